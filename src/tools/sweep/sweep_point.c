/* SPDX-License-Identifier: BSD-2-Clause */
/* One point of qpgate-sweep (sweep.h): qpgate-perf run at N clients, against
 * a fresh server (--server-args) or a running one, its JSON report read
 * into a sweep_point, what ran out classified (exhaust.c), and the wait
 * until the server, the device and TIME_WAIT are back at their baseline. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sweep.h"

double sweep_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double jnum(json_t *root, const char *path)
{
	json_t *v = root;
	char key[64];
	for (const char *p = path; v && *p;) {
		size_t n = strcspn(p, ".");
		snprintf(key, sizeof(key), "%.*s", (int)n, p);
		v = json_object_get(v, key);
		p += n + (p[n] == '.');
	}
	return v && json_is_number(v) ? json_number_value(v) : -1;
}

/* TCP sockets in TIME_WAIT in this network namespace (/proc/net/tcp and
 * tcp6, state 06), or -1 when neither can be read. */
long sweep_time_wait_count(void)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	long n = -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		FILE *f = fopen(files[i], "r");
		if (!f)
			continue;
		char line[512];
		unsigned st;
		n = n < 0 ? 0 : n;
		if (fgets(line, sizeof(line), f)) /* the header */
			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "%*s %*s %*s %x", &st) == 1 && st == 0x06)
					n++;
		fclose(f);
	}
	return n;
}

/* Wait until the server's fd count, the device's QP count and the TIME_WAIT
 * sockets are back to what they were before the first run: the previous
 * run's connections are gone, and so are the local ports they held for a
 * minute after (the next run would otherwise find the ports of one source
 * address taken and fail connects the run did not cause: at 35,000 rdma
 * clients right after 70,000, 1,750 "Cannot assign requested address").
 * The next run then measures only itself. */
static bool settle(struct sweep *sw, double *took)
{
	double t0 = sweep_now_s();
	for (;;) {
		bool ok = true;
		if (sw->server_base.ok) {
			struct proc_sample p;
			proc_sample(sw->server_pid, &p);
			ok = ok && p.ok && p.fds <= sw->server_base.fds;
		}
		if (sw->dev_base.ok) {
			struct dev_counts d;
			dev_counts(sw->dev_name, &d);
			ok = ok && d.ok && d.qp <= sw->dev_base.qp;
		}
		if (sw->tw_base >= 0) {
			long tw = sweep_time_wait_count();
			ok = ok && tw >= 0 && tw <= sw->tw_base + 64;
		}
		*took = sweep_now_s() - t0;
		if (ok)
			return true;
		if (*took > sw->settle_timeout_s || *sw->stop)
			return false;
		usleep(200000);
	}
}

static void describe_failures(json_t *perf, char *out, size_t len)
{
	json_t *f = json_object_get(
	    json_object_get(json_object_get(perf, "results"), "connections"), "failures");
	const char *k;
	json_t *v;
	size_t used = 0;
	out[0] = 0;
	json_object_foreach(f, k, v)
	{
		int n = snprintf(out + used, len - used, "%s%s %lld", used ? ", " : "", k,
				 (long long)json_integer_value(v));
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

/* Starts qpgate-server with --server-args on a free port; fills PORT. */
static pid_t spawn_server(struct sweep *sw, char *port, size_t port_len)
{
	char port_file[PATH_MAX], log_path[PATH_MAX];
	snprintf(port_file, sizeof(port_file), "%s/runs/server.port", sw->out_dir);
	snprintf(log_path, sizeof(log_path), "%s/runs/server.log", sw->out_dir);
	unlink(port_file);
	char *argv[80];
	int a = 0;
	argv[a++] = (char *)sw->server_path;
	for (int i = 0; i < sw->server_argc; i++)
		argv[a++] = sw->server_argv[i];
	argv[a++] = "-p";
	argv[a++] = "0";
	argv[a++] = "--port-file";
	argv[a++] = port_file;
	argv[a] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (!freopen(log_path, "a", stderr))
			_exit(127);
		execv(sw->server_path, argv);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) { /* up to 30 s: the lab is slow */
		FILE *f = fopen(port_file, "r");
		if (f) {
			int ok = fscanf(f, "%15s", port) == 1;
			fclose(f);
			if (ok)
				return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
		usleep(100000);
	}
	fprintf(stderr, "qpgate-sweep: the server did not start (see %s)\n", log_path);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	(void)port_len;
	return -1;
}

/* Stops it; true if it exited 0. *KILLED: it had died of SIGKILL already
 * (the OOM killer). */
static bool stop_server(pid_t pid, bool *killed)
{
	int status = 0;
	*killed = waitpid(pid, &status, WNOHANG) == pid && WIFSIGNALED(status) &&
		  WTERMSIG(status) == SIGKILL;
	if (!*killed) {
		kill(pid, SIGTERM);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* qpgate-perf's command line for one run at N clients (ARGV holds 128). */
static void perf_argv(const struct sweep *sw, char **argv, char *nbuf, const char *json_path,
		      const char *pidbuf, const char *port, bool spawned)
{
	int a = 0;
	argv[a++] = (char *)sw->perf_path;
	argv[a++] = "-c";
	argv[a++] = nbuf;
	argv[a++] = "--json";
	argv[a++] = (char *)json_path;
	if (sw->server_pid) {
		argv[a++] = "--server-pid";
		argv[a++] = (char *)pidbuf;
	}
	if (spawned) {
		argv[a++] = "-p";
		argv[a++] = (char *)port;
	}
	for (int i = 0; i < sw->nperf_args && a < 127; i++)
		argv[a++] = sw->perf_args[i];
	argv[a] = NULL;
}

/* Runs ARGV with its output to TXT_PATH; its wait status, or -1 when it
 * could not be forked. SIGINT/SIGTERM (*sw->stop) pass on to it. */
static int run_perf(const struct sweep *sw, char **argv, const char *txt_path)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		FILE *f = freopen(txt_path, "w", stdout);
		if (!f)
			_exit(127);
		execv(sw->perf_path, argv);
		fprintf(stderr, "qpgate-sweep: cannot run %s: %s\n", sw->perf_path,
			strerror(errno));
		_exit(127);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		if (*sw->stop)
			kill(pid, SIGTERM);
	return status;
}

/* P's figures from qpgate-perf's report R of a run at N clients. */
static void read_report(json_t *r, int n, struct sweep_point *p)
{
	p->connected = (int)jnum(r, "results.connections.succeeded");
	p->failed = (int)jnum(r, "results.connections.failed");
	p->success = jnum(r, "results.connections.success_rate");
	p->connect_p50_ms = jnum(r, "results.connections.connect_ms.p50");
	p->connect_p99_ms = jnum(r, "results.connections.connect_ms.p99");
	p->msgs_per_s = jnum(r, "results.data.msgs_per_s");
	p->lat_p50_us = jnum(r, "results.data.latency_us.p50");
	p->lat_p99_us = jnum(r, "results.data.latency_us.p99");
	p->verified = (long)jnum(r, "results.data.verified");
	p->mismatches = (long)jnum(r, "results.data.mismatches");
	p->kb_per_client = jnum(r, "results.resources.server_memory_per_client_kb");
	json_t *snap = json_object_get(json_object_get(r, "results"), "resources");
	snap = json_object_get(snap, "snapshots");
	double q0 = jnum(json_array_get(snap, 0), "device.qp");
	double q1 = jnum(json_array_get(snap, 1), "device.qp");
	p->dev_qps_per_client = q0 >= 0 && q1 >= 0 && n > 0 ? (q1 - q0) / n : -1;
	describe_failures(r, p->failures, sizeof(p->failures));
}

int sweep_run_point(struct sweep *sw, int n, enum sweep_stage stage, struct sweep_point *p)
{
	char json_path[PATH_MAX], txt_path[PATH_MAX], nbuf[16], pidbuf[16];
	snprintf(json_path, sizeof(json_path), "%s/runs/perf-%d.json", sw->out_dir, n);
	snprintf(txt_path, sizeof(txt_path), "%s/runs/perf-%d.txt", sw->out_dir, n);
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	unlink(json_path);

	char port[16], log_path[PATH_MAX];
	pid_t spawned = 0;
	snprintf(log_path, sizeof(log_path), "%s/runs/server.log", sw->out_dir);
	struct stat log_st;
	long log_from = stat(log_path, &log_st) == 0 ? (long)log_st.st_size : 0;
	if (sw->server_argc) {
		if ((spawned = spawn_server(sw, port, sizeof(port))) < 0)
			return -1;
		sw->server_pid = spawned;
		proc_sample(spawned, &sw->server_base);
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)sw->server_pid);
	char *argv[128];
	perf_argv(sw, argv, nbuf, json_path, pidbuf, port, spawned != 0);

	fprintf(stderr, "qpgate-sweep: %s: %d clients\n", sweep_stage_name(stage), n);
	double t0 = sweep_now_s();
	int status = run_perf(sw, argv, txt_path);
	if (status < 0)
		return -1;
	bool server_ok = true, server_killed = false;
	if (spawned) {
		server_ok = stop_server(spawned, &server_killed);
		sw->server_base.ok = false; /* gone: only the device has to settle */
	}
	memset(p, 0, sizeof(*p));
	p->clients = n;
	p->stage = stage;
	p->wall_s = sweep_now_s() - t0;
	json_error_t jerr;
	p->perf = json_load_file(json_path, 0, &jerr);
	if (!p->perf) {
		fprintf(stderr, "qpgate-sweep: %d clients: no report from qpgate-perf (%s)\n", n,
			jerr.text);
		return -1;
	}
	read_report(p->perf, n, p);
	p->all_verified = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	p->server_exit_ok = server_ok;
	struct exhaust_input ei = {p->perf, spawned ? log_path : NULL, log_from, server_killed};
	exhaust_classify(&ei, &p->exh);
	if (p->exh.what != EXH_NONE)
		fprintf(stderr, "qpgate-sweep: %d clients: ran out of %s (%s): %s\n", n,
			exhausted_name(p->exh.what), p->exh.value, p->exh.evidence);
	p->settled = settle(sw, &p->settle_s);
	if (!server_ok)
		fprintf(stderr, "qpgate-sweep: %d clients: the server did not exit cleanly\n", n);
	fprintf(stderr,
		"qpgate-sweep: %d clients: %.2f%% connected, %s, connect p50 %.1f ms p99 %.1f ms, "
		"%.0f msg/s%s\n",
		n, 100 * p->success, p->all_verified ? "all echoes verified" : "NOT all verified",
		p->connect_p50_ms, p->connect_p99_ms, p->msgs_per_s,
		p->settled ? "" : ", resources did NOT return to baseline");
	return 0;
}

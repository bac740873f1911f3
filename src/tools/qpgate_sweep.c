/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-sweep: capacity sweep. Runs qpgate-perf at progressive client
 * counts (a fresh process per run, so every run starts clean), waits for the
 * server and device to settle back to their baseline between runs, then
 * binary-searches the largest client count at 100% success and at >= 99%,
 * and writes a report directory (report.json, report.md, report.html).
 *
 *   qpgate-sweep [options] -- [qpgate-perf flags] HOST SERVERNAME */
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

#include "cli.h"
#include "opts.h"
#include "report.h"
#include "resources.h"

#define MAX_POINTS 64

struct sweep {
	const char *perf_path;
	const char *out_dir;
	char **perf_args; /* passed through, ends with HOST SERVERNAME */
	int nperf_args;
	pid_t server_pid;
	/* --server-args: a fresh qpgate-server per run, so each run's memory
	 * and resource figures start from an idle server. */
	char *server_argv[64];
	int server_argc;
	const char *server_path;
	const char *dev_name;
	int settle_timeout_s;
	struct proc_sample server_base;
	struct dev_counts dev_base;
	long tw_base; /* TIME_WAIT sockets before the first run */
	struct sweep_report rep;
};

static volatile sig_atomic_t g_stop; /* set by SIGINT/SIGTERM (tool, not library) */

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static double now_s(void)
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
static long time_wait_count(void)
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
	double t0 = now_s();
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
			long tw = time_wait_count();
			ok = ok && tw >= 0 && tw <= sw->tw_base + 64;
		}
		*took = now_s() - t0;
		if (ok)
			return true;
		if (*took > sw->settle_timeout_s || g_stop)
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
 * could not be forked. SIGINT/SIGTERM (g_stop) pass on to it. */
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
		if (g_stop)
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

/* One qpgate-perf run at N clients. Returns 0 with P filled in, or -1 when
 * the run produced no report at all (the tool could not start). */
static int run_point(struct sweep *sw, int n, enum sweep_stage stage, struct sweep_point *p)
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
	double t0 = now_s();
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
	p->wall_s = now_s() - t0;
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

static bool is_full(const struct sweep_point *p)
{
	return p->success >= 1.0 && p->all_verified;
}

static bool is_99(const struct sweep_point *p)
{
	return p->success >= 0.99 && p->mismatches == 0;
}

/* From every point measured so far: the largest N at the level below the
 * smallest N that missed it. */
static struct sweep_bound bound_of(const struct sweep_report *rep,
				   bool (*meets)(const struct sweep_point *))
{
	struct sweep_bound b = {0, 0};
	for (int i = 0; i < rep->npoints; i++)
		if (!meets(&rep->points[i]) && (!b.fail_at || rep->points[i].clients < b.fail_at))
			b.fail_at = rep->points[i].clients;
	for (int i = 0; i < rep->npoints; i++) {
		int n = rep->points[i].clients;
		if (meets(&rep->points[i]) && n > b.n && (!b.fail_at || n < b.fail_at))
			b.n = n;
	}
	return b;
}

static int add_point(struct sweep *sw, int n, enum sweep_stage stage)
{
	if (sw->rep.npoints >= MAX_POINTS || g_stop)
		return -1;
	struct sweep_point *p = &sw->rep.points[sw->rep.npoints];
	if (run_point(sw, n, stage, p) != 0)
		return -1;
	sw->rep.npoints++;
	return 0;
}

/* Narrow [b.n, b.fail_at) until it is within RESOLUTION (a fraction of the
 * lower end) or ITERS runs are spent. */
static void search(struct sweep *sw, bool (*meets)(const struct sweep_point *),
		   enum sweep_stage stage, double resolution, int iters)
{
	for (int k = 0; k < iters && !g_stop; k++) {
		struct sweep_bound b = bound_of(&sw->rep, meets);
		if (!b.fail_at)
			return; /* nothing failed: the largest N tried is a lower bound */
		int gap = b.fail_at - b.n;
		int step = (int)(b.n * resolution);
		if (gap <= 1 || gap <= step)
			return;
		if (add_point(sw, b.n + gap / 2, stage) != 0)
			return;
	}
}

static int parse_steps(const char *s, int *steps, int max)
{
	int n = 0;
	char *copy = strdup(s), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
		steps[n++] = (int)qpg_cli_int(t, 1, 10000000, "--steps");
	free(copy);
	return n;
}

struct steps {
	int v[32];
	int n;
};

static void parse_steps_opt(const char *arg, void *dst)
{
	struct steps *st = dst;
	st->n = parse_steps(arg, st->v, 32);
	if (st->n == 0) {
		fprintf(stderr, "error: --steps wants a list of client counts, e.g. 10,100,1000\n");
		exit(2);
	}
}

/* --server-args "FLAGS": split on blanks (paths with spaces need a wrapper). */
static void parse_server_args(const char *arg, void *dst)
{
	struct sweep *sw = dst;
	for (char *t = strtok(strdup(arg), " \t"); t && sw->server_argc < 60;
	     t = strtok(NULL, " \t"))
		sw->server_argv[sw->server_argc++] = t;
}

/* NAME in this program's directory: the tools are installed together. */
static const char *sibling_path(char *buf, size_t len, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n <= 0)
		return name;
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash - buf) + strlen(name) + 2 > len)
		return name;
	snprintf(slash + 1, len - (size_t)(slash + 1 - buf), "%s", name);
	return buf;
}

/* What the command line asks for beside SW's own fields. */
struct sweep_args {
	struct steps st;
	int max_clients, iters;
	double resolution;
};

/* Parses ARGV into SW and A: qpgate-perf's arguments follow "--". 0, or
 * the exit status. */
static int parse_args(struct sweep *sw, struct sweep_args *a, int argc, char **argv)
{
	static char perf_buf[PATH_MAX], server_buf[PATH_MAX];
	a->st.n = parse_steps("10,100,500,1000,5000,10000", a->st.v, 32);
	a->iters = 8;
	a->resolution = 0.02;
	sw->out_dir = "qpgate-report";
	sw->settle_timeout_s = 120;
	sw->rep.title = "qpgate capacity sweep";
	sw->perf_path = sibling_path(perf_buf, sizeof(perf_buf), "qpgate-perf");
	sw->server_path = sibling_path(server_buf, sizeof(server_buf), "qpgate-server");
	int server_pid = 0;
	const struct qpg_opt opts[] = {
	    {"steps", 0, OPT_CALL, &a->st, 0, 0, "LIST",
	     "progressive client counts (default 10,100,500,1000,5000,10000)", parse_steps_opt},
	    {"max", 0, OPT_INT, &a->max_clients, 1, 10000000, "N",
	     "keep doubling past the last step up to N (default: the last step)"},
	    {"search-iters", 0, OPT_INT, &a->iters, 0, 40, "K",
	     "runs per binary search (default 8)"},
	    {"resolution", 0, OPT_DOUBLE, &a->resolution, 0, 1, "F",
	     "stop a search within F of its lower end (default 0.02)"},
	    {"out", 0, OPT_STR, &sw->out_dir, 0, 0, "DIR",
	     "report directory (default ./qpgate-report)"},
	    {"server-args", 0, OPT_CALL, sw, 0, 0, "ARGS",
	     "a fresh qpgate-server with ARGS for every run", parse_server_args},
	    {"server-pid", 0, OPT_INT, &server_pid, 1, 1 << 30, "PID",
	     "or: an already running server to watch"},
	    {"ib-dev", 'd', OPT_STR, &sw->dev_name, 0, 0, "DEV",
	     "device whose QP count must settle between runs"},
	    {"settle-timeout", 0, OPT_INT, &sw->settle_timeout_s, 0, 86400, "S",
	     "longest wait for the baseline between runs (default 120)"},
	    {"perf", 0, OPT_STR, &sw->perf_path, 0, 0, "PATH",
	     "qpgate-perf to run (default: next to this program)"},
	    {"title", 0, OPT_STR, &sw->rep.title, 0, 0, "TEXT", "report title"},
	    {"compare-seeds", 0, OPT_FLAG, &sw->rep.compare_seeds, 0, 0, NULL,
	     "put the seed prototype's published figures beside ours in the report"},
	    QPG_OPT_END};
	const struct qpg_opt *const tables[] = {opts, NULL};
	const char *synopsis = "qpgate-sweep [options] -- [qpgate-perf flags] HOST SERVERNAME";
	int optind = qpg_opts_parse(argc, argv, tables, synopsis, -1);
	sw->server_pid = (pid_t)server_pid;
	if (argc - optind < 2) {
		fprintf(stderr, "error: HOST and SERVERNAME (after --) are needed\nusage: %s\n",
			synopsis);
		return 2;
	}
	sw->perf_args = argv + optind;
	sw->nperf_args = argc - optind;
	return 0;
}

/* The report's seeds, transport and command, and its directories. 0, or
 * the exit status. */
static int prepare(struct sweep *sw)
{
	static struct seed_runs seeds;
	static char cmd[2048];
	char serr[PATH_MAX + 300];
	if (sw->rep.compare_seeds) {
		if (seed_runs_load(&seeds, NULL, serr, sizeof(serr))) {
			fprintf(stderr, "error: --compare-seeds: %s\n", serr);
			return 2;
		}
		sw->rep.seeds = &seeds;
	}
	sw->rep.transport = "rdma";
	for (int i = 0; i + 1 < sw->nperf_args; i++)
		if (!strcmp(sw->perf_args[i], "--transport"))
			sw->rep.transport = sw->perf_args[i + 1];
	size_t used = (size_t)snprintf(cmd, sizeof(cmd), "qpgate-perf -c N");
	for (int i = 0; i < sw->nperf_args && used < sizeof(cmd); i++)
		used += (size_t)snprintf(cmd + used, sizeof(cmd) - used, " %s", sw->perf_args[i]);
	sw->rep.command = cmd;
	char runs[PATH_MAX];
	snprintf(runs, sizeof(runs), "%s/runs", sw->out_dir);
	if ((mkdir(sw->out_dir, 0755) && errno != EEXIST) ||
	    (mkdir(runs, 0755) && errno != EEXIST)) {
		fprintf(stderr, "qpgate-sweep: cannot create %s: %s\n", runs, strerror(errno));
		return 1;
	}
	return 0;
}

/* Progressive steps, then doubling up to --max: stop at the first run
 * below 99% (its bracket is what the searches need). Then the searches. */
static void sweep_run(struct sweep *sw, const struct sweep_args *a)
{
	int last = 0;
	for (int i = 0; !g_stop; i++) {
		int n = i < a->st.n ? a->st.v[i]
				    : (last * 2 < a->max_clients ? last * 2 : a->max_clients);
		if (i >= a->st.n && (n <= last || n > a->max_clients))
			break;
		if (add_point(sw, n, STAGE_STEP) != 0)
			break;
		last = n;
		if (!is_99(&sw->rep.points[sw->rep.npoints - 1]))
			break;
	}
	search(sw, is_full, STAGE_SEARCH_FULL, a->resolution, a->iters);
	search(sw, is_99, STAGE_SEARCH_99, a->resolution, a->iters);
	sw->rep.full = bound_of(&sw->rep, is_full);
	sw->rep.p99 = bound_of(&sw->rep, is_99);
}

static void print_table(const struct sweep *sw)
{
	printf("\n %-9s %-11s %-9s %-9s %-11s %-11s %-12s %-10s %-9s\n", "#clients", "stage",
	       "success", "verified", "conn p50", "conn p99", "kB/client", "msg/s", "settled");
	for (int i = 0; i < sw->rep.npoints; i++) {
		const struct sweep_point *p = &sw->rep.points[i];
		printf(" %-9d %-11s %7.2f%%  %-9s %8.1f ms %8.1f ms %12.1f %-10.0f %-9s\n",
		       p->clients, sweep_stage_name(p->stage), 100 * p->success,
		       p->all_verified ? "all" : "NO", p->connect_p50_ms, p->connect_p99_ms,
		       p->kb_per_client, p->msgs_per_s, p->settled ? "yes" : "NO");
	}
	printf("\n largest N at 100%% success: %d%s\n", sw->rep.full.n,
	       sw->rep.full.fail_at ? "" : " (nothing failed: a lower bound)");
	printf(" largest N at >= 99%% success: %d%s\n", sw->rep.p99.n,
	       sw->rep.p99.fail_at ? "" : " (nothing failed: a lower bound)");
	printf(" report: %s/report.html (also report.md, report.json)\n", sw->out_dir);
}

int main(int argc, char **argv)
{
	static struct sweep_point points[MAX_POINTS];
	struct sweep sw = {0};
	struct sweep_args a = {0};
	sw.rep.points = points;
	int rc = parse_args(&sw, &a, argc, argv);
	if (rc || (rc = prepare(&sw)))
		return rc;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (sw.server_pid)
		proc_sample(sw.server_pid, &sw.server_base);
	dev_counts(sw.dev_name, &sw.dev_base);
	sw.tw_base = time_wait_count();
	time_t now = time(NULL);
	strftime(sw.rep.date, sizeof(sw.rep.date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	double t0 = now_s();
	sweep_run(&sw, &a);
	sw.rep.total_s = now_s() - t0;
	char err[512];
	if (report_write(&sw.rep, sw.out_dir, err, sizeof(err))) {
		fprintf(stderr, "qpgate-sweep: %s\n", err);
		rc = 1;
	} else {
		print_table(&sw);
		rc = g_stop ? 130 : 0;
	}
	for (int i = 0; i < sw.rep.npoints; i++)
		json_decref(sw.rep.points[i].perf);
	return rc;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-perf: N concurrent secure clients from one event loop, with
 * connection, per-phase, latency, throughput and resource figures, as a
 * perftest-style table, JSON (--json) and CSV (--csv). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cluster_pick.h"
#include "jsondoc.h"
#include "load.h"
#include "opts.h"
#include "resources.h"

struct samples {
	struct proc_sample client[3], server[3]; /* baseline, all connected, end */
	struct dev_counts dev[3];
	pid_t server_pid;
	const char *dev_name;
	bool tty;
	FILE *psn_log; /* --psn-log: one line per connection */
	double last_line_s;
	uint64_t t0;
	int threads; /* --threads: the client's event loops */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void take(struct samples *s, int k)
{
	proc_sample(0, &s->client[k]);
	if (s->server_pid)
		proc_sample(s->server_pid, &s->server[k]);
	dev_counts(s->dev_name, &s->dev[k]);
}

static void on_connected(const struct load_result *r, void *arg)
{
	take(arg, 1);
}

static void on_conn_done(const struct qpg_conn_info *ci, void *arg)
{
	struct samples *s = arg;
	if (s->psn_log && ci->transport == QPG_TRANSPORT_RDMA)
		fprintf(s->psn_log, "%u %u\n", ci->local_psn, ci->peer_psn);
}

static void on_progress(const struct load_result *r, const char *phase, void *arg)
{
	struct samples *s = arg;
	double t = now_s();
	if (s->tty) {
		fprintf(stderr, "\r %-8s %6d/%-6d connected  %5d failed  %9ld verified  %6.1f s  ",
			phase, r->established, r->nconns, r->failed, r->verified,
			t - (double)s->t0);
	} else if (t - s->last_line_s >= 5) {
		fprintf(stderr, "progress: %s %d/%d connected, %d failed, %ld verified\n", phase,
			r->established, r->nconns, r->failed, r->verified);
		s->last_line_s = t;
	}
}

static json_t *hist_json(const struct qpg_hist *h, double scale)
{
	return json_pack(
	    "{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t)h->count, "mean",
	    qpg_hist_mean(h) / scale, "p50", qpg_hist_quantile(h, 0.5) / scale, "p95",
	    qpg_hist_quantile(h, 0.95) / scale, "p99", qpg_hist_quantile(h, 0.99) / scale, "p999",
	    qpg_hist_quantile(h, 0.999) / scale, "max", h->count ? (double)h->max / scale : 0.0);
}

static json_t *proc_json(const struct proc_sample *p)
{
	if (!p->ok)
		return json_null();
	return json_pack("{s:f, s:I, s:I, s:i, s:i}", "cpu_s", p->cpu_s, "rss_kb",
			 (json_int_t)p->rss_kb, "rss_peak_kb", (json_int_t)p->hwm_kb, "threads",
			 p->threads, "fds", p->fds);
}

static json_t *dev_json(const struct dev_counts *d)
{
	if (!d->ok)
		return json_null();
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "pd", (json_int_t)d->pd, "cq",
			 (json_int_t)d->cq, "qp", (json_int_t)d->qp, "mr", (json_int_t)d->mr, "srq",
			 (json_int_t)d->srq, "cm_id", (json_int_t)d->cm_id);
}

static double per_client_kb(const struct samples *s, const struct load_result *r)
{
	if (!s->server[0].ok || !s->server[1].ok || r->established == 0)
		return -1;
	return (double)(s->server[1].rss_kb - s->server[0].rss_kb) / r->established;
}

static json_t *build_json(const struct qpg_client_opts *co, const struct load_opts *lo,
			  const struct load_result *r, const struct samples *s)
{
	json_t *fails = json_object(), *examples = json_object();
	for (int e = 1; e < QPG_ERR_COUNT; e++)
		if (r->fail_by_class[e]) {
			json_object_set_new(fails, qpg_err_class_name((enum qpg_err_class)e),
					    json_integer(r->fail_by_class[e]));
			json_object_set_new(examples, qpg_err_class_name((enum qpg_err_class)e),
					    json_string(r->fail_example[e]));
		}
	json_t *phases = json_object();
	for (int p = 0; p < QPG_PHASE_COUNT; p++)
		json_object_set_new(phases, qpg_phase_name((enum qpg_phase)p),
				    hist_json(&r->phase[p], 1e3));
	json_t *snap = json_array();
	static const char *const when[3] = {"baseline", "connected", "end"};
	for (int k = 0; k < 3; k++)
		json_array_append_new(snap, json_pack("{s:s, s:o, s:o, s:o}", "at", when[k],
						      "client", proc_json(&s->client[k]), "server",
						      proc_json(&s->server[k]), "device",
						      dev_json(&s->dev[k])));
	double pkb = per_client_kb(s, r);
	double rate = r->traffic_s > 0 ? (double)r->verified / r->traffic_s : 0;
	json_t *params = json_pack(
	    "{s:s, s:s, s:i, s:i, s:I, s:f, s:b, s:f, s:I, s:i, s:I, s:i, s:I, s:s, s:i}", "transport",
	    co->transport == QPG_KIND_RDMA ? "rdma" : "tcp", "host", co->host, "port", co->port,
	    "clients", lo->nconns, "msgs_per_client",
	    (json_int_t)(lo->duration_s > 0 ? 0 : lo->msgs), "duration_s", lo->duration_s, "auth",
	    co->auth, "ramp_per_s", lo->ramp, "window", (json_int_t)lo->window, "size",
	    (int)lo->size, "inflight", (json_int_t)lo->inflight, "qps_per_session",
	    (int)lo->qps_per_session, "latency_every", (json_int_t)lo->lat_every, "clock",
	    lo->clock ? stamp_name(lo->clock) : "mono", "threads", s->threads);
	json_t *results =
	    json_pack("{s:{s:i, s:i, s:i, s:i, s:I, s:i, s:f, s:o, s:o, s:o, s:o, s:f, s:f},"
		      " s:{s:I, s:I, s:I, s:o, s:f, s:f, s:f, s:f},"
		      " s:{s:o, s:o}}",
		      "connections", "attempted", r->nconns, "succeeded", r->established, "failed",
		      r->failed, "tls_resumed", r->resumed, "connect_attempts", (json_int_t)r->attempts,
		      "retried", r->retried, "success_rate",
		      r->nconns ? (double)r->established / r->nconns : 0, "failures", fails,
		      "failure_examples", examples, "connect_ms", hist_json(&r->setup, 1e6),
		      "phases_us", phases, "connect_phase_s", r->connect_s, "prime_s",
		      r->prime_s, "data", "sent",
		      (json_int_t)r->sent, "verified", (json_int_t)r->verified, "mismatches",
		      (json_int_t)r->mismatches, "latency_us", hist_json(&r->lat, 1e3),
		      "msgs_per_s", rate, "bytes_per_s", rate * lo->size, "traffic_phase_s",
		      r->traffic_s, "clock_drift", r->clock_drift, "resources", "snapshots", snap,
		      "server_memory_per_client_kb", pkb >= 0 ? json_real(pkb) : json_null());
	return qpg_json_doc("qpgate-perf", params, results);
}

static int write_csv(const char *path, const struct load_opts *lo, const struct load_result *r,
		     const struct samples *s)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	double rate = r->traffic_s > 0 ? (double)r->verified / r->traffic_s : 0;
	fprintf(f, "clients,connected,failed,success_rate,connect_p50_ms,connect_p95_ms,"
		   "connect_p99_ms,connect_max_ms,size,messages,verified,mismatches,lat_p50_us,"
		   "lat_p99_us,lat_p999_us,msgs_per_s,bytes_per_s,server_rss_kb,"
		   "server_kb_per_client,device_qps_connected\n");
	fprintf(f,
		"%d,%d,%d,%.6f,%.3f,%.3f,%.3f,%.3f,%u,%ld,%ld,%ld,%.1f,%.1f,%.1f,%.1f,%.1f,%ld,%."
		"2f,%ld\n",
		r->nconns, r->established, r->failed,
		r->nconns ? (double)r->established / r->nconns : 0,
		qpg_hist_quantile(&r->setup, 0.5) / 1e6, qpg_hist_quantile(&r->setup, 0.95) / 1e6,
		qpg_hist_quantile(&r->setup, 0.99) / 1e6, (double)r->setup.max / 1e6, lo->size,
		r->sent, r->verified, r->mismatches, qpg_hist_quantile(&r->lat, 0.5) / 1e3,
		qpg_hist_quantile(&r->lat, 0.99) / 1e3, qpg_hist_quantile(&r->lat, 0.999) / 1e3,
		rate, rate * lo->size, s->server[1].rss_kb, per_client_kb(s, r), s->dev[1].qp);
	return fclose(f);
}

static void print_resources(const struct samples *s, const struct load_result *r)
{
	static const char *const when[3] = {"baseline", "connected", "end"};
	printf("\n %-10s %-8s %10s %10s %8s %7s %9s %6s %6s %6s %6s\n", "resources", "at", "cpu[s]",
	       "rss[kB]", "threads", "fds", "dev:qp", "cq", "mr", "pd", "srq");
	for (int k = 0; k < 3; k++) {
		const struct proc_sample *who[2] = {&s->client[k], &s->server[k]};
		for (int w = 0; w < 2; w++) {
			if (!who[w]->ok)
				continue;
			printf(" %-10s %-8s %10.2f %10ld %8d %7d", w ? "server" : "client", when[k],
			       who[w]->cpu_s, who[w]->rss_kb, who[w]->threads, who[w]->fds);
			if (w == 0 && s->dev[k].ok)
				printf(" %9ld %6ld %6ld %6ld %6ld", s->dev[k].qp, s->dev[k].cq,
				       s->dev[k].mr, s->dev[k].pd, s->dev[k].srq);
			printf("\n");
		}
	}
	double pkb = per_client_kb(s, r);
	if (pkb >= 0)
		printf(" server memory per connected client: %.1f kB\n", pkb);
}

/* What the command line asks for. */
struct perf_args {
	struct qpg_client_opts co;
	struct load_opts lo;
	const char *json_path, *csv_path, *psn_log, *clock_name;
	int server_pid, threads;
};

/* Parses ARGV into A, and its client's host or cluster into A->co. 0, or
 * the exit status. */
static int parse_args(struct perf_args *a, int argc, char **argv)
{
	struct qpg_client_opts *co = &a->co;
	struct load_opts *lo = &a->lo;
	qpg_client_opts_default(co);
	load_opts_default(lo);
	lo->nconns = 10;
	lo->msgs = 10;
	lo->timeout_ms = 0; /* unless given: 600 s and 10 ms per client */
	a->clock_name = "mono";
	const struct qpg_opt client[] = {QPG_OPTS_CLIENT(co), QPG_OPT_END};
	const struct qpg_opt own[] = {
	    QPG_OPTS_LOAD(lo),
	    {"ramp", 0, OPT_DOUBLE, &lo->ramp, 0.001, 1e9, "R",
	     "new connections per second (default: as fast as --window allows)"},
	    {"inflight", 0, OPT_LONG, &lo->inflight, 0, 100000000, "N",
	     "echoes in flight over all clients (default 1024; 0: one per client)"},
	    {"lat-every", 0, OPT_LONG, &lo->lat_every, 1, 1000000, "K",
	     "time 1 echo in K on each client (default 1: all; all are verified)"},
	    {"clock", 0, OPT_STR, &a->clock_name, 0, 0, "mono|tsc",
	     "latency stamps: CLOCK_MONOTONIC, or the CPU's time-stamp counter (x86-64; "
	     "calibrated against it) where that clock is slow (default mono)"},
	    {"duration", 'D', OPT_DOUBLE, &lo->duration_s, 0.001, 86400, "S",
	     "send for S seconds instead of -n"},
	    {"stop-file", 0, OPT_STR, &lo->stop_file, 0, 0, "FILE",
	     "stop sending once FILE exists (as if -D had ended)"},
	    {"ready-file", 0, OPT_STR, &lo->ready_file, 0, 0, "FILE",
	     "write 'ESTABLISHED FAILED' to FILE once every client has connected or failed, "
	     "as the traffic starts (a profiler's cue)"},
	    {"threads", 0, OPT_INT, &a->threads, 1, 64, "N",
	     "event-loop threads, each a client with its share of the connections (default: "
	     "one per CPU, one per 64 clients at most)"},
	    {"server-pid", 0, OPT_INT, &a->server_pid, 1, 1 << 30, "PID",
	     "also report the server's CPU, RSS, threads, fds"},
	    {"json", 0, OPT_STR, &a->json_path, 0, 0, "FILE", "results as JSON (docs/json.md)"},
	    {"csv", 0, OPT_STR, &a->csv_path, 0, 0, "FILE", "results as one CSV row with a header"},
	    {"psn-log", 0, OPT_STR, &a->psn_log, 0, 0, "FILE",
	     "append 'LOCAL_PSN PEER_PSN' per rdma connection (PSN audits)"},
	    QPG_OPT_END};
	struct cluster_pick pick = {0};
	bool clustered;
	int optind = cluster_pick_parse(&pick, argc, argv, client, own, "qpgate-perf -c N", &clustered);
	if (proc_check_server_pid((pid_t)a->server_pid))
		return 2;
	if (!load_opts_fit(co, lo, "qpgate-perf"))
		return 2;
	if (clustered)
		return cluster_pick(&pick, co, "qpgate-perf") ? 1 : 0;
	co->host = argv[optind];
	co->servername = argv[optind + 1];
	return 0;
}

/* The run's clock, limits, deadlines, ports and source address, and S's
 * hooks; warns of what will not fit. 0, or the exit status. */
static int prepare(struct perf_args *a, struct stamp *clock, struct samples *s, char *source,
		   size_t source_len)
{
	struct qpg_client_opts *co = &a->co;
	struct load_opts *lo = &a->lo;
	int crc = stamp_init(clock, a->clock_name);
	if (crc == -EINVAL) {
		fprintf(stderr, "error: --clock is 'mono' or 'tsc', not '%s'\n", a->clock_name);
		return 2;
	}
	if (crc) {
		fprintf(stderr, "error: --clock tsc: no time-stamp counter to read on this CPU\n");
		return 2;
	}
	lo->clock = clock;
	long nofile = qpg_cli_raise_nofile();
	if (nofile >= 0 && lo->nconns + 32 > nofile)
		fprintf(
		    stderr,
		    "qpgate-perf: warning: %ld clients need a file descriptor each, but open files "
		    "are limited to %ld (ulimit -n): expect 'Too many open files'\n",
		    (long)lo->nconns, nofile);
	qpg_cli_note_map_count("qpgate-perf", co->transport, (long)lo->nconns, 1, "-c");
	if (!lo->timeout_ms)
		lo->timeout_ms = 600000 + 10L * lo->nconns;
	/* No new try after half the run: one that cannot connect ends with its
	 * failures, not at its timeout (10 tries of a 3 s handshake deadline
	 * and their backoff outlast a 30 s run). */
	if ((long)co->connect_deadline_ms > lo->timeout_ms / 2)
		co->connect_deadline_ms = (unsigned)(lo->timeout_ms / 2);
	if (!load_ports_fit(co, lo, "qpgate-perf"))
		return 2;
	load_pick_source(co, lo, source, source_len, "qpgate-perf");
	load_note_loopback(co, lo, "qpgate-perf");
	lo->prime = co->tls_resume;
	if (!a->threads)
		a->threads = load_default_threads(lo->nconns);
	if (a->psn_log && !(s->psn_log = fopen(a->psn_log, "a"))) {
		fprintf(stderr, "qpgate-perf: cannot open %s\n", a->psn_log);
		return 2;
	}
	s->server_pid = (pid_t)a->server_pid;
	s->threads = a->threads;
	s->dev_name = co->ib_dev;
	s->tty = isatty(STDERR_FILENO);
	s->t0 = (uint64_t)now_s();
	lo->progress = on_progress;
	lo->connected = on_connected;
	lo->conn_done = on_conn_done;
	lo->progress_arg = s;
	return 0;
}

/* The table, and the JSON and CSV asked for. The exit status. */
static int report(const struct perf_args *a, const struct load_result *r, struct samples *s)
{
	const struct qpg_client_opts *co = &a->co;
	const struct load_opts *lo = &a->lo;
	printf(" qpgate-perf: %d clients, %s transport, message auth %s, %u-byte messages, %d "
	       "thread%s\n",
	       lo->nconns, co->transport == QPG_KIND_RDMA ? "rdma" : "tcp", co->auth ? "on" : "off",
	       lo->size, a->threads, a->threads == 1 ? "" : "s");
	load_print(r, lo);
	printf(
	    " success rate %.2f%%   connect p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
	    r->nconns ? 100.0 * r->established / r->nconns : 0,
	    qpg_hist_quantile(&r->setup, 0.5) / 1e6, qpg_hist_quantile(&r->setup, 0.95) / 1e6,
	    qpg_hist_quantile(&r->setup, 0.99) / 1e6, (double)r->setup.max / 1e6);
	print_resources(s, r);
	int rc = load_ok(r, lo) ? 0 : 1;
	if (a->json_path) {
		json_t *j = build_json(co, lo, r, s);
		if (!j || json_dump_file(j, a->json_path, JSON_INDENT(2)) != 0) {
			fprintf(stderr, "qpgate-perf: cannot write %s\n", a->json_path);
			rc = 1;
		}
		json_decref(j);
	}
	if (a->csv_path && write_csv(a->csv_path, lo, r, s) != 0) {
		fprintf(stderr, "qpgate-perf: cannot write %s\n", a->csv_path);
		rc = 1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct perf_args a = {0};
	struct samples s = {0};
	struct stamp clock;
	char source[INET6_ADDRSTRLEN], err[512];
	struct load_result *r = NULL;
	int rc = parse_args(&a, argc, argv);
	if (rc || (rc = prepare(&a, &clock, &s, source, sizeof(source))))
		goto out;
	signal(SIGPIPE, SIG_IGN);
	take(&s, 0);
	r = malloc(sizeof(*r));
	int lrc = r ? load_run_spread(&a.co, &a.lo, a.threads, r, err, sizeof(err)) : -ENOMEM;
	if (lrc) {
		if (lrc == -EIO)
			fprintf(stderr, "qpgate-perf: error: %s\n", err);
		else
			fprintf(stderr, "qpgate-perf: out of memory\n");
		rc = 1;
		goto out;
	}
	if (s.tty)
		fprintf(stderr, "\n");
	take(&s, 2);
	rc = report(&a, r, &s);
out:
	if (s.psn_log && fclose(s.psn_log) != 0 && rc == 0)
		rc = 1;
	free(r);
	return rc;
}

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
#include "sweep.h"

#define MAX_POINTS 64

static volatile sig_atomic_t g_stop; /* set by SIGINT/SIGTERM (tool, not library) */

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
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
	if (sweep_run_point(sw, n, stage, p) != 0)
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
	struct sweep sw = {.stop = &g_stop};
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
	sw.tw_base = sweep_time_wait_count();
	time_t now = time(NULL);
	strftime(sw.rep.date, sizeof(sw.rep.date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	double t0 = sweep_now_s();
	sweep_run(&sw, &a);
	sw.rep.total_s = sweep_now_s() - t0;
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

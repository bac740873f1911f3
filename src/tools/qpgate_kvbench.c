/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kvbench: many logical workers doing GETs through a small pool of
 * secure connections (the seed's kv-bench, on the qpgate KV service).
 *
 *   qpgate-kvbench [--threads 4] [--num-workers 16] [--num-clients 4]
 *       [--num-keys 10000] [--value-size 4096] [-D SECONDS | -n OPS]
 *       [--dist uniform|zipf] [--json FILE] [--scaling] [client flags]
 *       HOST SERVERNAME
 *
 * Preloads the keys, then runs the workers; every GET's value is checked
 * against the checksum of what was stored. --scaling prints the seed's two
 * tables for this system: workers 4..64 at 4 clients, and clients 1..1024
 * at 64 workers. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "etcd_opts.h"
#include "jsondoc.h"
#include "kvbench.h"
#include "kvdata.h"
#include "opts.h"
#include "qpgate/hist.h"
#include "qpgate/kv_client.h"
#include "resources.h"

static const char *const mode_names[] = {"auto", "two-sided", "one-sided"};

static bool report_gbits; /* --report_gbits */

static void print_header(void)
{
	printf(" %-10s %-8s %-8s %-8s %10s %10s %9s %9s %9s %9s %8s %7s %6s %6s %9s %9s\n", "GET",
	       "workers", "clients", "threads", "GETs", "ops/s", report_gbits ? "Gb/s" : "MiB/s",
	       "p50[us]", "p99[us]", "p99.9[us]", "RSS[MB]", "QPs", "errs", "vs 1st", "cpu[us]",
	       "srv[us]");
}

static void print_row(const struct run_result *r, double base)
{
	const char *mode = mode_names[r->get_mode];
	if (r->connect_error) {
		printf(" %-10s %-8u %-8u %-8u  FAILED: %s\n", mode, r->workers, r->clients,
		       r->threads, r->why);
		return;
	}
	char cpu[2][16];
	const double per[2] = {r->client_cpu_us, r->server_cpu_us};
	for (int i = 0; i < 2; i++)
		snprintf(cpu[i], sizeof(cpu[i]), per[i] < 0 ? "-" : "%.1f", per[i]);
	printf(" %-10s %-8u %-8u %-8u %10ld %10.0f %9.2f %9.1f %9.1f %9.1f %8.1f %7ld %6ld %5.2fx "
	       "%9s %9s\n",
	       mode, r->workers, r->clients, r->threads, r->ops, r->ops_per_s,
	       report_gbits ? r->gib_per_s * 8 * 1073741824.0 / 1e9 : r->gib_per_s * 1024,
	       qpg_hist_quantile(&r->lat, 0.5) / 1e3, qpg_hist_quantile(&r->lat, 0.99) / 1e3,
	       qpg_hist_quantile(&r->lat, 0.999) / 1e3, r->rss_kb / 1024.0, r->dev_qps,
	       r->errors + r->mismatches, base > 0 ? r->ops_per_s / base : 1.0, cpu[0], cpu[1]);
	fflush(stdout);
}

/* A CPU figure, or null when it is not known. */
static json_t *cpu_json(double us)
{
	return us < 0 ? json_null() : json_real(us);
}

static json_t *row_json(const struct run_result *r, double base)
{
	json_t *j = json_pack(
	    "{s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, "
	    "s:f, s:s}",
	    "get_mode", mode_names[r->get_mode], "workers", r->workers, "clients", r->clients,
	    "threads", r->threads, "credits", r->credits, "gets", (json_int_t)r->ops, "mismatches",
	    (json_int_t)r->mismatches, "errors", (json_int_t)r->errors, "secs", r->secs,
	    "ops_per_s", r->ops_per_s, "gib_per_s", r->gib_per_s, "p50_us",
	    qpg_hist_quantile(&r->lat, 0.5) / 1e3, "p99_us", qpg_hist_quantile(&r->lat, 0.99) / 1e3,
	    "p999_us", qpg_hist_quantile(&r->lat, 0.999) / 1e3, "rss_kb", (json_int_t)r->rss_kb,
	    "device_qps", (json_int_t)r->dev_qps, "vs_first", base > 0 ? r->ops_per_s / base : 1.0,
	    "error", r->why);
	if (j) {
		json_object_set_new(j, "zero_copy_gets", json_integer(r->zero_copy));
		json_object_set_new(j, "client_cpu_us_per_get", cpu_json(r->client_cpu_us));
		json_object_set_new(j, "server_cpu_us_per_get", cpu_json(r->server_cpu_us));
	}
	return j;
}

/* One of the seed's tables: VALUES vary the workers (clients fixed) or the
 * clients (workers fixed). Returns nonzero if any row failed a GET. */
struct table_spec {
	int id;
	const char *title;
	const unsigned *values;
	size_t n;
	unsigned clients, workers; /* the fixed one; 0: the varying one */
};

static int run_table(struct bench *b, const struct table_spec *t, json_t *rows)
{
	printf("\n table %d: %s\n", t->id, t->title);
	print_header();
	double base = 0;
	int rc = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct run_result r;
		kvbench_run_once(b, b->po.threads, t->clients ? t->clients : t->values[i],
				 t->workers ? t->workers : t->values[i], false, &r);
		if (i == 0)
			base = r.ops_per_s;
		print_row(&r, base);
		json_t *j = row_json(&r, base);
		json_object_set_new(j, "table", json_integer(t->id));
		json_array_append_new(rows, j);
		rc |= r.connect_error || r.errors || r.mismatches;
	}
	return rc;
}

static void parse_dist(const char *arg, void *dst)
{
	if (strcmp(arg, "uniform") && strcmp(arg, "zipf")) {
		fprintf(stderr, "error: --dist is uniform or zipf, not '%s'\n", arg);
		exit(2);
	}
	*(bool *)dst = !strcmp(arg, "zipf");
}

static void parse_workload(const char *arg, void *dst)
{
	if (strcmp(arg, "get") && strcmp(arg, "prefix")) {
		fprintf(stderr, "error: --workload is get or prefix, not '%s'\n", arg);
		exit(2);
	}
	*(bool *)dst = !strcmp(arg, "prefix");
}

/* --workload prefix's own lines: the turns, the blocks the cache held. */
static void report_prefix(const struct bench *b, const struct run_result *r, json_t *row,
			  size_t lru_bytes)
{
	double ratio = r->blocks ? (double)r->blocks_hit / (double)r->blocks : 0;
	double lru = lru_bytes ? kvb_prefix_lru(b, lru_bytes) : -1;
	printf(" prefix: %ld turns of 1 to %u blocks (%.1f turns/s, per turn p50 %.1f us, p99 %.1f "
	       "us)\n",
	       r->turns, b->blocks, r->secs > 0 ? r->turns / r->secs : 0,
	       qpg_hist_quantile(&r->lat, 0.5) / 1e3, qpg_hist_quantile(&r->lat, 0.99) / 1e3);
	printf(" prefix: %.1f%% of blocks cached (%ld of %ld, by %ld EXISTS lookups); %ld PUTs "
	       "stored the rest; %ld evicted between lookup and read\n",
	       100 * ratio, r->blocks_hit, r->blocks, r->lookups, r->puts, r->misses);
	printf(" prefix: %.1f blocks/s, %.3f GB/s of blocks read or stored\n",
	       r->secs > 0 ? r->ops / r->secs : 0,
	       r->secs > 0 ? r->ops * (double)b->value_size / r->secs / 1e9 : 0);
	if (lru >= 0)
		printf(" prefix: an exact LRU of %zu bytes, on the same turns: %.1f%% (this run "
		       "%+.1f points)\n",
		       lru_bytes, 100 * lru, 100 * (ratio - lru));
	json_object_set_new(row, "prefix",
			    json_pack("{s:I, s:I, s:I, s:I, s:f, s:I}", "turns", (json_int_t)r->turns,
				      "lookups", (json_int_t)r->lookups, "blocks",
				      (json_int_t)r->blocks, "blocks_cached",
				      (json_int_t)r->blocks_hit, "hit_ratio", ratio,
				      "evicted_after_lookup", (json_int_t)r->misses));
	if (lru >= 0)
		json_object_set_new(json_object_get(row, "prefix"), "lru_hit_ratio", json_real(lru));
}

/* --get-mode: an enum qpg_kv_get_mode, or 3 for compare. */
static void parse_get_mode(const char *arg, void *dst)
{
	static const char *const names[] = {"auto", "two-sided", "one-sided", "compare"};
	*(int *)dst = (int)qpg_cli_pick(arg, names, 4, "--get-mode");
}

/* What the command line asks for besides the bench's own settings. */
struct cli_args {
	bool scaling, preload, compare, prefix, clustered;
	size_t lru_bytes;
	const char *json_path;
	int get_mode;
	int server_pid;
};

/* The options that must go together, checked, and what they imply set:
 * the pool's GET mode, the workload, HOST and SERVERNAME (at OPTIND).
 * Returns OPTIND, or -2. */
static int settle_args(struct bench *b, struct cli_args *c, char **argv, int optind)
{
	b->po.connect_attempts = b->po.client.connect_attempts; /* one --connect-attempts */
	if (c->clustered && (!b->etcd.name || c->scaling || c->get_mode == 3)) {
		fprintf(stderr, "error: --cluster needs --cluster-name, and runs without --scaling "
				"or --get-mode compare\n");
		return -2;
	}
	if (c->prefix && (c->scaling || c->get_mode == 3 || b->put_pct || b->shared >= b->blocks)) {
		fprintf(stderr, "error: --workload prefix runs without --scaling, --get-mode compare "
				"or --put-ratio, and with --shared-blocks below --blocks\n");
		return -2;
	}
	/* Each worker holds a turn's blocks while it stores them. */
	if (c->prefix && (uint64_t)b->blocks * b->value_size * b->workers > (2ull << 30)) {
		fprintf(stderr, "error: --blocks x --value-size x --num-workers is over 2 GiB of "
				"blocks held while they are stored; give fewer of one\n");
		return -2;
	}
	/* --put-ratio: every key's value at hand, so a PUT costs what the
	 * client does with it, not its making. */
	if (b->put_pct && (uint64_t)b->nkeys * b->value_size > (1ull << 30)) {
		fprintf(
		    stderr,
		    "error: --put-ratio keeps every value in memory: %u keys x %u bytes is over "
		    "1 GiB; give fewer --num-keys\n",
		    b->nkeys, b->value_size);
		return -2;
	}
	c->compare = c->get_mode == 3;
	if (!c->compare)
		b->po.get_mode = (uint8_t)c->get_mode;
	if (!c->prefix) {
		b->blocks = 0;
	} else {
		b->workload = &kvb_prefix_workload;
		c->preload = false; /* the cache starts cold and fills as turns go */
	}
	b->refill_misses = c->clustered; /* a member that took a key over may lack it */
	if (!c->clustered) {
		b->po.client.host = argv[optind];
		b->po.client.servername = argv[optind + 1];
	}
	return optind;
}

/* Parses the command line into B and C, with the defaults first. Returns
 * the index of HOST, or -2 for options that do not go together. */
static int parse_args(struct bench *b, struct cli_args *c, int argc, char **argv)
{
	qpg_kv_pool_opts_default(&b->po);
	b->po.client.credits = 0; /* unless --credits: enough for every worker */
	b->workers = 16;
	b->nkeys = 10000;
	b->value_size = 4096;
	b->duration_s = 10;
	b->blocks = 16;
	b->shared = 4;
	*c = (struct cli_args){.preload = true, .get_mode = QPG_KV_GET_AUTO};
	const struct qpg_opt client[] = {QPG_OPTS_CLIENT(&b->po.client), QPG_OPT_END};
	const struct qpg_opt own[] = {
	    {"threads", 0, OPT_UINT, &b->po.threads, 1, 256, "N", "pool threads (default 4)"},
	    {"window", 0, OPT_UINT, &b->po.connect_window, 1, 100000, "N",
	     "handshakes in progress at once while the pool connects"},
	    {"qp", 'q', OPT_UINT, &b->po.qps_per_session, 1, QPG_KV_MAX_SESSION_QPS, "N",
	     "rdma: pooled connections brought up over each TLS session (default 1)"},
	    {"num-workers", 0, OPT_UINT, &b->workers, 1, 100000, "N",
	     "concurrent GET workers (default 16)"},
	    {"num-clients", 0, OPT_UINT, &b->po.conns, 1, 100000, "N",
	     "pooled connections (default 4)"},
	    {"num-keys", 0, OPT_U32, &b->nkeys, 1, 100000000, "N",
	     "keys preloaded (default 10000)"},
	    {"value-size", 0, OPT_SIZE32, &b->value_size, 1, QPG_KV_MAX_VALUE, "BYTES",
	     "value size (default 4096)"},
	    {"duration", 'D', OPT_DOUBLE, &b->duration_s, 0.1, 86400, "S",
	     "measure for S seconds (default 10)"},
	    {"ops", 'n', OPT_LONG, &b->max_ops, 1, 1e12, "N", "or: stop after N GETs"},
	    {"put-ratio", 0, OPT_UINT, &b->put_pct, 0, 100, "PCT",
	     "this share of operations are PUTs of the key's own value (default 0: GETs)"},
	    {"dist", 0, OPT_CALL, &b->zipf, 0, 0, "uniform|zipf",
	     "key popularity (default uniform; zipf s=0.99)", parse_dist},
	    {"workload", 0, OPT_CALL, &c->prefix, 0, 0, "get|prefix",
	     "get (default), or prefix: turns of an inference server's prefix cache (EXISTS the "
	     "prompt's blocks, GET the cached prefix, PUT the rest); --num-keys prompts",
	     parse_workload},
	    {"blocks", 0, OPT_UINT, &b->blocks, 1, QPG_KV_EXISTS_MAX, "N",
	     "prefix: blocks per prompt, each --value-size (default 16)"},
	    {"shared-blocks", 0, OPT_UINT, &b->shared, 0, QPG_KV_EXISTS_MAX, "N",
	     "prefix: of those, a system prompt shared by each 8 prompts (default 4)"},
	    {"lru-capacity", 0, OPT_SIZE, &c->lru_bytes, 4096, 1024.0 * (1ull << 30), "BYTES",
	     "prefix: also the hit ratio an exact LRU of BYTES (the server's --kv-capacity) "
	     "reaches on the same turns"},
	    {"max-msg", 's', OPT_U32, &b->po.client.max_msg, 512, 1 << 20, "BYTES",
	     "frame size (default 8192)"},
	    {"no-preload", 0, OPT_FLAG_OFF, &c->preload, 0, 0, NULL, "the keys are already there"},
	    {"register", 0, OPT_FLAG, &b->reg, 0, 0, NULL,
	     "GET into one buffer registered with the pool (qpg_kv_register): one-sided GETs "
	     "READ straight into it, no copy"},
	    {"get-mode", 0, OPT_CALL, &c->get_mode, 0, 0, "MODE",
	     "auto (the server picks by size), two-sided, one-sided, or compare all three",
	     parse_get_mode},
	    {"scaling", 0, OPT_FLAG, &c->scaling, 0, 0, NULL,
	     "the seed's tables: workers 4..64 at 4 clients, clients 1..1024 at 64 workers"},
	    {"server-pid", 0, OPT_INT, &c->server_pid, 1, 1 << 30, "PID",
	     "also report the server's CPU per GET (a server on this machine)"},
	    {"json", 0, OPT_STR, &c->json_path, 0, 0, "FILE", "results as JSON (docs/json.md)"},
	    {"report_gbits", 0, OPT_FLAG, &report_gbits, 0, 0, NULL,
	     "throughput in Gb/s (default MiB/s)"},
	    QPG_OPTS_ETCD(&b->etcd, "spread the keys over a cluster's members, from etcd (then no "
				    "HOST SERVERNAME)"),
	    QPG_OPT_END};
	const struct qpg_opt *const opt_tables[] = {client, own, NULL};
	for (int i = 1; i < argc; i++)
		c->clustered |=
		    strncmp(argv[i], "--cluster", 9) == 0 && (argv[i][9] == 0 || argv[i][9] == '=');
	int optind = qpg_opts_parse(
	    argc, argv, opt_tables,
	    c->clustered ? "qpgate-kvbench --cluster URL --cluster-name NAME [options]"
			 : "qpgate-kvbench [options] HOST SERVERNAME",
	    c->clustered ? 0 : 2);
	return settle_args(b, c, argv, optind);
}

/* What every key holds, preloaded now or by an earlier run (a prefix
 * workload's blocks: made as first needed), and the zipf CDF. Returns 0 or
 * -ENOMEM. */
static int keys_prepare(struct bench *b, const struct cli_args *c)
{
	if (c->prefix && c->lru_bytes) {
		b->trace_cap = 1l << 24; /* turns remembered: 64 MiB */
		if (!(b->trace = malloc(sizeof(*b->trace) * (size_t)b->trace_cap)))
			return -ENOMEM;
	}
	b->expect = calloc(c->prefix ? kvb_prefix_ids(b) : b->nkeys, sizeof(*b->expect));
	if (!b->expect)
		return -ENOMEM;
	uint64_t values_len = (uint64_t)b->nkeys * b->value_size;
	if (b->put_pct && !(b->values = malloc(values_len ? values_len : 1)))
		return -ENOMEM;
	uint8_t *value = malloc(b->value_size ? b->value_size : 1);
	if (!value)
		return -ENOMEM;
	for (uint32_t k = 0; !c->prefix && k < b->nkeys; k++) {
		uint8_t *v = b->values ? b->values + (size_t)k * b->value_size : value;
		kv_value_fill(v, k, b->value_size);
		b->expect[k] = XXH64(v, b->value_size, 0);
	}
	free(value);
	if (b->zipf) {
		b->zipf_cdf = malloc(sizeof(double) * b->nkeys);
		if (!b->zipf_cdf)
			return -ENOMEM;
		double sum = 0;
		for (uint32_t k = 0; k < b->nkeys; k++)
			sum += 1.0 / pow(k + 1, 0.99);
		double acc = 0;
		for (uint32_t k = 0; k < b->nkeys; k++)
			b->zipf_cdf[k] = (acc += 1.0 / pow(k + 1, 0.99) / sum);
	}
	return 0;
}

static void print_banner(const struct bench *b, const struct cli_args *c)
{
	const char *transport = b->po.client.transport == QPG_KIND_RDMA ? "rdma" : "tcp";
	const char *auth = b->po.client.auth ? "on" : "off";
	if (c->prefix)
		printf(" qpgate-kvbench: prefix workload, %u prompts (%s) of 1 to %u blocks x %u "
		       "bytes, "
		       "the first %u shared by each %u prompts, %s transport, message auth %s\n",
		       b->nkeys, b->zipf ? "zipf" : "uniform", b->blocks, b->value_size, b->shared,
		       8, transport, auth);
	else
		printf(" qpgate-kvbench: %u keys x %u bytes, %s keys, %s transport, message auth "
		       "%s\n",
		       b->nkeys, b->value_size, b->zipf ? "zipf" : "uniform", transport, auth);
}

/* One run, or with --get-mode compare the same shape each way (two-sided
 * first, the same keys), a row each in ROWS. Returns non-zero when a run
 * failed or a value did not check. */
static int run_modes(struct bench *b, const struct cli_args *c, json_t *rows)
{
	static const uint8_t order[] = {QPG_KV_GET_TWO_SIDED, QPG_KV_GET_ONE_SIDED,
					QPG_KV_GET_AUTO};
	double base = 0;
	int rc = 0;
	for (int m = 0; m < (c->compare ? 3 : 1); m++) {
		if (c->compare)
			b->po.get_mode = order[m];
		struct run_result r;
		kvbench_run_once(b, b->po.threads, b->po.conns, b->workers, c->preload && m == 0,
				 &r);
		if (m == 0) {
			print_header();
			base = r.ops_per_s;
		}
		print_row(&r, base);
		json_t *row = row_json(&r, base);
		rc |= r.connect_error || r.errors || r.mismatches || r.ops == 0;
		if (b->put_pct || c->prefix)
			printf(" %ld PUTs, %ld GETs verified, %ld mismatches, %ld errors\n", r.puts,
			       r.ops - r.puts, r.mismatches, r.errors);
		else
			printf(" %ld GETs verified, %ld mismatches, %ld errors\n", r.ops,
			       r.mismatches, r.errors);
		json_object_set_new(row, "puts", json_integer(r.puts));
		if (c->prefix)
			report_prefix(b, &r, row, c->lru_bytes);
		if (c->clustered) {
			/* Misses and UNAVAILABLE answers are what a failover
			 * costs; anything else, or a value that fails its
			 * check, is an error. */
			printf(" cluster: %ld misses (each filled again: %ld), %ld unavailable\n",
			       r.misses, r.refills, r.unavailable);
			json_object_set_new(row, "misses", json_integer(r.misses));
			json_object_set_new(row, "unavailable", json_integer(r.unavailable));
			json_object_set_new(row, "refills", json_integer(r.refills));
			if (b->cluster_report)
				json_object_set(row, "cluster", b->cluster_report);
		}
		json_array_append_new(rows, row);
	}
	return rc;
}

/* --scaling: the seed's two tables. Returns non-zero when a run failed,
 * -1 when the preload did. */
static int run_scaling(struct bench *b, const struct cli_args *c, json_t *rows)
{
	static const unsigned wl[] = {4, 8, 16, 32, 64}, cl[] = {1, 4, 16, 64, 256, 1024};
	if (c->preload) { /* once: the tables then only read */
		struct run_result r;
		kvbench_run_once(b, b->po.threads, b->po.conns, 1, true, &r);
		if (r.connect_error) {
			printf(" preload FAILED: %s\n", r.why);
			return -1;
		}
	}
	static const struct table_spec tables[] = {
	    {1, "workers at 4 clients (seed: 16 workers = 2.0-2.5x of 4)", wl, 5, 4, 0},
	    {2, "clients at 64 workers (seed: never more than 8 clients)", cl, 6, 0, 64},
	};
	int rc = 0;
	for (size_t t = 0; t < 2; t++)
		rc |= run_table(b, &tables[t], rows);
	return rc;
}

/* --json FILE: the rows under the common schema (docs/json.md). Takes
 * ROWS. Returns 0 or 1. */
static int write_json(const struct bench *b, const struct cli_args *c, json_t *rows)
{
	json_t *root = qpg_json_doc(
	    "qpgate-kvbench",
	    json_pack("{s:i, s:i, s:s, s:s, s:b, s:i, s:s, s:i, s:i}", "num_keys", (int)b->nkeys,
		      "value_size", (int)b->value_size, "dist", b->zipf ? "zipf" : "uniform",
		      "transport", b->po.client.transport == QPG_KIND_RDMA ? "rdma" : "tcp", "auth",
		      b->po.client.auth, "qps_per_session", (int)b->po.qps_per_session, "workload",
		      c->prefix ? "prefix" : "get", "blocks", (int)b->blocks, "shared_blocks",
		      c->prefix ? (int)b->shared : 0),
	    json_pack("{s:o}", "runs", rows));
	int rc = 0;
	if (!root || json_dump_file(root, c->json_path, JSON_INDENT(2))) {
		fprintf(stderr, "qpgate-kvbench: cannot write %s\n", c->json_path);
		rc = 1;
	}
	json_decref(root);
	return rc;
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	struct cli_args c;
	if (parse_args(&b, &c, argc, argv) < 0)
		return 2;
	qpg_cli_raise_nofile();
	b.server_pid = (pid_t)c.server_pid;
	if (proc_check_server_pid(b.server_pid))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cv, NULL);
	if (keys_prepare(&b, &c))
		return 1;
	print_banner(&b, &c);
	json_t *rows = json_array();
	int rc = c.scaling ? run_scaling(&b, &c, rows) : run_modes(&b, &c, rows);
	if (rc < 0) { /* the scaling tables' preload failed */
		json_decref(rows);
		return 1;
	}
	if (c.json_path)
		rc |= write_json(&b, &c, rows);
	else
		json_decref(rows);
	json_decref(b.cluster_report);
	free(b.expect);
	free(b.values);
	free(b.zipf_cdf);
	free(b.trace);
	return rc ? 1 : 0;
}

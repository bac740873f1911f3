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
#include <getopt.h>
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
#include "kvbench.h"
#include "kvdata.h"
#include "qpgate/hist.h"
#include "qpgate/kv_client.h"
#include "resources.h"

static const char *const mode_names[] = {"auto", "two-sided", "one-sided"};

static void print_header(void)
{
	printf(" %-10s %-8s %-8s %-8s %10s %10s %9s %9s %9s %9s %8s %7s %6s %6s\n", "GET",
	       "workers", "clients", "threads", "GETs", "ops/s", "MiB/s", "p50[us]", "p99[us]",
	       "p99.9[us]", "RSS[MB]", "QPs", "errs", "vs 1st");
}

static void print_row(const struct run_result *r, double base)
{
	const char *mode = mode_names[r->get_mode];
	if (r->connect_error) {
		printf(" %-10s %-8u %-8u %-8u  FAILED: %s\n", mode, r->workers, r->clients,
		       r->threads, r->why);
		return;
	}
	printf(
	    " %-10s %-8u %-8u %-8u %10ld %10.0f %9.2f %9.1f %9.1f %9.1f %8.1f %7ld %6ld %5.2fx\n",
	    mode, r->workers, r->clients, r->threads, r->ops, r->ops_per_s, r->gib_per_s * 1024,
	    qpg_hist_quantile(&r->lat, 0.5) / 1e3, qpg_hist_quantile(&r->lat, 0.99) / 1e3,
	    qpg_hist_quantile(&r->lat, 0.999) / 1e3, r->rss_kb / 1024.0, r->dev_qps,
	    r->errors + r->mismatches, base > 0 ? r->ops_per_s / base : 1.0);
	fflush(stdout);
}

static json_t *row_json(const struct run_result *r, double base)
{
	return json_pack(
	    "{s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, "
	    "s:f, s:s}",
	    "get_mode", mode_names[r->get_mode], "workers", r->workers, "clients", r->clients,
	    "threads", r->threads, "gets", (json_int_t)r->ops, "mismatches",
	    (json_int_t)r->mismatches, "errors", (json_int_t)r->errors, "secs", r->secs,
	    "ops_per_s", r->ops_per_s, "gib_per_s", r->gib_per_s, "p50_us",
	    qpg_hist_quantile(&r->lat, 0.5) / 1e3, "p99_us", qpg_hist_quantile(&r->lat, 0.99) / 1e3,
	    "p999_us", qpg_hist_quantile(&r->lat, 0.999) / 1e3, "rss_kb", (json_int_t)r->rss_kb,
	    "device_qps", (json_int_t)r->dev_qps, "vs_first", base > 0 ? r->ops_per_s / base : 1.0,
	    "error", r->why);
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

static void usage(FILE *f)
{
	fprintf(f, "usage: qpgate-kvbench [options] HOST SERVERNAME\n" QPG_CLI_CLIENT_HELP
		   "      --threads N        pool threads (default 4)\n"
		   "      --num-workers N    concurrent GET workers (default 16)\n"
		   "      --num-clients N    pooled connections (default 4)\n"
		   "      --num-keys N       keys preloaded (default 10000)\n"
		   "      --value-size BYTES value size (default 4096)\n"
		   "  -D, --duration S       measure for S seconds (default 10)\n"
		   "  -n, --ops N            or: stop after N GETs\n"
		   "      --dist uniform|zipf key popularity (default uniform; zipf s=0.99)\n"
		   "  -s, --max-msg BYTES    frame size (default 8192)\n"
		   "      --no-preload       the keys are already there\n"
		   "      --get-mode MODE    auto (the server picks by size; default), two-sided\n"
		   "                         (the server SENDs the value), one-sided (RDMA\n"
		   "                         READ of a granted window), or compare: the same\n"
		   "                         run each of the three ways\n"
		   "      --scaling          the seed's tables: workers 4..64 at 4 clients,\n"
		   "                         clients 1..1024 at 64 workers\n"
		   "      --json FILE        results as JSON\n");
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	qpg_kv_pool_opts_default(&b.po);
	b.workers = 16;
	b.nkeys = 10000;
	b.value_size = 4096;
	b.duration_s = 10;
	bool scaling = false, do_preload = true, compare = false;
	const char *json_path = NULL;
	enum {
		O_THREADS = 256,
		O_WORKERS,
		O_CLIENTS,
		O_KEYS,
		O_VSIZE,
		O_DIST,
		O_JSON,
		O_SCALING,
		O_NOPRELOAD,
		O_GETMODE
	};
	static const struct option opts[] = {
	    QPG_CLI_CLIENT_LONGOPTS,
	    {"threads", 1, 0, O_THREADS},
	    {"num-workers", 1, 0, O_WORKERS},
	    {"num-clients", 1, 0, O_CLIENTS},
	    {"num-keys", 1, 0, O_KEYS},
	    {"value-size", 1, 0, O_VSIZE},
	    {"duration", 1, 0, 'D'},
	    {"ops", 1, 0, 'n'},
	    {"dist", 1, 0, O_DIST},
	    {"max-msg", 1, 0, 's'},
	    {"json", 1, 0, O_JSON},
	    {"scaling", 0, 0, O_SCALING},
	    {"no-preload", 0, 0, O_NOPRELOAD},
	    {"get-mode", 1, 0, O_GETMODE},
	    {"help", 0, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, QPG_CLI_CLIENT_SHORTOPTS "D:n:s:h", opts, NULL)) !=
	       -1) {
		if (qpg_cli_client_opt(ch, optarg, &b.po.client))
			continue;
		switch (ch) {
		case O_THREADS:
			b.po.threads = (unsigned)qpg_cli_int(optarg, 1, 256, "--threads");
			break;
		case O_WORKERS:
			b.workers = (unsigned)qpg_cli_int(optarg, 1, 100000, "--num-workers");
			break;
		case O_CLIENTS:
			b.po.conns = (unsigned)qpg_cli_int(optarg, 1, 100000, "--num-clients");
			break;
		case O_KEYS:
			b.nkeys = (uint32_t)qpg_cli_int(optarg, 1, 100000000, "--num-keys");
			break;
		case O_VSIZE:
			b.value_size =
			    (uint32_t)qpg_cli_size(optarg, 1, QPG_KV_MAX_VALUE, "--value-size");
			break;
		case 'D':
			b.duration_s = qpg_cli_double(optarg, 0.1, 86400, "--duration");
			break;
		case 'n':
			b.max_ops = qpg_cli_int(optarg, 1, 1000000000000ll, "--ops");
			break;
		case 's':
			b.po.client.max_msg =
			    (uint32_t)qpg_cli_int(optarg, 512, 1 << 20, "--max-msg");
			break;
		case O_DIST:
			if (strcmp(optarg, "uniform") && strcmp(optarg, "zipf")) {
				fprintf(stderr, "error: --dist is uniform or zipf\n");
				return 2;
			}
			b.zipf = !strcmp(optarg, "zipf");
			break;
		case O_JSON:
			json_path = optarg;
			break;
		case O_SCALING:
			scaling = true;
			break;
		case O_NOPRELOAD:
			do_preload = false;
			break;
		case O_GETMODE:
			if (!strcmp(optarg, "compare")) {
				compare = true;
				break;
			}
			for (b.po.get_mode = 0; b.po.get_mode < 3; b.po.get_mode++)
				if (!strcmp(optarg, mode_names[b.po.get_mode]))
					break;
			if (b.po.get_mode == 3) {
				fprintf(stderr,
					"error: --get-mode is auto, two-sided, one-sided or "
					"compare\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	b.po.client.host = argv[optind];
	b.po.client.servername = argv[optind + 1];
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cv, NULL);
	b.expect = calloc(b.nkeys, sizeof(*b.expect));
	if (!b.expect)
		return 1;
	/* What every key holds, preloaded now or by an earlier run. */
	for (uint32_t k = 0; k < b.nkeys; k++)
		b.expect[k] = kv_value_fnv(k, b.value_size);
	if (b.zipf) {
		b.zipf_cdf = malloc(sizeof(double) * b.nkeys);
		if (!b.zipf_cdf)
			return 1;
		double sum = 0;
		for (uint32_t k = 0; k < b.nkeys; k++)
			sum += 1.0 / pow(k + 1, 0.99);
		double acc = 0;
		for (uint32_t k = 0; k < b.nkeys; k++)
			b.zipf_cdf[k] = (acc += 1.0 / pow(k + 1, 0.99) / sum);
	}
	printf(" qpgate-kvbench: %u keys x %u bytes, %s keys, %s transport, message auth %s\n",
	       b.nkeys, b.value_size, b.zipf ? "zipf" : "uniform",
	       b.po.client.transport == QPG_KIND_RDMA ? "rdma" : "tcp",
	       b.po.client.auth ? "on" : "off");
	json_t *rows = json_array();
	int rc = 0;
	if (!scaling) {
		/* Compare: the same shape each way, two-sided first, same keys. */
		static const uint8_t order[] = {QPG_KV_GET_TWO_SIDED, QPG_KV_GET_ONE_SIDED,
						QPG_KV_GET_AUTO};
		double base = 0;
		for (int m = 0; m < (compare ? 3 : 1); m++) {
			if (compare)
				b.po.get_mode = order[m];
			struct run_result r;
			kvbench_run_once(&b, b.po.threads, b.po.conns, b.workers,
					 do_preload && m == 0, &r);
			if (m == 0) {
				print_header();
				base = r.ops_per_s;
			}
			print_row(&r, base);
			json_array_append_new(rows, row_json(&r, base));
			rc |= r.connect_error || r.errors || r.mismatches || r.ops == 0;
			printf(" %ld GETs verified, %ld mismatches, %ld errors\n", r.ops,
			       r.mismatches, r.errors);
		}
	} else {
		static const unsigned wl[] = {4, 8, 16, 32, 64}, cl[] = {1, 4, 16, 64, 256, 1024};
		struct run_result r;
		if (do_preload) { /* once: the tables then only read */
			kvbench_run_once(&b, b.po.threads, b.po.conns, 1, true, &r);
			if (r.connect_error) {
				printf(" preload FAILED: %s\n", r.why);
				return 1;
			}
		}
		static const struct table_spec tables[] = {
		    {1, "workers at 4 clients (seed: 16 workers = 2.0-2.5x of 4)", wl, 5, 4, 0},
		    {2, "clients at 64 workers (seed: never more than 8 clients)", cl, 6, 0, 64},
		};
		for (size_t t = 0; t < 2; t++)
			rc |= run_table(&b, &tables[t], rows);
	}
	if (json_path) {
		json_t *root =
		    json_pack("{s:{s:s, s:i, s:i, s:s, s:s, s:b}, s:o}", "test_info", "tool",
			      "qpgate-kvbench", "num_keys", (int)b.nkeys, "value_size",
			      (int)b.value_size, "dist", b.zipf ? "zipf" : "uniform", "transport",
			      b.po.client.transport == QPG_KIND_RDMA ? "rdma" : "tcp", "auth",
			      b.po.client.auth, "results", rows);
		if (!root || json_dump_file(root, json_path, JSON_INDENT(2))) {
			fprintf(stderr, "qpgate-kvbench: cannot write %s\n", json_path);
			rc = 1;
		}
		json_decref(root);
	} else {
		json_decref(rows);
	}
	free(b.expect);
	free(b.zipf_cdf);
	return rc ? 1 : 0;
}

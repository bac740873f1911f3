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
#include "kvdata.h"
#include "qpgate/hist.h"
#include "qpgate/kv_client.h"
#include "resources.h"

struct bench;

struct worker {
	struct qpg_kv_request req;
	struct bench *b;
	uint64_t rng;
	uint32_t key;
	char keybuf[24];
	uint64_t fnv; /* running checksum of the value being received */
	uint64_t t0;
	long ops, mismatches, errors;
	struct qpg_hist lat;
};

struct bench {
	struct qpg_kv_pool_opts po;
	unsigned workers;
	uint32_t nkeys, value_size;
	double duration_s;
	long max_ops;
	bool zipf;
	double *zipf_cdf;
	uint64_t *expect; /* fnv64 of each key's value */
	struct qpg_kv_pool *pool;
	atomic_long issued;
	atomic_bool stop;
	atomic_int active;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};

struct run_result {
	uint8_t get_mode;
	unsigned workers, clients, threads;
	long ops, mismatches, errors;
	double secs, ops_per_s, gib_per_s;
	struct qpg_hist lat;
	long rss_kb;
	long dev_qps; /* device QPs while the pool was up, minus before */
	int connect_error;
	char why[256];
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int key_name(char *buf, size_t len, uint32_t k)
{
	return snprintf(buf, len, "kv-%08u", k);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint32_t pick_key(struct worker *w)
{
	struct bench *b = w->b;
	double u = (double)(xorshift(&w->rng) >> 11) / (double)(1ull << 53);
	if (!b->zipf)
		return (uint32_t)(u * b->nkeys) % b->nkeys;
	uint32_t lo = 0, hi = b->nkeys - 1; /* first CDF entry >= u */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (b->zipf_cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- preload ------------------------------------------------------------ */

struct put_slot {
	struct qpg_kv_request req;
	struct bench *b;
	char key[24];
	uint8_t *value;
	int status;
	bool busy;
};

static void put_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct put_slot *s = r->user;
	pthread_mutex_lock(&s->b->lock);
	s->busy = false;
	if (status != QPG_KV_OK && s->status == QPG_KV_OK)
		s->status = status ? status : -EIO;
	pthread_cond_broadcast(&s->b->cv);
	pthread_mutex_unlock(&s->b->lock);
}

static int preload(struct bench *b, struct qpg_kv_pool *pool)
{
	enum { INFLIGHT = 64 };
	struct put_slot *slots = calloc(INFLIGHT, sizeof(*slots));
	int rc = slots ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < INFLIGHT; i++) {
		slots[i].b = b;
		if (!(slots[i].value = malloc(b->value_size ? b->value_size : 1)))
			rc = -ENOMEM;
	}
	for (uint32_t k = 0; rc == 0 && k < b->nkeys; k++) {
		struct put_slot *s = NULL;
		pthread_mutex_lock(&b->lock);
		while (!s) {
			for (int i = 0; i < INFLIGHT && !s; i++)
				if (!slots[i].busy)
					s = &slots[i];
			if (!s)
				pthread_cond_wait(&b->cv, &b->lock);
		}
		s->busy = true;
		if (s->status != QPG_KV_OK)
			rc = s->status > 0 ? -EIO : s->status;
		pthread_mutex_unlock(&b->lock);
		if (rc)
			break;
		for (uint32_t i = 0; i < b->value_size; i++)
			s->value[i] = kv_value_byte(k, i);
		int n = key_name(s->key, sizeof(s->key), k);
		s->req = (struct qpg_kv_request){.op = QPG_KV_PUT,
						 .key = s->key,
						 .key_len = (uint16_t)n,
						 .value = s->value,
						 .value_len = b->value_size,
						 .done = put_done,
						 .user = s};
		if ((rc = qpg_kv_submit(pool, &s->req)) != 0)
			s->busy = false;
	}
	pthread_mutex_lock(&b->lock); /* wait for the last ones */
	for (int i = 0; slots && i < INFLIGHT; i++) {
		while (slots[i].busy)
			pthread_cond_wait(&b->cv, &b->lock);
		if (rc == 0 && slots[i].status != QPG_KV_OK)
			rc = slots[i].status > 0 ? -EIO : slots[i].status;
	}
	pthread_mutex_unlock(&b->lock);
	for (int i = 0; slots && i < INFLIGHT; i++)
		free(slots[i].value);
	free(slots);
	return rc;
}

/* ---- the workers --------------------------------------------------------- */

static void issue(struct worker *w);

static void get_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		      uint32_t total)
{
	struct worker *w = r->user;
	w->fnv = kv_fnv_step(w->fnv, data, len); /* straight from the receive buffer */
}

static void worker_stop(struct bench *b)
{
	pthread_mutex_lock(&b->lock);
	atomic_fetch_sub(&b->active, 1);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->lock);
}

static void get_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct worker *w = r->user;
	struct bench *b = w->b;
	qpg_hist_add(&w->lat, now_ns() - w->t0);
	if (status != QPG_KV_OK)
		w->errors++;
	else if (len != b->value_size || w->fnv != b->expect[w->key])
		w->mismatches++;
	else
		w->ops++;
	if (status < 0) { /* the connection is gone: this worker stops */
		worker_stop(b);
		return;
	}
	issue(w);
}

static void issue(struct worker *w)
{
	struct bench *b = w->b;
	if (atomic_load(&b->stop) ||
	    (b->max_ops > 0 && atomic_fetch_add(&b->issued, 1) >= b->max_ops)) {
		worker_stop(b);
		return;
	}
	w->key = pick_key(w);
	int n = key_name(w->keybuf, sizeof(w->keybuf), w->key);
	w->req = (struct qpg_kv_request){.op = QPG_KV_GET,
					 .key = w->keybuf,
					 .key_len = (uint16_t)n,
					 .chunk = get_chunk,
					 .done = get_done,
					 .user = w};
	w->fnv = KV_FNV_INIT;
	w->t0 = now_ns();
	if (qpg_kv_submit(b->pool, &w->req) != 0)
		worker_stop(b);
}

/* One measured run: a fresh pool of CLIENTS connections on THREADS threads,
 * WORKERS workers, for the duration or op count. */
static void run_once(struct bench *b, unsigned threads, unsigned clients, unsigned workers,
		     bool do_preload, struct run_result *res)
{
	memset(res, 0, sizeof(*res));
	res->workers = workers;
	res->clients = clients;
	res->threads = threads;
	res->get_mode = b->po.get_mode;
	qpg_hist_init(&res->lat);
	struct qpg_kv_pool_opts po = b->po;
	po.threads = threads;
	po.conns = clients;
	/* Enough credits for every worker of a connection to be in flight. */
	unsigned per = (workers + clients - 1) / clients;
	po.client.credits = (uint16_t)(per < 1 ? 1 : per > 1024 ? 1024 : per);
	if (do_preload && po.client.credits < 16)
		po.client.credits = 16;
	struct dev_counts d0, d1;
	dev_counts(po.client.ib_dev, &d0);
	char err[256] = "";
	int rc = qpg_kv_pool_create(&b->pool, &po, err, sizeof(err));
	if (rc) {
		res->connect_error = rc;
		snprintf(res->why, sizeof(res->why), "%s", err);
		return;
	}
	dev_counts(po.client.ib_dev, &d1);
	res->dev_qps = d0.ok && d1.ok ? d1.qp - d0.qp : -1;
	if (do_preload) {
		uint64_t t = now_ns();
		rc = preload(b, b->pool);
		fprintf(stderr, "kvbench: preloaded %u keys of %u bytes in %.1f s%s\n", b->nkeys,
			b->value_size, (double)(now_ns() - t) / 1e9, rc ? " (FAILED)" : "");
		if (rc) {
			res->connect_error = rc;
			snprintf(res->why, sizeof(res->why), "preload failed: %s",
				 rc == -EIO ? "the server refused a PUT" : strerror(-rc));
			qpg_kv_pool_destroy(b->pool);
			return;
		}
	}
	struct worker *w = calloc(workers, sizeof(*w));
	if (!w) {
		res->connect_error = -ENOMEM;
		qpg_kv_pool_destroy(b->pool);
		return;
	}
	atomic_store(&b->stop, false);
	atomic_store(&b->issued, 0);
	atomic_store(&b->active, (int)workers);
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < workers; i++) {
		w[i].b = b;
		w[i].rng = 0x9e3779b97f4a7c15ull * (i + 1) ^ t0;
		qpg_hist_init(&w[i].lat);
		issue(&w[i]);
	}
	uint64_t end = t0 + (uint64_t)(b->duration_s * 1e9);
	pthread_mutex_lock(&b->lock);
	while (atomic_load(&b->active) > 0) {
		if (b->max_ops <= 0 && now_ns() >= end)
			atomic_store(&b->stop, true);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&b->cv, &b->lock, &ts);
	}
	pthread_mutex_unlock(&b->lock);
	res->secs = (double)(now_ns() - t0) / 1e9;
	struct proc_sample ps;
	proc_sample(0, &ps);
	res->rss_kb = ps.rss_kb;
	qpg_kv_pool_destroy(b->pool);
	b->pool = NULL;
	for (unsigned i = 0; i < workers; i++) {
		res->ops += w[i].ops;
		res->mismatches += w[i].mismatches;
		res->errors += w[i].errors;
		qpg_hist_merge(&res->lat, &w[i].lat);
	}
	free(w);
	res->ops_per_s = res->secs > 0 ? res->ops / res->secs : 0;
	res->gib_per_s = res->ops_per_s * b->value_size / (1024.0 * 1024 * 1024);
}

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
		run_once(b, b->po.threads, t->clients ? t->clients : t->values[i],
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
			run_once(&b, b.po.threads, b.po.conns, b.workers, do_preload && m == 0, &r);
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
			run_once(&b, b.po.threads, b.po.conns, 1, true, &r);
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

/* SPDX-License-Identifier: BSD-2-Clause */
/* One process of the nemesis test (tests/nemesis/nemesis.sh): a writer of
 * versioned values, or a reader that checks them, through a cluster.
 *   nemesis_client writer|reader ETCD_URL NAME CA TRANSPORT KEYS SECONDS LOG
 * Each value is 128 bytes: "QPNM", the key's index, its version and a
 * pattern drawn from both, so a reader knows what it got and whether it is
 * whole. The writer has one write in flight per key (versions of a key are
 * acknowledged in order) and logs "T key version" before each PUT and
 * "A key version t" once acknowledged; a reader logs "R key version t0 t1"
 * for each value, "M key t0" for a miss, "U key t0" for UNAVAILABLE, "C key
 * t0" for a value that is not whole, "E key status t0" for anything else.
 * Times are CLOCK_MONOTONIC ns, the same clock in every process of the
 * host. nemesis_check.py judges the logs. Bounded: SECONDS, then exit.
 * NEMESIS_READERS=N (up to 64) gives a reader N threads, thread T reading
 * only keys = T (mod N): with N = KEYS each key has a lane of its own, and
 * a request that a dead member holds until its deadline delays no other
 * key's reads (bench/failover.sh times each key's outage so). */
#include <inttypes.h>
#include <pthread.h>
#include <qpgate/kv_cluster.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VLEN	    128
#define THREADS	    4
#define MAX_THREADS 64

static struct {
	struct qpg_kv_cluster *c;
	bool writer;
	bool lanes; /* a reader's thread T reads only keys = T (mod threads) */
	unsigned threads;
	unsigned keys;
	uint64_t until_ns;
	FILE *log;
	uint64_t *version; /* writer: the last version written, per key */
	atomic_ullong ok, miss, unavailable, corrupt, other;
} g;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void make_value(uint8_t *v, uint32_t key, uint64_t version)
{
	memcpy(v, "QPNM", 4);
	memcpy(v + 4, &key, 4);
	memcpy(v + 8, &version, 8);
	uint64_t s = mix((uint64_t)key << 40 ^ version);
	for (unsigned i = 16; i < VLEN; i += 8) {
		s = mix(s);
		memcpy(v + i, &s, 8);
	}
}

/* The version V holds if it is a whole value of KEY, else 0. */
static uint64_t check_value(const uint8_t *v, uint32_t len, uint32_t key)
{
	uint32_t k;
	uint64_t version;
	if (len != VLEN || memcmp(v, "QPNM", 4))
		return 0;
	memcpy(&k, v + 4, 4);
	memcpy(&version, v + 8, 8);
	uint8_t want[VLEN];
	make_value(want, key, version);
	return k == key && memcmp(v, want, VLEN) == 0 ? version : 0;
}

struct call {
	struct qpg_kv_request r;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint8_t got[VLEN];
	uint32_t got_len;
};

static void on_chunk(struct qpg_kv_request *r, const uint8_t *d, uint32_t len, uint32_t off,
		     uint32_t total)
{
	(void)total;
	struct call *c = r->user;
	if (off + len <= VLEN) {
		memcpy(c->got + off, d, len);
		c->got_len = off + len;
	} else {
		c->got_len = VLEN + 1; /* too long: not whole */
	}
}

static void on_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	(void)len;
	struct call *c = r->user;
	pthread_mutex_lock(&c->lock);
	c->status = status;
	c->done = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
}

static int run(struct call *c)
{
	c->done = false;
	c->got_len = 0;
	c->r.user = c;
	c->r.done = on_done;
	int rc = qpg_kv_cluster_submit(g.c, &c->r);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	while (!c->done)
		pthread_cond_wait(&c->cv, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return c->status;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	struct call c = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	char key[32];
	uint8_t val[VLEN];
	uint64_t rnd = mix(now_ns() ^ t);
	for (unsigned i = 0; now_ns() < g.until_ns; i++) {
		rnd = mix(rnd);
		/* writer: thread T writes only keys = T (mod threads) */
		uint32_t k = g.writer || g.lanes
				 ? (uint32_t)((rnd % (g.keys / g.threads)) * g.threads + t)
				 : (uint32_t)(rnd % g.keys);
		snprintf(key, sizeof(key), "nemesis-%u", k);
		memset(&c.r, 0, sizeof(c.r));
		c.r.key = key;
		c.r.key_len = (uint16_t)strlen(key);
		uint64_t t0 = now_ns();
		if (g.writer) {
			uint64_t v = ++g.version[k];
			make_value(val, k, v);
			c.r.op = QPG_KV_PUT;
			c.r.value = val;
			c.r.value_len = VLEN;
			fprintf(g.log, "T %u %" PRIu64 "\n", k, v);
			int st = run(&c);
			if (st == QPG_KV_OK) {
				fprintf(g.log, "A %u %" PRIu64 " %" PRIu64 "\n", k, v, now_ns());
				atomic_fetch_add(&g.ok, 1);
			} else {
				atomic_fetch_add(
				    st == QPG_KV_UNAVAILABLE ? &g.unavailable : &g.other, 1);
			}
		} else {
			c.r.op = QPG_KV_GET;
			c.r.chunk = on_chunk;
			int st = run(&c);
			uint64_t t1 = now_ns();
			if (st == QPG_KV_OK) {
				uint64_t v = check_value(c.got, c.got_len, k);
				if (v) {
					fprintf(g.log, "R %u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
						k, v, t0, t1);
					atomic_fetch_add(&g.ok, 1);
				} else {
					fprintf(g.log, "C %u %" PRIu64 "\n", k, t0);
					atomic_fetch_add(&g.corrupt, 1);
				}
			} else if (st == QPG_KV_NOT_FOUND) {
				fprintf(g.log, "M %u %" PRIu64 "\n", k, t0);
				atomic_fetch_add(&g.miss, 1);
			} else if (st == QPG_KV_UNAVAILABLE) {
				fprintf(g.log, "U %u %" PRIu64 "\n", k, t0);
				atomic_fetch_add(&g.unavailable, 1);
			} else {
				fprintf(g.log, "E %u %d %" PRIu64 "\n", k, st, t0);
				atomic_fetch_add(st == QPG_KV_CORRUPT ? &g.corrupt : &g.other, 1);
			}
		}
		/* A refusal comes back at once: pace the retries, so a member
		 * that is down does not fill the log. */
		if (c.status != QPG_KV_OK && c.status != QPG_KV_NOT_FOUND)
			nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 9 || (strcmp(argv[1], "writer") && strcmp(argv[1], "reader"))) {
		fprintf(stderr,
			"usage: nemesis_client writer|reader ETCD_URL NAME CA tcp|rdma KEYS "
			"SECONDS LOG\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	g.writer = argv[1][0] == 'w';
	g.keys = (unsigned)atoi(argv[6]);
	g.threads = THREADS;
	const char *readers = getenv("NEMESIS_READERS");
	if (!g.writer && readers) {
		g.lanes = true;
		g.threads = (unsigned)atoi(readers);
		if (g.threads < 1 || g.threads > MAX_THREADS) {
			fprintf(stderr, "nemesis_client: NEMESIS_READERS is 1 to %d\n", MAX_THREADS);
			return 2;
		}
	}
	if (g.keys < g.threads)
		g.keys = g.threads;
	g.keys -= g.keys % g.threads;
	if (!(g.log = fopen(argv[8], "w")) || !(g.version = calloc(g.keys, sizeof(uint64_t)))) {
		perror("nemesis_client");
		return 1;
	}
	struct qpg_kv_cluster_opts o;
	qpg_kv_cluster_opts_default(&o);
	o.etcd.endpoints = argv[2];
	o.etcd.name = argv[3];
	o.etcd.quiet = true;
	o.pool.client.ca = argv[4];
	o.pool.client.transport = strcmp(argv[5], "rdma") ? QPG_KIND_TCP : QPG_KIND_RDMA;
	o.pool.get_mode = QPG_KV_GET_AUTO;
	char err[512];
	if (qpg_kv_cluster_create(&g.c, &o, err, sizeof(err))) {
		fprintf(stderr, "nemesis_client: %s\n", err);
		return 1;
	}
	g.until_ns = now_ns() + (uint64_t)atoi(argv[7]) * 1000000000ull;
	pthread_t th[MAX_THREADS];
	for (unsigned t = 0; t < g.threads; t++)
		pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < g.threads; t++)
		pthread_join(th[t], NULL);
	qpg_kv_cluster_destroy(g.c);
	fclose(g.log);
	fprintf(stderr,
		"nemesis_client %s: %llu ok, %llu misses, %llu unavailable, %llu not whole, %llu "
		"other\n",
		argv[1], (unsigned long long)atomic_load(&g.ok),
		(unsigned long long)atomic_load(&g.miss),
		(unsigned long long)atomic_load(&g.unavailable),
		(unsigned long long)atomic_load(&g.corrupt),
		(unsigned long long)atomic_load(&g.other));
	return 0;
}

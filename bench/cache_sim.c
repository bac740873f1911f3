/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV store's eviction (SIEVE, src/kv/kv_store.c, the real one) against
 * exact LRU, on the same traces and with the same room: the share of reads
 * each answers from the cache. Values are all one size, so room is a count
 * of keys and neither side loses any to fragmentation.
 *
 *   qpg_cache_sim [SEED]
 *
 * Two traces, each at four sizes of the cache:
 *  - prefix: an inference server's prefix cache (kvbench --workload
 *    prefix): turns of zipf-chosen prompts of 16 blocks, the first 4
 *    shared by each 8 prompts. A turn looks its blocks up (EXISTS: no
 *    read, no eviction credit), reads the cached prefix and stores the
 *    rest. Hit ratio: blocks found cached over blocks asked for.
 *  - zipf: single-key GETs, zipf s=0.99, a miss filled again (cache-aside).
 * Prints a table; the figures go in docs/kv.md with the date and seed. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact_lru.h"
#include "kv_store.h"

#define VALUE 256 /* the store's smallest block: one key per block */

static uint64_t rng_state;

static uint64_t next_rand(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* Zipf(0.99) over N items by inverse CDF. */
struct zipf {
	double *cdf;
	uint32_t n;
};

static int zipf_init(struct zipf *z, uint32_t n)
{
	z->n = n;
	z->cdf = malloc(sizeof(double) * n);
	if (!z->cdf)
		return -1;
	double sum = 0, acc = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += 1.0 / pow(i + 1, 0.99);
	for (uint32_t i = 0; i < n; i++)
		z->cdf[i] = (acc += 1.0 / pow(i + 1, 0.99) / sum);
	return 0;
}

static uint32_t zipf_pick(const struct zipf *z)
{
	double u = (double)(next_rand() >> 11) / (double)(1ull << 53);
	uint32_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Popularity is not id order: a fixed shuffle (an odd multiplier). */
	return (uint32_t)(((uint64_t)lo * 2654435761u) % z->n);
}

/* ---- the two caches, behind the same three calls ----------------------- */

struct cache {
	struct qpg__kv_store s; /* SIEVE */
	struct exact_lru l;
	bool sieve;
};

static bool c_exists(struct cache *c, uint32_t id)
{
	if (!c->sieve)
		return c->l.in[id];
	return qpg__kv_exists(&c->s, NULL, (const uint8_t *)&id, sizeof(id));
}

static bool c_get(struct cache *c, uint32_t id)
{
	if (!c->sieve)
		return exact_lru_touch(&c->l, id, false);
	struct qpg__kv_value *v = qpg__kv_get(&c->s, NULL, (const uint8_t *)&id, sizeof(id));
	qpg__kv_release(&c->s, v);
	return v != NULL;
}

static void c_put(struct cache *c, uint32_t id)
{
	if (!c->sieve) {
		exact_lru_touch(&c->l, id, true);
		return;
	}
	struct qpg__kv_value *v;
	if (qpg__kv_reserve(&c->s, NULL, (const uint8_t *)&id, sizeof(id), VALUE, &v) == QPG__KVS_OK)
		qpg__kv_commit(&c->s, v);
}

static int c_init(struct cache *c, bool sieve, uint32_t ids, uint32_t room)
{
	memset(c, 0, sizeof(*c));
	c->sieve = sieve;
	if (sieve)
		return qpg__kv_store_init(&c->s, (size_t)room * VALUE, VALUE);
	return exact_lru_init(&c->l, ids, room);
}

static void c_fini(struct cache *c)
{
	if (c->sieve) {
		qpg__kv_store_fini(&c->s);
		return;
	}
	exact_lru_fini(&c->l);
}

/* ---- the traces ---------------------------------------------------------- */

enum { PROMPTS = 4000, BLOCKS = 16, SHARED = 4, FAMILY = 8, TURNS = 200000 };
enum { KEYS = 100000, GETS = 1000000 };

static uint32_t block_id(uint32_t p, unsigned i)
{
	if (i < SHARED)
		return (p / FAMILY) * SHARED + i;
	return (PROMPTS / FAMILY) * SHARED + p * (BLOCKS - SHARED) + (i - SHARED);
}

/* Blocks found cached over blocks asked for. */
static double run_prefix(struct cache *c, const struct zipf *z)
{
	uint64_t asked = 0, cached = 0;
	for (uint32_t t = 0; t < TURNS; t++) {
		uint32_t p = zipf_pick(z);
		unsigned have = 0;
		while (have < BLOCKS && c_exists(c, block_id(p, have)))
			have++;
		for (unsigned i = 0; i < BLOCKS; i++)
			if (i < have && c_get(c, block_id(p, i)))
				cached++;
			else
				c_put(c, block_id(p, i));
		asked += BLOCKS;
	}
	return (double)cached / (double)asked;
}

static double run_zipf(struct cache *c, const struct zipf *z)
{
	uint64_t hits = 0;
	for (uint32_t g = 0; g < GETS; g++) {
		uint32_t k = zipf_pick(z);
		if (c_get(c, k))
			hits++;
		else
			c_put(c, k);
	}
	return (double)hits / GETS;
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 0x9e3779b97f4a7c15ull;
	struct zipf zp, zk;
	if (zipf_init(&zp, PROMPTS) || zipf_init(&zk, KEYS))
		return 1;
	const uint32_t pids = (PROMPTS / FAMILY) * SHARED + PROMPTS * (BLOCKS - SHARED);
	static const double shares[] = {0.05, 0.10, 0.25, 0.50};
	printf(" qpg_cache_sim: SIEVE (the store) against exact LRU, seed 0x%llx\n",
	       (unsigned long long)seed);
	printf(" %-8s %10s %8s %10s %10s %8s\n", "trace", "keys", "room", "SIEVE", "LRU",
	       "SIEVE-LRU");
	for (int tr = 0; tr < 2; tr++) {
		uint32_t ids = tr == 0 ? pids : KEYS;
		for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++) {
			uint32_t room = (uint32_t)(shares[i] * ids);
			double r[2];
			for (int s = 0; s < 2; s++) {
				struct cache c;
				if (c_init(&c, s == 0, ids, room))
					return 1;
				rng_state = seed; /* the same trace for both */
				r[s] = tr == 0 ? run_prefix(&c, &zp) : run_zipf(&c, &zk);
				c_fini(&c);
			}
			printf(" %-8s %10u %7.0f%% %9.1f%% %9.1f%% %+7.1f\n",
			       tr == 0 ? "prefix" : "zipf", ids, 100 * shares[i], 100 * r[0],
			       100 * r[1], 100 * (r[0] - r[1]));
		}
	}
	free(zp.cdf);
	free(zk.cdf);
	return 0;
}

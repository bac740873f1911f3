/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kvbench --workload prefix: what an inference server asks of a
 * KV cache. Each turn is a prompt of --blocks blocks: its first
 * --shared-blocks are a system prompt shared by a family of 8 prompts, the
 * rest its own. A worker looks the blocks up in one EXISTS batch, reads the
 * cached prefix (every block verified), then stores the blocks it had to
 * compute (the prefill), in order, as vLLM's and SGLang's prefix caches
 * do with their block hashes. Prompts are picked uniform or zipf, so a
 * store smaller than the working set evicts, and the hit ratio says how
 * well it chose. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvbench.h"
#include "kvdata.h"
#include "qpgate/kv_target.h"

#define FAMILY 8 /* prompts sharing a system prompt */

struct kvb_turn {
	uint32_t prompt;
	unsigned step, have;
	uint64_t t0;
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t ids[QPG_KV_EXISTS_MAX];
	struct qpg_kv_key keys[QPG_KV_EXISTS_MAX];
	char names[QPG_KV_EXISTS_MAX][28];
	uint8_t *value; /* the block being stored */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t kvb_prefix_ids(const struct bench *b)
{
	uint64_t families = (b->nkeys + FAMILY - 1) / FAMILY;
	return families * b->shared + (uint64_t)b->nkeys * (b->blocks - b->shared);
}

/* Block I of prompt P: its name and its id (what its value is made from). */
static void block(const struct bench *b, struct kvb_turn *t, uint32_t p, unsigned i)
{
	uint32_t fam = p / FAMILY;
	if (i < b->shared) {
		t->ids[i] = fam * b->shared + i;
		snprintf(t->names[i], sizeof(t->names[i]), "sys-%u-%u", fam, i);
	} else {
		uint32_t families = (b->nkeys + FAMILY - 1) / FAMILY;
		t->ids[i] = families * b->shared + p * (b->blocks - b->shared) + (i - b->shared);
		snprintf(t->names[i], sizeof(t->names[i]), "blk-%u-%u", p, i);
	}
	t->keys[i] = (struct qpg_kv_key){.key = t->names[i], .len = (uint16_t)strlen(t->names[i])};
}

/* What block ID's value hashes to (made once, on first need). */
static uint64_t expect_of(struct bench *b, struct kvb_turn *t, uint32_t id)
{
	uint64_t e = __atomic_load_n(&b->expect[id], __ATOMIC_RELAXED);
	if (!e) {
		kv_value_fill(t->value, id, b->value_size);
		e = XXH64(t->value, b->value_size, 0) | 1; /* 0: not made yet */
		__atomic_store_n(&b->expect[id], e, __ATOMIC_RELAXED);
	}
	return e;
}

struct kvb_turn *kvb_turn_new(const struct bench *b)
{
	struct kvb_turn *t = calloc(1, sizeof(*t));
	if (t && !(t->value = malloc(b->value_size ? b->value_size : 1))) {
		free(t);
		t = NULL;
	}
	return t;
}

void kvb_turn_free(struct kvb_turn *t)
{
	if (t)
		free(t->value);
	free(t);
}

static void next_block(struct worker *w);

static void block_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
			uint32_t total)
{
	(void)off, (void)total;
	struct worker *w = r->user;
	XXH64_update(w->xxh, data, len);
}

static void get_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct worker *w = r->user;
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	if (status == QPG_KV_NOT_FOUND) {
		/* Evicted since the lookup: computed and stored, as the rest. */
		w->misses++;
		t->have = t->step;
	} else if (status == QPG_KV_UNAVAILABLE) {
		w->unavailable++;
		t->have = t->step;
	} else if (status != QPG_KV_OK) {
		w->errors++;
		if (status < 0) {
			kvb_worker_stop(b);
			return;
		}
		t->step++;
	} else {
		if (len != b->value_size ||
		    (XXH64_digest(w->xxh) | 1) != expect_of(b, t, t->ids[t->step]))
			w->mismatches++;
		else
			w->ops++;
		t->step++;
	}
	next_block(w);
}

static void put_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	(void)len;
	struct worker *w = r->user;
	if (status == QPG_KV_OK)
		w->ops++, w->puts++;
	else if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else
		w->errors++;
	if (status < 0) {
		kvb_worker_stop(w->b);
		return;
	}
	w->turn->step++;
	next_block(w);
}

/* The cached prefix first (GETs), then what the prefill made (PUTs); the
 * turn's time into the histogram at its end. */
static void next_block(struct worker *w)
{
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	if (t->step >= b->blocks) {
		w->turns++;
		struct qpg_hist *h = kvb_thread_lat(b);
		if (h)
			qpg_hist_add(h, now_ns() - t->t0);
		kvb_prefix_issue(w);
		return;
	}
	unsigned i = t->step;
	if (i < t->have) {
		w->req = (struct qpg_kv_request){.op = QPG_KV_GET,
						 .key = t->names[i],
						 .key_len = t->keys[i].len,
						 .chunk = block_chunk,
						 .done = get_done,
						 .user = w};
		XXH64_reset(w->xxh, 0);
	} else {
		kv_value_fill(t->value, t->ids[i], b->value_size);
		w->req = (struct qpg_kv_request){.op = QPG_KV_PUT,
						 .key = t->names[i],
						 .key_len = t->keys[i].len,
						 .value = t->value,
						 .value_len = b->value_size,
						 .done = put_done,
						 .user = w};
	}
	if (kvb_submit(b, &w->req) != 0)
		kvb_worker_stop(b);
}

static void lookup_done(void *arg, int status, uint32_t prefix)
{
	struct worker *w = arg;
	struct kvb_turn *t = w->turn;
	w->lookups++;
	if (status < 0) {
		w->errors++;
		kvb_worker_stop(w->b);
		return;
	}
	if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else if (status != QPG_KV_OK)
		w->errors++;
	t->have = status == QPG_KV_OK ? prefix : 0;
	w->blocks_hit += t->have;
	w->blocks += w->b->blocks;
	t->step = 0;
	next_block(w);
}

void kvb_prefix_issue(struct worker *w)
{
	struct bench *b = w->b;
	if (atomic_load(&b->stop) ||
	    (b->max_ops > 0 && atomic_fetch_add(&b->issued, 1) >= b->max_ops)) {
		kvb_worker_stop(b);
		return;
	}
	struct kvb_turn *t = w->turn;
	t->prompt = kvb_pick_key(w);
	for (unsigned i = 0; i < b->blocks; i++)
		block(b, t, t->prompt, i);
	t->t0 = now_ns();
	if (qpg_kv_target_exists(b->target, t->keys, b->blocks, t->bits, lookup_done, w) != 0)
		kvb_worker_stop(b);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kvbench --workload prefix: what an inference server asks of a
 * KV cache. Each request (a "turn") is a prompt of 1 to --blocks blocks
 * (its length fixed per prompt); the first --shared-blocks are a system
 * prompt shared by a family of 8 prompts, the rest its own. Blocks are
 * named as SGLang's and LMCache's are: a model tag and a chained SHA-256
 * (64 hex digits) over every block up to it, so a shared prefix has the
 * same names in every prompt of its family. A worker looks the prompt up
 * in one EXISTS batch (qpg_kv_target_exists: the stored prefix), GETs the
 * cached blocks at once (each verified), then PUTs the rest at once, as
 * the prefill made them. Prompts are picked uniform or zipf, so a store
 * smaller than the working set evicts; with --lru-capacity the same trace
 * is replayed through an exact LRU of that room for comparison. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exact_lru.h"
#include "kvbench.h"
#include "kvdata.h"
#include "qpgate/kv_target.h"
#include "stamp.h"

#define FAMILY 8			/* prompts sharing a system prompt */
#define MODEL  "qpgate-bench-8b"	/* the model tag every key starts with */
#define NAME   (sizeof(MODEL) + 64 + 1) /* tag, '/', 64 hex digits, NUL */
#define READ   1000 /* a slot's status: read in this turn, so not stored (no wire status) */

struct kvb_slot { /* one block's GET or PUT in a batch */
	struct qpg_kv_request req;
	struct worker *w;
	XXH64_state_t *xxh;
	int status;
	bool ok;
};

struct kvb_turn {
	uint32_t prompt;
	unsigned n;    /* its blocks */
	unsigned have; /* the stored prefix, by the lookup */
	uint64_t t0;
	atomic_uint pending; /* of the batch in flight */
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t ids[QPG_KV_EXISTS_MAX];
	struct qpg_kv_key keys[QPG_KV_EXISTS_MAX];
	char names[QPG_KV_EXISTS_MAX][NAME];
	struct kvb_slot slot[QPG_KV_EXISTS_MAX];
	uint8_t *values; /* the blocks being stored, one after another */
};

static uint32_t families(const struct bench *b)
{
	return (b->nkeys + FAMILY - 1) / FAMILY;
}

uint64_t kvb_prefix_ids(const struct bench *b)
{
	return (uint64_t)families(b) * b->shared + (uint64_t)b->nkeys * (b->blocks - b->shared);
}

/* Prompt P's length: 1 to --blocks, fixed per prompt (a hash of it). */
static unsigned blocks_of(const struct bench *b, uint32_t p)
{
	uint64_t x = (uint64_t)p * 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return 1u + (unsigned)(x % b->blocks);
}

/* Block I of prompt P: its id (what its value is made from). */
static uint32_t block_id(const struct bench *b, uint32_t p, unsigned i)
{
	if (i < b->shared)
		return (p / FAMILY) * b->shared + i;
	return families(b) * b->shared + p * (b->blocks - b->shared) + (i - b->shared);
}

/* The names of prompt P's blocks: MODEL/hex(SHA-256(previous digest, the
 * block's tokens)), the tokens standing for its id. */
static void name_blocks(const struct bench *b, struct kvb_turn *t, uint32_t p)
{
	uint8_t md[32] = {0}, in[32 + 4];
	static const char hex[] = "0123456789abcdef";
	for (unsigned i = 0; i < t->n; i++) {
		t->ids[i] = block_id(b, p, i);
		memcpy(in, md, 32);
		memcpy(in + 32, &t->ids[i], 4);
		unsigned len = 0;
		EVP_Digest(in, sizeof(in), md, &len, EVP_sha256(), NULL);
		char *s = t->names[i];
		memcpy(s, MODEL "/", sizeof(MODEL));
		for (int j = 0; j < 32; j++) {
			s[sizeof(MODEL) + 2 * j] = hex[md[j] >> 4];
			s[sizeof(MODEL) + 2 * j + 1] = hex[md[j] & 15];
		}
		s[NAME - 1] = 0;
		t->keys[i] = (struct qpg_kv_key){.key = s, .len = (uint16_t)(NAME - 1)};
	}
}

/* What block ID's value hashes to (made once, on first need, into SCRATCH). */
static uint64_t expect_of(struct bench *b, uint8_t *scratch, uint32_t id)
{
	uint64_t e = __atomic_load_n(&b->expect[id], __ATOMIC_RELAXED);
	if (!e) {
		kv_value_fill(scratch, id, b->value_size);
		e = XXH64(scratch, b->value_size, 0) | 1; /* 0: not made yet */
		__atomic_store_n(&b->expect[id], e, __ATOMIC_RELAXED);
	}
	return e;
}

static void turn_free(struct kvb_turn *t);

static struct kvb_turn *turn_new(const struct bench *b)
{
	struct kvb_turn *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->values = malloc((size_t)b->blocks * (b->value_size ? b->value_size : 1));
	bool ok = t->values != NULL;
	for (unsigned i = 0; i < b->blocks; i++)
		ok &= (t->slot[i].xxh = XXH64_createState()) != NULL;
	if (!ok) {
		turn_free(t);
		return NULL;
	}
	return t;
}

static void turn_free(struct kvb_turn *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < QPG_KV_EXISTS_MAX; i++)
		XXH64_freeState(t->slot[i].xxh);
	free(t->values);
	free(t);
}

/* ---- the trace, for an exact LRU of the same room ------------------------- */

static void trace_add(struct bench *b, uint32_t p)
{
	if (!b->trace)
		return;
	long i = atomic_fetch_add(&b->trace_n, 1);
	if (i < b->trace_cap)
		b->trace[i] = p;
}

double kvb_prefix_lru(const struct bench *b, uint64_t room_bytes)
{
	long n = atomic_load(&b->trace_n);
	if (n > b->trace_cap)
		n = b->trace_cap;
	uint64_t block = 256; /* the store's buddy block for one value */
	while (block < b->value_size)
		block <<= 1;
	struct exact_lru l;
	double ratio = -1;
	if (exact_lru_init(&l, kvb_prefix_ids(b), (uint32_t)(room_bytes / block)) == 0 && l.cap) {
		uint64_t asked = 0, cached = 0;
		for (long k = 0; k < n; k++) {
			uint32_t p = b->trace[k];
			unsigned nb = blocks_of(b, p), have = 0;
			while (have < nb && l.in[block_id(b, p, have)])
				have++;
			for (unsigned i = 0; i < nb; i++)
				exact_lru_touch(&l, block_id(b, p, i), true); /* read, or stored */
			asked += nb;
			cached += have;
		}
		ratio = asked ? (double)cached / (double)asked : 0;
	}
	exact_lru_fini(&l);
	return ratio;
}

/* ---- a turn: lookup, the cached blocks at once, the rest at once ---------- */

static void put_batch(struct worker *w);

static void turn_done(struct worker *w)
{
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	w->turns++;
	struct qpg_hist *h = kvb_thread_lat(b);
	if (h)
		qpg_hist_add(h, stamp_mono_ns() - t->t0);
	kvb_issue(w);
}

/* The last answer of a batch: its counts, then what follows. Returns
 * whether the worker goes on. */
static bool tally(struct worker *w, unsigned from, unsigned to, bool puts)
{
	struct kvb_turn *t = w->turn;
	bool go = true;
	for (unsigned i = from; i < to; i++) {
		struct kvb_slot *s = &t->slot[i];
		if (puts && s->status == READ)
			continue;
		if (puts && s->status == QPG_KV_OK)
			w->ops++, w->puts++;
		else if (!puts && s->status == QPG_KV_OK && s->ok)
			w->ops++;
		else if (!puts && s->status == QPG_KV_OK)
			w->mismatches++;
		else if (!puts && s->status == QPG_KV_NOT_FOUND)
			w->misses++; /* evicted since the lookup: stored again */
		else if (s->status == QPG_KV_UNAVAILABLE)
			w->unavailable++;
		else
			w->errors++;
		go &= s->status >= 0;
	}
	return go;
}

static void get_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		      uint32_t total)
{
	(void)off, (void)total;
	struct kvb_slot *s = r->user;
	XXH64_update(s->xxh, data, len);
}

static void get_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct kvb_slot *s = r->user;
	struct worker *w = s->w;
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	s->status = status;
	if (status == QPG_KV_OK) {
		unsigned i = (unsigned)(s - t->slot);
		s->ok = len == b->value_size &&
			(XXH64_digest(s->xxh) | 1) ==
			    expect_of(b, t->values + (size_t)i * b->value_size, t->ids[i]);
	}
	if (atomic_fetch_sub(&t->pending, 1) != 1)
		return;
	if (!tally(w, 0, t->have, false)) {
		kvb_worker_stop(b);
		return;
	}
	put_batch(w);
}

/* S's PUT is answered (or never went): the last of the batch ends the turn. */
static void put_answered(struct kvb_slot *s, int status)
{
	struct worker *w = s->w;
	struct kvb_turn *t = w->turn;
	s->status = status;
	if (atomic_fetch_sub(&t->pending, 1) != 1)
		return;
	if (!tally(w, 0, t->n, true)) {
		kvb_worker_stop(w->b);
		return;
	}
	turn_done(w);
}

static void put_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	(void)len;
	put_answered(r->user, status);
}

/* The blocks not read: each one's PUT, all at once (those read are marked
 * done already). */
static void put_batch(struct worker *w)
{
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	unsigned todo = 0;
	for (unsigned i = 0; i < t->n; i++)
		todo += !(i < t->have && t->slot[i].status == QPG_KV_OK);
	if (todo == 0) {
		turn_done(w);
		return;
	}
	atomic_store(&t->pending, todo);
	for (unsigned i = 0; i < t->n; i++) {
		struct kvb_slot *s = &t->slot[i];
		if (i < t->have && s->status == QPG_KV_OK) {
			s->status = READ; /* read, not stored: no PUT to count */
			continue;
		}
		uint8_t *v = t->values + (size_t)i * b->value_size;
		kv_value_fill(v, t->ids[i], b->value_size);
		s->status = QPG_KV_OK;
		s->req = (struct qpg_kv_request){.op = QPG_KV_PUT,
						 .key = t->names[i],
						 .key_len = t->keys[i].len,
						 .value = v,
						 .value_len = b->value_size,
						 .done = put_done,
						 .user = s};
		if (kvb_submit(b, &s->req) != 0)
			put_answered(s, -ECANCELED); /* the target is closing */
	}
}

static void lookup_done(void *arg, int status, uint32_t prefix)
{
	struct worker *w = arg;
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	w->lookups++;
	if (status < 0) {
		w->errors++;
		kvb_worker_stop(b);
		return;
	}
	if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else if (status != QPG_KV_OK)
		w->errors++;
	t->have = status == QPG_KV_OK ? prefix : 0;
	w->blocks_hit += t->have;
	w->blocks += t->n;
	for (unsigned i = 0; i < t->n; i++)
		t->slot[i].status = QPG_KV_NOT_FOUND;
	if (t->have == 0) {
		put_batch(w);
		return;
	}
	atomic_store(&t->pending, t->have);
	for (unsigned i = 0; i < t->have; i++) {
		struct kvb_slot *s = &t->slot[i];
		s->w = w;
		s->ok = false;
		XXH64_reset(s->xxh, 0);
		s->req = (struct qpg_kv_request){.op = QPG_KV_GET,
						 .key = t->names[i],
						 .key_len = t->keys[i].len,
						 .chunk = get_chunk,
						 .done = get_done,
						 .user = s};
		if (kvb_submit(b, &s->req) != 0) {
			kvb_worker_stop(b); /* closing: the answers of those sent are lost */
			return;
		}
	}
}

static void prefix_issue(struct worker *w)
{
	struct bench *b = w->b;
	struct kvb_turn *t = w->turn;
	t->prompt = kvb_pick_key(w);
	t->n = blocks_of(b, t->prompt);
	for (unsigned i = 0; i < t->n; i++)
		t->slot[i].w = w;
	name_blocks(b, t, t->prompt);
	trace_add(b, t->prompt);
	t->t0 = stamp_mono_ns();
	if (qpg_kv_target_exists(b->target, t->keys, t->n, t->bits, lookup_done, w) != 0)
		kvb_worker_stop(b);
}

const struct kvb_workload kvb_prefix_workload = {
    .issue = prefix_issue,
    .turn_new = turn_new,
    .turn_free = turn_free,
};

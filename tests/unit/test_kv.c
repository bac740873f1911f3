/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV store: its accounting holds across put/replace/delete, eviction
 * (SIEVE) makes room and spares what readers and lent chunks hold, TTLs,
 * watermarks and stores past 4 GiB. The wire format is test_kv_wire.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"

#include <openssl/evp.h>

#include "kv_digest.h"
#include "kv_ref.h"
#include "kv_store.h"
#include "qpgate/kv.h"

static int put(struct qpg__kv_store *s, const char *key, const char *val, uint32_t len)
{
	struct qpg__kv_value *v;
	int rc = qpg__kv_reserve(s, NULL, (const uint8_t *)key, (uint16_t)strlen(key), len, &v);
	if (rc != QPG__KVS_OK)
		return rc;
	memset(qpg__kv_data(s, v), val[0], len);
	qpg__kv_commit(s, v);
	return QPG__KVS_OK;
}

static void test_store_basics(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	assert_int_equal(put(&s, "a", "1", 4096), QPG__KVS_OK);
	assert_int_equal(put(&s, "b", "2", 100), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"a", 1);
	assert_non_null(v);
	assert_int_equal(v->len, 4096);
	assert_int_equal(qpg__kv_data(&s, v)[4095], '1');
	qpg__kv_release(&s, v);
	assert_null(qpg__kv_get(&s, NULL, (const uint8_t *)"c", 1));
	assert_int_equal(s.nkeys, 2);
	assert_int_equal(s.live_bytes, 4196);
	/* Replace: the old value's block goes back, nothing leaks. */
	size_t used = s.allocated;
	assert_int_equal(used, 4096 + 256);
	assert_int_equal(put(&s, "a", "3", 4000), QPG__KVS_OK);
	assert_int_equal(s.allocated, used);
	assert_int_equal(put(&s, "a", "4", 4000), QPG__KVS_OK);
	assert_int_equal(s.allocated, used);
	assert_int_equal(s.nkeys, 2);
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"a", 1), QPG__KVS_OK);
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"a", 1), QPG__KVS_NOT_FOUND);
	assert_int_equal(s.nkeys, 1);
	assert_int_equal(s.live_bytes, 100);
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"b", 1), QPG__KVS_OK);
	assert_int_equal(s.allocated, 0);
	qpg__kv_store_fini(&s);
}

static void test_store_limits(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 16 << 10), 0);
	s.evict = false; /* --kv-eviction none: a full store refuses */
	assert_int_equal(put(&s, "big", "x", (16 << 10) + 1), QPG__KVS_TOO_LARGE);
	char key[8];
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(put(&s, key, "y", 16 << 10), QPG__KVS_OK);
	}
	assert_int_equal(put(&s, "k4", "y", 16 << 10), QPG__KVS_FULL);
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"k0", 2), QPG__KVS_OK);
	assert_int_equal(put(&s, "k4", "y", 16 << 10), QPG__KVS_OK);
	qpg__kv_store_fini(&s);
}

/* Space freed by large values serves small ones and back: buddies merge. */
static void test_store_no_fragmentation(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 256 << 10), 0);
	s.evict = false;
	char key[16];
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "L%d", i);
		assert_int_equal(put(&s, key, "L", 256 << 10), QPG__KVS_OK);
	}
	assert_int_equal(put(&s, "x", "x", 1), QPG__KVS_FULL);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "L%d", i);
		assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)key, (uint16_t)strlen(key)), 0);
	}
	for (int i = 0; i < 16; i++) { /* 16 x 64 KiB fill the same 1 MiB */
		snprintf(key, sizeof(key), "S%d", i);
		assert_int_equal(put(&s, key, "S", 64 << 10), QPG__KVS_OK);
	}
	for (int i = 0; i < 16; i++) {
		snprintf(key, sizeof(key), "S%d", i);
		assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)key, (uint16_t)strlen(key)), 0);
	}
	for (int i = 0; i < 4; i++) { /* and merge back into 256 KiB blocks */
		snprintf(key, sizeof(key), "L%d", i);
		assert_int_equal(put(&s, key, "L", 256 << 10), QPG__KVS_OK);
	}
	qpg__kv_store_fini(&s);
}

static void test_store_digest(void **st)
{
	/* One-sided readers check values against the digest taken at commit. */
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 4096), 0);
	assert_int_equal(put(&s, "d", "q", 1000), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"d", 1);
	assert_non_null(v);
	uint8_t want[32], data[1000];
	memset(data, 'q', sizeof(data));
	assert_int_equal(EVP_Digest(data, sizeof(data), want, NULL, EVP_sha256(), NULL), 1);
	assert_memory_equal(v->digest, want, sizeof(want));
	qpg__kv_release(&s, v);
	/* Under the digest its owner chose, from the next commit on. */
	struct qpg__kv_digests dg;
	assert_int_equal(qpg__kv_digests_fetch(&dg), 0);
	for (uint8_t a = QPG_KV_DIGEST_SHA256; a <= QPG_KV_DIGEST_MAX; a++)
		assert_int_equal(EVP_MD_get_size(qpg__kv_digest_md(&dg, a)), QPG__KVS_DIGEST_LEN);
	assert_null(qpg__kv_digest_md(&dg, QPG_KV_DIGEST_AUTO));
	assert_null(qpg__kv_digest_md(&dg, QPG_KV_DIGEST_MAX + 1));
	s.digest = qpg__kv_digest_md(&dg, QPG_KV_DIGEST_SHA512_256);
	assert_int_equal(put(&s, "d", "q", 1000), QPG__KVS_OK);
	v = qpg__kv_get(&s, NULL, (const uint8_t *)"d", 1);
	assert_non_null(v);
	assert_int_equal(EVP_Digest(data, sizeof(data), want, NULL, EVP_sha512_256(), NULL), 1);
	assert_memory_equal(v->digest, want, sizeof(want));
	uint8_t pick = qpg__kv_digest_pick(&dg);
	assert_true(pick == QPG_KV_DIGEST_SHA256 || pick == QPG_KV_DIGEST_SHA512_256);
	qpg__kv_release(&s, v);
	qpg__kv_digests_free(&dg);
	qpg__kv_store_fini(&s);
}

static bool has(struct qpg__kv_store *s, const char *key)
{
	struct qpg__kv_value *v = qpg__kv_get(s, NULL, (const uint8_t *)key, (uint16_t)strlen(key));
	qpg__kv_release(s, v);
	return v != NULL;
}

static bool in(struct qpg__kv_store *s, const char *key)
{
	return qpg__kv_exists(s, NULL, (const uint8_t *)key, (uint16_t)strlen(key));
}

/* SIEVE on a trace worked by hand: 4 slots, k0..k3 in, k0 and k2 read.
 * k4 in: the hand, from the oldest, clears k0 and evicts k1. k5 in: it
 * clears k2 and evicts k3. k6 in: it evicts k4 (new and never read:
 * SIEVE's quick demotion). k0 and k2 read again, k7 in: it evicts k5.
 * Exact LRU evicts k1, k3, k0 and k4 on the same trace, and misses k0's
 * second read: 3 hits of 4 against SIEVE's 4. EXISTS marks nothing. */
static void test_store_sieve_trace(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 16 << 10), 0);
	char key[8];
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(put(&s, key, "v", 16 << 10), QPG__KVS_OK);
	}
	assert_true(has(&s, "k0") && has(&s, "k2"));
	assert_true(in(&s, "k1") && in(&s, "k3")); /* checked, not read */
	assert_int_equal(put(&s, "k4", "v", 16 << 10), QPG__KVS_OK);
	assert_false(in(&s, "k1"));
	assert_int_equal(put(&s, "k5", "v", 16 << 10), QPG__KVS_OK);
	assert_false(in(&s, "k3"));
	assert_int_equal(put(&s, "k6", "v", 16 << 10), QPG__KVS_OK);
	assert_false(in(&s, "k4"));
	assert_true(has(&s, "k0") && has(&s, "k2")); /* both hit again */
	assert_int_equal(put(&s, "k7", "v", 16 << 10), QPG__KVS_OK);
	assert_false(in(&s, "k5"));
	assert_true(in(&s, "k0") && in(&s, "k2") && in(&s, "k6") && in(&s, "k7"));
	assert_int_equal(s.nkeys, 4);
	assert_int_equal(s.evictions, 4);
	assert_int_equal(s.evicted_bytes, 4u * (16 << 10));
	qpg__kv_store_fini(&s);
}

/* A store full of small values of mixed sizes admits a value of the
 * largest size: eviction goes on until a block of its order is free. */
static void test_store_evicts_for_largest(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 256 << 10), 0);
	static const uint32_t sizes[] = {300, 4096, 1000, 65536, 20000, 256};
	char key[16];
	int n = 0;
	for (; s.evictions == 0; n++) { /* until the first eviction: full */
		snprintf(key, sizeof(key), "m%d", n);
		assert_int_equal(put(&s, key, "m", sizes[n % 6]), QPG__KVS_OK);
	}
	uint64_t before = s.evicted_bytes;
	assert_int_equal(put(&s, "L", "L", 256 << 10), QPG__KVS_OK);
	assert_true(in(&s, "L"));
	print_message("a 256 KiB value into a full 1 MiB store of %d mixed values evicted %llu "
		      "bytes\n",
		      n, (unsigned long long)(s.evicted_bytes - before));
	assert_true(s.allocated <= s.capacity);
	qpg__kv_store_fini(&s);
}

/* Four times the capacity written: no PUT fails for space, the newest
 * key of each size is there, and the accounting adds up. */
static void test_store_fill_four_times(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	char key[16];
	size_t written = 0;
	for (int i = 0; written < 4u << 20; i++) {
		uint32_t len = 512u << (i % 8); /* 512 B to 64 KiB */
		snprintf(key, sizeof(key), "f%d", i);
		assert_int_equal(put(&s, key, "f", len), QPG__KVS_OK);
		written += len;
		assert_true(in(&s, key));
	}
	assert_true(s.evictions > 0);
	assert_true(s.live_bytes <= s.allocated && s.allocated <= s.capacity);
	qpg__kv_store_fini(&s);
}

/* Eviction never frees a value under a reader: it leaves the table at
 * once, and its block comes back when the reader is done. */
static void test_store_eviction_spares_readers(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 16 << 10), 0);
	assert_int_equal(put(&s, "r", "A", 16 << 10), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"r", 1);
	assert_non_null(v);
	v->visited = false; /* the hand's first choice */
	char key[8];
	for (int i = 0; i < 8; i++) { /* twice the store, while the GET streams */
		snprintf(key, sizeof(key), "w%d", i);
		assert_int_equal(put(&s, key, "B", 16 << 10), QPG__KVS_OK);
	}
	assert_false(in(&s, "r")); /* evicted from the table... */
	for (uint32_t i = 0; i < v->len; i++) /* ...but its bytes untouched */
		if (qpg__kv_data(&s, v)[i] != 'A')
			fail_msg("byte %u of a value under a reader was overwritten", i);
	assert_int_equal(s.allocated, 4u * (16 << 10));
	qpg__kv_release(&s, v);
	assert_int_equal(s.allocated, 3u * (16 << 10));
	qpg__kv_store_fini(&s);
}

static void test_store_reader_keeps_value(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 16 << 10), 0);
	s.evict = false;
	assert_int_equal(put(&s, "k", "A", 8192), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"k", 1);
	assert_non_null(v);
	/* Deleted and its space wanted by others while a GET still streams it. */
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"k", 1), QPG__KVS_OK);
	for (int i = 0; i < 6; i++) {
		char key[8];
		snprintf(key, sizeof(key), "o%d", i);
		put(&s, key, "B", 8192);
	}
	assert_int_equal(qpg__kv_data(&s, v)[0], 'A');
	assert_int_equal(qpg__kv_data(&s, v)[8191], 'A');
	qpg__kv_release(&s, v);
	qpg__kv_store_fini(&s);
}

static int regions_closed;
static void count_close(void *region)
{
	(void)region;
	regions_closed++;
}

/* A reply's chunk lent to a send (kv_ref.c) keeps its value: the GET's own
 * reference goes (its job is done once the last chunk is queued) and the
 * key is deleted while the SEND is in flight, and the value's block is
 * neither given to the PUTs that want it nor its region closed, so the
 * bytes the frame's tag was computed over are the bytes the device reads.
 * When the send gives the loan back, the block and region go. Short chunks
 * and values without a region are not lent (copied instead). */
static void test_lent_chunk_keeps_its_value(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 16 << 10), 0); /* 8 blocks of 8 KiB */
	s.evict = false;
	s.region_close = count_close;
	regions_closed = 0;
	assert_int_equal(put(&s, "k", "A", 8192), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"k", 1);
	assert_non_null(v);
	assert_null(qpg__kv_ref_new(&s, v, 0, 8192)); /* no region: copied */
	v->region = &s;				      /* as the service's opened region */
	assert_null(qpg__kv_ref_new(&s, v, 0, QPG__KV_REF_MIN - 1));
	struct qpg_buf *lent = qpg__kv_ref_new(&s, v, 1024, 7168);
	assert_non_null(lent);
	assert_ptr_equal(lent->addr, qpg__kv_data(&s, v) + 1024);
	assert_int_equal(lent->io_len, 7168);
	qpg__kv_release(&s, v); /* the GET's job, popped */
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"k", 1), QPG__KVS_OK);
	int stored = 0;
	for (int i = 0; i < 8; i++) {
		char key[8];
		snprintf(key, sizeof(key), "o%d", i);
		stored += put(&s, key, "B", 8192) == QPG__KVS_OK;
	}
	assert_int_equal(stored, 7); /* its block still lent */
	const uint8_t *p = lent->addr;
	for (uint32_t i = 0; i < 7168; i++)
		if (p[i] != 'A')
			fail_msg("byte %u of the lent chunk is '%c', not 'A'", i, p[i]);
	assert_int_equal(regions_closed, 0);
	lent->release(lent); /* the SEND completed */
	assert_int_equal(regions_closed, 1);
	assert_int_equal(put(&s, "o7", "B", 8192), QPG__KVS_OK);
	qpg__kv_store_fini(&s);
}

/* A store past 4 GiB: offsets are 64-bit. Six 1 GiB reservations (never
 * written, so they cost no memory) take all of a 6 GiB store, each at its
 * own offset; the highest is given back, and a small value then lands past
 * 5 GiB, is written and read back there, and every block comes back whole. */
static void test_store_past_4_gib(void **st)
{
	struct qpg__kv_store s;
	const size_t gib = (size_t)1 << 30;
	assert_int_equal(qpg__kv_store_init(&s, 6 * gib, 1u << 30), 0);
	assert_true(s.capacity == 6 * gib);
	s.evict = false;
	struct qpg__kv_value *big[6];
	char key[16];
	size_t sum = 0, top = 0;
	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "G%d", i);
		assert_int_equal(qpg__kv_reserve(&s, NULL, (const uint8_t *)key, 2, 1u << 30, &big[i]),
				 QPG__KVS_OK);
		sum += big[i]->off;
		if (big[i]->off > big[top]->off)
			top = (size_t)i;
	}
	/* 0 + 1 + ... + 5 GiB: no two share an offset (32-bit ones would). */
	assert_true(sum == 15 * gib);
	assert_true(big[top]->off == 5 * gib);
	assert_int_equal(put(&s, "full", "F", 1), QPG__KVS_FULL);
	qpg__kv_release(&s, big[top]);
	assert_int_equal(put(&s, "small", "Z", 4096), QPG__KVS_OK);
	struct qpg__kv_value *v = qpg__kv_get(&s, NULL, (const uint8_t *)"small", 5);
	assert_non_null(v);
	assert_true(v->off >= 5 * gib);
	assert_int_equal(qpg__kv_data(&s, v)[0], 'Z');
	assert_int_equal(qpg__kv_data(&s, v)[4095], 'Z');
	qpg__kv_release(&s, v);
	assert_true(s.allocated == 5 * gib + 4096);
	for (int i = 0; i < 6; i++)
		if ((size_t)i != top)
			qpg__kv_release(&s, big[i]);
	assert_int_equal(qpg__kv_del(&s, NULL, (const uint8_t *)"small", 5), QPG__KVS_OK);
	assert_true(s.allocated == 0);
	/* Merged back: six values of the largest size fit again. */
	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "H%d", i);
		assert_int_equal(qpg__kv_reserve(&s, NULL, (const uint8_t *)key, 2, 1u << 30, &big[i]),
				 QPG__KVS_OK);
	}
	for (int i = 0; i < 6; i++)
		qpg__kv_release(&s, big[i]);
	qpg__kv_store_fini(&s);
	/* The bound: 1 TiB. */
	assert_int_equal(qpg__kv_store_init(&s, QPG__KVS_MAX_CAPACITY + 4096, 4096), -EINVAL);
}

/* Watermarks: a reservation past the high one calls on_high; a trim
 * evicts (SIEVE's order: the read key stays) down to the low one, and
 * stops at a victim still being read rather than evict on in vain. */
static int kicks;
static void count_kick(void *user)
{
	(void)user;
	kicks++;
}

static void test_store_watermarks(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 64 << 10, 4096), 0); /* 16 blocks of 4 KiB */
	s.wm_high = 48 << 10;					    /* 12 blocks */
	s.wm_low = 32 << 10;					    /* 8 */
	s.on_high = count_kick;
	char key[8];
	for (int i = 0; i < 12; i++) {
		snprintf(key, sizeof(key), "w%d", i);
		assert_int_equal(put(&s, key, "w", 4096), QPG__KVS_OK);
	}
	assert_int_equal(kicks, 0);
	assert_false(qpg__kv_store_over_high(&s));
	struct qpg__kv_value *r = qpg__kv_get(&s, NULL, (const uint8_t *)"w0", 2); /* read: kept */
	qpg__kv_release(&s, r);
	assert_int_equal(put(&s, "w12", "w", 4096), QPG__KVS_OK);
	assert_int_equal(kicks, 1);
	assert_true(qpg__kv_store_over_high(&s));
	assert_int_equal(qpg__kv_store_trim(&s, 100), 5); /* 13 blocks down to 8 */
	assert_true(s.allocated == 32 << 10);
	assert_int_equal(s.evictions_ahead, 5);
	assert_int_equal(s.evictions, 5);
	assert_true(qpg__kv_exists(&s, NULL, (const uint8_t *)"w0", 2));
	assert_false(qpg__kv_exists(&s, NULL, (const uint8_t *)"w1", 2));
	assert_int_equal(qpg__kv_store_trim(&s, 100), 0); /* at the low mark: nothing */
	/* A victim still read frees nothing: the trim stops there. */
	for (int i = 13; i < 18; i++) {
		snprintf(key, sizeof(key), "w%d", i);
		assert_int_equal(put(&s, key, "w", 4096), QPG__KVS_OK);
	}
	struct qpg__kv_value *held[16];
	int nheld = 0;
	for (struct qpg__kv_value *v = s.tenants[0]->tail; v; v = v->newer)
		if (v->key_len != 2 || memcmp(v->key, "w0", 2)) /* all but the visited one */
			held[nheld++] = qpg__kv_get(&s, NULL, v->key, v->key_len);
	for (int i = 0; i < nheld; i++)
		held[i]->visited = false; /* read, but not to be kept: pinned only */
	size_t before = s.allocated;
	assert_int_equal(qpg__kv_store_trim(&s, 100), 1);
	assert_true(s.allocated == before);
	for (int i = 0; i < nheld; i++)
		qpg__kv_release(&s, held[i]);
	qpg__kv_store_fini(&s);
}

/* TTL on the store's clock (a test's own): a value past it is gone for
 * EXISTS and GET (and dropped, counted), and eviction takes it first even
 * when it was read. */
static uint64_t fake_ns;
static uint64_t fake_clock(void)
{
	return fake_ns;
}

static void test_store_ttl(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 4096, 1024), 0); /* 4 blocks of 1 KiB */
	s.clock = fake_clock;
	fake_ns = 1000000000ull;
	struct qpg__kv_value *v;
	assert_int_equal(qpg__kv_reserve(&s, NULL, (const uint8_t *)"t", 1, 1024, &v), QPG__KVS_OK);
	v->ttl_ms = 100;
	qpg__kv_commit(&s, v);
	assert_int_equal(put(&s, "keep", "k", 1024), QPG__KVS_OK);
	fake_ns += 99 * 1000000ull;
	assert_true(qpg__kv_exists(&s, NULL, (const uint8_t *)"t", 1));
	struct qpg__kv_value *g = qpg__kv_get(&s, NULL, (const uint8_t *)"t", 1); /* read: visited */
	assert_non_null(g);
	qpg__kv_release(&s, g);
	fake_ns += 1000000ull; /* 100 ms since the commit */
	assert_false(qpg__kv_exists(&s, NULL, (const uint8_t *)"t", 1));
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	const uint8_t list[] = {1, 't', 4, 'k', 'e', 'e', 'p'};
	assert_int_equal(qpg__kv_exists_list(&s, NULL, list, sizeof(list), bits), 0);
	assert_int_equal(bits[0], 0x2);
	/* Eviction: the hand finds the expired value first, visited as it is. */
	assert_int_equal(put(&s, "a", "a", 1024), QPG__KVS_OK);
	assert_int_equal(put(&s, "b", "b", 1024), QPG__KVS_OK);
	assert_int_equal(put(&s, "c", "c", 1024), QPG__KVS_OK); /* the store was full */
	assert_int_equal(s.expired, 1);
	assert_int_equal(s.evictions, 0);
	assert_null(qpg__kv_get(&s, NULL, (const uint8_t *)"t", 1));
	assert_true(qpg__kv_exists(&s, NULL, (const uint8_t *)"keep", 4));
	/* A GET drops one it finds past its TTL. */
	assert_int_equal(qpg__kv_reserve(&s, NULL, (const uint8_t *)"u", 1, 10, &v), QPG__KVS_OK);
	v->ttl_ms = 1;
	qpg__kv_commit(&s, v); /* (evicting "keep", the oldest unvisited) */
	size_t keys = s.nkeys;
	fake_ns += 2000000ull;
	assert_null(qpg__kv_get(&s, NULL, (const uint8_t *)"u", 1));
	assert_int_equal(s.expired, 2);
	assert_int_equal(s.nkeys, keys - 1);
	qpg__kv_store_fini(&s);
}

QPG_UNIT_MAIN(NULL, NULL,
	      cmocka_unit_test(test_store_ttl),
	      cmocka_unit_test(test_store_watermarks),
	      cmocka_unit_test(test_store_past_4_gib),
	      cmocka_unit_test(test_store_basics),
	      cmocka_unit_test(test_store_limits),
	      cmocka_unit_test(test_store_no_fragmentation),
	      cmocka_unit_test(test_store_reader_keeps_value),
	      cmocka_unit_test(test_lent_chunk_keeps_its_value),
	      cmocka_unit_test(test_store_sieve_trace),
	      cmocka_unit_test(test_store_evicts_for_largest),
	      cmocka_unit_test(test_store_fill_four_times),
	      cmocka_unit_test(test_store_eviction_spares_readers),
	      cmocka_unit_test(test_store_digest))

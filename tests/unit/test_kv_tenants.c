/* SPDX-License-Identifier: BSD-2-Clause */
/* The store's tenants (kv_store.c, kv_tenant.c) and the tenants file
 * (kv_tenants.c): namespaces, quotas that evict a tenant's own values,
 * the choice of victims in a full store, limits, and the file's checks. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_store.h"
#include "kv_tenants.h"
#include "qpgate/kv.h"
#include "unit.h"

#define K16 (16u << 10)

static int put(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const char *key, uint8_t fill,
	       uint32_t len)
{
	struct qpg__kv_value *v;
	int rc = qpg__kv_reserve(s, t, (const uint8_t *)key, (uint16_t)strlen(key), len, &v);
	if (rc != QPG__KVS_OK)
		return rc;
	memset(qpg__kv_data(s, v), fill, len);
	qpg__kv_commit(s, v);
	return QPG__KVS_OK;
}

/* The first byte of KEY's value in T, or -1 for a miss. */
static int first(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const char *key)
{
	struct qpg__kv_value *v = qpg__kv_get(s, t, (const uint8_t *)key, (uint16_t)strlen(key));
	if (!v)
		return -1;
	int b = qpg__kv_data(s, v)[0];
	qpg__kv_release(s, v);
	return b;
}

static bool in(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const char *key)
{
	return qpg__kv_exists(s, t, (const uint8_t *)key, (uint16_t)strlen(key));
}

/* The same key in two tenants is two values; neither tenant's GET,
 * EXISTS or DEL reaches the other's. */
static void test_namespaces(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a"), *b = qpg__kv_tenant_get(&s, "b");
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(qpg__kv_tenant_get(&s, "a"), a); /* by name: the same */
	assert_int_equal(put(&s, a, "k", 0xaa, 100), QPG__KVS_OK);
	assert_int_equal(first(&s, b, "k"), -1);
	assert_false(in(&s, b, "k"));
	assert_false(in(&s, NULL, "k")); /* nor the default tenant */
	assert_int_equal(qpg__kv_del(&s, b, (const uint8_t *)"k", 1), QPG__KVS_NOT_FOUND);
	assert_int_equal(put(&s, b, "k", 0xbb, 100), QPG__KVS_OK);
	assert_int_equal(first(&s, a, "k"), 0xaa);
	assert_int_equal(first(&s, b, "k"), 0xbb);
	const uint8_t list[] = {1, 'k', 1, 'x'};
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	assert_int_equal(qpg__kv_exists_list(&s, a, list, sizeof(list), bits), 1);
	assert_int_equal(bits[0], 1);
	assert_int_equal(qpg__kv_del(&s, a, (const uint8_t *)"k", 1), QPG__KVS_OK);
	assert_int_equal(first(&s, b, "k"), 0xbb);
	assert_int_equal(a->nkeys, 0);
	assert_int_equal(b->nkeys, 1);
	assert_int_equal(s.nkeys, 1);
	qpg__kv_store_fini(&s);
}

/* A tenant at its quota evicts its own values, SIEVE's choice: the one it
 * read stays. Another tenant's values are not touched. */
static void test_quota_evicts_own(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a"), *b = qpg__kv_tenant_get(&s, "b");
	qpg__kv_tenant_limits(&s, a, 4 * K16, 0, 0, true);
	char key[8];
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "b%d", i);
		assert_int_equal(put(&s, b, key, (uint8_t)i, K16), QPG__KVS_OK);
		snprintf(key, sizeof(key), "a%d", i);
		assert_int_equal(put(&s, a, key, (uint8_t)i, K16), QPG__KVS_OK);
	}
	assert_int_equal(first(&s, a, "a0"), 0); /* read: SIEVE keeps it */
	assert_int_equal(put(&s, a, "a4", 4, K16), QPG__KVS_OK);
	assert_true(a->used <= 4 * K16);
	assert_int_equal(a->evictions, 1);
	assert_true(in(&s, a, "a0") && !in(&s, a, "a1"));
	assert_int_equal(b->evictions, 0);
	assert_int_equal(b->nkeys, 4);
	/* Larger than the quota: its own status, and nothing evicted. */
	assert_int_equal(put(&s, a, "big", 9, 64 << 10 | 1), QPG__KVS_TOO_LARGE); /* store's max */
	qpg__kv_tenant_limits(&s, a, 2 * K16, 0, 0, true);
	assert_int_equal(put(&s, a, "big", 9, 3 * K16), QPG__KVS_OVER_QUOTA);
	/* A lowered quota: the next PUT brings the tenant under it. */
	assert_int_equal(put(&s, a, "a5", 5, K16), QPG__KVS_OK);
	assert_true(a->used <= 2 * K16);
	assert_int_equal(a->nkeys, 2);
	/* The largest value and the number of keys. */
	qpg__kv_tenant_limits(&s, a, 0, 2, 1000, true);
	assert_int_equal(put(&s, a, "v", 1, 1001), QPG__KVS_OVER_QUOTA);
	assert_int_equal(put(&s, a, "a5", 6, 1000), QPG__KVS_OK); /* a replacement: no new key */
	assert_int_equal(a->nkeys, 2);
	assert_int_equal(put(&s, a, "a6", 6, 1000), QPG__KVS_OK); /* a new key: one evicted */
	assert_int_equal(a->nkeys, 2);
	assert_int_equal(b->nkeys, 4);
	qpg__kv_store_fini(&s);
}

/* A full store takes its victims from the tenant furthest over its quota,
 * then from tenants without one (the largest first), and never from a
 * tenant under its quota on another's behalf. */
static void test_full_store_victims(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 8 * K16, K16), 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a"), *b = qpg__kv_tenant_get(&s, "b");
	struct qpg__kv_tenant *c = qpg__kv_tenant_get(&s, "c");
	qpg__kv_tenant_limits(&s, a, 6 * K16, 0, 0, true); /* under it, holding the most */
	char key[8];
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "a%d", i);
		assert_int_equal(put(&s, a, key, 1, K16), QPG__KVS_OK);
	}
	for (int i = 0; i < 12; i++) { /* b, no quota, fills the store and goes on */
		snprintf(key, sizeof(key), "b%d", i);
		assert_int_equal(put(&s, b, key, 2, K16), QPG__KVS_OK);
	}
	assert_int_equal(a->nkeys, 5);
	assert_int_equal(a->evictions, 0);
	assert_int_equal(b->evictions, 9);
	/* c, no quota either, takes from b (the larger) */
	assert_int_equal(put(&s, c, "c0", 3, K16), QPG__KVS_OK);
	assert_int_equal(b->evictions, 10);
	assert_int_equal(a->evictions, 0);
	/* a's quota lowered below what it holds: a is the first victim now,
	 * for c as for anyone. */
	qpg__kv_tenant_limits(&s, a, 2 * K16, 0, 0, true);
	assert_int_equal(put(&s, c, "c1", 3, K16), QPG__KVS_OK);
	assert_int_equal(a->evictions, 1);
	assert_int_equal(b->evictions, 10);
	/* When only tenants under their quota hold values, the asker makes its
	 * own room, or is refused if it has none. */
	qpg__kv_store_fini(&s);
	assert_int_equal(qpg__kv_store_init(&s, 4 * K16, K16), 0);
	a = qpg__kv_tenant_get(&s, "a");
	b = qpg__kv_tenant_get(&s, "b");
	qpg__kv_tenant_limits(&s, a, 4 * K16, 0, 0, true);
	qpg__kv_tenant_limits(&s, b, 4 * K16, 0, 0, true);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "a%d", i);
		assert_int_equal(put(&s, a, key, 1, K16), QPG__KVS_OK);
	}
	assert_int_equal(put(&s, b, "b0", 2, K16), QPG__KVS_FULL);
	assert_int_equal(a->nkeys, 4);
	assert_int_equal(put(&s, a, "a4", 1, K16), QPG__KVS_OK); /* its own */
	assert_int_equal(a->evictions, 1);
	qpg__kv_store_fini(&s);
}

/* A tenant whose values are all being read cannot make room under its
 * quota: refused, and the readers' values stay whole. */
static void test_quota_spares_readers(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a");
	qpg__kv_tenant_limits(&s, a, 2 * K16, 0, 0, true);
	assert_int_equal(put(&s, a, "r0", 7, K16), QPG__KVS_OK);
	assert_int_equal(put(&s, a, "r1", 8, K16), QPG__KVS_OK);
	struct qpg__kv_value *h0 = qpg__kv_get(&s, a, (const uint8_t *)"r0", 2);
	struct qpg__kv_value *h1 = qpg__kv_get(&s, a, (const uint8_t *)"r1", 2);
	assert_int_equal(put(&s, a, "r2", 9, K16), QPG__KVS_OVER_QUOTA);
	assert_int_equal(qpg__kv_data(&s, h0)[K16 - 1], 7);
	assert_int_equal(qpg__kv_data(&s, h1)[K16 - 1], 8);
	qpg__kv_release(&s, h0);
	qpg__kv_release(&s, h1);
	assert_int_equal(put(&s, a, "r2", 9, K16), QPG__KVS_OK); /* their space came back */
	assert_true(a->used <= 2 * K16);
	qpg__kv_store_fini(&s);
}

/* The default tenant is always there; names are bounded; the table is. */
static void test_tenant_table(void **st)
{
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	assert_string_equal(s.tenants[0]->name, "default");
	assert_null(qpg__kv_tenant_get(&s, ""));
	char name[QPG__KV_TENANT_NAME + 1];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	assert_null(qpg__kv_tenant_get(&s, name)); /* one byte too long */
	for (unsigned i = 1; i < QPG__KV_TENANTS_MAX; i++) {
		snprintf(name, sizeof(name), "t%u", i);
		assert_non_null(qpg__kv_tenant_get(&s, name));
	}
	assert_null(qpg__kv_tenant_get(&s, "one more"));
	assert_non_null(qpg__kv_tenant_get(&s, "t7")); /* known ones still found */
	qpg__kv_store_fini(&s);
}

static int load(struct qpg__kv_store *s, struct qpg__kv_tenancy *tn, const char *json, char *err,
		size_t err_len)
{
	char path[] = "/tmp/qpg-tenants.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	int rc = qpg__kv_tenancy_init(tn, s, path, 0, err, err_len);
	unlink(path);
	return rc;
}

/* The file: limits applied to the store's tenants, identities sorted for
 * lookup, and every mistake refused with its place. */
static void test_tenants_file(void **st)
{
	struct qpg__kv_store s;
	struct qpg__kv_tenancy tn;
	char err[256];
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	assert_int_equal(load(&s, &tn,
			      "{\"default\": \"b\", \"tenants\": ["
			      "{\"name\": \"a\", \"identities\": [\"spiffe://x/a\", \"alice\"],"
			      " \"quota\": \"2M\", \"max_value\": 65536, \"max_keys\": 10},"
			      "{\"name\": \"b\"}]}",
			      err, sizeof(err)),
			 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a");
	assert_int_equal(a->quota, 2u << 20);
	assert_int_equal(a->max_value, 65536);
	assert_int_equal(a->max_keys, 10);
	assert_true(a->listed);
	assert_int_equal(tn.nids, 2);
	assert_string_equal(tn.ids[0].identity, "alice");
	assert_ptr_equal(tn.ids[1].tenant, a);
	assert_ptr_equal(tn.fallback, qpg__kv_tenant_get(&s, "b"));
	qpg__kv_tenancy_fini(&tn);
	static const struct {
		const char *json, *says;
	} bad[] = {
	    {"{\"tenants\": [{\"name\": \"a\", \"quota\": \"lots\"}]}", "tenants[0].quota"},
	    {"{\"tenants\": [{\"name\": \"a\", \"quota\": 0}]}", "tenants[0].quota"},
	    {"{\"tenants\": [{\"name\": \"a\", \"quota\": \"2X\"}]}", "tenants[0].quota"},
	    {"{\"tenants\": [{\"name\": \"a\", \"qouta\": \"2M\"}]}", "unknown field \"qouta\""},
	    {"{\"tenants\": [{\"name\": \"a b\"}]}", "tenants[0].name"},
	    {"{\"tenants\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}", "defined twice"},
	    {"{\"tenants\": [{\"name\": \"a\", \"identities\": [\"x\"]}, {\"name\": \"b\", "
	     "\"identities\": [\"x\"]}]}",
	     "given to two tenants"},
	    {"{\"tenants\": [{\"name\": \"a\"}], \"default\": \"z\"}", "\"default\" must name"},
	    {"{\"tenants\": []}", "\"tenants\" must be"},
	    {"{\"tenants\": [{\"name\": \"a\", \"max_value\": \"512M\"}]}", "max_value"},
	    {"{\"tenants\": [{\"name\": \"a\"}], \"tenants\": []}", "duplicate"},
	    {"[1, 2", "qpg-tenants"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_not_equal(load(&s, &tn, bad[i].json, err, sizeof(err)), 0);
		if (!strstr(err, bad[i].says))
			fail_msg("case %zu: '%s' does not say '%s'", i, err, bad[i].says);
		qpg__kv_tenancy_fini(&tn);
	}
	assert_int_equal(a->quota, 2u << 20); /* a refused file changed nothing */
	qpg__kv_store_fini(&s);
}

/* STAT's record: a round trip, the server's builder, and records that
 * lie about their length, set reserved bytes or carry unprintable names
 * refused (the reply decoder with them). */
static void test_stat_wire(void **st)
{
	struct qpg_kv_tenant_stat in = {.quota = 1ull << 40,
					.used = 3,
					.keys = 4,
					.max_keys = 5,
					.hits = 6,
					.misses = 7,
					.evictions = 8,
					.refused = 9,
					.max_value = 10,
					.listed = 1,
					.name = "spiffe://x/a"},
				  out;
	uint8_t rec[QPG_KV_STAT_LEN + 256];
	int n = qpg_kv_encode_stat(rec, sizeof(rec), &in);
	assert_int_equal(n, QPG_KV_STAT_LEN + 12);
	assert_int_equal(qpg_kv_decode_stat(rec, (size_t)n, &out), 0);
	assert_memory_equal(&in, &out, offsetof(struct qpg_kv_tenant_stat, name));
	assert_string_equal(out.name, "spiffe://x/a");
	assert_int_equal(qpg_kv_encode_stat(rec, (size_t)n - 1, &in), -ENOSPC);
	assert_int_not_equal(qpg_kv_decode_stat(rec, (size_t)n - 1, &out), 0);
	rec[70] = 1;
	assert_int_not_equal(qpg_kv_decode_stat(rec, (size_t)n, &out), 0);
	rec[70] = 0;
	rec[QPG_KV_STAT_LEN] = '\n';
	assert_int_not_equal(qpg_kv_decode_stat(rec, (size_t)n, &out), 0);
	in.name[0] = '\0';
	assert_int_equal(qpg_kv_encode_stat(rec, sizeof(rec), &in), -EINVAL);
	/* The server's record of a tenant, in a reply the client accepts. */
	struct qpg__kv_store s;
	assert_int_equal(qpg__kv_store_init(&s, 1 << 20, 64 << 10), 0);
	struct qpg__kv_tenant *a = qpg__kv_tenant_get(&s, "a");
	qpg__kv_tenant_limits(&s, a, 4 * K16, 0, 0, true);
	assert_int_equal(put(&s, a, "k", 1, 100), QPG__KVS_OK);
	uint8_t msg[QPG_KV_HDR_LEN + sizeof(rec)];
	n = qpg__kv_tenant_stat(&s, a, msg + QPG_KV_HDR_LEN, sizeof(rec));
	assert_int_equal(n, QPG_KV_STAT_LEN + 1);
	struct qpg_kv_reply r = {.op = QPG_KV_STAT, .req_id = 1, .value_len = (uint32_t)n}, d;
	qpg_kv_encode_reply(msg, QPG_KV_HDR_LEN, &r);
	assert_int_equal(qpg_kv_decode_reply(msg, QPG_KV_HDR_LEN + (size_t)n, &d), 0);
	assert_int_equal(qpg_kv_decode_stat(d.chunk, d.chunk_len, &out), 0);
	assert_int_equal(out.quota, 4 * K16);
	assert_int_equal(out.used, 256);
	assert_int_equal(out.keys, 1);
	assert_int_not_equal(qpg_kv_decode_reply(msg, QPG_KV_HDR_LEN + (size_t)n - 1, &d), 0);
	qpg__kv_store_fini(&s);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_stat_wire), cmocka_unit_test(test_namespaces),
	      cmocka_unit_test(test_quota_evicts_own), cmocka_unit_test(test_full_store_victims),
	      cmocka_unit_test(test_quota_spares_readers), cmocka_unit_test(test_tenant_table),
	      cmocka_unit_test(test_tenants_file))

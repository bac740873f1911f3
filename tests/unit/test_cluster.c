/* SPDX-License-Identifier: BSD-2-Clause */
/* The cluster's pure parts: a member entry's JSON (what etcd holds is input
 * from outside, so every field is checked), and key ownership by weighted
 * rendezvous hashing (spread, and how many keys move on a join or leave). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "qpgate/cluster.h"
#include "view.h"

static struct qpg_cluster_member member(const char *id)
{
	struct qpg_cluster_member m = {0};
	snprintf(m.id, sizeof(m.id), "%s", id);
	snprintf(m.host, sizeof(m.host), "10.0.0.1");
	snprintf(m.tls_name, sizeof(m.tls_name), "kv.example.org");
	m.port = 7471;
	m.incarnation = 0x0123456789abcdefull;
	m.state = QPG_MEMBER_ACTIVE;
	m.weight = 1;
	m.clients = 12;
	m.max_clients = 100;
	for (int i = 0; i < 32; i++)
		m.spki_sha256[i] = (uint8_t)(i * 7);
	return m;
}

static void test_entry_roundtrip(void **state)
{
	(void)state;
	struct qpg_cluster_member m = member("a-1"), back;
	char json[QPG_CLUSTER_ENTRY_MAX + 1], why[128];
	int n = qpg_cluster_member_to_json(&m, json, sizeof(json));
	assert_true(n > 0);
	assert_int_equal(qpg_cluster_member_from_json(&back, json, (size_t)n, why, sizeof(why)), 0);
	assert_memory_equal(&m, &back, sizeof(m));
	/* An entry that is not valid is never written. */
	m.weight = 0;
	assert_int_equal(qpg_cluster_member_to_json(&m, json, sizeof(json)), -EINVAL);
}

/* Each field wrong in turn: refused, with a reason. */
static void test_entry_refused(void **state)
{
	(void)state;
	struct qpg_cluster_member m = member("a-1");
	char json[QPG_CLUSTER_ENTRY_MAX + 1], why[128];
	int n = qpg_cluster_member_to_json(&m, json, sizeof(json));
	assert_true(n > 0);
	static const struct {
		const char *from, *to;
	} bad[] = {
	    {"\"v\":1", "\"v\":2"},
	    {"\"id\":\"a-1\"", "\"id\":\"a/1\""},
	    {"\"id\":\"a-1\"", "\"id\":\"\""},
	    {"\"host\":\"10.0.0.1\"", "\"host\":\"10.0.0.1;rm\""},
	    {"\"port\":7471", "\"port\":0"},
	    {"\"port\":7471", "\"port\":70000"},
	    {"\"port\":7471", "\"port\":\"7471\""},
	    {"\"transport\":\"rdma\"", "\"transport\":\"udp\""},
	    {"\"state\":\"active\"", "\"state\":\"happy\""},
	    {"\"weight\":1", "\"weight\":1001"},
	    {"\"incarnation\":\"0123456789abcdef\"", "\"incarnation\":\"0123\""},
	    {"\"spki_sha256\":\"00", "\"spki_sha256\":\"zz"},
	    {"\"tls_name\":\"kv.example.org\"", "\"tls_name\":7"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char mut[QPG_CLUSTER_ENTRY_MAX + 64];
		const char *at = strstr(json, bad[i].from);
		assert_non_null(at);
		int k = snprintf(mut, sizeof(mut), "%.*s%s%s", (int)(at - json), json, bad[i].to,
				 at + strlen(bad[i].from));
		struct qpg_cluster_member out;
		why[0] = 0;
		assert_int_equal(
		    qpg_cluster_member_from_json(&out, mut, (size_t)k, why, sizeof(why)), -EINVAL);
		assert_true(why[0] != 0);
	}
	struct qpg_cluster_member out;
	assert_int_equal(qpg_cluster_member_from_json(&out, "[1]", 3, why, sizeof(why)), -EINVAL);
	assert_int_equal(qpg_cluster_member_from_json(&out, json, (size_t)n - 1, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(qpg_cluster_member_from_json(&out, "", 0, why, sizeof(why)), -EINVAL);
}

static struct qpg_cluster_view *view_of(unsigned n, const unsigned *weights)
{
	struct qpg_cluster_view *v = qpg__view_new(n);
	for (unsigned i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof(id), "kv-%u", i);
		v->m[i] = member(id);
		v->m[i].weight = weights ? weights[i] : 1;
	}
	v->n = n;
	qpg__view_sort(v);
	return v;
}

#define KEYS 30000

static int owner_of(const struct qpg_cluster_view *v, unsigned k, const char **id)
{
	char key[32];
	int n = snprintf(key, sizeof(key), "layer%u/blk%u", k % 61, k);
	int o = qpg_cluster_owner(v, key, (size_t)n);
	*id = o >= 0 ? v->m[o].id : NULL;
	return o;
}

/* 30,000 keys over 3 members: max/mean at most 1.1. */
static void test_spread(void **state)
{
	(void)state;
	struct qpg_cluster_view *v = view_of(3, NULL);
	unsigned count[3] = {0};
	for (unsigned k = 0; k < KEYS; k++) {
		const char *id;
		int o = owner_of(v, k, &id);
		assert_true(o >= 0 && o < 3);
		count[o]++;
	}
	unsigned mx = 0;
	for (int i = 0; i < 3; i++)
		mx = count[i] > mx ? count[i] : mx;
	assert_true((double)mx / (KEYS / 3.0) <= 1.1);
	qpg_cluster_view_put(v);
}

/* A fourth member takes 1/4 ± 2 points of the keys, all from the others;
 * then one leaving gives away only its own. */
static void test_moves(void **state)
{
	(void)state;
	struct qpg_cluster_view *v3 = view_of(3, NULL), *v4 = view_of(4, NULL);
	unsigned moved = 0;
	for (unsigned k = 0; k < KEYS; k++) {
		const char *a, *b;
		owner_of(v3, k, &a);
		owner_of(v4, k, &b);
		if (strcmp(a, b)) {
			moved++;
			assert_string_equal(b, "kv-3"); /* only to the newcomer */
		}
	}
	double f = (double)moved / KEYS;
	assert_true(f >= 0.23 && f <= 0.27);
	/* kv-1 drains: only its keys move. */
	struct qpg_cluster_view *d = view_of(4, NULL);
	d->m[qpg_cluster_find(d, "kv-1")].state = QPG_MEMBER_DRAINING;
	for (unsigned k = 0; k < KEYS; k++) {
		const char *a, *b;
		owner_of(v4, k, &a);
		owner_of(d, k, &b);
		if (strcmp(a, "kv-1"))
			assert_string_equal(a, b);
		else
			assert_string_not_equal(b, "kv-1");
	}
	qpg_cluster_view_put(v3);
	qpg_cluster_view_put(v4);
	qpg_cluster_view_put(d);
}

/* Weight 3 against 1, 1: about 3/5 of the keys. Nobody active: no owner. */
static void test_weights_and_states(void **state)
{
	(void)state;
	const unsigned w[3] = {3, 1, 1};
	struct qpg_cluster_view *v = view_of(3, w);
	unsigned heavy = 0;
	for (unsigned k = 0; k < KEYS; k++) {
		const char *id;
		owner_of(v, k, &id);
		heavy += strcmp(id, "kv-0") == 0;
	}
	double f = (double)heavy / KEYS;
	assert_true(f > 0.57 && f < 0.63);
	for (unsigned i = 0; i < v->n; i++)
		v->m[i].state = i ? QPG_MEMBER_WARMING : QPG_MEMBER_DRAINING;
	const char *id;
	assert_int_equal(owner_of(v, 7, &id), -1);
	assert_int_equal(qpg_cluster_find(v, "kv-2"), 2);
	assert_int_equal(qpg_cluster_find(v, "kv-9"), -1);
	qpg_cluster_view_put(v);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_entry_roundtrip),
	      cmocka_unit_test(test_entry_refused), cmocka_unit_test(test_spread),
	      cmocka_unit_test(test_moves), cmocka_unit_test(test_weights_and_states))

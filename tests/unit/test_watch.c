/* SPDX-License-Identifier: BSD-2-Clause */
/* The watch's handling of what etcd sends (watch_apply.c), fed by hand:
 * completeness only from events applied and from reads, one view per
 * revision, a gap reported at once. */
#include <stdio.h>
#include <string.h>

#include "unit.h"

#include "etcd.h"
#include "qpgate/cluster.h"
#include "watch_int.h"

struct seen {
	int64_t rev[16];
	unsigned nmembers[16];
	bool gap[16];
	unsigned n;
};

static void on_view(void *user, const struct qpg_cluster_view *old,
		    const struct qpg_cluster_view *now, bool gap)
{
	(void)old;
	struct seen *s = user;
	if (s->n < 16) {
		s->rev[s->n] = now->revision;
		s->nmembers[s->n] = now->n;
		s->gap[s->n] = gap;
		s->n++;
	}
}

/* A member entry's kv, as etcd sends it, at revision REV. */
static json_t *entry_kv(const char *id, int64_t rev)
{
	struct qpg_cluster_member m = {0};
	snprintf(m.id, sizeof(m.id), "%s", id);
	snprintf(m.host, sizeof(m.host), "127.0.0.1");
	snprintf(m.tls_name, sizeof(m.tls_name), "localhost");
	m.port = 7000;
	m.incarnation = 0x1234;
	m.state = QPG_MEMBER_ACTIVE;
	m.weight = 1;
	m.max_clients = 10;
	char json[QPG_CLUSTER_ENTRY_MAX];
	int n = qpg_cluster_member_to_json(&m, json, sizeof(json));
	assert_true(n > 0);
	char key[128];
	snprintf(key, sizeof(key), "/qpgate/t/members/%s", id);
	char r[32];
	snprintf(r, sizeof(r), "%lld", (long long)rev);
	return json_pack("{s:o, s:o, s:s}", "key", qpg__etcd_b64(key, strlen(key)), "value",
			 qpg__etcd_b64(json, (size_t)n), "mod_revision", r);
}

static json_t *del_kv(const char *id, int64_t rev)
{
	char key[128], r[32];
	snprintf(key, sizeof(key), "/qpgate/t/members/%s", id);
	snprintf(r, sizeof(r), "%lld", (long long)rev);
	return json_pack("{s:o, s:s}", "key", qpg__etcd_b64(key, strlen(key)), "mod_revision", r);
}

static json_t *sync_kv(int64_t rev)
{
	const char *key = "/qpgate/t/sync/m1";
	char r[32];
	snprintf(r, sizeof(r), "%lld", (long long)rev);
	return json_pack("{s:o, s:o, s:s}", "key", qpg__etcd_b64(key, strlen(key)), "value",
			 qpg__etcd_b64("", 0), "mod_revision", r);
}

static json_t *put_ev(json_t *kv)
{
	return json_pack("{s:o}", "kv", kv);
}

static json_t *del_ev(json_t *kv)
{
	return json_pack("{s:s, s:o}", "type", "DELETE", "kv", kv);
}

/* A watch reply: header revision HREV, EVENTS (stolen; NULL: none). */
static json_t *reply(int64_t hrev, json_t *events, bool created)
{
	char r[32];
	snprintf(r, sizeof(r), "%lld", (long long)hrev);
	json_t *res = json_pack("{s:{s:s}}", "header", "revision", r);
	if (created)
		json_object_set_new(res, "created", json_true());
	if (events)
		json_object_set_new(res, "events", events);
	return json_pack("{s:o}", "result", res);
}

/* The watch after a read of the prefix at revision 11 holding m1. */
static struct qpg_cluster_watch *watch_at_11(struct seen *s)
{
	struct qpg_cluster_watch *w = qpg__watch_new("t", on_view, s);
	assert_non_null(w);
	json_t *read =
	    json_pack("{s:{s:s}, s:[o]}", "header", "revision", "11", "kvs", entry_kv("m1", 5));
	qpg__watch_apply_read(w, read, false);
	json_decref(read);
	assert_int_equal(qpg_cluster_watch_revision(w), 11);
	assert_int_equal(s->n, 1);
	return w;
}

static void feed(struct qpg_cluster_watch *w, json_t *obj, int want)
{
	assert_int_equal(qpg__watch_on_result(w, obj), want);
	json_decref(obj);
}

/* A reopened stream's `created` reply carries etcd's revision (30) before
 * the events the watch missed: it must not count as complete there. Nor
 * does a progress notification. The events do. */
static void test_created_does_not_advance(void **state)
{
	(void)state;
	struct seen s = {0};
	struct qpg_cluster_watch *w = watch_at_11(&s);
	feed(w, reply(30, NULL, true), 0);
	assert_int_equal(qpg_cluster_watch_revision(w), 11);
	feed(w, reply(30, json_array(), false), 0); /* progress */
	assert_int_equal(qpg_cluster_watch_revision(w), 11);
	/* The missed events come: m2 joins at 20, a sync write at 30. */
	feed(w,
	     reply(30, json_pack("[o, o]", put_ev(entry_kv("m2", 20)), put_ev(sync_kv(30))), false),
	     0);
	assert_int_equal(qpg_cluster_watch_revision(w), 30);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.rev[1], 20);
	assert_int_equal(s.nmembers[1], 2);
	assert_false(qpg__watch_gapped(w));
	qpg__watch_free(w);
}

/* One reply holding m2's join (12) and its leave (13): two views, so the
 * member side sees each ownership change (a key that went m1 -> m2 -> m1
 * is dropped on m1 at 12). Events already applied are skipped. */
static void test_each_revision_is_a_view(void **state)
{
	(void)state;
	struct seen s = {0};
	struct qpg_cluster_watch *w = watch_at_11(&s);
	feed(w,
	     reply(14,
		   json_pack("[o, o, o, o]", put_ev(entry_kv("m2", 12)), put_ev(entry_kv("m3", 12)),
			     del_ev(del_kv("m2", 13)), put_ev(sync_kv(14))),
		   false),
	     0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.rev[1], 12);
	assert_int_equal(s.nmembers[1], 3); /* m2 and m3 came in one transaction */
	assert_int_equal(s.rev[2], 13);
	assert_int_equal(s.nmembers[2], 2);
	assert_int_equal(qpg_cluster_watch_revision(w), 14);
	/* The same events again (a reopen that overlapped): nothing changes. */
	feed(w, reply(14, json_pack("[o]", del_ev(del_kv("m3", 12))), false), 0);
	assert_int_equal(s.n, 3);
	qpg__watch_free(w);
}

/* A compacted revision: the gap is reported at once (every key dropped),
 * the watch refuses until the prefix is read again, and the read ends it. */
static void test_gap_at_detection(void **state)
{
	(void)state;
	struct seen s = {0};
	struct qpg_cluster_watch *w = watch_at_11(&s);
	json_t *o = json_pack("{s:{s:{s:s}, s:s}}", "result", "header", "revision", "40",
			      "compact_revision", "25");
	feed(w, o, -1);
	assert_int_equal(s.n, 2);
	assert_true(s.gap[1]);
	assert_true(qpg__watch_gapped(w));
	assert_int_equal(qpg_cluster_watch_revision(w), 11);
	json_t *read = json_pack("{s:{s:s}, s:[]}", "header", "revision", "41", "kvs");
	qpg__watch_apply_read(w, read, true);
	json_decref(read);
	assert_false(qpg__watch_gapped(w));
	assert_int_equal(qpg_cluster_watch_revision(w), 41);
	assert_int_equal(s.n, 3);
	assert_true(s.gap[2]);
	assert_int_equal(s.nmembers[2], 0);
	qpg__watch_free(w);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_created_does_not_advance),
	      cmocka_unit_test(test_each_revision_is_a_view),
	      cmocka_unit_test(test_gap_at_detection))

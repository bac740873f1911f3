/* SPDX-License-Identifier: BSD-2-Clause */
/* What the watch does with what etcd sends: a read of the prefix replaces
 * the working set; the stream's events are applied one revision at a
 * time, and each revision that changes a member is published as a view of
 * its own, so the member side sees every ownership change (a key that
 * goes A -> B -> A inside one reply is dropped on A at B's revision).
 *
 * Completeness (the revision every change up to which is applied) comes
 * only from the events themselves and from reads: a `created` reply or a
 * progress notification says what etcd's revision is, not that the events
 * before it have arrived, and is never taken for it. A revision's events
 * are never split across replies (the stream is opened without
 * fragmenting), so the last event of a reply completes its revision. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"
#include "watch_int.h"

struct qpg_cluster_watch *qpg__watch_new(const char *name, qpg_cluster_view_cb cb, void *user)
{
	struct qpg_cluster_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	struct qpg_cluster_view *v = qpg__view_new(0);
	if (!v) {
		free(w);
		return NULL;
	}
	snprintf(w->root, sizeof(w->root), "/qpgate/%s/", name);
	snprintf(w->members, sizeof(w->members), "%smembers/", w->root);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->cb = cb;
	w->user = user;
	atomic_init(&w->cur, v);
	return w;
}

void qpg__watch_free(struct qpg_cluster_watch *w)
{
	if (!w)
		return;
	qpg_cluster_view_put(atomic_load(&w->cur));
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cv);
	free(w->work);
	free(w->buf);
	free(w);
}

const struct qpg_cluster_view *qpg_cluster_view_get(struct qpg_cluster_watch *w)
{
	/* The publisher waits for readers to be 0 before it lets go of a view
	 * it swapped out, so the view read here lives until it is ref'd. */
	atomic_fetch_add(&w->readers, 1);
	const struct qpg_cluster_view *v = qpg__view_ref(atomic_load(&w->cur));
	atomic_fetch_sub(&w->readers, 1);
	return v;
}

int64_t qpg_cluster_watch_revision(const struct qpg_cluster_watch *w)
{
	return atomic_load(&w->complete_rev);
}

bool qpg__watch_gapped(const struct qpg_cluster_watch *w)
{
	return atomic_load(&w->gapped);
}

static void publish(struct qpg_cluster_watch *w, int64_t rev, bool gap)
{
	struct qpg_cluster_view *v = qpg__view_new(w->nwork);
	if (!v) {
		/* Without the new view the member side cannot see this change:
		 * a gap, so that it drops every key rather than serve by the
		 * old one. */
		atomic_store(&w->gapped, true);
		if (w->cb)
			w->cb(w->user, atomic_load(&w->cur), atomic_load(&w->cur), true);
		w->need_read = true;
		return;
	}
	if (w->nwork) /* an empty prefix has no working set at all */
		memcpy(v->m, w->work, w->nwork * sizeof(w->work[0]));
	v->n = w->nwork;
	v->revision = rev;
	qpg__view_sort(v);
	struct qpg_cluster_view *old = atomic_exchange(&w->cur, v);
	while (atomic_load(&w->readers))
		sched_yield();
	atomic_fetch_add(&w->views, 1);
	if (w->cb)
		w->cb(w->user, old, v, gap);
	qpg_cluster_view_put(old);
}

static void advance(struct qpg_cluster_watch *w, int64_t rev)
{
	pthread_mutex_lock(&w->lock);
	if (rev > atomic_load(&w->complete_rev))
		atomic_store(&w->complete_rev, rev);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->lock);
	if (rev >= w->next_rev)
		w->next_rev = rev + 1;
}

static void work_remove(struct qpg_cluster_watch *w, const char *id)
{
	for (unsigned i = 0; i < w->nwork; i++)
		if (strcmp(w->work[i].id, id) == 0) {
			w->work[i] = w->work[--w->nwork];
			w->changed = true;
			return;
		}
}

/* A members/ key's event: PUT with VALUE, or DELETE. */
static void apply(struct qpg_cluster_watch *w, const char *id, const json_t *kv, bool del)
{
	work_remove(w, id);
	if (del)
		return;
	char val[QPG_CLUSTER_ENTRY_MAX];
	long n = qpg__etcd_unb64(kv, "value", val, sizeof(val));
	struct qpg_cluster_member m;
	char why[128];
	if (n <= 0 || qpg_cluster_member_from_json(&m, val, (size_t)n, why, sizeof(why)) ||
	    strcmp(m.id, id) != 0) {
		atomic_fetch_add(&w->bad_entries, 1);
		fprintf(stderr, "qpgate: cluster: member entry '%s' left out: %s\n", id,
			n <= 0	 ? "not base64 or too long"
			: why[0] ? why
				 : "its id is another");
		return;
	}
	m.mod_revision = qpg__etcd_i64(kv, "mod_revision", 0);
	if (w->nwork == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 16;
		void *p = realloc(w->work, cap * sizeof(w->work[0]));
		if (!p) {
			atomic_fetch_add(&w->bad_entries, 1);
			return;
		}
		w->work = p;
		w->cap = cap;
	}
	w->work[w->nwork++] = m;
	w->changed = true;
}

/* A key under the root: members/ID is applied, sync/ only moves the
 * revision on. */
static void on_key(struct qpg_cluster_watch *w, const json_t *kv, bool del)
{
	char key[256];
	long n = qpg__etcd_unb64(kv, "key", key, sizeof(key) - 1);
	if (n <= 0)
		return;
	key[n] = 0;
	size_t pl = strlen(w->members);
	if (strncmp(key, w->members, pl) == 0)
		apply(w, key + pl, kv, del);
}

void qpg__watch_apply_read(struct qpg_cluster_watch *w, const json_t *resp, bool gap)
{
	w->nwork = 0;
	const json_t *kvs = json_object_get(resp, "kvs"), *kv;
	size_t i;
	json_array_foreach(kvs, i, kv) on_key(w, kv, false);
	int64_t rev = qpg__etcd_i64(json_object_get(resp, "header"), "revision", 0);
	w->need_read = false;
	publish(w, rev, gap);
	if (!w->need_read) /* published: the gap is over */
		atomic_store(&w->gapped, false);
	advance(w, rev);
	w->next_rev = rev + 1;
}

/* A gap, found now: drop every key at once (the member side's callback
 * with GAP), refuse until the prefix was read again. */
static void gap_found(struct qpg_cluster_watch *w)
{
	atomic_store(&w->gapped, true);
	w->need_read = true;
	atomic_fetch_add(&w->rereads, 1);
	const struct qpg_cluster_view *v = qpg_cluster_view_get(w);
	if (w->cb)
		w->cb(w->user, v, v, true);
	qpg_cluster_view_put(v);
}

/* The revision REV's events are all applied. */
static void revision_done(struct qpg_cluster_watch *w, int64_t rev)
{
	if (w->changed)
		publish(w, rev, false);
	w->changed = false;
	atomic_fetch_add(&w->revisions, 1);
	advance(w, rev);
}

int qpg__watch_on_result(struct qpg_cluster_watch *w, const json_t *obj)
{
	const json_t *r = json_object_get(obj, "result");
	if (!json_is_object(r))
		return json_object_get(obj, "error") ? -1 : 0;
	int64_t compact = qpg__etcd_i64(r, "compact_revision", 0);
	if (compact > 0 || json_is_true(json_object_get(r, "canceled"))) {
		gap_found(w);
		return -1;
	}
	atomic_store(&w->etcd_ok, true);
	if (w->said_down) {
		w->said_down = false;
		fprintf(stderr, "qpgate: cluster: etcd watch back, complete at revision %lld\n",
			(long long)atomic_load(&w->complete_rev));
	}
	const json_t *events = json_object_get(r, "events"), *ev;
	size_t i;
	int64_t cur = 0; /* the revision whose events are being applied */
	w->changed = false;
	json_array_foreach(events, i, ev)
	{
		const json_t *kv = json_object_get(ev, "kv");
		int64_t rev = qpg__etcd_i64(kv, "mod_revision", 0);
		if (rev <= 0 || rev < w->next_rev)
			continue; /* applied already (or no revision at all) */
		if (cur && rev != cur)
			revision_done(w, cur);
		cur = rev;
		const char *type = json_string_value(json_object_get(ev, "type"));
		on_key(w, kv, type && strcmp(type, "DELETE") == 0);
	}
	if (cur)
		revision_done(w, cur);
	/* A view that could not be made is a gap: read the prefix again. */
	return w->need_read ? -1 : 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A KV service as a member of a cluster: it serves a key only while all of
 * this holds, for every value it returns:
 *   - its lease is known alive (lease fencing: registration's
 *     qpg_cluster_lease_until);
 *   - its view is known current within the staleness bound S: a write of
 *     its own sent at T came back through the watch (fresh.c), and now is
 *     before T + S. An old owner cut off from etcd, or whose watch lags,
 *     stops serving within S of the last moment it provably knew every
 *     change;
 *   - its view is at least as new as the client's (the request's
 *     view_rev): else the request waits, parked by the service, until the
 *     watch has it;
 *   - it owns the key in that view (weighted HRW over the active members),
 *     under its current incarnation;
 *   - and it did not gain the key less than S ago: a member that gains
 *     keys at revision R learned of R after R was committed, and every old
 *     owner has seen R or stopped serving within S of then. Until then the
 *     request waits too.
 * It applies every view change in order (one per revision): the keys it
 * stops owning are dropped before the next view is published, all keys at
 * a gap and on a lost lease, so a key that bounces A -> B -> A never lets
 * A serve a value older than one written to B meanwhile.
 *
 * The gate never blocks and never calls etcd: it reads atomics, and a
 * short lock over the recent gains only while there are any. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "qpgate/cluster.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"
#include "view.h"
#include "watch_int.h"

/* The view changes whose gains are remembered; more within S count as a
 * gain of every key. */
#define GAINS 8

struct gain {
	const struct qpg_cluster_view *before; /* the view before the change */
	uint64_t until_ns;		       /* its gains wait until then */
};

struct qpg_cluster_kv {
	struct qpg_kv_service *k;
	struct qpg_cluster_watch *w;
	struct qpg__fresh *fresh;
	_Atomic(struct qpg_cluster_reg *) reg;
	char id[QPG_CLUSTER_ID_MAX + 1];
	uint64_t stale_ns; /* S */
	atomic_bool detached;
	pthread_mutex_t gain_lock;
	struct gain gains[GAINS];
	atomic_ullong gains_until; /* the latest until of any gain: none past it */
	atomic_ullong all_until;   /* every key counts as gained until then */
	atomic_ullong drops, dropped, waits, wrong_owner, fenced, stale;
};

/* The new owner waits S and a little more: clocks may run at slightly
 * different rates (docs/cluster.md: 3% is assumed at most). */
static uint64_t gain_wait(const struct qpg_cluster_kv *a)
{
	return a->stale_ns + a->stale_ns / 32;
}

static bool mine(const struct qpg_cluster_view *v, const char *id, const void *key, size_t len)
{
	int o = qpg_cluster_owner(v, key, len);
	return o >= 0 && strcmp(v->m[o].id, id) == 0;
}

static void count(atomic_ullong *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Whether KEY was gained less than S ago. */
static bool gained(struct qpg_cluster_kv *a, const void *key, size_t len, uint64_t now)
{
	if (now < atomic_load(&a->all_until))
		return true;
	if (now >= atomic_load(&a->gains_until))
		return false;
	bool g = false;
	pthread_mutex_lock(&a->gain_lock);
	for (unsigned i = 0; i < GAINS && !g; i++)
		g = a->gains[i].before && now < a->gains[i].until_ns &&
		    !mine(a->gains[i].before, a->id, key, len);
	pthread_mutex_unlock(&a->gain_lock);
	return g;
}

static int gate(void *user, const uint8_t *key, uint16_t key_len, uint64_t view_rev,
		uint64_t *server_rev)
{
	struct qpg_cluster_kv *a = user;
	struct qpg_cluster_reg *r = atomic_load(&a->reg);
	uint64_t now = qpg_cluster_now_ns();
	if (!r || atomic_load(&a->detached) || now >= qpg_cluster_lease_until(r) ||
	    qpg__watch_gapped(a->w)) {
		count(&a->fenced);
		return QPG_KV_UNAVAILABLE;
	}
	uint64_t at = qpg__fresh_at(a->fresh);
	if (!at) { /* the first write has not come back yet (a start) */
		count(&a->waits);
		return QPG_KV_GATE_WAIT;
	}
	if (now >= at + a->stale_ns) {
		count(&a->stale);
		return QPG_KV_UNAVAILABLE;
	}
	if ((int64_t)view_rev > qpg_cluster_watch_revision(a->w)) {
		count(&a->waits);
		return QPG_KV_GATE_WAIT;
	}
	const struct qpg_cluster_view *v = qpg_cluster_view_get(a->w);
	int o = qpg_cluster_owner(v, key, key_len);
	bool ok = o >= 0 && strcmp(v->m[o].id, a->id) == 0 &&
		  v->m[o].incarnation == qpg_cluster_incarnation(r);
	*server_rev = (uint64_t)v->revision;
	qpg_cluster_view_put(v);
	if (!ok) {
		count(&a->wrong_owner);
		return QPG_KV_WRONG_OWNER;
	}
	if (gained(a, key, key_len, now)) {
		count(&a->waits);
		return QPG_KV_GATE_WAIT;
	}
	return QPG_KV_OK;
}

struct keep_ctx {
	const struct qpg_cluster_view *v;
	const char *id;
};

static bool keep(void *user, const uint8_t *key, uint16_t key_len)
{
	struct keep_ctx *c = user;
	return mine(c->v, c->id, key, key_len);
}

/* Whether ownership can differ between A and B: the active members and
 * their weights (a load refresh changes neither). */
static bool same_owners(const struct qpg_cluster_view *a, const struct qpg_cluster_view *b)
{
	unsigned i = 0, j = 0;
	for (;;) {
		while (i < a->n && a->m[i].state != QPG_MEMBER_ACTIVE)
			i++;
		while (j < b->n && b->m[j].state != QPG_MEMBER_ACTIVE)
			j++;
		if (i == a->n || j == b->n)
			return i == a->n && j == b->n;
		if (strcmp(a->m[i].id, b->m[j].id) || a->m[i].weight != b->m[j].weight)
			return false;
		i++, j++;
	}
}

static void drop(struct qpg_cluster_kv *a, const struct qpg_cluster_view *v)
{
	struct keep_ctx c = {v, a->id};
	size_t n = qpg_kv_service_drop(a->k, v ? keep : NULL, &c);
	atomic_fetch_add(&a->drops, 1);
	atomic_fetch_add(&a->dropped, n);
	if (n)
		fprintf(stderr,
			"qpgate-server: cluster: view %lld%s: dropped %zu key%s this member no "
			"longer owns\n",
			v ? (long long)v->revision : -1LL, v ? "" : " (a gap)", n,
			n == 1 ? "" : "s");
}

/* Every key counts as gained for S from now. */
static void gain_all(struct qpg_cluster_kv *a)
{
	atomic_store(&a->all_until, qpg_cluster_now_ns() + gain_wait(a));
}

/* The change from BEFORE may have given this member keys: they wait S. */
static void gain_from(struct qpg_cluster_kv *a, const struct qpg_cluster_view *before)
{
	uint64_t now = qpg_cluster_now_ns(), until = now + gain_wait(a);
	pthread_mutex_lock(&a->gain_lock);
	struct gain *slot = NULL;
	for (unsigned i = 0; i < GAINS && !slot; i++)
		if (!a->gains[i].before || now >= a->gains[i].until_ns)
			slot = &a->gains[i];
	if (slot) {
		qpg_cluster_view_put(slot->before);
		slot->before = qpg__view_ref(before);
		slot->until_ns = until;
		atomic_store(&a->gains_until, until);
	}
	pthread_mutex_unlock(&a->gain_lock);
	if (!slot)
		gain_all(a);
}

/* On the watch's thread, for each view in order. */
static void on_view(void *user, const struct qpg_cluster_view *old,
		    const struct qpg_cluster_view *now, bool gap)
{
	struct qpg_cluster_kv *a = user;
	if (gap) {
		gain_all(a);
		drop(a, NULL);
	} else if (!old || !same_owners(old, now)) {
		if (old)
			gain_from(a, old);
		else
			gain_all(a);
		drop(a, now);
	}
}

int qpg_cluster_kv_attach(struct qpg_cluster_kv **out, struct qpg_kv_service *k,
			  const struct qpg_cluster_opts *o, const char *member_id, char *err,
			  size_t err_len)
{
	struct qpg_cluster_kv *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->k = k;
	snprintf(a->id, sizeof(a->id), "%s", member_id);
	a->stale_ns =
	    (uint64_t)(o->staleness_ms ? o->staleness_ms : QPG_CLUSTER_STALENESS_MS) * 1000000ull;
	pthread_mutex_init(&a->gain_lock, NULL);
	gain_all(a);			     /* a member's first keys wait S too */
	qpg_kv_service_set_gate(k, gate, a); /* UNAVAILABLE until set_reg */
	struct qpg_cluster_opts quiet = *o;
	quiet.quiet = true;
	int rc = qpg_cluster_watch_start(&a->w, &quiet, on_view, a, err, err_len);
	if (rc == 0 &&
	    (rc = qpg__fresh_start(&a->fresh, &quiet, member_id, a->w,
				   (unsigned)(a->stale_ns / 4000000ull), err, err_len)) != 0)
		qpg_cluster_watch_stop(a->w);
	if (rc) {
		qpg_kv_service_set_gate(k, NULL, NULL);
		pthread_mutex_destroy(&a->gain_lock);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void qpg_cluster_kv_set_reg(struct qpg_cluster_kv *a, struct qpg_cluster_reg *r)
{
	qpg__fresh_set_reg(a->fresh, r);
	atomic_store(&a->reg, r);
}

void qpg_cluster_kv_lost(struct qpg_cluster_kv *a)
{
	gain_all(a);
	drop(a, NULL);
}

void qpg_cluster_kv_detach(struct qpg_cluster_kv *a)
{
	if (!a)
		return;
	atomic_store(&a->detached, true);
	qpg_kv_service_set_gate(a->k, NULL, NULL);
	qpg__fresh_stop(a->fresh);
	qpg_cluster_watch_stop(a->w);
	for (unsigned i = 0; i < GAINS; i++)
		qpg_cluster_view_put(a->gains[i].before);
	pthread_mutex_destroy(&a->gain_lock);
	free(a);
}

void qpg_cluster_kv_stats(struct qpg_cluster_kv *a, struct qpg_cluster_kv_stats *out)
{
	out->drops = atomic_load(&a->drops);
	out->keys_dropped = atomic_load(&a->dropped);
	out->catch_ups = atomic_load(&a->waits);
	out->wrong_owner = atomic_load(&a->wrong_owner);
	out->fenced = atomic_load(&a->fenced);
	out->stale = atomic_load(&a->stale);
}

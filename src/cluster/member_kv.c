/* SPDX-License-Identifier: BSD-2-Clause */
/* A KV service as a member of a cluster: it serves a key only while that
 * holds, for every value it returns:
 *   - it owns the key in its view (weighted HRW over the active members),
 *     under its current incarnation;
 *   - its view is at least as new as the client's (the request's
 *     view_rev): else it catches up first, from its watch;
 *   - its lease is known alive (lease fencing: registration's
 *     qpg_cluster_lease_until).
 * And it applies every view change in order: the keys it stops owning are
 * dropped before the next view is published, all keys after a gap (a
 * compacted watch) and on a lost lease. Otherwise a key could bounce
 * A -> B -> A and A serve a value older than one written to B meanwhile. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qpgate/cluster.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"

struct qpg_cluster_kv {
	struct qpg_kv_service *k;
	struct qpg_cluster_watch *w;
	_Atomic(struct qpg_cluster_reg *) reg;
	char id[QPG_CLUSTER_ID_MAX + 1];
	atomic_bool detached;
	atomic_bool catching; /* a loop thread waits for a catch-up now */
	atomic_ullong drops, dropped, catch_ups, wrong_owner, fenced;
};

/* A catch-up holds a loop thread: bounded in time, and one thread at a
 * time (the others answer UNAVAILABLE meanwhile), so requests that claim
 * newer views cannot stall every loop of the server. */
#define CATCH_UP_MS 200

static bool mine(const struct qpg_cluster_view *v, const char *id, const void *key, size_t len)
{
	int o = qpg_cluster_owner(v, key, len);
	return o >= 0 && strcmp(v->m[o].id, id) == 0;
}

static int gate(void *user, const uint8_t *key, uint16_t key_len, uint64_t view_rev,
		uint64_t *server_rev)
{
	struct qpg_cluster_kv *a = user;
	struct qpg_cluster_reg *r = atomic_load(&a->reg);
	if (!r || atomic_load(&a->detached) || qpg_cluster_now_ns() >= qpg_cluster_lease_until(r)) {
		atomic_fetch_add_explicit(&a->fenced, 1, memory_order_relaxed);
		return QPG_KV_UNAVAILABLE;
	}
	if ((int64_t)view_rev > qpg_cluster_watch_revision(a->w)) {
		if (atomic_exchange(&a->catching, true)) {
			atomic_fetch_add_explicit(&a->fenced, 1, memory_order_relaxed);
			return QPG_KV_UNAVAILABLE;
		}
		atomic_fetch_add_explicit(&a->catch_ups, 1, memory_order_relaxed);
		int rc = qpg_cluster_watch_catch_up(a->w, (int64_t)view_rev, CATCH_UP_MS);
		atomic_store(&a->catching, false);
		if (rc == -ERANGE) { /* a revision etcd never had: the client is wrong */
			*server_rev = (uint64_t)qpg_cluster_watch_revision(a->w);
			atomic_fetch_add_explicit(&a->wrong_owner, 1, memory_order_relaxed);
			return QPG_KV_WRONG_OWNER;
		}
		if (rc) {
			atomic_fetch_add_explicit(&a->fenced, 1, memory_order_relaxed);
			return QPG_KV_UNAVAILABLE;
		}
	}
	const struct qpg_cluster_view *v = qpg_cluster_view_get(a->w);
	int o = qpg_cluster_owner(v, key, key_len);
	bool ok = o >= 0 && strcmp(v->m[o].id, a->id) == 0 &&
		  v->m[o].incarnation == qpg_cluster_incarnation(r);
	*server_rev = (uint64_t)v->revision;
	qpg_cluster_view_put(v);
	if (ok)
		return QPG_KV_OK;
	atomic_fetch_add_explicit(&a->wrong_owner, 1, memory_order_relaxed);
	return QPG_KV_WRONG_OWNER;
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

/* On the watch's thread, for each view in order. */
static void on_view(void *user, const struct qpg_cluster_view *old,
		    const struct qpg_cluster_view *now, bool gap)
{
	struct qpg_cluster_kv *a = user;
	if (gap)
		drop(a, NULL);
	else if (!old || !same_owners(old, now))
		drop(a, now);
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
	qpg_kv_service_set_gate(k, gate, a); /* UNAVAILABLE until set_reg */
	struct qpg_cluster_opts quiet = *o;
	quiet.quiet = true;
	int rc = qpg_cluster_watch_start(&a->w, &quiet, on_view, a, err, err_len);
	if (rc) {
		qpg_kv_service_set_gate(k, NULL, NULL);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void qpg_cluster_kv_set_reg(struct qpg_cluster_kv *a, struct qpg_cluster_reg *r)
{
	atomic_store(&a->reg, r);
}

void qpg_cluster_kv_lost(struct qpg_cluster_kv *a)
{
	drop(a, NULL);
}

void qpg_cluster_kv_detach(struct qpg_cluster_kv *a)
{
	if (!a)
		return;
	atomic_store(&a->detached, true);
	qpg_kv_service_set_gate(a->k, NULL, NULL);
	qpg_cluster_watch_stop(a->w);
	free(a);
}

void qpg_cluster_kv_stats(struct qpg_cluster_kv *a, struct qpg_cluster_kv_stats *out)
{
	out->drops = atomic_load(&a->drops);
	out->keys_dropped = atomic_load(&a->dropped);
	out->catch_ups = atomic_load(&a->catch_ups);
	out->wrong_owner = atomic_load(&a->wrong_owner);
	out->fenced = atomic_load(&a->fenced);
}

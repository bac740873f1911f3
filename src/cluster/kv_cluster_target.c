/* SPDX-License-Identifier: BSD-2-Clause */
/* A cluster as a KV target (qpgate/kv_target.h): its members' pools seen
 * as one, and what each member served. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cluster_int.h"

static struct qpg_kv_cluster *cluster_of(struct qpg_kv_target *t)
{
	return (struct qpg_kv_cluster *)t; /* base first */
}

struct qpg_kv_target *qpg_kv_cluster_target(struct qpg_kv_cluster *c)
{
	return c ? &c->base : NULL;
}

static void cluster_destroy(struct qpg_kv_target *t)
{
	qpg_kv_cluster_destroy(cluster_of(t));
}

/* The members of the view in use, their pools summed. */
static void cluster_info(struct qpg_kv_target *t, struct qpg_kv_target_info *out)
{
	struct qpg_kv_cluster *c = cluster_of(t);
	pthread_mutex_lock(&c->build);
	struct route *r = atomic_load(&c->cur);
	out->view_revision = r->v->revision;
	for (unsigned i = 0; i < r->v->n; i++) {
		struct member *m = r->m[i];
		if (!m)
			continue;
		out->members++;
		struct qpg_kv_pool_info pi = {0};
		if (m->pool)
			qpg_kv_pool_info(m->pool, &pi);
		else
			pi.conns = c->o.pool.conns;
		out->members_up += pi.connected > 0 && !atomic_load(&m->suspect);
		out->conns += pi.conns;
		out->connected += pi.connected;
		out->retries += pi.retries;
		if (!out->credits)
			out->credits = pi.credits;
		if (pi.max_msg && (!out->max_msg || pi.max_msg < out->max_msg))
			out->max_msg = pi.max_msg;
		if (pi.last_error[0])
			snprintf(out->last_error, sizeof(out->last_error), "%s: %.130s", m->e.id,
				 pi.last_error);
	}
	pthread_mutex_unlock(&c->build);
}

static int cluster_stats(struct qpg_kv_target *t, struct qpg_kv_target_stats *out)
{
	struct qpg_kv_cluster *c = cluster_of(t);
	pthread_mutex_lock(&c->build);
	struct route *r = atomic_load(&c->cur);
	out->revision = r->v->revision;
	out->views = atomic_load(&c->views);
	out->redirects = atomic_load(&c->redirects);
	out->unroutable = atomic_load(&c->unroutable);
	struct qpg_cluster_watch_stats ws;
	qpg_cluster_watch_stats(c->w, &ws);
	out->etcd_ok = ws.etcd_ok;
	/* Every member ever seen, by ID (a member that left keeps its counts). */
	pthread_mutex_lock(&c->st_lock);
	out->m = calloc(c->nst ? c->nst : 1, sizeof(*out->m));
	for (unsigned i = 0; out->m && i < c->nst; i++) {
		struct qpg_kv_member_stats *s = &out->m[i];
		struct mstats *st = c->st[i];
		snprintf(s->id, sizeof(s->id), "%s", st->id);
		s->ops = atomic_load(&st->ops);
		s->misses = atomic_load(&st->misses);
		s->unavailable = atomic_load(&st->unavailable);
		s->wrong_owner = atomic_load(&st->wrong_owner);
		s->pool_waits = atomic_load(&st->pool_waits);
		s->errors = atomic_load(&st->errors);
		int j = qpg_cluster_find(r->v, st->id);
		if (j >= 0) {
			s->incarnation = r->v->m[j].incarnation;
			s->active = r->v->m[j].state == QPG_MEMBER_ACTIVE;
			s->up = r->m[j] && r->m[j]->pool;
			s->suspect = r->m[j] && atomic_load(&r->m[j]->suspect);
			struct qpg_kv_target_stats ps; /* its pool's, while it has one */
			if (s->up &&
			    qpg_kv_target_stats(qpg_kv_pool_target(r->m[j]->pool), &ps) == 0) {
				s->zero_copy = ps.n ? ps.m[0].zero_copy : 0;
				qpg_kv_target_stats_free(&ps);
			}
		}
		out->n++;
	}
	pthread_mutex_unlock(&c->st_lock);
	pthread_mutex_unlock(&c->build);
	return out->m ? 0 : -ENOMEM;
}

/* (The target's group op: a batch's keys, grouped by owner.) */
static int cluster_group(struct qpg_kv_target *t, const void *key, uint16_t len)
{
	struct qpg_kv_cluster *c = (struct qpg_kv_cluster *)t;
	atomic_fetch_add(&c->readers, 1);
	int o = qpg_cluster_owner(atomic_load(&c->cur)->v, key, len);
	atomic_fetch_sub(&c->readers, 1);
	return o;
}

/* (The target's max_msg op: the least its members' pools agreed, read as
 * a submit reads the route, without c->build.) */
static uint32_t cluster_max_msg(struct qpg_kv_target *t)
{
	struct qpg_kv_cluster *c = (struct qpg_kv_cluster *)t;
	uint32_t least = 0;
	atomic_fetch_add(&c->readers, 1);
	const struct route *r = atomic_load(&c->cur);
	for (unsigned i = 0; r && i < r->v->n; i++) {
		struct qpg_kv_pool_info pi;
		if (!r->m[i] || !r->m[i]->pool)
			continue;
		qpg_kv_pool_info(r->m[i]->pool, &pi);
		if (pi.max_msg && (!least || pi.max_msg < least))
			least = pi.max_msg;
	}
	atomic_fetch_sub(&c->readers, 1);
	return least;
}

const struct qpg_kv_target_ops qpg__kv_cluster_target_ops = {
    .kind = "cluster",
    .submit = qpg__kv_cluster_submit,
    .destroy = cluster_destroy,
    .info = cluster_info,
    .stats = cluster_stats,
    .group = cluster_group,
    .max_msg = cluster_max_msg,
    .reg = qpg__kv_cluster_reg,
    .unreg = qpg__kv_cluster_unreg,
};

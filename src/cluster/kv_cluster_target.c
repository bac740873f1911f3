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

/* Registered buffers: the cluster keeps the list, and every member's pool
 * registers each one as the member enters a route (publish, under build),
 * so a member that joins later reads into them as the first ones do. */
void qpg__kv_cluster_regions_apply(struct qpg_kv_cluster *c, const struct route *r)
{
	for (unsigned i = 0; i < r->v->n; i++) {
		struct member *m = r->m[i];
		for (unsigned j = 0; m && m->pool && j < c->nregions; j++) {
			int rc = qpg_kv_register(qpg_kv_pool_target(m->pool), c->regions[j].addr,
						 c->regions[j].len);
			if (rc) /* its GETs into that buffer copy, as over tcp */
				fprintf(stderr,
					"qpgate: cluster: member %s cannot register a buffer of "
					"%zu bytes: %s\n",
					m->e.id, c->regions[j].len, strerror(-rc));
		}
	}
}

static int cluster_unreg_locked(struct qpg_kv_cluster *c, void *addr)
{
	unsigned at = 0;
	while (at < c->nregions && c->regions[at].addr != addr)
		at++;
	if (at == c->nregions)
		return -ENOENT;
	const struct route *r = atomic_load(&c->cur);
	int rc = 0;
	for (unsigned i = 0; r && i < r->v->n; i++)
		if (r->m[i] && r->m[i]->pool) {
			int e = qpg_kv_unregister(qpg_kv_pool_target(r->m[i]->pool), addr);
			if (e && e != -ENOENT && !rc)
				rc = e;
		}
	if (rc == 0)
		c->regions[at] = c->regions[--c->nregions];
	return rc;
}

static int cluster_reg(struct qpg_kv_target *t, void *addr, size_t len)
{
	struct qpg_kv_cluster *c = cluster_of(t);
	pthread_mutex_lock(&c->build);
	int rc = 0;
	for (unsigned j = 0; j < c->nregions && !rc; j++)
		if (c->regions[j].addr == addr && c->regions[j].len == len)
			rc = -EALREADY;
		else if ((uint8_t *)addr < (uint8_t *)c->regions[j].addr + c->regions[j].len &&
			 (uint8_t *)c->regions[j].addr < (uint8_t *)addr + len)
			rc = -EEXIST;
	if (rc) {
		pthread_mutex_unlock(&c->build);
		return rc == -EALREADY ? 0 : rc;
	}
	struct cluster_region *a = realloc(c->regions, (c->nregions + 1) * sizeof(*a));
	if (!a) {
		pthread_mutex_unlock(&c->build);
		return -ENOMEM;
	}
	c->regions = a;
	c->regions[c->nregions++] = (struct cluster_region){addr, len};
	const struct route *r = atomic_load(&c->cur);
	for (unsigned i = 0; r && i < r->v->n && !rc; i++)
		if (r->m[i] && r->m[i]->pool)
			rc = qpg_kv_register(qpg_kv_pool_target(r->m[i]->pool), addr, len);
	if (rc)
		cluster_unreg_locked(c, addr);
	pthread_mutex_unlock(&c->build);
	return rc;
}

static int cluster_unreg(struct qpg_kv_target *t, void *addr)
{
	struct qpg_kv_cluster *c = cluster_of(t);
	pthread_mutex_lock(&c->build);
	int rc = cluster_unreg_locked(c, addr);
	pthread_mutex_unlock(&c->build);
	return rc;
}

const struct qpg_kv_target_ops qpg__kv_cluster_target_ops = {
    .kind = "cluster",
    .submit = qpg__kv_cluster_submit,
    .destroy = cluster_destroy,
    .info = cluster_info,
    .stats = cluster_stats,
    .group = cluster_group,
    .max_msg = cluster_max_msg,
    .reg = cluster_reg,
    .unreg = cluster_unreg,
};

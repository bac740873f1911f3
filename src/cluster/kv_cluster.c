/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV client over a cluster: a route (the view in use, and a pool per
 * active member) published behind an atomic pointer. A submit reads it
 * inside a readers section and takes no lock; the watch's thread builds
 * the next route (pools for members that joined, the same pools for the
 * members that stay), publishes it, waits for the readers of the old one
 * to leave, then closes the pools of members that left.
 *
 * Two threads of its own. The worker (kv_cluster_req.c, with the request
 * path) completes what fails fast and routes again what a server answered
 * WRONG_OWNER. The builder brings up the pools of members that joined, and
 * again those of suspect members, with no lock held while it connects: a
 * member that drops packets costs its own keys a connect deadline, never a
 * view change or another member's keys. */
#include "qpgate/kv_cluster.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_cluster_int.h"
#include "view.h"

static uint64_t now_ns(void)
{
	return qpg_cluster_now_ns();
}

void qpg_kv_cluster_opts_default(struct qpg_kv_cluster_opts *o)
{
	memset(o, 0, sizeof(*o));
	qpg_kv_pool_opts_default(&o->pool);
	o->pool.threads = 1;
	o->pool.conns = 2;
	/* A member that does not answer is suspect soon, and tried again
	 * later: a view change is not held up by a long connect. */
	o->pool.connect_attempts = 2;
	o->pool.request_timeout_ms = QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS;
}

static struct mstats *stats_for(struct qpg_kv_cluster *c, const char *id)
{
	pthread_mutex_lock(&c->st_lock);
	struct mstats *s = NULL;
	for (unsigned i = 0; i < c->nst && !s; i++)
		if (strcmp(c->st[i]->id, id) == 0)
			s = c->st[i];
	if (!s) {
		struct mstats **a = realloc(c->st, (c->nst + 1) * sizeof(*a));
		if (a) {
			c->st = a;
			s = calloc(1, sizeof(*s));
			if (s) {
				snprintf(s->id, sizeof(s->id), "%s", id);
				c->st[c->nst++] = s;
			}
		}
	}
	pthread_mutex_unlock(&c->st_lock);
	return s;
}

/* A pool for member E, pinned to its certificate's public key. */
static struct qpg_kv_pool *pool_for(struct qpg_kv_cluster *c, const struct qpg_cluster_member *e)
{
	struct qpg_kv_pool_opts po = c->o.pool;
	po.client.host = e->host;
	po.client.port = e->port;
	po.client.servername = e->tls_name;
	po.client.transport = e->tcp ? QPG_TRANSPORT_TCP : QPG_TRANSPORT_RDMA;
	po.client.spki_sha256 = e->spki_sha256;
	struct qpg_kv_pool *p = NULL;
	char err[256];
	if (qpg_kv_pool_create(&p, &po, err, sizeof(err))) {
		fprintf(stderr, "qpgate: cluster: member %s (%s:%u) unavailable: %s\n", e->id,
			e->host, e->port, err);
		return NULL;
	}
	return p;
}

/* Same member, same process, same address and key: the pool still fits. */
static bool same_member(const struct qpg_cluster_member *a, const struct qpg_cluster_member *b)
{
	return strcmp(a->id, b->id) == 0 && a->incarnation == b->incarnation &&
	       strcmp(a->host, b->host) == 0 && a->port == b->port && a->tcp == b->tcp &&
	       strcmp(a->tls_name, b->tls_name) == 0 &&
	       memcmp(a->spki_sha256, b->spki_sha256, 32) == 0;
}

static struct member *find_member(const struct route *r, const struct qpg_cluster_member *e)
{
	for (unsigned i = 0; r && i < r->v->n; i++)
		if (r->m[i] && same_member(&r->m[i]->e, e))
			return r->m[i];
	return NULL;
}

static void member_free(struct member *m)
{
	if (!m)
		return;
	qpg_kv_pool_destroy(m->pool); /* fails what is in flight: -ECANCELED */
	free(m);
}

/* Publish R, wait until no submit still reads the old route, then free
 * it and close the pools that R does not keep. Under c->build. */
static void publish(struct qpg_kv_cluster *c, struct route *r)
{
	qpg__kv_cluster_regions_apply(c, r); /* before any request can reach them */
	struct route *old = atomic_exchange(&c->cur, r);
	while (atomic_load(&c->readers))
		sched_yield();
	qpg__kv_cluster_count(&c->views);
	qpg__kv_cluster_routes_changed(c);
	if (!old)
		return;
	for (unsigned i = 0; i < old->v->n; i++) {
		struct member *m = old->m[i];
		bool kept = false;
		for (unsigned j = 0; m && j < r->v->n && !kept; j++)
			kept = r->m[j] == m;
		if (m && !kept) { /* closed by the builder (its requests fail then) */
			m->next_dead = c->dead;
			c->dead = m;
		}
	}
	qpg_cluster_view_put(old->v);
	free(old->m);
	free(old);
}

/* The route for view V: existing pools kept, new active members pooled. */
static struct route *route_for(struct qpg_kv_cluster *c, const struct qpg_cluster_view *v)
{
	struct route *r = calloc(1, sizeof(*r)), *old = atomic_load(&c->cur);
	if (!r || !(r->m = calloc(v->n ? v->n : 1, sizeof(*r->m)))) {
		free(r);
		return NULL;
	}
	r->v = v;
	for (unsigned i = 0; i < v->n; i++) {
		const struct qpg_cluster_member *e = &v->m[i];
		if (e->state != QPG_MEMBER_ACTIVE)
			continue;
		struct member *m = find_member(old, e);
		if (!m) {
			m = calloc(1, sizeof(*m));
			if (!m)
				continue;
			m->e = *e;
			m->c = c;
			m->st = stats_for(c, e->id);
			/* The first view's pools are made here, so a new client
			 * can be used at once; later ones by the builder. */
			m->pool = atomic_load(&c->first_built) ? NULL : pool_for(c, e);
			if (!m->pool && !atomic_load(&c->first_built)) {
				atomic_store(&m->suspect, true);
				m->retry_ns = now_ns() + QPG__KV_CLUSTER_SUSPECT_RETRY_NS;
			}
		}
		r->m[i] = m;
	}
	return r;
}

static void on_view(void *user, const struct qpg_cluster_view *old,
		    const struct qpg_cluster_view *now, bool gap)
{
	(void)old, (void)gap;
	struct qpg_kv_cluster *c = user;
	pthread_mutex_lock(&c->build);
	/* The route keeps its own reference to the view. */
	struct route *r = route_for(c, (const struct qpg_cluster_view *)now);
	if (r) {
		qpg__view_ref(now);
		publish(c, r);
		if (c->o.on_view)
			c->o.on_view(c->o.user, now);
	}
	pthread_mutex_unlock(&c->build);
}

/* Whether member M needs a pool now: none yet (it joined), or a suspect
 * one whose retry is due. */
static bool wants_pool(const struct member *m, uint64_t now)
{
	if (!m)
		return false;
	return atomic_load(&m->suspect) ? now >= m->retry_ns : !m->pool;
}

/* Put POOL in for the member with entry E, if the route in use still has it
 * and it still wants one: a new route with a new member struct (the old
 * one, and its failed pool, go once no submit reads it). Under c->build. */
static bool install(struct qpg_kv_cluster *c, const struct qpg_cluster_member *e,
		    struct qpg_kv_pool *pool)
{
	struct route *cur = atomic_load(&c->cur);
	int at = -1;
	for (unsigned i = 0; i < cur->v->n && at < 0; i++)
		if (cur->m[i] && same_member(&cur->m[i]->e, e) && wants_pool(cur->m[i], UINT64_MAX))
			at = (int)i;
	struct route *r = at >= 0 ? calloc(1, sizeof(*r)) : NULL;
	struct member *n = r ? calloc(1, sizeof(*n)) : NULL;
	if (!n || !(r->m = calloc(cur->v->n, sizeof(*r->m)))) {
		free(n);
		free(r);
		return false;
	}
	*n = (struct member){.e = *e, .c = c, .st = cur->m[at]->st, .pool = pool};
	r->v = qpg__view_ref(cur->v);
	for (unsigned i = 0; i < cur->v->n; i++)
		r->m[i] = (int)i == at ? n : cur->m[i];
	if (cur->m[at]->pool)
		fprintf(stderr, "qpgate: cluster: member %s back\n", e->id);
	publish(c, r);
	return true;
}

/* One pass: the entries that want a pool, read under the lock; each pool
 * made without it; each put in under it again. */
static void build_pools(struct qpg_kv_cluster *c)
{
	struct qpg_cluster_member want[16];
	unsigned n = 0;
	uint64_t now = now_ns();
	pthread_mutex_lock(&c->build);
	struct route *cur = atomic_load(&c->cur);
	for (unsigned i = 0; cur && i < cur->v->n && n < 16; i++)
		if (wants_pool(cur->m[i], now))
			want[n++] = cur->m[i]->e;
	pthread_mutex_unlock(&c->build);
	for (unsigned i = 0; i < n && !atomic_load(&c->closing); i++) {
		struct qpg_kv_pool *p = pool_for(c, &want[i]);
		pthread_mutex_lock(&c->build);
		bool used = p && !atomic_load(&c->closing) && install(c, &want[i], p);
		struct member *m = p ? NULL : find_member(atomic_load(&c->cur), &want[i]);
		if (m) { /* tried again in QPG__KV_CLUSTER_SUSPECT_RETRY_NS */
			atomic_store(&m->suspect, true);
			m->retry_ns = now_ns() + QPG__KV_CLUSTER_SUSPECT_RETRY_NS;
		}
		pthread_mutex_unlock(&c->build);
		if (m) /* what waited for it fails now, not at its deadline */
			qpg__kv_cluster_routes_changed(c);
		if (p && !used)
			qpg_kv_pool_destroy(p);
	}
}

/* Close the pools of the members no route holds. */
static void bury(struct qpg_kv_cluster *c)
{
	pthread_mutex_lock(&c->build);
	struct member *m = c->dead;
	c->dead = NULL;
	pthread_mutex_unlock(&c->build);
	while (m) {
		struct member *next = m->next_dead;
		member_free(m);
		m = next;
	}
}

static void *builder_main(void *arg)
{
	struct qpg_kv_cluster *c = arg;
	while (!atomic_load(&c->closing)) {
		bury(c);
		build_pools(c);
		for (int i = 0; i < 10 && !atomic_load(&c->closing); i++)
			nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	return NULL;
}

/* The cluster keeps its options' strings: the watch reconnects, and pools
 * are made, long after the caller's (a binding's) strings are gone. */
static int own(struct qpg_kv_cluster *c, const char **p)
{
	if (!*p)
		return 0;
	char *d = strdup(*p);
	if (!d)
		return -ENOMEM;
	c->owned[c->nowned++] = d;
	*p = d;
	return 0;
}

static int own_strings(struct qpg_kv_cluster *c)
{
	struct qpg_cluster_opts *e = &c->o.etcd;
	struct qpg_client_opts *p = &c->o.pool.client;
	const char **s[] = {&e->endpoints, &e->name, &e->ca,	  &e->cert, &e->key, &e->user,
			    &e->password_file, &p->ca, &p->cert, &p->key, &p->ib_dev, &p->source};
	_Static_assert(sizeof(s) / sizeof(s[0]) <= sizeof(c->owned) / sizeof(c->owned[0]),
		       "owned[] holds every string");
	for (unsigned i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		if (own(c, s[i]))
			return -ENOMEM;
	return 0;
}

static void free_cluster(struct qpg_kv_cluster *c)
{
	for (unsigned i = 0; i < c->nowned; i++)
		free(c->owned[i]);
	free(c->regions);
	free(c);
}

int qpg_kv_cluster_create(struct qpg_kv_cluster **out, const struct qpg_kv_cluster_opts *o,
			  char *err, size_t err_len)
{
	struct qpg_kv_cluster *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base.ops = &qpg__kv_cluster_target_ops;
	c->o = *o;
	if (own_strings(c)) {
		snprintf(err, err_len, "out of memory for the cluster's options");
		free_cluster(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->build, NULL);
	pthread_mutex_init(&c->st_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	/* The first view's route is built inside the start (on_view). */
	int rc = qpg_cluster_watch_start(&c->w, &c->o.etcd, on_view, c, err, err_len);
	if (rc == 0 && !atomic_load(&c->cur)) {
		snprintf(err, err_len, "out of memory for the cluster's route");
		qpg_cluster_watch_stop(c->w);
		rc = -ENOMEM;
	}
	atomic_store(&c->first_built, true);
	if (rc == 0 &&
	    (rc = -pthread_create(&c->worker, NULL, qpg__kv_cluster_worker_main, c)) != 0) {
		snprintf(err, err_len, "cannot start the cluster's worker thread");
		qpg_cluster_watch_stop(c->w);
	}
	if (rc == 0 && (rc = -pthread_create(&c->builder, NULL, builder_main, c)) != 0) {
		snprintf(err, err_len, "cannot start the cluster's pool builder thread");
		atomic_store(&c->closing, true);
		qpg_cluster_watch_stop(c->w);
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->worker, NULL);
	}
	if (rc) {
		bury(c);
		struct route *r = atomic_load(&c->cur);
		if (r) {
			for (unsigned i = 0; i < r->v->n; i++)
				member_free(r->m[i]);
			qpg_cluster_view_put(r->v);
			free(r->m);
			free(r);
		}
		free_cluster(c);
		return rc;
	}
	*out = c;
	return 0;
}

void qpg_kv_cluster_destroy(struct qpg_kv_cluster *c)
{
	if (!c)
		return;
	atomic_store(&c->closing, true);
	pthread_join(c->builder, NULL); /* at most one connect deadline */
	qpg_cluster_watch_stop(c->w);	/* no new route from here on */
	bury(c);
	/* Pools fail what they hold (-ECANCELED): completions go to their
	 * callers, or through the worker, which is still running. */
	pthread_mutex_lock(&c->build);
	struct route *r = atomic_load(&c->cur);
	for (unsigned i = 0; i < r->v->n; i++)
		if (r->m[i]) {
			qpg_kv_pool_destroy(r->m[i]->pool);
			r->m[i]->pool = NULL;
		}
	pthread_mutex_unlock(&c->build);
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->worker, NULL);
	for (unsigned i = 0; i < r->v->n; i++)
		free(r->m[i]);
	qpg_cluster_view_put(r->v);
	free(r->m);
	free(r);
	for (unsigned i = 0; i < c->nst; i++)
		free(c->st[i]);
	free(c->st);
	pthread_mutex_destroy(&c->build);
	pthread_mutex_destroy(&c->st_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cv);
	free_cluster(c);
}

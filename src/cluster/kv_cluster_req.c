/* SPDX-License-Identifier: BSD-2-Clause */
/* The cluster's request path: a caller's request routed by the view in use
 * to its owner's pool without a lock, the member's answer back to the
 * caller, and the worker thread, which completes what fails fast (a key
 * with no usable owner), routes again what a server answered WRONG_OWNER
 * once the view has caught up with the server's, and what waited for the
 * pool of a member that joined once that pool is up. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "kv_cluster_int.h"
#include "view.h"

#define REDIRECTS_MAX 2
#define CATCH_UP_MS   1000

/* OP at the end of the list HEAD..TAIL. Under c->lock. */
static void append(struct clreq **head, struct clreq **tail, struct clreq *op)
{
	op->next = NULL;
	QPG__QUEUE_APPEND(*head, *tail, op, next);
}

static void enqueue(struct qpg_kv_cluster *c, struct clreq **head, struct clreq **tail,
		    struct clreq *op)
{
	pthread_mutex_lock(&c->lock);
	append(head, tail, op);
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
}

static void fail_later(struct qpg_kv_cluster *c, struct clreq *op)
{
	enqueue(c, &c->fail_head, &c->fail_tail, op);
}

/* The caller's request is over: what the member set, then its callback. */
static void finish(struct clreq *cr, int status, uint32_t len)
{
	struct qpg_kv_request *op = cr->op;
	op->view_rev = cr->in.view_rev;
	op->owner_rev = cr->in.owner_rev;
	free(cr);
	op->done(op, status, len);
}

/* A GET's piece, from the member's pool to the caller's callback. */
static void member_chunk(struct qpg_kv_request *in, const uint8_t *data, uint32_t len,
			 uint32_t offset, uint32_t value_len)
{
	struct clreq *cr = (struct clreq *)in;
	cr->op->chunk(cr->op, data, len, offset, value_len);
}

/* On a pool thread: the member's answer, or its failure. */
static void member_done(struct qpg_kv_request *in, int status, uint32_t len)
{
	struct clreq *cr = (struct clreq *)in;
	struct member *m = cr->m;
	struct qpg_kv_cluster *c = m->c;
	if (status == QPG_KV_WRONG_OWNER) {
		qpg__kv_cluster_count(&m->st->wrong_owner);
		if (cr->redirects < REDIRECTS_MAX) {
			cr->redirects++;
			enqueue(c, &c->redo_head, &c->redo_tail, cr);
			return;
		}
		status = QPG_KV_UNAVAILABLE;
	}
	if (status < 0) {
		/* A reset, a QP error, a timeout, or its pool closing: suspect,
		 * and its keys are not sent elsewhere until the view changes. */
		if (!atomic_exchange(&m->suspect, true)) {
			m->retry_ns = qpg_cluster_now_ns() + QPG__KV_CLUSTER_SUSPECT_RETRY_NS;
			/* With the reason its pool heard, when a connection closed. */
			struct qpg_kv_pool_info pi;
			qpg_kv_pool_info(m->pool, &pi);
			fprintf(stderr, "qpgate: cluster: member %s suspect (%s%s%s)\n", m->e.id,
				strerror(-status),
				pi.last_error[0] ? "; its pool's last closed connection: " : "",
				pi.last_error);
		}
		status = QPG_KV_UNAVAILABLE;
	}
	if (status == QPG_KV_UNAVAILABLE)
		qpg__kv_cluster_count(&m->st->unavailable);
	else if (status == QPG_KV_OK || status == QPG_KV_NOT_FOUND)
		qpg__kv_cluster_count(&m->st->ops);
	else
		qpg__kv_cluster_count(&m->st->errors);
	if (status == QPG_KV_NOT_FOUND)
		qpg__kv_cluster_count(&m->st->misses);
	finish(cr, status, len);
}

/* The owner of OP's key in view V; an EXISTS's, of its first key (the
 * keys of one were grouped by owner: qpg_kv_target_exists). */
static int owner_of(const struct qpg_cluster_view *v, const struct qpg_kv_request *op)
{
	if (op->op != QPG_KV_EXISTS)
		return qpg_cluster_owner(v, op->key, op->key_len);
	size_t pos = 0;
	const uint8_t *key = NULL;
	uint8_t n = qpg_kv_exists_next(op->value, op->value_len, &pos, &key);
	return qpg_cluster_owner(v, key, n);
}

/* CR's owner M joined and its pool is being made: CR waits for it, unless
 * its deadline passed or too many wait. 0: it waits. */
static int wait_pool(struct qpg_kv_cluster *c, struct clreq *cr, struct member *m)
{
	uint64_t now = qpg_cluster_now_ns();
	bool first = !cr->wait_until_ns;
	if (first)
		cr->wait_until_ns = now + QPG__KV_CLUSTER_POOL_WAIT_NS;
	if (now >= cr->wait_until_ns)
		return -EAGAIN;
	int rc = -EAGAIN;
	pthread_mutex_lock(&c->lock);
	if (!c->stop && c->pool_waiting < QPG__KV_CLUSTER_POOL_WAITS) {
		append(&c->pool_head, &c->pool_tail, cr);
		c->pool_waiting++;
		rc = 0;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && first)
		qpg__kv_cluster_count(&m->st->pool_waits);
	return rc;
}

/* Route CR by the view in use. */
static void route(struct qpg_kv_cluster *c, struct clreq *cr)
{
	atomic_fetch_add(&c->readers, 1);
	struct route *r = atomic_load(&c->cur);
	int o = owner_of(r->v, &cr->in);
	struct member *m = o >= 0 ? r->m[o] : NULL;
	int rc = -EAGAIN;
	if (m && !m->pool && !atomic_load(&m->suspect)) {
		if (wait_pool(c, cr, m) == 0) {
			atomic_fetch_sub(&c->readers, 1);
			return;
		}
	} else if (m && m->pool && !atomic_load(&m->suspect)) {
		memset(cr->in.qpg__private, 0, sizeof(cr->in.qpg__private));
		cr->in.view_rev = (uint64_t)r->v->revision;
		cr->in.owner_rev = 0;
		cr->m = m;
		rc = qpg_kv_submit(m->pool, &cr->in); /* IN is the pool's from here on */
	}
	/* Member stats live as long as the cluster; M itself may not once the
	 * readers section ends. */
	atomic_ullong *failed = m ? &m->st->unavailable : &c->unroutable;
	atomic_fetch_sub(&c->readers, 1);
	if (rc == 0)
		return;
	qpg__kv_cluster_count(failed);
	fail_later(c, cr);
}

/* (Through qpg_kv_target_submit, which checked OP.) */
int qpg__kv_cluster_submit(struct qpg_kv_target *t, struct qpg_kv_request *op)
{
	struct qpg_kv_cluster *c = (struct qpg_kv_cluster *)t;
	struct clreq *cr = malloc(sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	cr->in = (struct qpg_kv_request){
	    .op = op->op,
	    .key = op->key,
	    .key_len = op->key_len,
	    .value = op->value,
	    .value_len = op->value_len,
	    .ttl_ms = op->ttl_ms,
	    .chunk = op->chunk ? member_chunk : NULL,
	    .done = member_done,
	    .into = op->into,
	    .into_cap = op->into_cap,
	};
	cr->op = op;
	cr->m = NULL;
	cr->next = NULL;
	cr->wait_until_ns = 0;
	cr->redirects = 0;
	route(c, cr);
	return 0;
}

int qpg_kv_cluster_submit(struct qpg_kv_cluster *c, struct qpg_kv_request *op)
{
	return qpg_kv_target_submit(&c->base, op);
}

static struct clreq *pop(struct clreq **head, struct clreq **tail)
{
	struct clreq *op = *head;
	if (op && !(*head = op->next))
		*tail = NULL;
	return op;
}

void qpg__kv_cluster_routes_changed(struct qpg_kv_cluster *c)
{
	pthread_mutex_lock(&c->lock);
	c->routes_gen++;
	if (c->pool_head)
		pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
}

/* The requests that wait for a pool, each routed again (to the pool now
 * up, back to waiting, or UNAVAILABLE past its deadline or on a stop).
 * Called and returns under c->lock. */
static void pool_pass(struct qpg_kv_cluster *c)
{
	struct clreq *op = c->pool_head;
	bool stopping = c->stop;
	c->pool_head = c->pool_tail = NULL;
	c->pool_waiting = 0;
	pthread_mutex_unlock(&c->lock);
	while (op) {
		struct clreq *next = op->next;
		if (stopping)
			finish(op, QPG_KV_UNAVAILABLE, 0);
		else
			route(c, op);
		op = next;
	}
	pthread_mutex_lock(&c->lock);
}

void *qpg__kv_cluster_worker_main(void *arg)
{
	struct qpg_kv_cluster *c = arg;
	uint64_t gen_seen = 0, pass_ns = 0;
	pthread_mutex_lock(&c->lock);
	while (!c->stop || c->fail_head || c->redo_head || c->pool_head) {
		struct clreq *op;
		/* Deadlines are checked every 100 ms; a new route at once. The
		 * clock is read only while requests wait for a pool. */
		uint64_t now = c->pool_head ? qpg_cluster_now_ns() : 0;
		if (c->pool_head &&
		    (c->stop || c->routes_gen != gen_seen || now >= pass_ns + 100000000ull)) {
			gen_seen = c->routes_gen;
			pass_ns = now;
			pool_pass(c);
			continue;
		}
		if ((op = pop(&c->fail_head, &c->fail_tail))) {
			pthread_mutex_unlock(&c->lock);
			finish(op, QPG_KV_UNAVAILABLE, 0);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if ((op = pop(&c->redo_head, &c->redo_tail))) {
			bool stopping = c->stop;
			pthread_mutex_unlock(&c->lock);
			qpg__kv_cluster_count(&c->redirects);
			/* Route again once our view is at least the server's. */
			if (stopping || qpg_cluster_watch_catch_up(c->w, (int64_t)op->in.owner_rev,
								   CATCH_UP_MS))
				finish(op, QPG_KV_UNAVAILABLE, 0);
			else
				route(c, op);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (c->stop)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += c->pool_head ? 100000000 : 250000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&c->cv, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

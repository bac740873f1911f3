/* SPDX-License-Identifier: BSD-2-Clause */
/* The pooled KV client. Each pool thread owns a qpg_client (its own event
 * loop) and a share of the connections; nothing of a thread's loop state is
 * touched by another thread. Submitters put operations in the owning
 * thread's inbox and wake its loop. An external pool has one such loop and
 * no thread: its caller's event loop runs it (qpg_kv_pool_run). */
#include "qpgate/kv_client.h"
#include "qpgate/kv_call.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_testing.h"
#include "common.h"
#include "kv_client_int.h"
#include "kv_testing.h"

void qpg_kv_pool_opts_default(struct qpg_kv_pool_opts *o)
{
	memset(o, 0, sizeof(*o));
	qpg_client_opts_default(&o->client);
	o->client.service = QPG_SERVICE_KV;
	o->client.credits = 16;
	o->client.max_msg = 8192;
	o->threads = 4;
	o->conns = 4;
	o->connect_window = 32;
	o->qps_per_session = 1;
	o->connect_attempts = 6;
	o->request_timeout_ms = 10000;
}

static void on_established(struct qpg_client_conn *c, void *user)
{
	struct kv_conn *k = user;
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	k->credits = ci.credits;
	k->max_msg = ci.max_msg;
	k->read_max = ci.read_max;
	/* Asked for one-sided, ask even where it cannot be (the server says
	 * so); left to the server, only ask where READs exist. */
	uint8_t mode = k->th->pool->o.get_mode;
	k->get_flags = mode == QPG_KV_GET_ONE_SIDED		    ? QPG_KV_F_ONE_SIDED
		       : mode == QPG_KV_GET_AUTO && ci.read_max > 0 ? QPG_KV_F_GRANT_LARGE
								    : 0;
	k->up = true;
	struct qpg_kv_pool *p = k->th->pool;
	if (k->connecting) {
		k->connecting = false;
		atomic_fetch_sub(&p->connecting, 1);
	}
	pthread_mutex_lock(&p->lock);
	p->up++;
	p->retries += ci.attempts > 1 ? ci.attempts - 1 : 0;
	p->credits = ci.credits;
	p->max_msg = ci.max_msg;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	qpg__kvc_pump(k);
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct kv_conn *k = user;
	struct qpg_kv_pool *p = k->th->pool;
	bool was_up = k->up;
	k->up = false;
	k->conn = NULL;
	if (k->connecting) {
		k->connecting = false;
		atomic_fetch_sub(&p->connecting, 1);
	}
	/* Connects that another try may cure were tried again by the client
	 * (qpg_client_opts.connect_attempts): this is the last word. */
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	k->dead = true;
	pthread_mutex_lock(&p->lock);
	if (err != QPG_ERR_NONE) /* ours are recorded by fail_conn */
		snprintf(p->last_error, sizeof(p->last_error), "%s: %s", qpg_err_class_name(err),
			 why);
	if (!was_up) {
		p->retries += ci.attempts > 1 ? ci.attempts - 1 : 0;
		p->failed++;
		if (!p->err[0])
			snprintf(p->err, sizeof(p->err), "%s: %s", qpg_err_class_name(err), why);
	} else if (p->up > 0) {
		p->up--;
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	/* Last: a caller woken by its failed request sees why, and the count. */
	qpg__kvc_fail_all(k, atomic_load(&p->stop) ? -ECANCELED
			     : k->timed_out	   ? -ETIMEDOUT
						   : -ECONNRESET);
}

/* Start what may start: connections not yet up, not given up, past their
 * backoff, while the pool-wide window has room. */
static void start_connects(struct pool_thread *th)
{
	struct qpg_kv_pool *p = th->pool;
	unsigned per = p->o.qps_per_session ? p->o.qps_per_session : 1;
	struct kv_conn *batch[QPG_KV_MAX_SESSION_QPS];
	void *users[QPG_KV_MAX_SESSION_QPS];
	struct qpg_client_conn *cc[QPG_KV_MAX_SESSION_QPS];
	unsigned i = 0;
	while (i < th->nconns) {
		unsigned n = 0;
		for (; i < th->nconns && n < per; i++) {
			struct kv_conn *k = &th->conns[i];
			if (k->up || k->dead || k->conn || k->connecting)
				continue;
			batch[n] = k;
			users[n++] = k;
		}
		if (n == 0)
			return;
		unsigned in = atomic_load(&p->connecting);
		do {
			if (in >= p->o.connect_window)
				return;
		} while (!atomic_compare_exchange_weak(&p->connecting, &in, in + n));
		for (unsigned j = 0; j < n; j++)
			batch[j]->connecting = true;
		int rc = qpg_client_connect_session(th->cl, n, users, cc);
		for (unsigned j = 0; j < n; j++) {
			struct kv_conn *k = batch[j];
			if ((int)j < rc) {
				k->conn = cc[j];
				continue;
			}
			/* never started: no closed callback will come */
			k->connecting = false;
			atomic_fetch_sub(&p->connecting, 1);
			k->dead = true;
			pthread_mutex_lock(&p->lock);
			p->failed++;
			snprintf(p->err, sizeof(p->err), "cannot start a connection: %s",
				 strerror(rc < 0 ? -rc : ENOMEM));
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/* The pool thread this is, if it is one (qpg_kv_submit keeps a request
 * submitted from its callbacks on it). */
static _Thread_local struct pool_thread *this_thread;

/* Loop thread: take the inbox and hand each operation to its connection. */
static void on_wake(void *arg)
{
	struct pool_thread *th = arg;
	pthread_mutex_lock(&th->lock);
	struct qpg_kv_request *list = th->in_head;
	th->in_head = th->in_tail = NULL;
	pthread_mutex_unlock(&th->lock);
	while (list) {
		struct qpg_kv_request *op = list;
		list = KR(op)->next;
		KR(op)->next = NULL;
		struct kv_conn *k = &th->conns[KR(op)->slot];
		if (k->dead) {
			qpg__kvc_complete(
			    th, op, atomic_load(&th->pool->stop) ? -ECANCELED : -ECONNRESET, 0);
			continue;
		}
		if (k->tail)
			KR(k->tail)->next = op;
		else
			k->head = op;
		k->tail = op;
	}
	/* Then, at the end of the loop's turn, the grants no GET took along
	 * (a worker that goes on from its done callback has submitted its
	 * next GET by now, and it carried one). */
	for (unsigned i = 0; i < th->nconns; i++) {
		qpg__kvc_pump(&th->conns[i]);
		qpg__kvc_flush_releases(&th->conns[i]);
	}
}

/* One turn of TH's loop: connects to start while the pool starts, then
 * what is ready (within TIMEOUT_MS). */
static void thread_turn(struct pool_thread *th, int timeout_ms)
{
	if (!atomic_load(&th->pool->started))
		start_connects(th);
	qpg_client_run(th->cl, timeout_ms);
	/* The request deadline: a server that stopped answering (hung, or
	 * behind a host that drops packets) would hold its requests for good.
	 * Its connection is closed, and they fail with -ETIMEDOUT. */
	uint64_t limit = (uint64_t)th->pool->o.request_timeout_ms * 1000000ull;
	if (!limit)
		return;
	/* Coarse, as the stamps are (kv_client_io.c): a deadline of seconds
	 * needs no precise read, which is a system call per reply wherever
	 * the clock source is not the vDSO's (a VM's HPET). */
	uint64_t now = qpg__coarse_ns();
	for (unsigned i = 0; i < th->nconns; i++) {
		struct kv_conn *k = &th->conns[i];
		if (k->conn && k->up && !k->timed_out && k->outstanding &&
		    qpg__age_ns(now, k->answer_ns) > limit) {
			k->timed_out = true;
			char why[96];
			snprintf(why, sizeof(why),
				 "no answer for %u ms (the server hung, or its host "
				 "drops packets)",
				 th->pool->o.request_timeout_ms);
			qpg__kvc_fail_conn(k, why, -ETIMEDOUT);
		}
	}
}

/* TH's connections closed (for a while), and what it still holds failed. */
static void thread_close(struct pool_thread *th)
{
	for (unsigned i = 0; i < th->nconns; i++)
		if (th->conns[i].conn)
			qpg_client_close(th->conns[i].conn);
	for (int k = 0; k < 500 && qpg_client_conn_count(th->cl); k++)
		qpg_client_run(th->cl, 10);
	on_wake(th); /* anything submitted meanwhile fails as cancelled */
}

static void *thread_main(void *arg)
{
	struct pool_thread *th = arg;
	struct qpg_kv_pool *p = th->pool;
	this_thread = th;
	while (!atomic_load(&p->stop))
		thread_turn(th, atomic_load(&p->started) ? 200 : 20);
	thread_close(th);
	return NULL;
}

int qpg_kv_pool_create(struct qpg_kv_pool **out, const struct qpg_kv_pool_opts *o, char *err,
		       size_t err_len)
{
	return qpg__kv_pool_create(out, o, false, err, err_len);
}

/* Until every connection is up or has failed, or UNTIL passes: an
 * external pool runs its loop here, a threaded one waits for its threads. */
static int wait_connections(struct qpg_kv_pool *p, const struct timespec *until)
{
	int rc = 0;
	pthread_mutex_lock(&p->lock);
	while (p->up + p->failed < p->nconns && rc == 0) {
		if (!p->external) {
			if (pthread_cond_timedwait(&p->cv, &p->lock, until) == ETIMEDOUT)
				rc = -ETIMEDOUT;
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > until->tv_sec ||
		    (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec))
			rc = -ETIMEDOUT;
		else
			thread_turn(&p->th[0], 20);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

static bool opts_ok(const struct qpg_kv_pool_opts *o, char *err, size_t err_len)
{
	if (o->threads == 0 || o->conns == 0 || o->client.credits > (1u << SLOT_BITS) ||
	    o->client.max_msg < QPG_KV_MIN_MSG || o->connect_window == 0 ||
	    o->qps_per_session > QPG_KV_MAX_SESSION_QPS ||
	    (o->qps_per_session > 1 && o->client.transport != QPG_KIND_RDMA) ||
	    o->connect_attempts == 0) {
		snprintf(err, err_len,
			 "threads, conns, connect window and attempts must be > 0, credits <= %u, "
			 "max_msg >= %u, QPs per session <= %u (more than 1 over rdma only)",
			 1u << SLOT_BITS, QPG_KV_MIN_MSG, QPG_KV_MAX_SESSION_QPS);
		return false;
	}
	return true;
}

/* Thread T's connections (their slots, release lists and digests) and its
 * client, sized for them. */
static int thread_setup(struct qpg_kv_pool *p, unsigned t, char *err, size_t err_len)
{
	static const struct qpg_client_cbs cbs = {.established = on_established,
						  .reply = qpg__kvc_on_reply,
						  .closed = on_closed,
						  .sent = qpg__kvc_on_sent,
						  .read_done = qpg__kvc_on_read_done};
	struct pool_thread *th = &p->th[t];
	th->pool = p;
	pthread_mutex_init(&th->lock, NULL);
	th->nconns = p->nconns / p->nthreads + (t < p->nconns % p->nthreads);
	th->conns = calloc(th->nconns, sizeof(*th->conns));
	if (!th->conns)
		return -ENOMEM;
	for (unsigned i = 0; i < th->nconns; i++) {
		struct kv_conn *k = &th->conns[i];
		k->th = th;
		k->index = i;
		k->nslots = p->o.client.credits;
		k->slots = calloc(k->nslots, sizeof(*k->slots));
		k->rel_cap = QPG_MAX(QPG__KVC_GRANTS_MAX, k->nslots);
		k->rel_ids = calloc(k->rel_cap, sizeof(*k->rel_ids));
		k->md = EVP_MD_CTX_new();
		if (!k->slots || !k->rel_ids || !k->md)
			return -ENOMEM;
	}
	/* Each thread's client sizes its pool for its connections. */
	struct qpg_client_opts co = p->o.client;
	co.connect_attempts = p->o.connect_attempts; /* the pool's word wins */
	co.pool_max = 4u * th->nconns * co.credits + 1024;
	if (p->o.get_mode != QPG_KV_GET_TWO_SIDED) {
		/* READs take send-queue entries and buffers beside the requests:
		 * up to the credits of each per connection, each READ up to
		 * QPG_CLIENT_READ_SLOTS buffers. */
		co.rd_atomic = 16;
		co.sq_depth = 2u * co.credits + 2;
		co.pool_max += QPG_CLIENT_READ_SLOTS * th->nconns * co.credits;
	}
	int rc = qpg_client_create(&th->cl, &co, &cbs, err, err_len);
	if (rc == 0)
		qpg_client_set_wake(th->cl, on_wake, th);
	return rc;
}

/* Wait for every connection: each window's worth of handshakes within its
 * deadline, every backoff at most 7.5 s, plus slack. */
static int pool_wait_up(struct qpg_kv_pool *p, char *err, size_t err_len)
{
	unsigned rounds = p->nconns / p->o.connect_window + 1 + p->o.connect_attempts;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)rounds * (p->o.client.handshake_timeout_ms / 1000 + 8) + 5;
	int rc = wait_connections(p, &until);
	pthread_mutex_lock(&p->lock);
	if (rc == 0 && p->failed) {
		rc = -ECONNREFUSED;
		snprintf(err, err_len, "%u of %u connections failed: %s", p->failed, p->nconns,
			 p->err);
	} else if (rc) {
		snprintf(err, err_len, "connections not up in time (%u of %u)", p->up, p->nconns);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int qpg__kv_pool_create(struct qpg_kv_pool **out, const struct qpg_kv_pool_opts *o, bool external,
			char *err, size_t err_len)
{
	*out = NULL;
	if (!opts_ok(o, err, err_len))
		return -EINVAL;
	struct qpg_kv_pool *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	p->base.ops = &qpg__kv_pool_target_ops;
	p->o = *o;
	snprintf(p->id, sizeof(p->id), "%.56s:%u", o->client.host ? o->client.host : "",
		 (unsigned)o->client.port);
	p->o.client.service = QPG_SERVICE_KV;
	p->external = external;
	p->nthreads = external ? 1 : o->threads < o->conns ? o->threads : o->conns;
	p->nconns = o->conns;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_rwlock_init(&p->regions_lock, NULL);
	p->th = calloc(p->nthreads, sizeof(*p->th));
	int rc = p->th ? qpg__kv_digests_fetch(&p->digests) : -ENOMEM;
	for (unsigned t = 0; rc == 0 && t < p->nthreads; t++)
		rc = thread_setup(p, t, err, err_len);
	for (unsigned t = 0; rc == 0 && !external && t < p->nthreads; t++) {
		if ((rc = -pthread_create(&p->th[t].tid, NULL, thread_main, &p->th[t])) == 0)
			p->th[t].started = true;
	}
	if (rc == 0)
		rc = pool_wait_up(p, err, err_len);
	else if (!err[0])
		snprintf(err, err_len, "cannot start the pool: %s", strerror(-rc));
	atomic_store(&p->started, true);
	if (rc) {
		qpg_kv_pool_destroy(p);
		return rc;
	}
	*out = p;
	return 0;
}

int qpg_kv_submit(struct qpg_kv_pool *p, struct qpg_kv_request *op)
{
	if (atomic_load(&p->stop))
		return -ECANCELED;
	if (!qpg__kv_request_ok(op))
		return -EINVAL;
	struct pool_thread *th = this_thread;
	if (th && th->pool == p) {
		/* From a callback on one of the pool's threads (a worker that
		 * goes on from its done callback): one of this thread's
		 * connections, so no other thread is woken for it. */
		KR(op)->slot = (int)(th->rr++ % th->nconns);
	} else {
		unsigned c = atomic_fetch_add(&p->rr, 1) % p->nconns;
		th = &p->th[c % p->nthreads];
		KR(op)->slot = (int)(c / p->nthreads);
	}
	KR(op)->next = NULL;
	KR(op)->zc = NULL;
	pthread_mutex_lock(&th->lock);
	if (th->in_tail)
		KR(th->in_tail)->next = op;
	else
		th->in_head = op;
	th->in_tail = op;
	pthread_mutex_unlock(&th->lock);
	qpg_client_wake(th->cl);
	return 0;
}

void qpg_kv_pool_destroy(struct qpg_kv_pool *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	for (unsigned t = 0; p->th && t < p->nthreads; t++) {
		struct pool_thread *th = &p->th[t];
		if (th->started) {
			qpg_client_wake(th->cl);
			pthread_join(th->tid, NULL);
		} else if (p->external && th->cl) {
			struct pool_thread *was = this_thread;
			this_thread = th;
			thread_close(th);
			this_thread = was;
		}
	}
	/* Every thread is stopped: the registrations go before their PDs. */
	qpg__kv_regions_free(p);
	for (unsigned t = 0; p->th && t < p->nthreads; t++) {
		struct pool_thread *th = &p->th[t];
		qpg_client_destroy(th->cl);
		for (unsigned i = 0; th->conns && i < th->nconns; i++) {
			free(th->conns[i].slots);
			free(th->conns[i].rel_ids);
			EVP_MD_CTX_free(th->conns[i].md);
		}
		free(th->conns);
		pthread_mutex_destroy(&th->lock);
	}
	free(p->th);
	qpg__kv_digests_free(&p->digests);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	pthread_rwlock_destroy(&p->regions_lock);
	free(p);
}

void qpg_kv_pool_info(const struct qpg_kv_pool *p, struct qpg_kv_pool_info *out)
{
	struct qpg_kv_pool *m = (struct qpg_kv_pool *)p;
	pthread_mutex_lock(&m->lock);
	out->threads = p->nthreads;
	out->conns = p->nconns;
	out->connected = p->up;
	out->retries = p->retries;
	out->credits = p->credits;
	out->max_msg = p->max_msg;
	snprintf(out->last_error, sizeof(out->last_error), "%s", p->last_error);
	pthread_mutex_unlock(&m->lock);
}

unsigned long long qpg__kv_pool_abuse_succeeded(const struct qpg_kv_pool *p)
{
	return atomic_load(&((struct qpg_kv_pool *)p)->abuse_succeeded);
}

int qpg__kv_pool_fd(const struct qpg_kv_pool *p)
{
	return p->external ? qpg_client_fd(p->th[0].cl) : -EINVAL;
}

int qpg__kv_pool_run(struct qpg_kv_pool *p)
{
	if (!p->external)
		return -EINVAL;
	/* Submits from its callbacks stay on this loop, unwoken. */
	struct pool_thread *was = this_thread;
	this_thread = &p->th[0];
	thread_turn(&p->th[0], 0);
	this_thread = was;
	return 0;
}


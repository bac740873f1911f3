/* Endpoints and the lifetime of their connections: creation, accounting,
 * the deferred close (as libuv's uv_close: a close only marks and unlinks;
 * the closed callback runs after the loop's batch, the memory is freed once
 * the data path has drained), and the deadlines the tick enforces. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "control.h"
#include "endpoint.h"

void qpg__phase_begin(struct qpg__conn *c)
{
	c->phase_start_ns = qpg__now_ns();
}

void qpg__phase_end(struct qpg__conn *c, enum qpg_phase p)
{
	uint64_t now = qpg__now_ns();
	c->phase_ns[p] = now - c->phase_start_ns;
	c->phase_start_ns = now;
}

struct qpg__conn *qpg__conn_new(struct qpg__endpoint *ep, int fd, bool is_server)
{
	struct qpg__conn *c = calloc(1, ep->t->conn_size);
	if (!c)
		return NULL;
	c->t = ep->t;
	c->ep = ep;
	c->is_server = is_server;
	c->io.fd = fd;
	c->started_ns = qpg__now_ns();
	c->deadline_ns = c->started_ns + ep->handshake_timeout_ns;
	c->phase_start_ns = c->started_ns;
	c->prev = ep->tail;
	if (ep->tail)
		ep->tail->next = c;
	else
		ep->head = c;
	ep->tail = c;
	ep->nconns++;
	atomic_fetch_add_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	return c;
}

static void conn_unlink(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	if (c->prev)
		c->prev->next = c->next;
	else
		ep->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		ep->tail = c->prev;
	c->prev = c->next = NULL;
	ep->nconns--;
}

void qpg__conn_close(struct qpg__conn *c, enum qpg_err_class err, const char *fmt, ...)
{
	if (c->state >= QPG_CONN_CLOSING)
		return;
	struct qpg__endpoint *ep = c->ep;
	/* A refused connection keeps the reason it was refused for. */
	if (c->state != QPG_CONN_REJECTING) {
		/* Format aside first: callers often pass c->why itself. */
		char why[sizeof(c->why)];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		memcpy(c->why, why, sizeof(why));
		c->err = err;
	}
	qpg__stat_add(&ep->stats.closed_by_reason[c->err], 1);
	if (!c->handshake_done) {
		atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
		qpg__stat_add(&ep->stats.handshakes_failed, 1);
	}
	if (c->counted_connected)
		atomic_fetch_sub_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	/* A polite close_notify when the session is healthy; never block on it. */
	if (c->ssl && c->state == QPG_CONN_ESTABLISHED)
		SSL_shutdown(c->ssl);
	if (c->io.fd >= 0) {
		qpg__loop_del(&ep->loop, &c->io);
		close(c->io.fd);
		c->io.fd = -1;
	}
	c->t->conn_shutdown(c);
	c->state = QPG_CONN_CLOSING;
	c->closing_since_ns = qpg__now_ns();
	conn_unlink(c);
	/* Scheduled, not done: the caller (often a callback of this very
	 * connection, several frames deep) may still touch C and its service
	 * state. The closed callback runs after the batch. */
	c->next_dead = NULL;
	if (ep->closing_tail)
		ep->closing_tail->next_dead = c;
	else
		ep->closing = c;
	ep->closing_tail = c;
	ep->nclosing++;
}

static void conn_free(struct qpg__conn *c)
{
	c->t->conn_release(c);
	SSL_free(c->ssl);
	qpg__auth_free(&c->auth);
	free(c->out);
	free(c);
}

/* Free dead connections once their data path has drained. One whose
 * completions never come back is abandoned after ep->abandon_ns: the
 * transport makes sure nothing in flight can still name it (for RDMA: the QP
 * is destroyed and the CQ drained) before it is freed. */
static void reap(struct qpg__endpoint *ep, bool force)
{
	struct qpg__conn **pp = &ep->dead;
	uint64_t now = qpg__now_ns();
	while (*pp) {
		struct qpg__conn *c = *pp;
		bool stuck = now - c->closing_since_ns > ep->abandon_ns;
		if (force || stuck || !c->t->conn_busy(c)) {
			if (c->t->conn_busy(c) && c->t->conn_abandon) {
				c->t->conn_abandon(c);
				qpg__stat_add(&ep->stats.slots_abandoned, c->in_flight);
			}
			*pp = c->next_dead;
			conn_free(c);
		} else {
			pp = &c->next_dead;
		}
	}
}

void qpg__endpoint_settle(struct qpg__endpoint *ep)
{
	/* A closed callback may close others: they join the end of the list. */
	while (ep->closing) {
		struct qpg__conn *c = ep->closing;
		ep->closing = c->next_dead;
		if (!ep->closing)
			ep->closing_tail = NULL;
		ep->nclosing--;
		if (ep->cbs.closed)
			ep->cbs.closed(c);
		c->next_dead = ep->dead;
		ep->dead = c;
	}
	if (ep->dead)
		reap(ep, false);
}

int qpg__rdma_dev_open_explained(struct qpg_rdma_dev *dev, const char *name, int port,
				 int gid_index, char *err, size_t err_len)
{
	int rc = qpg_rdma_dev_open(dev, name, (uint8_t)port, gid_index);
	if (rc)
		snprintf(err, err_len,
			 "no usable RDMA device%s%s (%s): run inside the lab "
			 "(scripts/rxe-vm -- ...) or use --transport tcp",
			 name ? " " : "", name ? name : "", strerror(-rc));
	return rc;
}

static void ep_tick(struct qpg__loop *l)
{
	qpg__endpoint_tick(l->owner);
}

static void ep_batch_end(struct qpg__loop *l)
{
	qpg__endpoint_settle(l->owner);
}

void qpg__endpoint_tick(struct qpg__endpoint *ep)
{
	uint64_t now = qpg__now_ns();
	atomic_store_explicit(&ep->stats.pool_in_use, (long long)ep->pool.in_use,
			      memory_order_relaxed);
	atomic_store_explicit(&ep->stats.pool_slots, (long long)ep->pool.nslots,
			      memory_order_relaxed);
	struct qpg__conn *c = ep->head, *next;
	for (; c; c = next) {
		next = c->next;
		if (c->deadline_ns && now > c->deadline_ns && c->state != QPG_CONN_ESTABLISHED) {
			qpg__control_deadline(c, now);
			continue;
		}
		if (c->state != QPG_CONN_ESTABLISHED)
			continue;
		/* A paused reader has a full send queue, so in_flight covers it. */
		if (ep->progress_ns_max && c->in_flight &&
		    now - c->progress_ns > ep->progress_ns_max)
			qpg__conn_close(c, QPG_ERR_TIMEOUT,
					"no progress: %u sends not completed for %llu ms (peer not "
					"reading?)",
					c->in_flight,
					(unsigned long long)(ep->progress_ns_max / 1000000));
		else if (ep->idle_ns_max && c->in_flight == 0 &&
			 now - c->active_ns > ep->idle_ns_max)
			qpg__conn_close(c, QPG_ERR_TIMEOUT, "idle for %llu ms",
					(unsigned long long)(ep->idle_ns_max / 1000000));
		else if (ep->cbs.tick)
			ep->cbs.tick(c, now);
	}
}

int qpg__endpoint_init(struct qpg__endpoint *ep, const struct qpg__ep_opts *o)
{
	int rc;
	memset(ep, 0, sizeof(*ep));
	ep->t = o->t;
	ep->dev = o->dev;
	ep->max_msg = o->max_msg;
	ep->srq_depth = o->srq_depth;
	ep->qp_max_send_wr = o->qp_max_send_wr;
	ep->qp_timeout = o->qp_timeout;
	ep->rd_atomic = o->rd_atomic;
	ep->credits_max = 16;
	ep->handshake_timeout_ns = 10000000000ull;
	ep->abandon_ns = 10000000000ull;
	rc = qpg__loop_init(&ep->loop, o->tick_ms ? o->tick_ms : 100);
	if (rc)
		return rc;
	ep->loop.owner = ep;
	ep->loop.on_tick = ep_tick;
	ep->loop.on_batch_end = ep_batch_end;
	rc = qpg_pool_init(&ep->pool, o->dev ? o->dev->pd : NULL, qpg_frame_len(o->max_msg, 1), 256,
			   o->pool_max, 0);
	if (rc)
		goto err_loop;
	rc = ep->t->ep_init(ep);
	if (rc)
		goto err_pool;
	return 0;

err_pool:
	qpg_pool_destroy(&ep->pool);
err_loop:
	qpg__loop_fini(&ep->loop);
	return rc;
}

void qpg__endpoint_fini(struct qpg__endpoint *ep)
{
	while (ep->head)
		qpg__conn_close(ep->head, QPG_ERR_LOCAL, "endpoint shutting down");
	qpg__endpoint_settle(ep);
	/* Let flushes arrive so QPs are destroyed idle, then force the rest. */
	for (int i = 0; i < 200 && (ep->dead || ep->closing); i++)
		qpg__loop_run_once(&ep->loop, 10);
	qpg__endpoint_settle(ep);
	reap(ep, true);
	ep->t->ep_fini(ep);
	qpg_pool_destroy(&ep->pool);
	qpg__loop_fini(&ep->loop);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Endpoints: one event loop with the transport's per-loop resources and a
 * message pool, set up and torn down here, and the deadlines its tick
 * enforces on every connection (handshake, progress, idle, the service's
 * own). Connections' lifetime is lifetime.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "control.h"
#include "core.h"
#include "tls.h"

static void ep_tick(struct qpg__loop *l)
{
	qpg__endpoint_tick(l->owner);
}

static void ep_batch_end(struct qpg__loop *l)
{
	qpg__endpoint_settle(l->owner);
}

bool qpg__session_idle(const struct qpg__conn *c, uint64_t now, uint64_t idle_ns)
{
	if (c->member_index)
		return false;
	for (const struct qpg__conn *m = c; m; m = m == c ? c->members : m->member_next)
		if (m->in_flight || qpg__age_ns(now, m->active_ns) <= idle_ns)
			return false;
	return true;
}

void qpg__endpoint_tick(struct qpg__endpoint *ep)
{
	uint64_t now = qpg__now_ns();
	atomic_store_explicit(&ep->stats.pool_in_use, (long long)ep->pool.in_use,
			      memory_order_relaxed);
	atomic_store_explicit(&ep->stats.pool_slots, (long long)ep->pool.nslots,
			      memory_order_relaxed);
	if (ep->t->ep_tick)
		ep->t->ep_tick(ep, now);
	struct qpg__conn *c, *next;
	for (c = ep->handshaking.head; c; c = next) {
		next = c->next;
		if (!c->deadline_ns || now <= c->deadline_ns)
			continue;
		/* Its members (next to it on the list) close with it. */
		while (next && next->leader == c)
			next = next->next;
		qpg__control_deadline(c, now);
	}
	if (!ep->progress_ns_max && !ep->idle_ns_max && !ep->bringup_ns_max && !ep->cbs.tick)
		return;
	/* Those that asked for this tick (qpg_conn_tick_soon): each is told
	 * once, and asks again if it still waits. */
	for (c = ep->established.head; c && ep->nsoon && ep->cbs.tick; c = next) {
		next = c->next;
		if (!c->tick_soon)
			continue;
		c->tick_soon = false;
		ep->nsoon--;
		if (c->state == QPG_CONN_ESTABLISHED)
			ep->cbs.tick(c, now);
	}
	/* A tenth of the established connections, so each once a second (a
	 * deadline of S seconds holds within S + 1). Closing one moves SCAN on. */
	size_t quota = ep->established.n / QPG__SCAN_TICKS + 1;
	for (size_t k = 0; k < quota && ep->established.n; k++) {
		if (!ep->scan)
			ep->scan = ep->established.head;
		c = ep->scan;
		ep->scan = c->next;
		if (c->state != QPG_CONN_ESTABLISHED)
			continue;
		if (ep->bringup_ns_max && !c->got_frame &&
		    qpg__age_ns(now, c->up_ns) > ep->bringup_ns_max) {
			/* The session goes with it: count its QPs. */
			const struct qpg__conn *l = c->leader ? c->leader : c;
			qpg__stat_add(&ep->stats.bringup_timeouts, 1u + l->nmembers);
			qpg__conn_close(c, QPG_ERR_TIMEOUT,
					"no authenticated frame within %llu ms of ACCEPT (bring-up "
					"deadline)",
					(unsigned long long)(ep->bringup_ns_max / 1000000));
		} else if (ep->progress_ns_max && c->in_flight && /* a paused reader's too */
			   qpg__age_ns(now, c->progress_ns) > ep->progress_ns_max)
			qpg__conn_close(c, QPG_ERR_TIMEOUT,
					"no progress: %u sends not completed for %llu ms (peer not "
					"reading?)",
					c->in_flight,
					(unsigned long long)(ep->progress_ns_max / 1000000));
		else if (ep->idle_ns_max && qpg__session_idle(c, now, ep->idle_ns_max))
			qpg__conn_close(c, QPG_ERR_TIMEOUT, "idle for %llu ms",
					(unsigned long long)(ep->idle_ns_max / 1000000));
		else if (ep->cbs.tick)
			ep->cbs.tick(c, now);
	}
}

void qpg__endpoint_stopping(struct qpg__endpoint *ep)
{
	if (ep->t->ep_tick)
		ep->t->ep_tick(ep, UINT64_MAX);
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
	ep->spare_qps = o->spare_qps;
	ep->spare_idle_ms = o->spare_idle_ms;
	ep->qp_timeout = o->qp_timeout;
	ep->tclass = o->tclass;
	ep->sl = o->sl;
	ep->rd_atomic = o->rd_atomic;
	ep->credits_max = 16;
	ep->handshake_timeout_ns = 10000000000ull;
	ep->abandon_ns = 10000000000ull;
	rc = qpg__loop_init(&ep->loop, o->tick_ms ? o->tick_ms : 100);
	if (rc)
		return rc;
	ep->loop.owner = ep;
	ep->loop.on_tick = ep_tick;
	uint32_t spin_us =
	    o->busy_poll_us == QPG_BUSY_POLL_US_DEFAULT ? o->t->busy_poll_us : o->busy_poll_us;
	ep->loop.spin_max_ns = ep->loop.spin_ns = (uint64_t)spin_us * 1000;
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
	while (ep->established.head)
		qpg__conn_close(ep->established.head, QPG_ERR_LOCAL, "endpoint shutting down");
	while (ep->handshaking.head)
		qpg__conn_close(ep->handshaking.head, QPG_ERR_LOCAL, "endpoint shutting down");
	qpg__endpoint_settle(ep);
	/* Let flushes arrive so QPs are destroyed idle, then force the rest. */
	for (int i = 0; i < 200 && (ep->dead || ep->closing); i++)
		qpg__loop_run_once(&ep->loop, 10);
	qpg__endpoint_settle(ep);
	qpg__endpoint_reap(ep, true);
	ep->t->ep_fini(ep);
	qpg_pool_destroy(&ep->pool);
	qpg__loop_fini(&ep->loop);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* RDMA transport: RC QPs on one shared CQ (with a completion channel in the
 * endpoint's epoll loop) and one SRQ per endpoint, fed from the endpoint's
 * registered pool. The pool is registered for local access only: receive
 * buffers have no usable rkey. One-sided access (memory windows, READs) is
 * in rdma_windows.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common.h"
#include "core.h"
#include "frame.h"
#include "map.h"
#include "rdma.h"

/* How many receives to keep posted: the configured depth, or one per credit
 * granted plus slack when the credits add up to more. Every peer may have
 * all its credits' worth of messages in flight at once; a receive short of
 * that means RNR NAKs. Thousands of QPs retrying RNR livelock rxe (seen at
 * 10,000 clients under TCG: a soft lockup in rxe_requester), and rxe counts
 * RNR waits against the sender's retry budget. */
static uint32_t srq_target(const struct rdma_ep *r)
{
	const struct qpg__endpoint *ep = r->ep;
	size_t want = QPG_MAX((size_t)ep->srq_depth, QPG_MAX(r->credits, ep->nconns) + 64);
	return (uint32_t)QPG_MIN(want, (size_t)r->srq_cap);
}

static void srq_refill(struct rdma_ep *r)
{
	struct qpg__endpoint *ep = r->ep;
	uint32_t target = srq_target(r);
	while (r->srq_posted < target) {
		struct ibv_recv_wr wrs[32], *bad;
		struct ibv_sge sges[32];
		int n = 0;
		while (n < 32 && r->srq_posted + (uint32_t)n < target) {
			struct qpg_buf *b = qpg_pool_get(&ep->pool);
			if (!b)
				break;
			b->owner = NULL; /* NULL owner marks a receive */
			sges[n] = (struct ibv_sge){(uintptr_t)b->addr, b->len, b->lkey};
			wrs[n] = (struct ibv_recv_wr){
			    .wr_id = (uintptr_t)b, .sg_list = &sges[n], .num_sge = 1, .next = NULL};
			if (n)
				wrs[n - 1].next = &wrs[n];
			n++;
		}
		if (n == 0)
			return;
		if (ibv_post_srq_recv(r->srq, wrs, &bad)) {
			for (struct ibv_recv_wr *w = bad; w; w = w->next)
				qpg_pool_put(&ep->pool, (struct qpg_buf *)(uintptr_t)w->wr_id);
			for (struct ibv_recv_wr *w = wrs; w != bad; w = w->next)
				r->srq_posted++;
			return;
		}
		r->srq_posted += (uint32_t)n;
	}
}

static void handle_wc(struct rdma_ep *r, const struct ibv_wc *wc)
{
	struct qpg__endpoint *ep = r->ep;
	enum wr_kind kind = (enum wr_kind)(wc->wr_id & WR_KIND_MASK);
	void *p = (void *)(uintptr_t)(wc->wr_id & ~(uint64_t)WR_KIND_MASK);
	if (kind == WR_WINDOW) {
		qpg__rdma_window_done(p, wc);
		return;
	}
	struct qpg_buf *b = p;
	struct qpg__conn *c = b->owner;
	bool ok = wc->status == IBV_WC_SUCCESS;
	if (kind == WR_READ) {
		qpg__conn_on_read(c, b, ok, ibv_wc_status_str(wc->status));
		qpg__rdma_net_done(to_rdma(c));
		return;
	}
	if (kind == WR_WRITE) {
		/* A WRITE that succeeded is reported like a READ, with its
		 * cookie: the test hook that posts it must see it landed. */
		if (ok) {
			qpg__conn_on_read(c, b, true, NULL);
		} else {
			qpg_pool_put(&ep->pool, b);
			if (c->state == QPG_CONN_ESTABLISHED)
				qpg__conn_close(c, QPG_ERR_QP, "one-sided write failed: %s",
						ibv_wc_status_str(wc->status));
			qpg__conn_on_sent(c, ok, ibv_wc_status_str(wc->status));
		}
		qpg__rdma_net_done(to_rdma(c));
		return;
	}
	if (!c) { /* a receive from the SRQ */
		r->srq_posted--;
		c = qpg__map_get(&r->qpn_to_conn, wc->qp_num);
		if (wc->status != IBV_WC_SUCCESS || !c) {
			/* An SRQ flushes only the receive a QP had taken: one
			 * that a message had begun to fill when its QP left
			 * RTS. */
			if (wc->status == IBV_WC_WR_FLUSH_ERR)
				qpg__stat_add(&ep->stats.recv_flushed, 1);
			qpg_pool_put(&ep->pool, b);
			if (c && wc->status != IBV_WC_WR_FLUSH_ERR)
				qpg__conn_close(c, QPG_ERR_QP, "receive failed: %s",
						ibv_wc_status_str(wc->status));
			return;
		}
		qpg__stat_add(&ep->stats.rdma_msgs_in, 1);
		qpg__conn_on_message(c, b, wc->byte_len);
		return;
	}
	uint32_t frames = qpg__rdma_sent_frames(b);
	qpg_pool_put(&ep->pool, b);
	for (uint32_t i = 0; i < frames; i++)
		qpg__conn_on_sent(c, ok, ibv_wc_status_str(wc->status));
	qpg__rdma_net_done(to_rdma(c));
}

/* Completions handled per callback. A busy CQ never empties (every reply
 * handled sends a request whose answer lands while we poll): one pass in
 * one benchmark run drained 36,120, and all that time the loop admitted no one
 * and ran no deadlines. Past this many it yields and comes back at once. */
#define DRAIN_BUDGET 2048

/* Returns the completions handled (DRAIN_BUDGET or more: the CQ may
 * still hold some). */
static int drain_cq(struct rdma_ep *r)
{
	struct ibv_wc wcs[64];
	int n = 0, total = 0;
	while (total < DRAIN_BUDGET &&
	       (n = ibv_poll_cq(r->cq, (int)QPG_ARRAY_SIZE(wcs), wcs)) > 0) {
		for (int i = 0; i < n; i++)
			handle_wc(r, &wcs[i]);
		total += n;
		/* What the batch answered goes first (one SEND a connection):
		 * a reply waits for no refill, and an echo for no later poll. */
		qpg__rdma_post_all(r);
		/* Refill per batch, not once the CQ is empty: each reply
		 * handled here can send a request whose answer lands in this
		 * same loop, so a busy loop never finds the CQ empty, and
		 * an SRQ refilled only at the end runs dry (RNR NAKs). */
		srq_refill(r);
	}
	/* Empty now, after every spare went to RESET: none of them has a
	 * completion left to be misread as its next owner's. */
	if (n == 0 && r->spares.ready < r->spares.n)
		qpg__rdma_spare_cq_empty(&r->spares);
	long long prev = atomic_load_explicit(&r->ep->stats.cq_depth_max, memory_order_relaxed);
	if (total > prev)
		atomic_store_explicit(&r->ep->stats.cq_depth_max, total, memory_order_relaxed);
	srq_refill(r); /* an earlier refill may have found the pool empty */
	return total;
}

/* The loop's poll: the CQ is user memory, so this costs no syscall. Work
 * found makes the loop spin again before it next sleeps. */
static int rdma_poll(struct qpg__loop *l)
{
	struct rdma_ep *r = ((struct qpg__endpoint *)l->owner)->tep;
	int got = drain_cq(r);
	if (got)
		l->spin_ns = l->spin_max_ns;
	return got;
}

/* The loop is about to sleep: ask for an event on the next completion,
 * then poll once more for any that landed before the request took. */
static int rdma_arm(struct qpg__loop *l)
{
	struct rdma_ep *r = ((struct qpg__endpoint *)l->owner)->tep;
	if (!r->armed && ibv_req_notify_cq(r->cq, 0) == 0)
		r->armed = true;
	return rdma_poll(l);
}

/* The CQ's event: the loop slept and a completion came. It is drained by
 * the poll at the start of the next turn; this consumes the event, which
 * disarms the CQ until the loop next sleeps. */
static void channel_cb(struct qpg__io *io, uint32_t events)
{
	struct rdma_ep *r = qpg__container_of(io, struct rdma_ep, channel_io);
	struct ibv_cq *cq;
	void *ctx;
	while (ibv_get_cq_event(r->channel, &cq, &ctx) == 0) {
		r->unacked_events++;
		r->armed = false;
	}
	/* Acking takes a lock in libibverbs: batch it. */
	if (r->unacked_events >= 256) {
		ibv_ack_cq_events(r->cq, r->unacked_events);
		r->unacked_events = 0;
	}
	rdma_poll(&r->ep->loop);
}

static void rdma_ep_fini(struct qpg__endpoint *ep);

static int rdma_ep_init(struct qpg__endpoint *ep)
{
	if (!ep->dev || !ep->dev->ctx)
		return -ENODEV;
	struct rdma_ep *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ep = ep;
	r->channel_io.fd = -1;
	qpg__rdma_send_init(r);
	ep->tep = r;
	int rc = qpg__rdma_spare_init(&r->spares, ep->spare_qps, ep->spare_idle_ms);
	if (rc) {
		errno = -rc;
		goto err;
	}
	/* Everything in flight holds a pool slot, so a CQ with one entry per
	 * slot can never overflow. */
	if (ep->pool.max_slots == 0 || ep->pool.max_slots >= (size_t)ep->dev->max_cqe)
		ep->pool.max_slots = (size_t)ep->dev->max_cqe - 1;
	/* Half the pool may wait in the SRQ; the other half carries sends. */
	r->srq_cap = (uint32_t)QPG_MIN((size_t)ep->dev->max_srq_wr, ep->pool.max_slots / 2);
	if (ep->srq_depth > r->srq_cap)
		ep->srq_depth = r->srq_cap;
	r->cq_size = (int)ep->pool.max_slots + 1;
	errno = 0;
	r->channel = ibv_create_comp_channel(ep->dev->ctx);
	if (!r->channel)
		goto err;
	int fl = fcntl(r->channel->fd, F_GETFL);
	if (fcntl(r->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		goto err;
	r->cq = ibv_create_cq(ep->dev->ctx, r->cq_size, r, r->channel, 0);
	if (!r->cq)
		goto err;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = r->srq_cap, .max_sge = 1}};
	r->srq = ibv_create_srq(ep->dev->pd, &sa);
	if (!r->srq)
		goto err;
	if ((rc = ibv_req_notify_cq(r->cq, 0)) != 0) {
		errno = rc;
		goto err;
	}
	r->armed = true;
	ep->loop.poll = rdma_poll;
	ep->loop.arm = rdma_arm;
	if ((rc = qpg__loop_add(&ep->loop, &r->channel_io, r->channel->fd, EPOLLIN, channel_cb)) <
	    0) {
		errno = -rc;
		goto err;
	}
	srq_refill(r);
	if (r->srq_posted == 0) {
		errno = ENOMEM;
		goto err;
	}
	return 0;
err:
	rc = errno ? -errno : -ENOMEM;
	rdma_ep_fini(ep);
	return rc;
}

static void rdma_ep_fini(struct qpg__endpoint *ep)
{
	struct rdma_ep *r = ep->tep;
	if (!r)
		return;
	if (r->channel_io.fd >= 0)
		qpg__loop_del(&ep->loop, &r->channel_io);
	qpg__rdma_send_fini(r);
	ep->loop.poll = NULL;
	ep->loop.arm = NULL;
	/* Spares use the SRQ and the CQ: they go first. */
	qpg__rdma_spare_fini(&r->spares, &ep->stats);
	/* Receives still posted are freed with the pool; destroying the SRQ
	 * first means no completion can point at them afterwards. */
	if (r->srq)
		ibv_destroy_srq(r->srq);
	if (r->cq) {
		if (r->unacked_events)
			ibv_ack_cq_events(r->cq, r->unacked_events);
		ibv_destroy_cq(r->cq);
	}
	if (r->channel)
		ibv_destroy_comp_channel(r->channel);
	qpg__map_free(&r->qpn_to_conn);
	free(r);
	ep->tep = NULL;
}

/* A new QP for O. A device without inline data gets one without it (O
 * says what it got). At the device's or the process's limit, the spares
 * are given back first. */
static int create_qp(struct qpg__endpoint *ep, struct rdma_ep *r, struct qpg_qp_opts *o,
		     struct ibv_qp **qp)
{
	int err;
	for (int tries = 0;; tries++) {
		if ((err = qpg_qp_create(ep->dev, o, qp)) == -EINVAL) {
			o->max_inline = 0;
			o->max_send_sge = 1;
			err = qpg_qp_create(ep->dev, o, qp);
		}
		if (tries || r->spares.n == 0 || (err != -ENOMEM && err != -QPG_EMAPCOUNT))
			return err;
		qpg__rdma_spare_drop_all(&r->spares, &ep->stats);
		atomic_store_explicit(&ep->stats.qps_spare, 0, memory_order_relaxed);
	}
}

static int rdma_conn_prepare(struct qpg__conn *c, struct qpg_wire_params *local)
{
	struct rdma_conn *rc = to_rdma(c);
	struct qpg__endpoint *ep = c->ep;
	struct rdma_ep *r = ep->tep;
	uint32_t psn;
	int err;

	qpg__phase_begin(c);
	/* Fresh from the CSPRNG for every connection and direction. */
	if ((err = qpg_psn_random(&psn)) != 0)
		return err;
	qpg__phase_end(c, QPG_PHASE_PSN_GEN);

	struct qpg_qp_opts o;
	qpg_qp_opts_default(&o);
	o.send_cq = o.recv_cq = r->cq;
	o.srq = r->srq;
	o.max_send_wr = qpg__conn_send_depth(c);
	o.max_inline = QPG__RDMA_INLINE;
	/* A client's READs scatter into up to READ_SGE slots; anyone's SEND
	 * gathers up to SEND_SGE entries (rdma_send.c). max_sge_rd is at
	 * most the device's max_sge. */
	o.max_send_sge = (uint32_t)QPG_MAX(
	    1, QPG_MIN(QPG_MAX(c->is_server ? 1 : QPG__RDMA_READ_SGE, QPG__RDMA_SEND_SGE),
		       ep->dev->max_sge_rd));
	rc->caps = (struct rdma_qp_caps){o.max_send_wr, o.max_inline, o.max_send_sge};
	struct rdma_spare sp;
	if (qpg__rdma_spare_take(&r->spares, &rc->caps, &sp)) {
		rc->qp = sp.qp;
		o.max_inline = sp.max_inline;
		o.max_send_sge = sp.max_send_sge;
		atomic_fetch_add_explicit(&ep->stats.qps_reused, 1, memory_order_relaxed);
		atomic_store_explicit(&ep->stats.qps_spare, r->spares.n, memory_order_relaxed);
	} else {
		if ((err = create_qp(ep, r, &o, &rc->qp)) != 0)
			return err;
		atomic_fetch_add_explicit(&ep->stats.qps_created, 1, memory_order_relaxed);
	}
	rc->max_inline = o.max_inline;
	rc->max_sge = o.max_send_sge;
	/* A READ's chain stays within READ_SGE slots (qpg_conn_info's
	 * read_max, the client's iovec of QPG_CLIENT_READ_SLOTS), whatever a
	 * SEND may gather. */
	c->read_slots = (uint8_t)QPG_MAX(1, QPG_MIN(o.max_send_sge, QPG__RDMA_READ_SGE));
	qpg__phase_end(c, QPG_PHASE_QP_CREATE);
	/* Remote access on the QP only lets peers use windows granted to it;
	 * no region is registered with remote access of its own. */
	if ((err = qpg_qp_to_init(ep->dev, rc->qp,
				  ep->grants_reads ? IBV_ACCESS_REMOTE_READ : 0)) != 0)
		return err;
	qpg__phase_end(c, QPG_PHASE_QP_INIT);
	if ((err = qpg__map_put(&r->qpn_to_conn, rc->qp->qp_num, c)) != 0)
		return err;

	struct qpg_qp_addr a;
	qpg_qp_local_addr(ep->dev, rc->qp, psn, &a);
	local->transport = QPG_TRANSPORT_RDMA;
	local->qpn = a.qpn;
	local->psn = a.psn;
	local->lid = a.lid;
	local->mtu = a.mtu;
	local->port = ep->dev->port;
	memcpy(local->gid, c->src_gid.own ? c->src_gid.gid : a.gid, 16);
	return 0;
}

/* Reflection: a HELLO names the GID the server's QP will send to. Unless
 * the server allows otherwise (--allow-any-gid), that GID must be the
 * address the TLS control connection came from (IPv4-mapped for IPv4), or,
 * for a peer on this host (loopback), one of this device's own GIDs. So a
 * client cannot point the server's QP at a third host. */
static int rdma_check_peer(struct qpg__conn *c, const struct qpg_wire_params *peer, char *why,
			   size_t why_len)
{
	uint8_t want[16] = {0};
	bool loopback = false;
	const struct sockaddr_storage *ss = &c->peer_addr;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
		want[10] = want[11] = 0xff;
		memcpy(want + 12, &s4->sin_addr, 4);
		loopback = want[12] == 127;
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
		memcpy(want, &s6->sin6_addr, 16);
		loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
			   (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && want[12] == 127);
	}
	if (loopback ? qpg_rdma_gid_is_local(c->ep->dev, peer->gid)
		     : memcmp(want, peer->gid, 16) == 0)
		return 0;
	char g[INET6_ADDRSTRLEN] = "?", a[INET6_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET6, peer->gid, g, sizeof(g));
	inet_ntop(AF_INET6, want, a, sizeof(a));
	if (loopback)
		snprintf(why, why_len, "GID %s is not this host's, and the client is local", g);
	else
		snprintf(why, why_len, "GID %s is not the control connection's address %s", g, a);
	return -EPERM;
}

static int rdma_conn_establish(struct qpg__conn *c, const struct qpg_wire_params *peer)
{
	struct rdma_conn *rc = to_rdma(c);
	struct qpg__endpoint *ep = c->ep;
	struct qpg_qp_addr pa = {
	    .qpn = peer->qpn, .psn = peer->psn, .lid = peer->lid, .mtu = peer->mtu};
	memcpy(pa.gid, peer->gid, 16);
	struct qpg_qp_opts o;
	qpg_qp_opts_default(&o);
	if (ep->qp_timeout)
		o.timeout = ep->qp_timeout;
	if (ep->rd_atomic)
		o.rd_atomic = ep->rd_atomic;
	o.traffic_class = ep->tclass;
	o.sl = ep->sl;
	o.own_sgid = c->src_gid.own;
	o.sgid_index = c->src_gid.index;
	int err;
	qpg__phase_begin(c);
	if ((err = qpg_qp_to_rtr(ep->dev, rc->qp, &pa, &o)) != 0)
		return err;
	qpg__phase_end(c, QPG_PHASE_QP_RTR);
	if ((err = qpg_qp_to_rts(ep->dev, rc->qp, c->local.psn, &o)) != 0)
		return err;
	qpg__phase_end(c, QPG_PHASE_QP_RTS);
	/* Back the new credits with receives before the peer can use them. */
	struct rdma_ep *r = ep->tep;
	rc->credits = c->credits;
	r->credits += c->credits;
	srq_refill(r);
	return 0;
}

static void rdma_on_stream(struct qpg__conn *c)
{
	/* After the bootstrap the control channel only carries the close: its
	 * TLS session is freed once the bootstrap is flushed, so it is read
	 * as a plain socket from then on (docs/protocol.md). */
	uint8_t buf[64];
	size_t got;
	if (!c->ssl) {
		ssize_t n = recv(c->io.fd, buf, sizeof(buf), 0);
		if (n > 0)
			qpg__conn_close(c, QPG_ERR_PROTOCOL,
					"unexpected data on the control channel");
		else if (n == 0)
			qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "peer closed the connection");
		else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "control channel lost: %s",
					strerror(errno));
		return;
	}
	enum qpg__tls_io r = qpg__tls_read(c->ssl, buf, sizeof(buf), &got, c->why, sizeof(c->why));
	if (r == QPG_TLS_DONE)
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unexpected data on the control channel");
	else if (r == QPG_TLS_CLOSED)
		qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "peer closed the connection");
	else if (r == QPG_TLS_FAILED)
		qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "control channel lost: %s", c->why);
}

static void rdma_conn_shutdown(struct qpg__conn *c)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_ep *r = c->ep->tep;
	if (!rc->qp)
		return;
	r->credits -= rc->credits;
	rc->credits = 0;
	qpg__rdma_send_drop(rc);
	qpg__rdma_ops_drop(rc);
	qpg__map_del(&r->qpn_to_conn, rc->qp->qp_num);
	/* ERR flushes posted sends back through the CQ; the conn is freed
	 * only after they are all back (conn_busy). */
	qpg_qp_to_error(rc->qp);
	qpg__rdma_windows_unbind(rc);
}

static bool rdma_conn_busy(struct qpg__conn *c)
{
	return c->in_flight > 0;
}

/* The flushes of C's work requests never came back. Destroying the QP
 * stops the device from producing more; completions it already produced
 * are taken now, while C (named by their wr_ids) still exists. Buffers of
 * work requests that never complete are lost to the pool (counted). */
static void rdma_conn_abandon(struct qpg__conn *c)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_ep *r = c->ep->tep;
	if (rc->qp) {
		qpg_qp_destroy(&rc->qp);
		atomic_fetch_add_explicit(&c->ep->stats.qps_destroyed, 1, memory_order_relaxed);
	}
	while (drain_cq(r))
		;
}

/* Every work request of C is back (or C never got as far as posting one):
 * its QP becomes a spare if there is room, else it is destroyed. */
static void rdma_conn_release(struct qpg__conn *c)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_ep *r = c->ep->tep;
	if (rc->qp) { /* (conn_shutdown took its QP number out of the map) */
		/* Take every completion already made first: a provider may
		 * drop the QP's entries from the CQ at RESET or destroy
		 * (libmlx5 cleans them, and gives their SRQ slots back
		 * unreported), and a receive dropped so would hold its pool
		 * slot and count as posted for good. rxe keeps them, and
		 * flushes a receive the QP had begun when it enters ERR.
		 * Bounded: a busy CQ never empties, and what this QP left is
		 * ahead of what comes later. */
		for (int pass = 0; pass < 4 && drain_cq(r) >= DRAIN_BUDGET; pass++)
			;
		struct rdma_spare sp = {.qp = rc->qp,
					.caps = rc->caps,
					.max_inline = rc->max_inline,
					.max_send_sge = rc->max_sge,
					.since_ns = qpg__now_ns()};
		if (qpg__rdma_spare_put(&r->spares, &sp)) {
			rc->qp = NULL;
			atomic_store_explicit(&c->ep->stats.qps_spare, r->spares.n,
					      memory_order_relaxed);
		} else {
			qpg_qp_destroy(&rc->qp);
			atomic_fetch_add_explicit(&c->ep->stats.qps_destroyed, 1,
						  memory_order_relaxed);
		}
	}
	qpg__rdma_windows_free(rc); /* after the QP: no window is usable without it */
}

static void rdma_ep_tick(struct qpg__endpoint *ep, uint64_t now_ns)
{
	struct rdma_ep *r = ep->tep;
	atomic_store_explicit(&ep->stats.srq_posted, (long long)r->srq_posted,
			      memory_order_relaxed);
	if (!r->spares.n)
		return;
	qpg__rdma_spare_trim(&r->spares, now_ns, &ep->stats);
	atomic_store_explicit(&ep->stats.qps_spare, r->spares.n, memory_order_relaxed);
}

const struct qpg__transport_ops qpg__transport_rdma = {
    .name = "rdma",
    .wire_id = QPG_TRANSPORT_RDMA,
    .conn_size = sizeof(struct rdma_conn),
    .busy_poll_us = QPG_BUSY_POLL_US_RDMA,
    .setup = qpg__rdma_setup,
    .teardown = qpg__rdma_teardown,
    .describe = qpg__rdma_describe,
    .ep_init = rdma_ep_init,
    .ep_fini = rdma_ep_fini,
    .ep_tick = rdma_ep_tick,
    .check_peer = rdma_check_peer,
    .conn_prepare = rdma_conn_prepare,
    .conn_establish = rdma_conn_establish,
    .send = qpg__rdma_send,
    .send_ref = qpg__rdma_send_ref,
    .can_ref = qpg__rdma_can_ref,
    .on_stream = rdma_on_stream,
    .conn_shutdown = rdma_conn_shutdown,
    .conn_busy = rdma_conn_busy,
    .conn_abandon = rdma_conn_abandon,
    .conn_release = rdma_conn_release,
    .windows_probe = qpg__rdma_windows_probe,
    .region_open = qpg__rdma_region_open,
    .region_close = qpg__rdma_region_close,
    .grant_read = qpg__rdma_grant_read,
    .revoke = qpg__rdma_revoke,
    .read = qpg__rdma_read,
    .test_write = qpg__rdma_test_write,
};

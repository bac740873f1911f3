/* SPDX-License-Identifier: BSD-2-Clause */
/* TCP transport: the same bootstrap and the same authenticated frames, with
 * the frames carried on the TLS control connection itself. For hosts
 * without RDMA; it moves real bytes, never sleeps to pretend.
 *
 * A send completes when its last byte has left the process (SSL_write took
 * it into the kernel), not when it is queued: like a work request that
 * completes once sent. So a connection never has more than its send depth
 * of frames in its output buffer, and the services' pumps, which wait for
 * room, are bounded by it. While the server has no room to answer, it stops
 * reading that connection's requests: TCP's own flow control then holds
 * the peer back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core.h"
#include "frame.h"
#include "stream.h"

struct tcp_conn {
	struct qpg__conn base;
	struct qpg_buf *rx; /* the frame being reassembled */
	size_t rx_len;
	/* Sends not yet complete: where each frame ends in the control
	 * channel's byte count (FIFO, at most the send depth). */
	uint64_t *ends;
	uint32_t head, n, cap;
	bool completing;
};

static struct tcp_conn *to_tcp(struct qpg__conn *c)
{
	return qpg__container_of(c, struct tcp_conn, base);
}

static int tcp_ep_init(struct qpg__endpoint *ep)
{
	/* No completion queue to poll: --busy-poll spins on the sockets. */
	ep->loop.spin_fds = true;
	return 0;
}

static void tcp_ep_fini(struct qpg__endpoint *ep)
{
}

static int tcp_conn_prepare(struct qpg__conn *c, struct qpg_wire_params *local)
{
	local->transport = QPG_TRANSPORT_TCP;
	local->qpn = local->psn = 0;
	local->lid = 0;
	local->mtu = 0;
	local->port = 0;
	memset(local->gid, 0, sizeof(local->gid));
	return 0;
}

static int tcp_conn_establish(struct qpg__conn *c, const struct qpg_wire_params *peer)
{
	struct tcp_conn *tc = to_tcp(c);
	tc->cap = qpg__conn_send_depth(c);
	tc->ends = calloc(tc->cap, sizeof(*tc->ends));
	return tc->ends ? 0 : -ENOMEM;
}

static int tcp_send(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct tcp_conn *tc = to_tcp(c);
	if (tc->n == tc->cap) { /* the core checks the room first */
		qpg_pool_put(&c->ep->pool, b);
		return -EAGAIN;
	}
	/* Recorded first: the write may flush, and complete it, at once. */
	uint32_t slot = (tc->head + tc->n++) % tc->cap;
	tc->ends[slot] = c->out_queued_total + len;
	int rc = qpg__conn_write(c, b->addr, len);
	qpg_pool_put(&c->ep->pool, b);
	if (rc && tc->n && (tc->head + tc->n - 1) % tc->cap == slot)
		tc->n--;
	return rc;
}

static void tcp_on_flushed(struct qpg__conn *c)
{
	struct tcp_conn *tc = to_tcp(c);
	if (tc->completing)
		return; /* the outer call goes on until nothing more is done */
	tc->completing = true;
	while (tc->n && tc->ends[tc->head] <= c->out_flushed_total &&
	       c->state == QPG_CONN_ESTABLISHED) {
		tc->head = (tc->head + 1) % tc->cap;
		tc->n--;
		qpg__conn_on_sent(c, true, NULL);
	}
	tc->completing = false;
	/* Room again: read the requests we held back. Some may already sit
	 * in OpenSSL's buffer, where epoll cannot see them, so the read is
	 * scheduled on the loop rather than waiting for the socket. */
	if (c->read_paused && c->state == QPG_CONN_ESTABLISHED && qpg__conn_send_room(c) > 0) {
		qpg__conn_pause_read(c, false);
		qpg__loop_defer(&c->ep->loop, &c->io);
	}
}

static void tcp_on_stream(struct qpg__conn *c)
{
	struct tcp_conn *tc = to_tcp(c);
	struct qpg__endpoint *ep = c->ep;
	while (c->state == QPG_CONN_ESTABLISHED) {
		/* Backpressure: no room for an answer, so read no more requests
		 * (the server only; a client within its credits always has room,
		 * and must keep reading the answers that make it). */
		if (c->is_server && qpg__conn_send_room(c) == 0) {
			qpg__conn_pause_read(c, true);
			return;
		}
		if (!tc->rx) {
			tc->rx = qpg_pool_get(&ep->pool);
			tc->rx_len = 0;
			if (!tc->rx) {
				qpg__conn_close(c, QPG_ERR_LOCAL, "receive pool exhausted");
				return;
			}
		}
		size_t want = QPG_FRAME_HDR_LEN - tc->rx_len, total = 0;
		if (tc->rx_len >= QPG_FRAME_HDR_LEN) {
			struct qpg_frame_hdr h;
			int rc = qpg_frame_hdr_decode(tc->rx->addr, SIZE_MAX, c->auth.enabled,
						      ep->max_msg, &h);
			if (rc) {
				qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed frame header");
				return;
			}
			total = qpg_frame_len(h.len, c->auth.enabled);
			want = total - tc->rx_len;
		}
		if (total && want == 0) {
			struct qpg_buf *b = tc->rx;
			tc->rx = NULL;
			qpg__conn_on_frame(c, b, total);
			/* Nothing buffered: the socket is level-triggered, so wait
			 * for epoll rather than spend a recv on EAGAIN. */
			if (!qpg__tls_pending(c->ssl))
				return;
			continue;
		}
		size_t got = 0;
		enum qpg__tls_io r = qpg__tls_read(c->ssl, (uint8_t *)tc->rx->addr + tc->rx_len,
						   want, &got, c->why, sizeof(c->why));
		if (r == QPG_TLS_DONE) {
			tc->rx_len += got;
			continue;
		}
		if (r == QPG_TLS_WANT_READ || r == QPG_TLS_WANT_WRITE)
			return;
		if (r == QPG_TLS_FORGED) { /* a frame's authentication, over tcp */
			qpg__stat_add(&c->ep->stats.auth_failures, 1);
			qpg__conn_close(c, QPG_ERR_AUTH, "a TLS record failed authentication: %s",
					c->why);
		} else if (r == QPG_TLS_CLOSED)
			qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "peer closed the connection");
		else /* reset, keepalive timeout, or a TLS error: say which */
			qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "connection lost: %s", c->why);
		return;
	}
}

static void tcp_conn_shutdown(struct qpg__conn *c)
{
	struct tcp_conn *tc = to_tcp(c);
	if (tc->rx) {
		qpg_pool_put(&c->ep->pool, tc->rx);
		tc->rx = NULL;
	}
}

static bool tcp_conn_busy(struct qpg__conn *c)
{
	return false;
}

static void tcp_conn_release(struct qpg__conn *c)
{
	struct tcp_conn *tc = to_tcp(c);
	free(tc->ends);
	tc->ends = NULL;
}

const struct qpg__transport_ops qpg__transport_tcp = {
    .name = "tcp",
    .wire_id = QPG_TRANSPORT_TCP,
    .conn_size = sizeof(struct tcp_conn),
    .busy_poll_us = QPG_BUSY_POLL_US_TCP,
    .frames_in_tls = true,
    .ep_init = tcp_ep_init,
    .ep_fini = tcp_ep_fini,
    .conn_prepare = tcp_conn_prepare,
    .conn_establish = tcp_conn_establish,
    .send = tcp_send,
    .on_stream = tcp_on_stream,
    .conn_shutdown = tcp_conn_shutdown,
    .conn_busy = tcp_conn_busy,
    .conn_release = tcp_conn_release,
    .on_flushed = tcp_on_flushed,
    .data_on_tls = true,
};

const struct qpg__transport_ops *qpg__transport_by_kind(int kind)
{
	switch (kind) {
	case QPG_TRANSPORT_RDMA:
		return &qpg__transport_rdma;
	case QPG_TRANSPORT_TCP:
		return &qpg__transport_tcp;
	default:
		return NULL;
	}
}

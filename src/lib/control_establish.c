/* SPDX-License-Identifier: BSD-2-Clause */
/* Both sides, once the bootstrap is through: each QP's keys from the TLS
 * session, the established list, the callbacks, and the TLS session let go
 * where the transport no longer needs it. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "control_int.h"
#include "core.h"
#include "stream.h"

/* C's keys, and its place on the established list: a session's own QP
 * exports its keys from SSL, a member (which has no TLS session of its
 * own) derives them from the session's secret SESS. */
static bool mark_established(struct qpg__conn *c, SSL *ssl, struct qpg__auth_session *sess,
			     uint64_t now)
{
	struct qpg__endpoint *ep = c->ep;
	/* Tags where the frames leave TLS (rdma); inside it (tcp) each TLS
	 * record authenticates them already, and both sides know which. */
	bool tags = (c->local.flags & QPG_WIRE_FLAG_AUTH) && !c->t->frames_in_tls;
	int rc = sess ? qpg__auth_init_member(&c->auth, sess, c->is_server, tags, c->member_index)
		      : qpg__auth_init_from_tls(&c->auth, ssl, c->is_server, tags);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot derive message keys");
		return false;
	}
	c->state = QPG_CONN_ESTABLISHED;
	qpg__conn_list_established(c);
	c->deadline_ns = 0;
	c->up_ns = c->active_ns = c->progress_ns = now;
	c->handshake_done = true;
	c->counted_connected = true;
	atomic_fetch_add_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	return true;
}

/* Member M's peer: the session's params, with M's own entry of the
 * bootstrap message in LEADER's input. */
void qpg__control_member_peer(const struct qpg__conn *leader, struct qpg__conn *m,
			      const struct qpg_wire_params *session)
{
	struct qpg_wire_qp q;
	qpg_wire_decode_qp(leader->boot_in, m->member_index - 1u, &q);
	m->peer = *session;
	m->peer.qpn = q.qpn;
	m->peer.psn = q.psn;
	m->peer.conn_id = q.conn_id;
	m->peer.extra_qps = 0;
}

/* The session's other QPs, while its TLS session still exists: each has
 * keys of its own, from one secret the session exports for them. A
 * failure there ends the whole session. */
static void establish_members(struct qpg__conn *c, uint64_t now)
{
	struct qpg__auth_session sess = {0}; /* without tags (c's): not used */
	if (c->auth.enabled && qpg__auth_session_init(&sess, c->ssl)) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot derive message keys");
		return;
	}
	for (struct qpg__conn *m = c->members; m && c->state == QPG_CONN_ESTABLISHED;
	     m = m->member_next) {
		memcpy(m->phase_ns, c->phase_ns, sizeof(m->phase_ns));
		m->resumed = c->resumed;
		if (!mark_established(m, c->ssl, &sess, now))
			break;
	}
	qpg__auth_session_free(&sess);
}

void qpg__control_established(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	uint64_t now = qpg__now_ns(); /* one stamp for the session's QPs */
	if (!mark_established(c, c->ssl, NULL, now))
		return;
	atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	qpg__stat_add(&ep->stats.handshakes_ok, 1);
	c->resumed = qpg__tls_resumed(c->ssl);
	if (c->resumed)
		qpg__stat_add(&ep->stats.handshakes_resumed, 1);
	uint64_t took = now - c->started_ns;
	qpg__stat_add(&ep->stats.handshake_ns_sum, took);
	unsigned b = 0;
	for (uint64_t us = took / 1000; us > 1 && b < 23; us >>= 1)
		b++;
	qpg__stat_add(&ep->stats.handshake_ns_bucket[b], 1);
	if (c->members)
		establish_members(c, now);
	free(c->boot_in);
	c->boot_in = NULL;
	if (c->state != QPG_CONN_ESTABLISHED)
		return;
	if (ep->cbs.established) {
		ep->cbs.established(c);
		struct qpg__conn *m = c->members, *next;
		for (; m && c->state == QPG_CONN_ESTABLISHED; m = next) {
			next = m->member_next;
			ep->cbs.established(m);
		}
	}
	/* Bytes that arrived with the bootstrap sit in OpenSSL's buffer, where
	 * epoll cannot see them. */
	if (c->state == QPG_CONN_ESTABLISHED && qpg__tls_pending(c->ssl))
		c->t->on_stream(c);
	qpg__stream_release_tls(c);
}

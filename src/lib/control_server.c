/* SPDX-License-Identifier: BSD-2-Clause */
/* The server's side of the bootstrap: check a HELLO, admit the session's
 * QPs, answer ACCEPT (or REJECT with a reason). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "control_int.h"
#include "core.h"
#include "stream.h"

void qpg__control_reject(struct qpg__conn *c, uint16_t code, enum qpg_err_class err,
			 const char *why, const char *fmt, ...)
{
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1];
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	qpg__stat_add(&c->ep->stats.rejected[code < 16 ? code : 0], 1);
	if (why)
		snprintf(c->why, sizeof(c->why), "%s", why);
	else
		snprintf(c->why, sizeof(c->why), "rejected: %s", text);
	c->err = err;
	c->state = QPG_CONN_REJECTING;
	int n = qpg_wire_encode_reject(msg, sizeof(msg), code, text);
	if (n > 0)
		qpg__conn_write(c, msg, (size_t)n);
}

#define reject(c, code, ...)                                                                       \
	qpg__control_reject(c, code, qpg__reject_err_class(code), NULL, __VA_ARGS__)

/* Decode a HELLO and check it against what this endpoint offers. Rejects
 * and returns false when it does not fit. */
static bool hello_check(struct qpg__conn *c, struct qpg_wire_params *peer)
{
	struct qpg__endpoint *ep = c->ep;
	char why[128] = "";
	int rc = qpg_wire_decode_params(c->boot_in, c->boot_in_len, peer, why, sizeof(why));
	if (rc == -EPROTONOSUPPORT) {
		reject(c, QPG_REJECT_VERSION,
		       "version mismatch: server speaks protocol %u, client sent %u",
		       QPG_WIRE_VERSION, c->boot_in[4]);
		return false;
	}
	if (rc) {
		reject(c, rc == -EPROTO ? QPG_REJECT_MALFORMED : QPG_REJECT_BAD_PARAMS,
		       "invalid HELLO: %s", why);
		return false;
	}
	if (c->boot_in[5] != QPG_WIRE_HELLO) {
		reject(c, QPG_REJECT_MALFORMED, "expected HELLO");
		return false;
	}
	/* Asked for: the ticket goes ahead of the answer, ACCEPT or REJECT (a
	 * client refused for now resumes when it comes back). */
	if ((peer->flags & QPG_WIRE_FLAG_TICKET) && qpg__tls_ticket_offer(c->ssl) == 1)
		qpg__stat_add(&ep->stats.tls_tickets, 1);
	if (peer->transport != c->t->wire_id) {
		reject(c, QPG_REJECT_TRANSPORT, "this server runs the %s transport", c->t->name);
		return false;
	}
	if (peer->service != ep->service) {
		reject(c, QPG_REJECT_SERVICE, "service %u is not offered here", peer->service);
		return false;
	}
	if (ep->auth_required && !(peer->flags & QPG_WIRE_FLAG_AUTH)) {
		reject(c, QPG_REJECT_AUTH_REQUIRED,
		       "this server requires per-message authentication");
		return false;
	}
	if (QPG_MIN(peer->max_msg, ep->max_msg) < ep->min_msg) {
		reject(c, QPG_REJECT_BAD_PARAMS, "this service needs messages of at least %u bytes",
		       ep->min_msg);
		return false;
	}
	unsigned qps_max = ep->session_qps_max ? ep->session_qps_max : 1;
	if (peer->extra_qps >= qps_max) {
		reject(c, QPG_REJECT_BAD_PARAMS, "at most %u QP%s per session here (asked for %u)",
		       qps_max, qps_max == 1 ? "" : "s", peer->extra_qps + 1u);
		return false;
	}
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1] = "";
	if (c->t->check_peer && !ep->allow_any_gid &&
	    c->t->check_peer(c, peer, text, sizeof(text)) != 0) {
		reject(c, QPG_REJECT_BAD_PARAMS, "%s", text);
		return false;
	}
	return true;
}

/* The service admits the session's QP and each of its extra QPs, each a
 * connection of its own (the server's --max-clients counts QPs). Rejects
 * and returns false when one does not fit. */
static bool session_admit(struct qpg__conn *c, unsigned extra_qps)
{
	struct qpg__endpoint *ep = c->ep;
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1] = "";
	int code = ep->cbs.admit ? ep->cbs.admit(c, text, sizeof(text)) : 0;
	if (code) {
		reject(c, (uint16_t)code, "%s", text);
		return false;
	}
	for (unsigned i = 0; i < extra_qps; i++) {
		struct qpg__conn *m = qpg__conn_new_member(c);
		if (!m) {
			reject(c, QPG_REJECT_RESOURCES, "out of memory for the session's QPs");
			return false;
		}
		code = ep->cbs.admit ? ep->cbs.admit(m, text, sizeof(text)) : 0;
		if (code) {
			reject(c, (uint16_t)code, "QP %u of the session's %u: %s", i + 2,
			       extra_qps + 1u, text);
			return false;
		}
	}
	return true;
}

/* Brings every QP of the session up to its data path and fills in its
 * entry of the ACCEPT (the leader's is in its params, the others' in
 * extra[]). Rejects and returns false when one cannot be made. */
static bool session_bring_up(struct qpg__conn *c, const struct qpg_wire_params *peer,
			     struct qpg_wire_qp *extra)
{
	struct qpg__endpoint *ep = c->ep;
	for (struct qpg__conn *m = c; m; m = m == c ? c->members : m->member_next) {
		if (m == c)
			m->peer = *peer;
		else
			qpg__control_member_peer(c, m, peer);
		m->max_msg = QPG_MIN(peer->max_msg, ep->max_msg);
		m->credits = QPG_MIN(peer->credits, ep->credits_max);
		m->local.service = ep->service;
		m->local.flags = peer->flags & QPG_WIRE_FLAG_AUTH;
		int rc = m->t->conn_prepare(m, &m->local);
		if (rc == 0)
			rc = m->t->conn_establish(m, &m->peer);
		if (rc) {
			reject(c, QPG_REJECT_RESOURCES,
			       "server could not create the data path%s: %s",
			       m == c ? "" : " of an extra QP", qpg_strerror(rc));
			return false;
		}
		m->local.transport = m->t->wire_id;
		m->local.max_msg = m->max_msg;
		m->local.credits = m->credits;
		m->local.conn_id = m->conn_id;
		if (m != c)
			extra[m->member_index - 1] = (struct qpg_wire_qp){
			    .qpn = m->local.qpn, .psn = m->local.psn, .conn_id = m->conn_id};
	}
	c->local.extra_qps = c->nmembers;
	return true;
}

void qpg__control_on_hello(struct qpg__conn *c)
{
	struct qpg_wire_params peer;
	struct qpg_wire_qp extra[QPG_WIRE_MAX_EXTRA_QPS];
	if (!hello_check(c, &peer) || !session_admit(c, peer.extra_qps) ||
	    !session_bring_up(c, &peer, extra))
		return;
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_ACCEPT, &c->local, extra);
	if (n < 0 || qpg__conn_write(c, msg, (size_t)n) < 0)
		return;
	qpg__control_established(c);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The client's side of the bootstrap: send HELLO (every QP of the session),
 * take ACCEPT or REJECT, connect the data path. */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "control_int.h"
#include "core.h"
#include "stream.h"

void qpg__control_send_hello(struct qpg__conn *c)
{
	qpg__phase_begin(c);
	c->local.transport = c->t->wire_id;
	int rc = c->t->conn_prepare(c, &c->local);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot create the data path: %s", qpg_strerror(rc));
		return;
	}
	c->local.max_msg = c->max_msg;
	c->local.credits = c->credits;
	struct qpg_wire_qp extra[QPG_WIRE_MAX_EXTRA_QPS];
	for (struct qpg__conn *m = c->members; m; m = m->member_next) {
		m->local.transport = m->t->wire_id;
		rc = m->t->conn_prepare(m, &m->local);
		if (rc) {
			qpg__conn_close(m, QPG_ERR_LOCAL, "cannot create the data path: %s",
					qpg_strerror(rc));
			return;
		}
		m->local.max_msg = m->max_msg;
		m->local.credits = m->credits;
		extra[m->member_index - 1] =
		    (struct qpg_wire_qp){.qpn = m->local.qpn, .psn = m->local.psn};
	}
	c->local.extra_qps = c->nmembers;
	struct qpg_wire_params hello = c->local;
	if (qpg__tls_slot_wants_ticket(c->ep->tls, c->ssl))
		hello.flags |= QPG_WIRE_FLAG_TICKET;
	if (c->test_mutation == QPG_MUTATE_GID) {
		static const uint8_t other[16] = {0, 0, 0,    0,    0,	 0, 0, 0,
						  0, 0, 0xff, 0xff, 192, 0, 2, 1};
		memcpy(hello.gid, other, 16);
	}
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_HELLO, &hello, extra);
	if (n < 0)
		return;
	switch (c->test_mutation) {
	case QPG_MUTATE_VERSION:
		msg[4] = QPG_WIRE_VERSION + 1;
		break;
	case QPG_MUTATE_PSN:
		msg[QPG_WIRE_HDR_LEN + 8] = 0x01; /* PSN > 0xffffff */
		break;
	case QPG_MUTATE_QPN:
		memset(msg + QPG_WIRE_HDR_LEN + 4, 0, 4);
		msg[QPG_WIRE_HDR_LEN + 7] = 1; /* QPN 1 */
		break;
	case QPG_MUTATE_TRUNCATED:
		n = n / 2;
		break;
	case QPG_MUTATE_LENGTH:
		msg[QPG_WIRE_HDR_LEN - 1] = 0xff;
		break;
	case QPG_MUTATE_STALL:
		n = 0;
		break;
	}
	qpg__phase_begin(c);
	if (n)
		qpg__conn_write(c, msg, (size_t)n);
}

void qpg__control_on_reply(struct qpg__conn *c)
{
	uint8_t type = c->boot_in[5];
	if (type == QPG_WIRE_REJECT) {
		struct qpg_wire_reject r;
		if (qpg_wire_decode_reject(c->boot_in, c->boot_in_len, &r)) {
			qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed REJECT from server");
			return;
		}
		c->reject_code = r.code;
		qpg__conn_close(c, qpg__reject_err_class(r.code), "server refused (%s): %s",
				qpg_reject_code_name(r.code), r.text);
		return;
	}
	struct qpg_wire_params peer;
	char why[128] = "";
	if (type != QPG_WIRE_ACCEPT) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"unexpected bootstrap message type %u from server", type);
		return;
	}
	if (qpg_wire_decode_params(c->boot_in, c->boot_in_len, &peer, why, sizeof(why))) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "invalid ACCEPT from server: %s", why);
		return;
	}
	if (peer.transport != c->t->wire_id || peer.flags != c->local.flags) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"server answered with other transport or flags");
		return;
	}
	if (peer.extra_qps != c->nmembers) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"server answered for %u QPs, the session asked for %u",
				peer.extra_qps + 1u, c->nmembers + 1u);
		return;
	}
	qpg__phase_end(c, QPG_PHASE_EXCHANGE);
	c->peer = peer;
	c->conn_id = peer.conn_id;
	c->max_msg = QPG_MIN(c->max_msg, peer.max_msg);
	c->credits = QPG_MIN(c->credits, peer.credits);
	int rc = c->t->conn_establish(c, &peer);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot connect the data path: %s",
				strerror(-rc));
		return;
	}
	for (struct qpg__conn *m = c->members; m; m = m->member_next) {
		qpg__control_member_peer(c, m, &peer);
		m->conn_id = m->peer.conn_id;
		m->max_msg = c->max_msg;
		m->credits = c->credits;
		rc = m->t->conn_establish(m, &m->peer);
		if (rc) {
			qpg__conn_close(m, QPG_ERR_LOCAL, "cannot connect the data path: %s",
					strerror(-rc));
			return;
		}
	}
	qpg__control_established(c);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The bootstrap's pieces, inside the control room: control.c drives the
 * socket and TLS and hands a whole bootstrap message down to the server's
 * side (control_server.c) or the client's (control_client.c); both end in
 * control_establish.c. */
#ifndef QPG_CONTROL_INT_H
#define QPG_CONTROL_INT_H

#include <openssl/ssl.h>
#include <stdint.h>

#include "control.h"
#include "core.h"

/* The class a refusal is reported under, on both sides of the wire. */
static inline enum qpg_err_class qpg__reject_err_class(uint16_t code)
{
	switch (code) {
	case QPG_REJECT_SERVER_FULL:
		return QPG_ERR_SERVER_FULL;
	case QPG_REJECT_VERSION:
		return QPG_ERR_VERSION;
	default:
		return QPG_ERR_REJECTED;
	}
}

/* Server: answer REJECT with CODE and TEXT, then close once it is flushed.
 * ERR is the class the close is counted under (with a local reason WHY, or
 * "rejected: TEXT"), set before the write: the REJECT may flush, and close,
 * at once. */
void qpg__control_reject(struct qpg__conn *c, uint16_t code, enum qpg_err_class err,
			 const char *why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Server: C's whole HELLO is in c->boot_in. */
void qpg__control_on_hello(struct qpg__conn *c);

/* Client: TLS is up, send HELLO for C and its session's members. */
void qpg__control_send_hello(struct qpg__conn *c);
/* Client: C's whole ACCEPT or REJECT is in c->boot_in. */
void qpg__control_on_reply(struct qpg__conn *c);

/* Member M's peer: the session's params, with M's own entry of the
 * bootstrap message in LEADER's input. */
void qpg__control_member_peer(const struct qpg__conn *leader, struct qpg__conn *m,
			      const struct qpg_wire_params *session);
/* Both sides: the bootstrap is through; keys, lists and callbacks for C
 * and its members. */
void qpg__control_established(struct qpg__conn *c);

#endif

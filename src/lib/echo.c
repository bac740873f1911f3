/* SPDX-License-Identifier: BSD-2-Clause */
/* The echo service: every request comes back as a reply, in the same
 * registered buffer it arrived in (no copy, no extra memory per client).
 * Written against qpgate/service.h alone, like any application's service.
 *
 * A reply waits when the send queue is full: our earlier replies may still
 * await their ACKs (a lost ACK is only made good by a later one, so under
 * loss this is normal). At most one window of replies waits per
 * connection; a client with more requests than that outstanding broke its
 * credits. */
#include <stdlib.h>

#include "qpgate/service.h"
#include "qpgate/wire.h"

struct echo_wait {
	struct qpg_buf *b;
	uint32_t len;
};

struct echo_conn {
	unsigned head, n, cap;
	struct echo_wait q[];
};

static struct echo_conn *echo_conn_of(struct qpg_conn *c)
{
	struct echo_conn *e = qpg_conn_data(c);
	if (!e) {
		unsigned cap = qpg_conn_credits(c);
		e = calloc(1, sizeof(*e) + cap * sizeof(e->q[0]));
		if (e)
			e->cap = cap;
		qpg_conn_set_data(c, e);
	}
	return e;
}

/* Send waiting replies while there is room. */
static void echo_pump(struct qpg_conn *c)
{
	struct echo_conn *e = qpg_conn_data(c);
	while (e && e->n && qpg_conn_is_open(c) && qpg_conn_send_room(c) > 0) {
		struct echo_wait w = e->q[e->head];
		e->head = (e->head + 1) % e->cap;
		e->n--;
		if (qpg_conn_send(c, w.b, QPG_FRAME_ECHO_REPLY, 0, w.len))
			return;
	}
}

static void echo_message(struct qpg_conn *c, uint8_t type, uint16_t flags, struct qpg_buf *b,
			 uint32_t len)
{
	struct echo_conn *e = qpg_conn_data(c);
	if ((!e || e->n == 0) && qpg_conn_send_room(c) > 0) {
		qpg_conn_send(c, b, QPG_FRAME_ECHO_REPLY, 0, len);
		return;
	}
	e = echo_conn_of(c);
	if (!e || e->n >= e->cap) {
		qpg_conn_buf_put(c, b);
		qpg_conn_close(c, QPG_ERR_PROTOCOL, "client exceeded its %u credits",
			       qpg_conn_credits(c));
		return;
	}
	e->q[(e->head + e->n++) % e->cap] = (struct echo_wait){b, len};
}

static void echo_close(struct qpg_conn *c)
{
	struct echo_conn *e = qpg_conn_data(c);
	if (!e)
		return;
	for (; e->n; e->n--, e->head = (e->head + 1) % e->cap)
		qpg_conn_buf_put(c, e->q[e->head].b);
	free(e);
	qpg_conn_set_data(c, NULL);
}

const struct qpg_service qpg_service_echo = {
    .id = QPG_SERVICE_ECHO,
    .name = "echo",
    .request_type = QPG_FRAME_ECHO_REQ,
    .on_message = echo_message,
    .on_sent = echo_pump,
    .on_close = echo_close,
};

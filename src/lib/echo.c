/* The echo service: every request comes back as a reply, in the same
 * registered buffer it arrived in (no copy, no extra memory per client).
 *
 * A reply waits when the send queue is full: our earlier replies may still
 * await their ACKs (a lost ACK is only made good by a later one, so under
 * loss this is normal). At most one window of replies waits per
 * connection; a client with more requests than that outstanding broke its
 * credits. */
#include <stdlib.h>

#include "common.h"
#include "service.h"

struct echo_wait {
	struct qpg_buf *b;
	uint32_t len;
};

struct echo_conn {
	unsigned head, n, cap;
	struct echo_wait q[];
};

static struct echo_conn *echo_conn_of(struct qpg__conn *c)
{
	if (!c->svc) {
		struct echo_conn *e = calloc(1, sizeof(*e) + c->credits * sizeof(e->q[0]));
		if (e)
			e->cap = c->credits;
		c->svc = e;
	}
	return c->svc;
}

/* Send waiting replies while there is room. */
static void echo_pump(struct qpg__conn *c)
{
	struct echo_conn *e = c->svc;
	while (e && e->n && c->state == QPG_CONN_ESTABLISHED && qpg__conn_send_room(c) > 0) {
		struct echo_wait w = e->q[e->head];
		e->head = (e->head + 1) % e->cap;
		e->n--;
		if (qpg__conn_send(c, w.b, QPG_FRAME_ECHO_REPLY, w.len))
			return;
	}
}

static void echo_message(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b)
{
	if (h->type != QPG_FRAME_ECHO_REQ) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unexpected frame type %u for echo", h->type);
		return;
	}
	struct echo_conn *e = c->svc;
	if ((!e || e->n == 0) && qpg__conn_send_room(c) > 0) {
		qpg__conn_send(c, b, QPG_FRAME_ECHO_REPLY, h->len);
		return;
	}
	e = echo_conn_of(c);
	if (!e || e->n >= e->cap) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "client exceeded its %u credits", c->credits);
		return;
	}
	e->q[(e->head + e->n++) % e->cap] = (struct echo_wait){b, h->len};
}

static void echo_closed(struct qpg__conn *c)
{
	struct echo_conn *e = c->svc;
	if (!e)
		return;
	for (; e->n; e->n--, e->head = (e->head + 1) % e->cap)
		qpg_pool_put(&c->ep->pool, e->q[e->head].b);
	free(e);
	c->svc = NULL;
}

const struct qpg__service qpg__service_echo = {
    .id = QPG_SERVICE_ECHO,
    .name = "echo",
    .message = echo_message,
    .sent = echo_pump,
    .closed = echo_closed,
};

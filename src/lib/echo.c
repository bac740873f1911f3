/* The echo service: every request comes back as a reply, in the same
 * registered buffer it arrived in (no copy, no extra memory per client). */
#include "service.h"

#include "common.h"

static void echo_message(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b)
{
	if (h->type != QPG_FRAME_ECHO_REQ) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unexpected frame type %u for echo", h->type);
		return;
	}
	/* Credits bound what a client may have outstanding. Our earlier replies
	 * may still await their send completion (the client already has them,
	 * the ACK is not reaped yet), hence the slack of one window. */
	if (c->in_flight >= 2u * c->credits) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "client exceeded its %u credits", c->credits);
		return;
	}
	qpg__conn_send(c, b, QPG_FRAME_ECHO_REPLY, h->len);
}

const struct qpg__service qpg__service_echo = {
    .id = QPG_SERVICE_ECHO,
    .name = "echo",
    .message = echo_message,
};

/* SPDX-License-Identifier: BSD-2-Clause */
/* RDMA sends: the frames a connection sends within one batch of the loop
 * go to the peer as one SEND, back to back (docs/protocol.md, "Messages").
 * On Soft-RoCE a message costs about what 3 KiB of payload do (a 4 KiB
 * GET's request, alone, was a fifth of its CPU), so a batch of requests,
 * or of small replies, pays for one. The first frame's pool slot gathers
 * the others (a copy of each: the server's QPs have one scatter entry, and
 * a request is tens of bytes); their slots go back at once. A message
 * holds at most what one frame of the agreed size may (the peer's receives
 * are that large). It is posted once a batch of completions has been
 * handled (the answers to a batch of requests, before the receives are
 * refilled) or the loop's turn ends (its flush), when the next frame would
 * not fit, and before any other work request of the connection, so work
 * requests keep the order they were asked for in. Each frame keeps its own
 * header, sequence number and tag, and counts in flight until the
 * message's completion. A connection is on rdma_ep.unposted exactly while
 * it holds a message. */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "core.h"
#include "frame.h"
#include "rdma.h"

/* A send's pool slot carries its message's frame count in io_len, set as
 * it is posted (a read's length otherwise: sends and reads never share a
 * slot). */
uint32_t qpg__rdma_sent_frames(const struct qpg_buf *b)
{
	return b->io_len;
}

static void unlist(struct rdma_conn *rc)
{
	if (rc->pprev_unposted) {
		*rc->pprev_unposted = rc->next_unposted;
		if (rc->next_unposted)
			rc->next_unposted->pprev_unposted = rc->pprev_unposted;
	}
	rc->next_unposted = NULL;
	rc->pprev_unposted = NULL;
}

static void enlist(struct rdma_ep *r, struct rdma_conn *rc)
{
	rc->next_unposted = r->unposted;
	if (r->unposted)
		r->unposted->pprev_unposted = &rc->next_unposted;
	r->unposted = rc;
	rc->pprev_unposted = &r->unposted;
}

/* Posts RC's message (nothing if it has none). A failed post fails its
 * frames as a failed completion would, which closes the connection. */
static void post(struct rdma_conn *rc)
{
	struct qpg_buf *b = rc->msg;
	if (!b)
		return;
	struct qpg__conn *c = &rc->base;
	uint32_t len = rc->msg_len, frames = rc->msg_frames;
	rc->msg = NULL;
	b->io_len = frames;
	struct ibv_sge sge = {(uintptr_t)b->addr, len, b->lkey};
	/* Still signaled when inline: the completion is what ends the send
	 * (in flight, the progress deadline) and gives the buffer back. */
	unsigned flags = IBV_SEND_SIGNALED | (len <= rc->max_inline ? IBV_SEND_INLINE : 0);
	struct ibv_send_wr wr = {.wr_id = wr_id_of(b, WR_BUF),
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = flags},
			   *bad;
	int err = ibv_post_send(rc->qp, &wr, &bad);
	if (!err) {
		qpg__stat_add(&c->ep->stats.rdma_msgs_out, 1);
		return;
	}
	qpg_pool_put(&c->ep->pool, b);
	for (uint32_t i = 0; i < frames; i++)
		qpg__conn_on_sent(c, false, strerror(err));
}

void qpg__rdma_post_now(struct rdma_conn *rc)
{
	if (!rc->msg)
		return;
	unlist(rc);
	post(rc);
}

void qpg__rdma_post_all(struct rdma_ep *r)
{
	while (r->unposted) {
		struct rdma_conn *rc = r->unposted;
		unlist(rc);
		post(rc);
	}
}

/* The loop's turn ended (or begins): every gathered message goes. */
static void post_all(struct qpg__loop *l)
{
	qpg__rdma_post_all(((struct qpg__endpoint *)l->owner)->tep);
}

int qpg__rdma_send(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_ep *r = c->ep->tep;
	b->owner = c;
	/* What one frame of the agreed size takes: the peer's receives hold
	 * at least that. */
	size_t room = qpg_frame_len(c->max_msg, c->auth.enabled);
	if (rc->msg && rc->msg_len + len <= room) {
		memcpy((uint8_t *)rc->msg->addr + rc->msg_len, b->addr, len);
		rc->msg_len += (uint32_t)len;
		rc->msg_frames++;
		qpg_pool_put(&c->ep->pool, b);
		return 0;
	}
	if (rc->msg)
		qpg__rdma_post_now(rc);
	if (c->state != QPG_CONN_ESTABLISHED) { /* that post failed and closed C */
		qpg_pool_put(&c->ep->pool, b);
		return -ENOTCONN;
	}
	rc->msg = b;
	rc->msg_len = (uint32_t)len;
	rc->msg_frames = 1;
	enlist(r, rc);
	return 0;
}

/* (Called from the close itself, so the frames are not failed through
 * qpg__conn_on_sent, which would close C again.) */
void qpg__rdma_send_drop(struct rdma_conn *rc)
{
	struct qpg_buf *b = rc->msg;
	if (!b)
		return;
	struct qpg__conn *c = &rc->base;
	unlist(rc);
	uint32_t frames = rc->msg_frames;
	rc->msg = NULL;
	qpg_pool_put(&c->ep->pool, b);
	c->in_flight -= frames; /* as their flushes would have */
}

void qpg__rdma_send_init(struct rdma_ep *r)
{
	r->ep->loop.flush = post_all;
}

void qpg__rdma_send_fini(struct rdma_ep *r)
{
	r->ep->loop.flush = NULL;
}

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
 * not fit, and before a READ or a window's invalidation of the connection,
 * so those keep the order they were asked for in. A window's bind does not
 * close it (the reply naming the window goes in it, after the bind); a
 * message closed while a bind or invalidation waits on the fence
 * (rdma_windows.c) waits behind it and is posted after it. Each frame keeps its own
 * header, sequence number and tag, and counts in flight until the
 * message's completion. A connection is on rdma_ep.unposted exactly while
 * it holds a message.
 *
 * A frame sent by reference (qpg__rdma_send_ref: a KV reply whose value is
 * sent from the store's registered memory) has its head and tag copied
 * into the message's slot like any frame, and its value gathered from
 * where it lies as a scatter entry of its own: the value is chained to the
 * message's slot, its offset in the slot's bytes (where it goes between
 * them) in its cookie, and is given back through its release when the
 * message completes or fails. */
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

/* Closed message B's scatter list into SGE: its slot's bytes (the first
 * USED of them), cut where each chained value goes between them. The
 * count; its length in *LEN. */
static int scatter(const struct qpg_buf *b, uint32_t used, struct ibv_sge sge[QPG__RDMA_SEND_SGE],
		   uint32_t *len)
{
	uint32_t from = 0;
	int n = 0;
	*len = used;
	for (const struct qpg_buf *v = b->chain; v; v = v->chain) {
		uint32_t at = (uint32_t)v->cookie;
		if (at > from)
			sge[n++] = (struct ibv_sge){(uintptr_t)b->addr + from, at - from, b->lkey};
		sge[n++] = (struct ibv_sge){(uintptr_t)v->addr, v->io_len, v->lkey};
		*len += v->io_len;
		from = at;
	}
	if (used > from)
		sge[n++] = (struct ibv_sge){(uintptr_t)b->addr + from, used - from, b->lkey};
	return n;
}

/* A closed message carries its frame count in io_len (qpg__rdma_sent_frames)
 * and the bytes of its slot it uses in cookie. A failed post fails its
 * frames as a failed completion would, which closes the connection. */
void qpg__rdma_msg_post(struct rdma_conn *rc, struct qpg_buf *b)
{
	struct qpg__conn *c = &rc->base;
	uint32_t frames = b->io_len, len;
	struct ibv_sge sge[QPG__RDMA_SEND_SGE];
	int nsge = scatter(b, (uint32_t)b->cookie, sge, &len);
	/* Still signaled when inline: the completion is what ends the send
	 * (in flight, the progress deadline) and gives the buffer back. */
	unsigned flags = IBV_SEND_SIGNALED | (len <= rc->max_inline ? IBV_SEND_INLINE : 0);
	struct ibv_send_wr wr = {.wr_id = wr_id_of(b, WR_BUF),
				 .sg_list = sge,
				 .num_sge = nsge,
				 .opcode = IBV_WR_SEND,
				 .send_flags = flags},
			   *bad;
	int err = ibv_post_send(rc->qp, &wr, &bad);
	if (!err) {
		rc->net_out++;
		qpg__stat_add(&c->ep->stats.rdma_msgs_out, 1);
		return;
	}
	qpg_pool_put(&c->ep->pool, b); /* and the values chained to it */
	for (uint32_t i = 0; i < frames; i++)
		qpg__conn_on_sent(c, false, strerror(err));
}

void qpg__rdma_msgs_drop(struct rdma_conn *rc, struct qpg_buf *m)
{
	struct qpg__conn *c = &rc->base;
	while (m) {
		struct qpg_buf *next = m->next_free;
		m->next_free = NULL;
		c->in_flight -= m->io_len; /* as their flushes would have */
		qpg_pool_put(&c->ep->pool, m); /* and the values chained to it */
		m = next;
	}
}

/* Closes RC's message and posts it (nothing if it has none), unless a
 * window's work request waits on the fence (rdma_windows.c): then it
 * waits behind the last such, and goes after it. */
static void post(struct rdma_conn *rc)
{
	struct qpg_buf *b = rc->msg;
	if (!b)
		return;
	b->io_len = rc->msg_frames;
	b->cookie = rc->msg_used;
	rc->msg = rc->msg_tail = NULL;
	struct rdma_window_op *op = rc->ops_tail;
	if (!op) {
		qpg__rdma_msg_post(rc, b);
		return;
	}
	b->next_free = NULL;
	if (op->after_tail)
		op->after_tail->next_free = b;
	else
		op->after = b;
	op->after_tail = b;
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

/* Appends LEN bytes at P to RC's message slot. */
static void append(struct rdma_conn *rc, const void *p, uint32_t len)
{
	memcpy((uint8_t *)rc->msg->addr + rc->msg_used, p, len);
	rc->msg_used += len;
	rc->msg_len += len;
}

/* Whether RC's message has room for a frame of BYTES on the wire, COPIED of
 * them into its slot, and REFS more values. */
static bool fits(const struct rdma_conn *rc, size_t room, size_t bytes, size_t copied,
		 uint32_t refs)
{
	return rc->msg && rc->msg_len + bytes <= room && rc->msg_used + copied <= rc->msg->len &&
	       1 + 2 * (rc->msg_refs + refs) <= rc->max_sge;
}

/* Starts RC's message with B, LEN bytes of its slot taken (after posting
 * the one it held). False when that post failed and closed C. */
static bool begin(struct qpg__conn *c, struct rdma_conn *rc, struct qpg_buf *b, uint32_t len)
{
	if (rc->msg)
		qpg__rdma_post_now(rc);
	if (c->state != QPG_CONN_ESTABLISHED)
		return false;
	b->chain = NULL;
	rc->msg = rc->msg_tail = b;
	rc->msg_len = rc->msg_used = len;
	rc->msg_frames = 1;
	rc->msg_refs = 0;
	enlist(c->ep->tep, rc);
	return true;
}

/* Chains value V to RC's message, at the slot's present end. */
static void chain(struct rdma_conn *rc, struct qpg_buf *v)
{
	v->cookie = rc->msg_used;
	v->chain = NULL;
	rc->msg_tail->chain = v;
	rc->msg_tail = v;
	rc->msg_refs++;
	rc->msg_len += v->io_len;
}

int qpg__rdma_send(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct rdma_conn *rc = to_rdma(c);
	b->owner = c;
	/* What one frame of the agreed size takes: the peer's receives hold
	 * at least that. */
	size_t room = qpg_frame_len(c->max_msg, c->auth.enabled);
	if (fits(rc, room, len, len, 0)) {
		append(rc, b->addr, (uint32_t)len);
		rc->msg_frames++;
		qpg_pool_put(&c->ep->pool, b);
		return 0;
	}
	if (!begin(c, rc, b, (uint32_t)len)) {
		qpg_pool_put(&c->ep->pool, b);
		return -ENOTCONN;
	}
	return 0;
}

bool qpg__rdma_can_ref(const struct qpg__conn *c)
{
	return to_rdma((struct qpg__conn *)c)->max_sge >= 3;
}

int qpg__rdma_send_ref(struct qpg__conn *c, struct qpg_buf *b, size_t head, struct qpg_buf *v,
		       void *region, size_t tag)
{
	struct rdma_conn *rc = to_rdma(c);
	b->owner = c;
	v->lkey = ((struct ibv_mr *)region)->lkey;
	size_t room = qpg_frame_len(c->max_msg, c->auth.enabled);
	if (fits(rc, room, head + v->io_len + tag, head + tag, 1)) {
		append(rc, b->addr, (uint32_t)head);
		chain(rc, v);
		append(rc, (uint8_t *)b->addr + head, (uint32_t)tag);
		rc->msg_frames++;
		qpg_pool_put(&c->ep->pool, b);
		return 0;
	}
	if (!begin(c, rc, b, (uint32_t)head)) {
		qpg_pool_put(&c->ep->pool, b);
		qpg_pool_put(&c->ep->pool, v);
		return -ENOTCONN;
	}
	chain(rc, v);
	rc->msg_used += (uint32_t)tag; /* already in place, after the head */
	rc->msg_len += (uint32_t)tag;
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
	rc->msg = rc->msg_tail = NULL;
	qpg_pool_put(&c->ep->pool, b); /* and the values chained to it */
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

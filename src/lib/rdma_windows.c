/* SPDX-License-Identifier: BSD-2-Clause */
/* One-sided access for the RDMA transport: type-2 memory windows, each
 * bound to one connection's QP by a work request. A window's rkey is useless
 * on any other QP, covers exactly the bytes granted, is read-only, and gets
 * a new key on every bind so an rkey from an earlier grant no longer works.
 * Regions are registered with MW_BIND and no remote access of their own. */
#include <errno.h>
#include <stdlib.h>

#include "frame.h"
#include "rdma.h"

/* W back on its connection's free list: unbound, or its QP in error. */
static void window_put(struct rdma_window *w)
{
	w->revoking = false;
	w->next_free = w->owner->free_windows;
	w->owner->free_windows = w;
}

void qpg__rdma_window_done(struct rdma_window_op *op, const struct ibv_wc *wc)
{
	struct rdma_window *w = op->w;
	struct qpg__conn *c = &w->owner->base;
	bool ok = wc->status == IBV_WC_SUCCESS;
	if (op->inv) {
		/* Invalid now (or its QP is in error): safe to reuse. Only
		 * the invalidation's completion says so, not a bind's that
		 * comes after the revoke was asked for. */
		window_put(w);
		if (ok)
			qpg__conn_on_revoked(c, w->user);
	}
	if (!ok && c->state == QPG_CONN_ESTABLISHED)
		qpg__conn_close(c, QPG_ERR_QP, "memory window operation failed: %s",
				ibv_wc_status_str(wc->status));
	qpg__conn_on_sent(c, ok, ibv_wc_status_str(wc->status));
}

int qpg__rdma_windows_probe(struct qpg__endpoint *ep)
{
	/* Only type-2 windows are scoped to one QP; without them, refuse. */
	struct ibv_mw *probe;
	int rc = qpg_mw_alloc(ep->dev, &probe);
	qpg_mw_free(&probe);
	return rc;
}

int qpg__rdma_region_open(struct qpg__endpoint *ep, void *addr, size_t len, void **region)
{
	/* Windows need MW_BIND; local write pins the pages writable. No
	 * remote access: the region's own rkey opens nothing. */
	errno = 0;
	struct ibv_mr *mr =
	    ibv_reg_mr(ep->dev->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	*region = mr;
	return 0;
}

void qpg__rdma_region_close(void *region)
{
	if (region)
		ibv_dereg_mr(region);
}

/* The fence. rxe retransmits from the oldest SEND not acknowledged, and
 * runs again every work request behind it, a bind already done included
 * (req_retry in rxe_req.c restarts there, and a local one is not skipped);
 * a type-2 window bound twice fails the QP with a bind error. So a bind
 * or an invalidation is posted only when no SEND, READ or WRITE of its
 * connection is outstanding (net_out 0): then the device has nothing to go
 * back over, and its completer retires the done bind before it can retry
 * what follows. One that must wait waits on rdma_conn.ops with every
 * message closed after it, in the order asked; the completion that brings
 * net_out to 0 lets them go. A bind does not close the message being
 * gathered: the reply that names the window goes in it, after the bind,
 * and a batch's binds share one wait. Costs one-sided GETs on a busy
 * connection up to the round trip of the SENDs ahead of them. */
static int window_post(struct rdma_conn *rc, struct rdma_window_op *op)
{
	struct rdma_window *w = op->w;
	struct ibv_send_wr wr = {.wr_id = wr_id_of(op, WR_WINDOW),
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	if (op->inv) {
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = w->rkey;
	} else {
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = w->mw;
		wr.bind_mw.rkey = w->rkey;
		wr.bind_mw.bind_info =
		    (struct ibv_mw_bind_info){.mr = w->region,
					      .addr = (uintptr_t)w->addr,
					      .length = w->len,
					      .mw_access_flags = IBV_ACCESS_REMOTE_READ};
	}
	int err = ibv_post_send(rc->qp, &wr, &bad);
	if (!err && !op->inv)
		w->mw->rkey = w->rkey; /* the provider names the window by its old key until posted */
	return err;
}

/* OP's work request, now or behind the fence. */
static int window_op(struct rdma_conn *rc, struct rdma_window_op *op)
{
	if (!rc->ops && !rc->net_out)
		return -window_post(rc, op);
	op->next = NULL;
	op->after = op->after_tail = NULL;
	if (rc->ops_tail)
		rc->ops_tail->next = op;
	else
		rc->ops = op;
	rc->ops_tail = op;
	return 0;
}

void qpg__rdma_net_done(struct rdma_conn *rc)
{
	struct qpg__conn *c = &rc->base;
	rc->net_out--;
	struct rdma_window_op *op;
	while ((op = rc->ops) && !rc->net_out && c->state == QPG_CONN_ESTABLISHED) {
		rc->ops = op->next;
		if (!rc->ops)
			rc->ops_tail = NULL;
		struct qpg_buf *m = op->after;
		op->after = op->after_tail = NULL;
		if (window_post(rc, op)) { /* as if it had failed on the device: C closes */
			struct ibv_wc wc = {.status = IBV_WC_LOC_QP_OP_ERR};
			qpg__rdma_window_done(op, &wc);
		}
		while (m && c->state == QPG_CONN_ESTABLISHED) {
			struct qpg_buf *next = m->next_free;
			m->next_free = NULL;
			qpg__rdma_msg_post(rc, m);
			m = next;
		}
		qpg__rdma_msgs_drop(rc, m); /* C closed: what was left */
	}
}

void qpg__rdma_ops_drop(struct rdma_conn *rc)
{
	struct qpg__conn *c = &rc->base;
	while (rc->ops) {
		struct rdma_window_op *op = rc->ops;
		rc->ops = op->next;
		qpg__rdma_msgs_drop(rc, op->after);
		op->after = op->after_tail = NULL;
		c->in_flight--; /* as its flush would have */
		if (op->inv)
			window_put(op->w);
	}
	rc->ops_tail = NULL;
}

/* Frames C has sent go first (rdma_send.c), where the order matters: an
 * invalidation after the reply that named its window, a READ after the
 * request it follows. */
static int post_sends_first(struct qpg__conn *c)
{
	qpg__rdma_post_now(to_rdma(c));
	return c->state == QPG_CONN_ESTABLISHED ? 0 : -ENOTCONN;
}

int qpg__rdma_grant_read(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			 void *user, void **window, uint32_t *rkey)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_window *w = rc->free_windows;
	int err;
	if (w && !w->mw)
		return -ENOTCONN; /* shut down: its windows are gone */
	if (w) {
		rc->free_windows = w->next_free;
	} else {
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		if ((err = qpg_mw_alloc(c->ep->dev, &w->mw)) != 0) {
			free(w);
			return err;
		}
		w->owner = rc;
		w->bind.w = w->inv.w = w;
		w->inv.inv = true;
		w->next_all = rc->windows;
		rc->windows = w;
	}
	/* A new key on every bind: the device knows the window by it from
	 * the bind on. */
	w->rkey = ibv_inc_rkey(w->mw->rkey);
	w->region = region;
	w->addr = addr;
	w->len = len;
	if ((err = window_op(rc, &w->bind)) != 0) {
		window_put(w);
		return err;
	}
	w->user = user;
	*window = w;
	*rkey = w->rkey;
	return 0;
}

int qpg__rdma_revoke(struct qpg__conn *c, void *window)
{
	struct rdma_window *w = window;
	if (!w->mw || post_sends_first(c))
		return -ENOTCONN;
	if (w->revoking)
		return -EALREADY;
	int err = window_op(to_rdma(c), &w->inv);
	w->revoking = !err;
	return err;
}

static int post_one_sided(struct qpg__conn *c, struct qpg_buf *b, enum wr_kind kind, uint64_t raddr,
			  uint32_t rkey)
{
	/* One scatter entry per slot of B's chain (a READ longer than a slot). */
	struct ibv_sge sge[QPG__RDMA_READ_SGE];
	int n = 0;
	for (struct qpg_buf *p = b; p; p = p->chain) {
		if (n == (int)c->read_slots || p->io_len > p->len || (p != b && kind != WR_READ))
			return -EINVAL;
		sge[n++] = (struct ibv_sge){(uintptr_t)p->addr, p->io_len, p->lkey};
	}
	/* Not held behind the fence: a connection that binds windows (a
	 * server's) does not read, and one that did would be refused here
	 * rather than have its READ pass what waits. */
	if (to_rdma(c)->ops)
		return -EBUSY;
	if (post_sends_first(c))
		return -ENOTCONN;
	b->owner = c;
	struct ibv_send_wr wr = {.wr_id = wr_id_of(b, kind),
				 .sg_list = sge,
				 .num_sge = n,
				 .opcode = kind == WR_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int err = ibv_post_send(to_rdma(c)->qp, &wr, &bad);
	if (err)
		return -err;
	to_rdma(c)->net_out++;
	return 0;
}

int qpg__rdma_read(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	return post_one_sided(c, b, WR_READ, raddr, rkey);
}

int qpg__rdma_test_write(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	return post_one_sided(c, b, WR_WRITE, raddr, rkey);
}

void qpg__rdma_windows_unbind(struct rdma_conn *rc)
{
	for (struct rdma_window *w = rc->windows; w; w = w->next_all)
		qpg_mw_free(&w->mw);
}

void qpg__rdma_windows_free(struct rdma_conn *rc)
{
	while (rc->windows) {
		struct rdma_window *w = rc->windows;
		rc->windows = w->next_all;
		qpg_mw_free(&w->mw);
		free(w);
	}
	rc->free_windows = NULL;
}

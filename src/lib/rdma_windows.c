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

void qpg__rdma_window_done(struct rdma_window *w, const struct ibv_wc *wc)
{
	struct qpg__conn *c = &w->owner->base;
	bool ok = wc->status == IBV_WC_SUCCESS;
	if (w->revoking) {
		/* Invalid now (or its QP is in error): safe to reuse. */
		w->revoking = false;
		w->next_free = w->owner->free_windows;
		w->owner->free_windows = w;
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

/* Frames C has sent go first (rdma_send.c): a reply that names a window
 * reaches the peer after the window is bound, as it was asked for. */
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
	if ((err = post_sends_first(c)) != 0)
		return err;
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
		w->next_all = rc->windows;
		rc->windows = w;
	}
	uint32_t new_rkey = ibv_inc_rkey(w->mw->rkey);
	struct ibv_send_wr wr = {.wr_id = wr_id_of(w, WR_WINDOW),
				 .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = new_rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = region,
							 .addr = (uintptr_t)addr,
							 .length = len,
							 .mw_access_flags = IBV_ACCESS_REMOTE_READ};
	if ((err = ibv_post_send(rc->qp, &wr, &bad)) != 0) {
		w->next_free = rc->free_windows;
		rc->free_windows = w;
		return -err;
	}
	/* The device knows the window by its current key from here on. */
	w->mw->rkey = new_rkey;
	w->user = user;
	*window = w;
	*rkey = new_rkey;
	return 0;
}

int qpg__rdma_revoke(struct qpg__conn *c, void *window)
{
	struct rdma_window *w = window;
	if (!w->mw || post_sends_first(c))
		return -ENOTCONN;
	struct ibv_send_wr wr = {.wr_id = wr_id_of(w, WR_WINDOW),
				 .opcode = IBV_WR_LOCAL_INV,
				 .send_flags = IBV_SEND_SIGNALED,
				 .invalidate_rkey = w->mw->rkey},
			   *bad;
	int err = ibv_post_send(to_rdma(c)->qp, &wr, &bad);
	if (err)
		return -err;
	w->revoking = true;
	return 0;
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
	return err ? -err : 0;
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

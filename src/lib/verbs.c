/* SPDX-License-Identifier: BSD-2-Clause */
/* IB verbs boundary: every verbs call in qpgate goes through here, and every
 * error comes out as a negative errno. */
#include "qpgate/verbs.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "maps.h"
#include "qpgate/qpgate.h"

static int neg_errno_or(int fallback)
{
	return errno ? -errno : -fallback;
}

/* RoCE v2 GIDs for IPv4 addresses are IPv4-mapped (::ffff:a.b.c.d); rxe on lo
 * only works with that one, and it is what a real RoCE NIC uses for IPv4. */
static int pick_gid_index(struct ibv_context *ctx, uint8_t port, int table_len)
{
	for (int i = 0; i < table_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, port, i, &g))
			continue;
		static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (memcmp(g.raw, v4mapped, sizeof(v4mapped)) == 0)
			return i;
	}
	return 0;
}

int qpg_rdma_dev_open(struct qpg_rdma_dev *dev, const char *name, uint8_t port, int gid_index)
{
	struct ibv_device **list;
	struct ibv_device *chosen = NULL;
	int n = 0, rc;

	memset(dev, 0, sizeof(*dev));
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return neg_errno_or(ENODEV);
	for (int i = 0; i < n; i++) {
		if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) {
			chosen = list[i];
			break;
		}
	}
	if (!chosen) {
		ibv_free_device_list(list);
		return -ENODEV;
	}
	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(chosen));
	errno = 0;
	dev->ctx = ibv_open_device(chosen);
	ibv_free_device_list(list);
	if (!dev->ctx)
		return neg_errno_or(ENODEV);

	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	rc = ibv_query_device(dev->ctx, &da);
	if (rc)
		goto err_close;
	rc = ibv_query_port(dev->ctx, port, &pa);
	if (rc)
		goto err_close;
	if (pa.state != IBV_PORT_ACTIVE) {
		rc = ENETDOWN;
		goto err_close;
	}
	dev->port = port;
	dev->lid = pa.lid;
	dev->active_mtu = pa.active_mtu;
	dev->max_qp = da.max_qp;
	dev->max_cqe = da.max_cqe;
	dev->max_srq_wr = da.max_srq_wr;
	dev->max_qp_wr = da.max_qp_wr;
	dev->max_qp_rd_atom = da.max_qp_rd_atom;
	dev->max_sge_rd = QPG_MIN(da.max_sge_rd, da.max_sge);
	if (gid_index < 0)
		gid_index = pick_gid_index(dev->ctx, port, pa.gid_tbl_len);
	if (gid_index >= pa.gid_tbl_len) {
		rc = EINVAL;
		goto err_close;
	}
	dev->gid_index = gid_index;
	dev->gid_tbl_len = pa.gid_tbl_len;
	rc = ibv_query_gid(dev->ctx, port, gid_index, &dev->gid);
	if (rc)
		goto err_close;
	errno = 0;
	dev->pd = ibv_alloc_pd(dev->ctx);
	if (!dev->pd) {
		rc = errno ? errno : ENOMEM;
		goto err_close;
	}
	return 0;

err_close:
	ibv_close_device(dev->ctx);
	dev->ctx = NULL;
	return -rc;
}

void qpg_rdma_dev_close(struct qpg_rdma_dev *dev)
{
	if (dev->pd) {
		ibv_dealloc_pd(dev->pd);
		dev->pd = NULL;
	}
	if (dev->ctx) {
		ibv_close_device(dev->ctx);
		dev->ctx = NULL;
	}
}

bool qpg_rdma_gid_is_local(const struct qpg_rdma_dev *dev, const uint8_t gid[16])
{
	for (int i = 0; i < dev->gid_tbl_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(dev->ctx, dev->port, i, &g) == 0 && memcmp(g.raw, gid, 16) == 0)
			return true;
	}
	return false;
}

void qpg_qp_opts_default(struct qpg_qp_opts *o)
{
	static const struct qpg_qp_opts defaults = {
	    .max_send_wr = 16,
	    .max_recv_wr = 16,
	    .max_inline = 0,
	    /* 4.096 us * 2^18 = 1.07 s per try, 7 tries: a dead peer shows up as
	     * a retry-exceeded completion within about 8 s instead of hanging.
	     * Shorter timeouts (14 = 67 ms is common on hardware) turn a loaded
	     * software device into a retransmission storm: with thousands of QPs
	     * each waiting longer than 67 ms for its ACK under load, every QP
	     * resends at once and the load that caused the delay doubles. */
	    .timeout = 18,
	    /* 6, not 7: rxe takes a retry count of 7 as "retry forever" (the
	     * spec's meaning for the RNR count only), and on a dead wire the QP
	     * never failed; seen in the two-VM lab with 100% loss. */
	    .retry_cnt = 6,
	    /* Finite: 7 would retry RNR forever, and a peer that stops posting
	     * receives (alive, its control channel open) would pin our send
	     * queue and the pool slots behind it for good. Receives are kept
	     * posted for every credit granted, so an honest peer does not RNR;
	     * the receiver's min_rnr_timer (qpg_qp_to_rtr) makes these 7 tries
	     * last ~70 ms. */
	    .rnr_retry = 6,
	    .rd_atomic = 1,
	};
	*o = defaults;
}

/* What the device allows, and never 0 (the verbs minimum is 1). */
static uint8_t rd_atomic_of(const struct qpg_rdma_dev *dev, const struct qpg_qp_opts *o)
{
	int n = o->rd_atomic ? o->rd_atomic : 1;
	if (dev->max_qp_rd_atom > 0 && n > dev->max_qp_rd_atom)
		n = dev->max_qp_rd_atom;
	return (uint8_t)n;
}

int qpg_qp_create(struct qpg_rdma_dev *dev, const struct qpg_qp_opts *o, struct ibv_qp **out)
{
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = o->send_cq;
	a.recv_cq = o->recv_cq;
	a.srq = o->srq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = o->max_send_wr;
	a.cap.max_recv_wr = o->srq ? 0 : o->max_recv_wr;
	a.cap.max_send_sge = o->max_send_sge ? o->max_send_sge : 1;
	a.cap.max_recv_sge = o->srq ? 0 : 1;
	a.cap.max_inline_data = o->max_inline;
	errno = 0;
	*out = ibv_create_qp(dev->pd, &a);
	if (!*out) {
		int err = neg_errno_or(ENOMEM);
		return err == -ENOMEM && qpg__maps_at_limit() ? -QPG_EMAPCOUNT : err;
	}
	return 0;
}

int qpg_qp_to_init(struct qpg_rdma_dev *dev, struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = dev->port;
	a.qp_access_flags = access;
	return -ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int qpg_qp_to_rtr(struct qpg_rdma_dev *dev, struct ibv_qp *qp, const struct qpg_qp_addr *peer,
		  const struct qpg_qp_opts *o)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)QPG_MIN(peer->mtu, (uint8_t)dev->active_mtu);
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn; /* the peer's secret sq_psn is our expected rq_psn */
	a.max_dest_rd_atomic = rd_atomic_of(dev, o);
	a.min_rnr_timer = 20; /* 10.24 ms: with rnr_retry 6 a peer gets ~70 ms to post */
	a.ah_attr.is_global = 1;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.port_num = dev->port;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = o->own_sgid ? o->sgid_index : (uint8_t)dev->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.traffic_class = o->traffic_class;
	a.ah_attr.sl = o->sl;
	return -ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int qpg_qp_to_rts(struct qpg_rdma_dev *dev, struct ibv_qp *qp, uint32_t sq_psn,
		  const struct qpg_qp_opts *o)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.max_rd_atomic = rd_atomic_of(dev, o);
	return -ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int qpg_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return -ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

void qpg_qp_destroy(struct ibv_qp **qp)
{
	if (*qp) {
		ibv_destroy_qp(*qp);
		*qp = NULL;
	}
}

void qpg_qp_local_addr(const struct qpg_rdma_dev *dev, const struct ibv_qp *qp, uint32_t psn,
		       struct qpg_qp_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = qp->qp_num;
	out->psn = psn;
	out->lid = dev->lid;
	out->mtu = (uint8_t)dev->active_mtu;
	memcpy(out->gid, dev->gid.raw, 16);
}

int qpg_mw_alloc(struct qpg_rdma_dev *dev, struct ibv_mw **out)
{
	errno = 0;
	*out = ibv_alloc_mw(dev->pd, IBV_MW_TYPE_2);
	if (!*out)
		return errno && errno != ENOSYS ? -errno : -EOPNOTSUPP;
	return 0;
}

void qpg_mw_free(struct ibv_mw **mw)
{
	if (*mw) {
		ibv_dealloc_mw(*mw);
		*mw = NULL;
	}
}

/* PSNs come from the CSPRNG in draws of PSN_DRAW at a time, each byte
 * handed out once: one RAND_bytes call costs as much as 60 of its bytes
 * (0.66 us for 3 bytes, 0.011 us per 4 of 256, on this host), and a
 * session of 64 QPs needs 64 PSNs on each side. The draw is the calling
 * thread's; a forked child throws its copy away (it would repeat the
 * parent's PSNs). */
#define PSN_DRAW 192 /* 64 PSNs */
static _Thread_local struct {
	unsigned char b[PSN_DRAW];
	unsigned left; /* bytes not yet handed out, at the end of b */
} psn_draw;
static pthread_once_t psn_once = PTHREAD_ONCE_INIT;

static void psn_forked(void)
{
	OPENSSL_cleanse(psn_draw.b, sizeof(psn_draw.b));
	psn_draw.left = 0;
}

static void psn_init(void)
{
	pthread_atfork(NULL, NULL, psn_forked);
}

int qpg_psn_random(uint32_t *psn)
{
	pthread_once(&psn_once, psn_init);
	if (psn_draw.left < 3) {
		if (RAND_bytes(psn_draw.b, sizeof(psn_draw.b)) != 1)
			return -EIO;
		psn_draw.left = sizeof(psn_draw.b);
	}
	unsigned char *b = psn_draw.b + sizeof(psn_draw.b) - psn_draw.left;
	*psn = ((uint32_t)b[0] << 16) | ((uint32_t)b[1] << 8) | b[2];
	memset(b, 0, 3); /* handed out: not kept */
	psn_draw.left -= 3;
	return 0;
}

/* ---- registered slot pool ---- */

struct qpg_pool_chunk {
	struct qpg_pool_chunk *next;
	void *mem;
	struct ibv_mr *mr;
	struct qpg_buf bufs[];
};

int qpg_pool_init(struct qpg_pool *p, struct ibv_pd *pd, size_t slot_size, size_t slots_per_chunk,
		  size_t max_slots, int access)
{
	if (slot_size == 0 || slots_per_chunk == 0 || slot_size > UINT32_MAX)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->pd = pd;
	/* 64-byte slots keep one slot's DMA off its neighbour's cache lines. */
	p->slot_size = (slot_size + 63) & ~(size_t)63;
	p->slots_per_chunk = slots_per_chunk;
	p->max_slots = max_slots;
	p->access = access;
	return 0;
}

static int pool_grow(struct qpg_pool *p)
{
	size_t n = p->slots_per_chunk;
	if (p->max_slots && p->nslots + n > p->max_slots)
		n = p->max_slots - p->nslots;
	if (n == 0)
		return -ENOSPC;
	struct qpg_pool_chunk *c = calloc(1, sizeof(*c) + n * sizeof(struct qpg_buf));
	if (!c)
		return -ENOMEM;
	size_t bytes = n * p->slot_size;
	if (posix_memalign(&c->mem, 4096, bytes)) {
		free(c);
		return -ENOMEM;
	}
	if (p->pd) {
		errno = 0;
		c->mr = ibv_reg_mr(p->pd, c->mem, bytes, IBV_ACCESS_LOCAL_WRITE | p->access);
		if (!c->mr) {
			int rc = neg_errno_or(ENOMEM);
			free(c->mem);
			free(c);
			return rc;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct qpg_buf *b = &c->bufs[i];
		b->addr = (char *)c->mem + i * p->slot_size;
		b->len = (uint32_t)p->slot_size;
		b->lkey = c->mr ? c->mr->lkey : 0;
		b->rkey = c->mr && p->access ? c->mr->rkey : 0;
		b->next_free = p->free;
		p->free = b;
	}
	c->next = p->chunks;
	p->chunks = c;
	p->nslots += n;
	return 0;
}

struct qpg_buf *qpg_pool_get(struct qpg_pool *p)
{
	if (!p->free && pool_grow(p) < 0)
		return NULL;
	struct qpg_buf *b = p->free;
	p->free = b->next_free;
	b->next_free = NULL;
	b->chain = NULL;
	p->in_use++;
	return b;
}

void qpg_pool_put(struct qpg_pool *p, struct qpg_buf *b)
{
	while (b) {
		struct qpg_buf *next = b->chain;
		if (b->release) {
			b->release(b);
			b = next;
			continue;
		}
		b->owner = NULL;
		b->chain = NULL;
		b->next_free = p->free;
		p->free = b;
		p->in_use--;
		b = next;
	}
}

void qpg_pool_destroy(struct qpg_pool *p)
{
	struct qpg_pool_chunk *c = p->chunks;
	while (c) {
		struct qpg_pool_chunk *next = c->next;
		if (c->mr)
			ibv_dereg_mr(c->mr);
		free(c->mem);
		free(c);
		c = next;
	}
	p->chunks = NULL;
	p->free = NULL;
	p->nslots = 0;
	p->in_use = 0;
}

size_t qpg_pool_bytes(const struct qpg_pool *p)
{
	return p->nslots * p->slot_size;
}

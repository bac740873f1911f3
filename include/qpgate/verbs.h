/* SPDX-License-Identifier: BSD-2-Clause */
/* Thin, errno-returning layer over IB verbs: device, registered pool, and the
 * manual RESET->INIT->RTR->RTS bring-up qpgate uses instead of rdma_cm.
 *
 * Every function returns 0 or a negative errno; verbs' mixed conventions
 * (NULL+errno, positive errno) are converted here and nowhere else. */
#ifndef QPGATE_VERBS_H
#define QPGATE_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qpg_rdma_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	int gid_index;
	int gid_tbl_len;
	union ibv_gid gid;
	uint16_t lid;
	enum ibv_mtu active_mtu;
	int max_qp;
	int max_cqe;
	int max_srq_wr;
	int max_qp_wr;
	int max_qp_rd_atom; /* RDMA READs one QP may have outstanding */
	int max_sge_rd;	    /* scatter entries in one RDMA READ */
	char name[64];
};

/* Opens NAME (NULL: the first device) and allocates its PD. GID_INDEX < 0
 * picks the first RoCE v2 IPv4-mapped GID, falling back to index 0. */
int qpg_rdma_dev_open(struct qpg_rdma_dev *dev, const char *name, uint8_t port, int gid_index);
void qpg_rdma_dev_close(struct qpg_rdma_dev *dev);
/* Whether GID is in DEV's port's GID table (one of this host's own). */
bool qpg_rdma_gid_is_local(const struct qpg_rdma_dev *dev, const uint8_t gid[16]);

/* The connection parameters one side tells the other. */
struct qpg_qp_addr {
	uint32_t qpn;
	uint32_t psn; /* 24 bits */
	uint16_t lid;
	uint8_t mtu; /* enum ibv_mtu */
	uint8_t gid[16];
};

struct qpg_qp_opts {
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq; /* NULL: the QP gets its own receive queue */
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_inline;
	uint32_t max_send_sge; /* 0: 1 (a READ may scatter into this many slots) */
	int access;	       /* remote access for INIT; 0 for two-sided only */
	uint8_t rd_atomic;     /* RDMA READs in flight, as initiator and as responder */
	uint8_t timeout;       /* local ACK timeout exponent */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t traffic_class; /* RoCE: the GRH traffic class (DSCP << 2 | ECN) */
	uint8_t sl;	       /* service level (the PCP priority on RoCE) */
	bool own_sgid;	       /* our packets come from GID SGID_INDEX, not the device's */
	uint8_t sgid_index;
};

void qpg_qp_opts_default(struct qpg_qp_opts *o);
int qpg_qp_create(struct qpg_rdma_dev *dev, const struct qpg_qp_opts *o, struct ibv_qp **out);
int qpg_qp_to_init(struct qpg_rdma_dev *dev, struct ibv_qp *qp, int access);
int qpg_qp_to_rtr(struct qpg_rdma_dev *dev, struct ibv_qp *qp, const struct qpg_qp_addr *peer,
		  const struct qpg_qp_opts *o);
int qpg_qp_to_rts(struct qpg_rdma_dev *dev, struct ibv_qp *qp, uint32_t sq_psn,
		  const struct qpg_qp_opts *o);
int qpg_qp_to_error(struct ibv_qp *qp);
void qpg_qp_destroy(struct ibv_qp **qp);
void qpg_qp_local_addr(const struct qpg_rdma_dev *dev, const struct ibv_qp *qp, uint32_t psn,
		       struct qpg_qp_addr *out);

/* Memory windows, type 2: bound to one QP by a work request, so a peer
 * reaches the window only through that QP. -EOPNOTSUPP when the device has
 * none. */
int qpg_mw_alloc(struct qpg_rdma_dev *dev, struct ibv_mw **out);
void qpg_mw_free(struct ibv_mw **mw);

/* A fresh 24-bit PSN from the OpenSSL CSPRNG. */
int qpg_psn_random(uint32_t *psn);

/* One registered pool of fixed-size slots, grown in registered chunks so a
 * server does not pin memory for clients it does not have. Not thread-safe:
 * each event loop owns its pool. */
struct qpg_buf {
	void *addr;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t len;
	struct qpg_buf *next_free;
	void *owner;	       /* free for the user while the slot is taken */
	uint64_t cookie;       /* a one-sided read's: its caller's context */
	uint32_t io_len;       /* a one-sided read's length */
	struct qpg_buf *chain; /* a one-sided read's next slot, NULL: the last */
	/* NULL: a slot of the pool. Else ADDR is a caller's registered memory
	 * (qpg_client_read_into) and qpg_pool_put hands B back through it. */
	void (*release)(struct qpg_buf *b);
};

struct qpg_pool_chunk;

struct qpg_pool {
	struct ibv_pd *pd; /* NULL: plain memory, for the TCP transport */
	size_t slot_size;
	size_t slots_per_chunk;
	size_t max_slots;
	int access;
	size_t nslots;
	size_t in_use;
	struct qpg_buf *free;
	struct qpg_pool_chunk *chunks;
};

int qpg_pool_init(struct qpg_pool *p, struct ibv_pd *pd, size_t slot_size, size_t slots_per_chunk,
		  size_t max_slots, int access);
struct qpg_buf *qpg_pool_get(struct qpg_pool *p);
/* Returns B and every slot chained to it (a multi-slot read's). */
void qpg_pool_put(struct qpg_pool *p, struct qpg_buf *b);
void qpg_pool_destroy(struct qpg_pool *p);
size_t qpg_pool_bytes(const struct qpg_pool *p);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The RDMA transport's own structures, shared by transport_rdma.c (QPs, the
 * CQ and SRQ, sends and receives) and rdma_windows.c (one-sided access). */
#ifndef QPG_RDMA_H
#define QPG_RDMA_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "core.h"
#include "map.h"
#include "qpgate/client.h"

/* What a QP is asked for: a spare is taken only by a connection that asks
 * for the same (rdma_spare.c). */
struct rdma_qp_caps {
	uint32_t max_send_wr, max_inline, max_send_sge;
};

struct rdma_spare {
	struct ibv_qp *qp;
	struct rdma_qp_caps caps; /* asked for */
	uint32_t max_inline;	  /* got (a device without inline data gives 0) */
	uint32_t max_send_sge;
	uint64_t since_ns; /* put back */
};

/* Spare QPs in RESET, oldest first: [0, ready) may be taken, [ready, n) wait
 * until the CQ is seen empty. */
struct rdma_spares {
	struct rdma_spare *slot;
	uint32_t n, ready, max;
	uint64_t idle_ns; /* a spare unused this long is destroyed */
};

struct rdma_ep {
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct qpg__io channel_io;
	struct qpg__map qpn_to_conn;
	uint32_t srq_posted;
	uint32_t srq_cap; /* the SRQ's size: the most receives we may post */
	size_t credits;	  /* summed over established connections */
	uint32_t unacked_events;
	bool armed; /* an event was asked for and has not come yet */
	int cq_size;
	struct rdma_spares spares;
	struct qpg__endpoint *ep;
	/* Connections holding a message not posted yet (rdma_send.c), posted
	 * after each batch of completions and as the loop's turn ends. */
	struct rdma_conn *unposted;
};

/* A window's bind or invalidation: its work request's id, and while it
 * waits on the fence (rdma_windows.c) the next that waits and the messages
 * closed after it (linked by next_free), which wait too. */
struct rdma_window_op {
	struct rdma_window *w;
	struct rdma_window_op *next;
	struct qpg_buf *after, *after_tail;
	bool inv;
};

struct rdma_window {
	struct ibv_mw *mw;
	struct rdma_conn *owner;
	void *user;
	struct rdma_window *next_all, *next_free;
	void *region; /* what its bind binds */
	const void *addr;
	uint32_t len;
	uint32_t rkey; /* the key its bind gives it (mw->rkey: once posted) */
	struct rdma_window_op bind, inv;
	bool revoking; /* its invalidation is posted or waits */
};

/* Scatter entries of a gathered SEND: the first slot's bytes, and for each
 * frame sent by reference its value and the slot's bytes after it (its tag,
 * the next frames' heads), so a message carries up to three values without
 * copying them: at 16 KiB messages, three 4 KiB GETs' replies. On rxe a
 * send queue entry of 8 scatter entries is no larger than one of 128 inline
 * bytes (below), so the QP costs no more memory. */
#define QPG__RDMA_SEND_SGE 8

struct rdma_conn {
	struct qpg__conn base;
	struct ibv_qp *qp;
	struct rdma_window *windows, *free_windows;
	uint32_t credits;	  /* this connection's share of rdma_ep.credits */
	uint32_t max_inline;	  /* sends up to this long go inline (0: none) */
	uint32_t max_sge;	  /* scatter entries its QP's work requests may have */
	struct rdma_qp_caps caps; /* what its QP was asked for */
	/* The message being gathered (rdma_send.c): frames sent in one
	 * batch of the loop go to the peer as one SEND. MSG is its first
	 * frame's slot, which the later frames' bytes are copied into; a
	 * frame sent by reference adds its value as a scatter entry of its
	 * own, chained to MSG (MSG_TAIL: the chain's last) until the SEND
	 * completes. */
	struct qpg_buf *msg, *msg_tail;
	uint32_t msg_len, msg_frames;
	uint32_t msg_used; /* bytes of MSG's slot taken */
	uint32_t msg_refs; /* values chained to MSG */
	/* On rdma_ep.unposted while msg is set: the next, and the pointer
	 * that points at this one (so it leaves the list in constant time). */
	struct rdma_conn *next_unposted, **pprev_unposted;
	/* The fence (rdma_windows.c): SENDs, READs and WRITEs posted and not
	 * completed, and the window binds and invalidations that wait for
	 * them to be none, oldest first, each with the messages behind it. */
	uint32_t net_out;
	struct rdma_window_op *ops, *ops_tail;
};

/* Small frames (an echo of up to 96 bytes with its header and tag) are
 * sent inline: copied into the work request when it is posted, so the
 * device does not read them from the pool. A device that offers no
 * inline data gets QPs without it. */
#define QPG__RDMA_INLINE 128

/* A READ scatters into up to this many pool slots (one work request, one
 * completion): a 64 KiB value over 8 KiB slots is one READ, not eight. On
 * rxe a send queue entry of 8 scatter entries is no larger than one of 128
 * inline bytes, so the QP costs no more memory. */
#define QPG__RDMA_READ_SGE QPG_CLIENT_READ_SLOTS

/* Work request ids: a pointer with the kind of request in its low bits
 * (buffers and windows are at least 8-byte aligned). */
enum wr_kind { WR_BUF = 0, WR_WINDOW = 1, WR_READ = 2, WR_WRITE = 3 };
#define WR_KIND_MASK 3u

static inline uint64_t wr_id_of(const void *p, enum wr_kind k)
{
	return (uintptr_t)p | (uint64_t)k;
}

static inline struct rdma_conn *to_rdma(struct qpg__conn *c)
{
	return qpg__container_of(c, struct rdma_conn, base);
}

/* rdma_spare.c: spare QPs (see there). MAX 0: none are kept; IDLE_MS 0:
 * QPG__SPARE_IDLE_MS. */
int qpg__rdma_spare_init(struct rdma_spares *s, uint32_t max, uint32_t idle_ms);
/* A spare asked for with CAPS, in RESET, and what it got; false if none. */
bool qpg__rdma_spare_take(struct rdma_spares *s, const struct rdma_qp_caps *caps,
			  struct rdma_spare *out);
/* Moves QP (every work request of it back) to RESET and keeps it; false
 * (the caller destroys it) when full or the move fails. */
bool qpg__rdma_spare_put(struct rdma_spares *s, const struct rdma_spare *qp);
/* The CQ was seen empty: every spare may be taken. */
void qpg__rdma_spare_cq_empty(struct rdma_spares *s);
/* Destroys spares unused for their idle time. */
void qpg__rdma_spare_trim(struct rdma_spares *s, uint64_t now_ns, struct qpg__ep_stats *st);
void qpg__rdma_spare_drop_all(struct rdma_spares *s, struct qpg__ep_stats *st);
void qpg__rdma_spare_fini(struct rdma_spares *s, struct qpg__ep_stats *st);

/* rdma_send.c: a frame joins the connection's message, which is posted
 * after the batch of completions or the loop's turn that sent it, or
 * before anything else C posts. */
int qpg__rdma_send(struct qpg__conn *c, struct qpg_buf *b, size_t len);
/* Sends a frame whose HEAD bytes in B are followed on the wire by V's
 * bytes (in REGION, an MR of the endpoint's PD) and then by B's next TAG
 * bytes. V comes back through its release once the SEND completes.
 * Only where qpg__rdma_can_ref. */
int qpg__rdma_send_ref(struct qpg__conn *c, struct qpg_buf *b, size_t head, struct qpg_buf *v,
		       void *region, size_t tag);
bool qpg__rdma_can_ref(const struct qpg__conn *c);
void qpg__rdma_post_now(struct rdma_conn *rc);
/* Every connection's gathered message, now. */
void qpg__rdma_post_all(struct rdma_ep *r);
/* C is closing: its unposted frames are dropped, as a flush would. */
void qpg__rdma_send_drop(struct rdma_conn *rc);
void qpg__rdma_send_init(struct rdma_ep *r);
void qpg__rdma_send_fini(struct rdma_ep *r);
/* A send's completion: how many frames its message carried. */
uint32_t qpg__rdma_sent_frames(const struct qpg_buf *b);
/* Posts message B (closed: its frame count and slot bytes in it), now. */
void qpg__rdma_msg_post(struct rdma_conn *rc, struct qpg_buf *b);
/* Drops the closed messages from M on (linked by next_free), as their
 * flushes would have. */
void qpg__rdma_msgs_drop(struct rdma_conn *rc, struct qpg_buf *m);

/* rdma_windows.c */
void qpg__rdma_window_done(struct rdma_window_op *op, const struct ibv_wc *wc);
/* A SEND, READ or WRITE of RC completed (or was flushed): the fence may
 * let the windows' work requests waiting on it go. */
void qpg__rdma_net_done(struct rdma_conn *rc);
/* RC is closing: the waiting window work requests and messages are
 * dropped, as their flushes would have been. */
void qpg__rdma_ops_drop(struct rdma_conn *rc);
int qpg__rdma_windows_probe(struct qpg__endpoint *ep);
/* rdma_setup.c: the process setup (qpg__transport_ops.setup). */
int qpg__rdma_setup(const struct qpg__transport_setup *su, struct qpg_rdma_dev *dev, char *err,
		    size_t err_len);
void qpg__rdma_teardown(struct qpg_rdma_dev *dev);
void qpg__rdma_describe(const struct qpg_rdma_dev *dev, char *buf, size_t len);
int qpg__rdma_region_open(struct qpg__endpoint *ep, void *addr, size_t len, void **region);
void qpg__rdma_region_close(void *region);
int qpg__rdma_grant_read(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			 void *user, void **window, uint32_t *rkey);
int qpg__rdma_revoke(struct qpg__conn *c, void *window);
int qpg__rdma_read(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
int qpg__rdma_test_write(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
/* Deallocating unbinds C's windows now (so the service can drop the
 * regions under them); the structs stay until the flushes are back. */
void qpg__rdma_windows_unbind(struct rdma_conn *rc);
void qpg__rdma_windows_free(struct rdma_conn *rc);

#endif

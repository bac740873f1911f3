/* SPDX-License-Identifier: BSD-2-Clause */
/* Two RC QPs on one real RDMA device, brought up RESET->INIT->RTR->RTS by hand
 * with CSPRNG PSNs, exchanging data through a shared CQ and an SRQ; and the
 * pool's memory (every receive buffer) refusing RDMA READ and WRITE from a
 * peer that knows its address and key. Fails when there is no device: the
 * lab or a NIC must be there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qpgate/verbs.h"

#define MSGS	 256
#define MSG_SIZE 1024

struct side {
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	uint32_t psn;
	struct qpg_qp_addr addr;
};

static struct qpg_rdma_dev dev;

static int setup(void **state)
{
	int rc = qpg_rdma_dev_open(&dev, getenv("QPG_IB_DEV"), 1, -1);
	if (rc < 0)
		fprintf(stderr, "cannot open an RDMA device: %s\n", strerror(-rc));
	assert_int_equal(rc, 0);
	printf("device %s, gid index %d, max_qp %d\n", dev.name, dev.gid_index, dev.max_qp);
	return 0;
}

static int teardown(void **state)
{
	qpg_rdma_dev_close(&dev);
	qpg_rdma_dev_close(&dev); /* idempotent */
	return 0;
}

static void bring_up_with(struct side *s, const struct qpg_qp_opts *o,
			  const struct qpg_qp_addr *peer, int remote_access)
{
	assert_int_equal(qpg_qp_to_init(&dev, s->qp, remote_access), 0);
	assert_int_equal(qpg_qp_to_rtr(&dev, s->qp, peer, o), 0);
	assert_int_equal(qpg_qp_to_rts(&dev, s->qp, s->psn, o), 0);

	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	assert_int_equal(ibv_query_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia),
			 0);
	assert_int_equal(a.qp_state, IBV_QPS_RTS);
	assert_int_equal(a.sq_psn, s->psn);
	assert_int_equal(a.rq_psn, peer->psn);
}

static void bring_up(struct side *s, const struct qpg_qp_opts *o, const struct qpg_qp_addr *peer)
{
	bring_up_with(s, o, peer, 0);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spins = 0; spins < 200000000L; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
	}
	return 0;
}

static void test_rc_send_recv_through_srq(void **state)
{
	struct side a = {0}, b = {0};
	struct qpg_pool pool;
	struct qpg_qp_opts o;

	a.cq = ibv_create_cq(dev.ctx, 2 * MSGS, NULL, NULL, 0);
	b.cq = ibv_create_cq(dev.ctx, 2 * MSGS, NULL, NULL, 0);
	assert_non_null(a.cq);
	assert_non_null(b.cq);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = MSGS, .max_sge = 1}};
	b.srq = ibv_create_srq(dev.pd, &sa);
	assert_non_null(b.srq);

	qpg_qp_opts_default(&o);
	o.max_send_wr = MSGS;
	o.send_cq = o.recv_cq = a.cq;
	assert_int_equal(qpg_qp_create(&dev, &o, &a.qp), 0);
	o.send_cq = o.recv_cq = b.cq;
	o.srq = b.srq;
	assert_int_equal(qpg_qp_create(&dev, &o, &b.qp), 0);

	assert_int_equal(qpg_psn_random(&a.psn), 0);
	assert_int_equal(qpg_psn_random(&b.psn), 0);
	assert_true(a.psn <= 0xffffff && b.psn <= 0xffffff);
	qpg_qp_local_addr(&dev, a.qp, a.psn, &a.addr);
	qpg_qp_local_addr(&dev, b.qp, b.psn, &b.addr);
	printf("A: QPN 0x%06x PSN 0x%06x   B: QPN 0x%06x PSN 0x%06x\n", a.addr.qpn, a.psn,
	       b.addr.qpn, b.psn);
	bring_up(&a, &o, &b.addr);
	bring_up(&b, &o, &a.addr);

	assert_int_equal(qpg_pool_init(&pool, dev.pd, MSG_SIZE, 64, 2 * MSGS, 0), 0);
	struct qpg_buf *rx[MSGS], *tx[MSGS];
	for (int i = 0; i < MSGS; i++) {
		rx[i] = qpg_pool_get(&pool);
		tx[i] = qpg_pool_get(&pool);
		assert_non_null(rx[i]);
		assert_non_null(tx[i]);
		assert_int_equal(rx[i]->rkey, 0); /* receive memory exposes no rkey */
		memset(rx[i]->addr, 0, MSG_SIZE);
		struct ibv_sge sge = {(uintptr_t)rx[i]->addr, MSG_SIZE, rx[i]->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
		assert_int_equal(ibv_post_srq_recv(b.srq, &wr, &bad), 0);
	}
	assert_null(qpg_pool_get(&pool)); /* max_slots holds */

	for (int i = 0; i < MSGS; i++) {
		unsigned char *p = tx[i]->addr;
		for (int j = 0; j < MSG_SIZE; j++)
			p[j] = (unsigned char)(i * 31 + j * 7 + (int)a.psn);
		struct ibv_sge sge = {(uintptr_t)tx[i]->addr, MSG_SIZE, tx[i]->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED};
		struct ibv_send_wr *bad;
		assert_int_equal(ibv_post_send(a.qp, &wr, &bad), 0);
	}

	int sent = 0, received = 0;
	unsigned char seen[MSGS] = {0};
	while (sent < MSGS || received < MSGS) {
		struct ibv_wc wc;
		if (sent < MSGS) {
			assert_int_equal(poll_one(a.cq, &wc), 1);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			assert_int_equal(wc.opcode, IBV_WC_SEND);
			sent++;
		}
		if (received < MSGS) {
			assert_int_equal(poll_one(b.cq, &wc), 1);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			assert_int_equal(wc.opcode, IBV_WC_RECV);
			assert_int_equal(wc.byte_len, MSG_SIZE);
			assert_int_equal(wc.qp_num, b.addr.qpn);
			/* RC delivers in order: the i-th receive holds the i-th send. */
			unsigned char *p = rx[wc.wr_id]->addr;
			for (int j = 0; j < MSG_SIZE; j++)
				assert_int_equal(
				    p[j], (unsigned char)(received * 31 + j * 7 + (int)a.psn));
			seen[wc.wr_id] = 1;
			received++;
		}
	}
	for (int i = 0; i < MSGS; i++)
		assert_true(seen[i]);
	printf("%d messages of %d bytes sent and verified over RC\n", MSGS, MSG_SIZE);

	qpg_qp_destroy(&a.qp);
	qpg_qp_destroy(&b.qp);
	qpg_qp_destroy(&b.qp); /* idempotent */
	qpg_pool_destroy(&pool);
	ibv_destroy_srq(b.srq);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
}

/* One one-sided operation from a fresh QP A at B's memory [addr, +len) with
 * rkey. B's QP allows remote read and write, so only the region's own
 * access flags stand in the way. Returns A's completion status. */
static enum ibv_wc_status one_sided_at(enum ibv_wr_opcode op, void *addr, uint32_t len,
				       uint32_t rkey)
{
	struct side a = {0}, b = {0};
	struct qpg_qp_opts o;
	a.cq = ibv_create_cq(dev.ctx, 4, NULL, NULL, 0);
	b.cq = ibv_create_cq(dev.ctx, 4, NULL, NULL, 0);
	assert_non_null(a.cq);
	assert_non_null(b.cq);
	qpg_qp_opts_default(&o);
	o.send_cq = o.recv_cq = a.cq;
	assert_int_equal(qpg_qp_create(&dev, &o, &a.qp), 0);
	o.send_cq = o.recv_cq = b.cq;
	assert_int_equal(qpg_qp_create(&dev, &o, &b.qp), 0);
	assert_int_equal(qpg_psn_random(&a.psn), 0);
	assert_int_equal(qpg_psn_random(&b.psn), 0);
	qpg_qp_local_addr(&dev, a.qp, a.psn, &a.addr);
	qpg_qp_local_addr(&dev, b.qp, b.psn, &b.addr);
	o.timeout = 14; /* a lost answer should fail fast, not hang the test */
	bring_up(&a, &o, &b.addr);
	bring_up_with(&b, &o, &a.addr, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);

	static unsigned char local[MSG_SIZE];
	struct ibv_mr *mr = ibv_reg_mr(dev.pd, local, sizeof(local), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	memset(local, 0xee, sizeof(local));
	struct ibv_sge sge = {(uintptr_t)local, len, mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = (uintptr_t)addr, .rkey = rkey}},
			   *bad;
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), 0);
	struct ibv_wc wc;
	assert_int_equal(poll_one(a.cq, &wc), 1);
	printf("%s at a receive buffer with its own key 0x%08x: %s\n",
	       op == IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE", rkey,
	       ibv_wc_status_str(wc.status));

	ibv_dereg_mr(mr);
	qpg_qp_destroy(&a.qp);
	qpg_qp_destroy(&b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	return wc.status;
}

/* ReDMArk guesses keys; guessing right must not be enough. The pool never
 * registers with remote access, so the device itself refuses a peer that
 * knows a receive buffer's address and key (here: its exact lkey, the best
 * guess there is; rxe uses the same value for both keys of a region). */
static void test_receive_memory_refuses_remote_access(void **state)
{
	struct qpg_pool pool;
	assert_int_equal(qpg_pool_init(&pool, dev.pd, MSG_SIZE, 4, 4, 0), 0);
	struct qpg_buf *rx = qpg_pool_get(&pool);
	assert_non_null(rx);
	assert_int_equal(rx->rkey, 0);
	memset(rx->addr, 0x5a, MSG_SIZE);

	assert_int_equal(one_sided_at(IBV_WR_RDMA_WRITE, rx->addr, MSG_SIZE, rx->lkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(one_sided_at(IBV_WR_RDMA_READ, rx->addr, MSG_SIZE, rx->lkey),
			 IBV_WC_REM_ACCESS_ERR);
	const unsigned char *p = rx->addr;
	for (int j = 0; j < MSG_SIZE; j++)
		assert_int_equal(p[j], 0x5a); /* the WRITE changed nothing */
	printf("receive memory: READ and WRITE refused by the device, contents unchanged\n");
	qpg_pool_destroy(&pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rc_send_recv_through_srq),
	    cmocka_unit_test(test_receive_memory_refuses_remote_access),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

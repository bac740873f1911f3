/* SPDX-License-Identifier: BSD-2-Clause */
/* The verbs floor of a connect: what the two QPs of one RC connection cost
 * to bring up and tear down, and nothing else. Each round creates a pair of
 * QPs as qpgate's two ends make them (a shared CQ, a shared receive queue,
 * 3 send WRs), moves each to INIT, RTR (towards the other) and RTS, and
 * destroys both. One thread, one device: no TLS, no socket, no bootstrap, no
 * loop. What is left is the device's and the kernel's work that any RC
 * connection pays, qpgate's or rdma_cm's.
 *   qpg_qp_floor [-d DEV] [-g GID_INDEX] [-n PAIRS] [--reuse] [--inline N] [--sge N]
 * --inline, --sge: the send queue's inline bytes and scatter entries (0 and
 * 1; qpgate's QPs have 128 inline bytes, a client's 8 scatter entries: in
 * the lab VM neither changed the pair's cost, docs/secure-path.md).
 * --reuse: the pair is created once and each round moves it back to RESET
 * instead of destroying it (what a spare QP costs to take again), and
 * sends one message from A to B through the shared receive queue, checked,
 * so that a QP brought back from RESET is shown to carry data.
 * Prints a table (µs of CPU per pair, and per step) and, last,
 * "floor qp_pairs=P per_s=R bringup_per_s=B": R = 2 / (CPU seconds per
 * pair, every step), B = the same for the bring-up alone (create to RTS,
 * which a connect waits for; the destroy comes after it). Pairs/s with both
 * vCPUs at work, the unit of qpg_tls_floor's figures. Exits 1 if any step
 * failed.
 * --threads N: N threads each bring PAIRS pairs up (create to RTS, on the
 * one device) at once and keep them, then all are destroyed. Prints only
 * "wall qp_pairs=P bringup_per_s=B threads=N": pairs brought up per second
 * of the wall clock, all threads together, which counts what a CPU figure
 * leaves out (the kernel's work in other contexts, the scheduler, a thread
 * that waits for the peer's MAC), as qpgate's connects are timed by the
 * wall clock too. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floor.h"

#include "qpgate/verbs.h"

enum { S_CREATE, S_INIT, S_RTR, S_RTS, S_DESTROY, S_N };
static const char *const step_name[S_N] = {"create", "INIT", "RTR", "RTS", "destroy"};
static const char *const reuse_name[S_N] = {"create", "INIT", "RTR", "RTS", "RESET"};

/* --reuse: A sends one message to B, which must land intact. */
struct probe {
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	uint8_t *buf; /* [0, 64): what A sends; [64, 128): where B receives */
};

static int probe_send(struct ibv_qp *a, const struct probe *p, unsigned round)
{
	struct ibv_sge rs = {(uintptr_t)p->buf + 64, 64, p->mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *rbad;
	memset(p->buf, 0, 128);
	for (unsigned i = 0; i < 64; i++)
		p->buf[i] = (uint8_t)(round * 31 + i);
	struct ibv_sge ss = {(uintptr_t)p->buf, 64, p->mr->lkey};
	struct ibv_send_wr sw = {.wr_id = 1,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	if (ibv_post_srq_recv(p->srq, &rw, &rbad) || ibv_post_send(a, &sw, &sbad))
		return -EIO;
	int got = 0;
	for (long spins = 0; got < 2 && spins < 100000000; spins++) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(p->cq, 1, &wc);
		if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS))
			return -EIO;
		got += n;
	}
	return got == 2 && memcmp(p->buf, p->buf + 64, 64) == 0 ? 0 : -EBADMSG;
}

/* One round: a pair up and down. Adds each step's CPU seconds to step[].
 * With PROBE (--reuse), q[] lives on: up, one message, back to RESET. */
static int pair_round(struct qpg_rdma_dev *dev, const struct qpg_qp_opts *qo, double step[S_N],
		      const char **what, struct ibv_qp **keep, const struct probe *probe,
		      unsigned round)
{
	struct ibv_qp *own[2] = {NULL, NULL}, **q = keep ? keep : own;
	struct qpg_qp_addr addr[2];
	uint32_t psn[2];
	int rc = 0;
	double t = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), u;
	for (int i = 0; i < 2 && !rc; i++)
		if ((rc = qpg_psn_random(&psn[i])) == 0 && !q[i])
			rc = qpg_qp_create(dev, qo, &q[i]);
	if (rc) {
		*what = "QP create";
		goto out;
	}
	u = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), step[S_CREATE] += u - t, t = u;
	for (int i = 0; i < 2; i++)
		qpg_qp_local_addr(dev, q[i], psn[i], &addr[i]);
	for (int i = 0; i < 2 && !rc; i++)
		rc = qpg_qp_to_init(dev, q[i], 0);
	if (rc) {
		*what = "INIT";
		goto out;
	}
	u = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), step[S_INIT] += u - t, t = u;
	for (int i = 0; i < 2 && !rc; i++)
		rc = qpg_qp_to_rtr(dev, q[i], &addr[!i], qo);
	if (rc) {
		*what = "RTR";
		goto out;
	}
	u = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), step[S_RTR] += u - t, t = u;
	for (int i = 0; i < 2 && !rc; i++)
		rc = qpg_qp_to_rts(dev, q[i], psn[i], qo);
	if (rc) {
		*what = "RTS";
		goto out;
	}
	u = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), step[S_RTS] += u - t, t = u;
	if (keep && !probe) /* --threads: the pair stays up, the caller destroys it */
		return 0;
	if (keep) {
		if ((rc = probe_send(q[0], probe, round)) != 0) {
			*what = "a message through the pair";
			goto out;
		}
		t = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID); /* the message is not a step of the bring-up */
		struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
		for (int i = 0; i < 2 && !rc; i++)
			rc = -ibv_modify_qp(q[i], &reset, IBV_QP_STATE);
		if (rc)
			*what = "RESET";
		else
			step[S_DESTROY] += floor_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t;
		return rc;
	}
out:
	for (int i = 0; i < 2; i++)
		if (own[i])
			qpg_qp_destroy(&own[i]);
	if (!rc && !keep)
		step[S_DESTROY] += floor_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t;
	return rc;
}

struct lane {
	pthread_t id;
	struct qpg_rdma_dev *dev;
	const struct qpg_qp_opts *qo;
	struct ibv_qp **q; /* 2 * pairs */
	long pairs, done;
	int rc;
};

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	double step[S_N] = {0};
	const char *what = NULL;
	for (; l->done < l->pairs; l->done++)
		if ((l->rc = pair_round(l->dev, l->qo, step, &what, &l->q[2 * l->done], NULL,
					(unsigned)l->done)) != 0) {
			fprintf(stderr, "qpg_qp_floor: pair %ld: %s: %s\n", l->done, what,
				strerror(-l->rc));
			break;
		}
	return NULL;
}

/* --threads: THREADS lanes of PAIRS bring-ups at once; 0, or 1. */
static int wall_bringups(struct qpg_rdma_dev *dev, const struct qpg_qp_opts *qo, long pairs,
			 int threads)
{
	struct lane l[8];
	int started = 0, rc = 0;
	long done = 0;
	double w0 = floor_clock_s(CLOCK_MONOTONIC);
	for (; started < threads; started++) {
		l[started] = (struct lane){.dev = dev,
					   .qo = qo,
					   .pairs = pairs,
					   .q = calloc(2 * (size_t)pairs, sizeof(struct ibv_qp *))};
		if (!l[started].q || pthread_create(&l[started].id, NULL, lane_main, &l[started])) {
			fprintf(stderr, "qpg_qp_floor: cannot start a thread\n");
			free(l[started].q);
			rc = 1;
			break;
		}
	}
	for (int i = 0; i < started; i++) {
		pthread_join(l[i].id, NULL);
		rc = rc || l[i].rc;
		done += l[i].done;
	}
	double wall = floor_clock_s(CLOCK_MONOTONIC) - w0;
	for (int i = 0; i < started; i++) {
		for (long k = 0; k < 2 * pairs; k++)
			if (l[i].q[k])
				qpg_qp_destroy(&l[i].q[k]);
		free(l[i].q);
	}
	if (!rc)
		printf("wall qp_pairs=%ld bringup_per_s=%.0f threads=%d\n", done, done / wall,
		       threads);
	return rc;
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	int gid_index = -1;
	long pairs = 500;
	int c, reuse = 0, threads = 0;
	long inline_bytes = 0, sges = 1;
	static const struct option lo[] = {{"reuse", no_argument, NULL, 'R'},
					   {"inline", required_argument, NULL, 'I'},
					   {"sge", required_argument, NULL, 'S'},
					   {"threads", required_argument, NULL, 'T'},
					   {0}};
	while ((c = getopt_long(argc, argv, "d:g:n:", lo, NULL)) != -1) {
		switch (c) {
		case 'R':
			reuse = 1;
			break;
		case 'T':
			threads = (int)floor_num("qpg_qp_floor", optarg, 1, 8);
			break;
		case 'I':
			inline_bytes = floor_num("qpg_qp_floor", optarg, 0, 1024);
			break;
		case 'S':
			sges = floor_num("qpg_qp_floor", optarg, 1, 32);
			break;
		case 'd':
			devname = optarg;
			break;
		case 'g':
			gid_index = (int)floor_num("qpg_qp_floor", optarg, 0, 255);
			break;
		case 'n':
			pairs = floor_num("qpg_qp_floor", optarg, 1, 1000000);
			break;
		default:
			fprintf(
			    stderr,
			    "usage: qpg_qp_floor [-d DEV] [-g GID_INDEX] [-n PAIRS] [--reuse] "
			    "[--inline N] [--sge N] [--threads N]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: qpg_qp_floor [-d DEV] [-g GID_INDEX] [-n PAIRS] [--reuse] "
				"[--inline N] [--sge N] [--threads N]\n");
		return 2;
	}
	struct qpg_rdma_dev dev;
	int rc = qpg_rdma_dev_open(&dev, devname, 1, gid_index);
	if (rc) {
		fprintf(
		    stderr,
		    "qpg_qp_floor: cannot open an RDMA device: %s (is rxe up? see docs/lab.md)\n",
		    strerror(-rc));
		return 1;
	}
	int ret = 1;
	struct probe probe = {0};
	struct ibv_cq *cq = ibv_create_cq(dev.ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 64, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(dev.pd, &sa);
	if (!cq || !srq) {
		fprintf(stderr, "qpg_qp_floor: cannot make the shared CQ and receive queue: %s\n",
			strerror(errno));
		goto out;
	}
	/* As qpgate's endpoints make their QPs (transport_rdma.c). */
	struct qpg_qp_opts qo;
	qpg_qp_opts_default(&qo);
	qo.send_cq = qo.recv_cq = cq;
	qo.srq = srq;
	qo.max_send_wr = 3;
	qo.max_inline = (uint32_t)inline_bytes;
	qo.max_send_sge = (uint32_t)sges;
	if (threads) {
		ret = reuse ? 2 : wall_bringups(&dev, &qo, pairs, threads);
		if (reuse)
			fprintf(stderr,
				"qpg_qp_floor: --threads measures new pairs, not --reuse\n");
		goto out;
	}
	struct ibv_qp *kept[2] = {NULL, NULL};
	probe.cq = cq;
	probe.srq = srq;
	if (reuse) {
		probe.buf = calloc(1, 128);
		probe.mr =
		    probe.buf ? ibv_reg_mr(dev.pd, probe.buf, 128, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (!probe.mr) {
			fprintf(stderr, "qpg_qp_floor: cannot register the probe's buffer\n");
			goto out;
		}
	}
	double step[S_N] = {0}, t0 = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = floor_clock_s(CLOCK_MONOTONIC);
	const char *what = NULL;
	long done = 0;
	for (; done < pairs; done++)
		if ((rc = pair_round(&dev, &qo, step, &what, reuse ? kept : NULL, &probe,
				     (unsigned)done)) != 0) {
			fprintf(stderr, "qpg_qp_floor: pair %ld: %s: %s\n", done, what,
				strerror(-rc));
			break;
		}
	double cpu = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0, wall = floor_clock_s(CLOCK_MONOTONIC) - w0;
	for (int i = 0; i < 2; i++)
		if (kept[i])
			qpg_qp_destroy(&kept[i]);
	if (done == 0)
		goto out;
	if (reuse)
		printf(" One QP pair brought up again and again from RESET, a message each time\n");
	else
		printf(" QP pairs brought up and torn down in one thread (both ends of a "
		       "connection)\n");
	printf(" %-10s %8s %16s %12s\n", "step", "pairs", "CPU/pair [us]", "share");
	for (int s = 0; s < S_N; s++)
		printf(" %-10s %8ld %16.1f %11.1f%%\n", (reuse ? reuse_name : step_name)[s], done,
		       step[s] / (double)done * 1e6, 100 * step[s] / cpu);
	printf(" %-10s %8ld %16.1f %12s   (wall %.1f us/pair)\n", "all", done,
	       cpu / (double)done * 1e6, "", wall / (double)done * 1e6);
	double up = step[S_CREATE] + step[S_INIT] + step[S_RTR] + step[S_RTS];
	printf("floor qp_pairs=%ld per_s=%.0f bringup_per_s=%.0f\n", done, 2 / (cpu / (double)done),
	       up > 0 ? 2 / (up / (double)done) : 0);
	ret = done == pairs ? 0 : 1;
out:
	if (probe.mr)
		ibv_dereg_mr(probe.mr);
	free(probe.buf);
	if (srq)
		ibv_destroy_srq(srq);
	if (cq)
		ibv_destroy_cq(cq);
	qpg_rdma_dev_close(&dev);
	return ret;
}

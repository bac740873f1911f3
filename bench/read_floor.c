/* SPDX-License-Identifier: BSD-2-Clause */
/* The floor of a verified one-sided GET: RDMA READs of SIZE bytes kept
 * DEPTH deep on one QP per thread (as ib_read_bw keeps its READs), each
 * landed buffer checked against the digest of what the responder holds
 * (SHA-256 or SHA-512/256, the two a KV server may choose), as qpgate's KV
 * client checks a one-sided value before it hands it over. No TLS, no
 * grant, no window, no loop, no pool: what is left is the device's work
 * and the digest, about the most a verified GET of this shape reaches on
 * this machine. With --verify none it is a plain READ loop, which should
 * come close to ib_read_bw.
 *   qpg_read_floor [-d DEV] [-s SIZE] [-q DEPTH] [-t THREADS] [-D SECONDS]
 *                  [--verify sha256|sha512-256|none]
 * Prints a table and, last, "floor verify=V threads=T bytes_per_s=B reads=N
 * mismatches=M". Exits 1 if anything failed or a digest did not match. */
#include <errno.h>
#include <getopt.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "floor.h"
#include "qpgate/verbs.h"

#define NVALS 16 /* distinct values the responder holds */

struct opts {
	const char *dev;
	uint32_t size;
	unsigned depth, threads;
	double secs;
	const char *verify; /* its name */
	const EVP_MD *md;   /* NULL: --verify none */
};

struct worker {
	pthread_t tid;
	const struct opts *o;
	struct qpg_rdma_dev *dev;
	long long reads, bytes, mismatches;
	double t_start, t_end; /* of its READ loop */
	int failed;
	char why[160];
};

static double now_s(void)
{
	return (double)qpg__now_ns() / 1e9;
}

static int fail(struct worker *w, const char *what, int err)
{
	snprintf(w->why, sizeof(w->why), "%s: %s", what, strerror(err < 0 ? -err : err));
	w->failed = 1;
	return -1;
}

static int post_read(struct ibv_qp *qp, struct ibv_mr *land, struct ibv_mr *src, uint32_t size,
		     unsigned slot, unsigned val)
{
	struct ibv_sge sge = {(uintptr_t)land->addr + (uint64_t)slot * size, size, land->lkey};
	struct ibv_send_wr wr = {.wr_id = (uint64_t)slot << 8 | val,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)src->addr + (uint64_t)val * size;
	wr.wr.rdma.rkey = src->rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* One thread: its own CQ and QP pair (initiator A, responder B), B's NVALS
 * values and their digests, A's DEPTH landing buffers. */
static void *run(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	struct qpg_rdma_dev *dev = w->dev;
	size_t src_len = (size_t)NVALS * o->size, land_len = (size_t)o->depth * o->size;
	uint8_t digest[NVALS][32];
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_mr *src_mr = NULL, *land_mr = NULL;
	uint8_t *src = malloc(src_len), *land = malloc(land_len);
	struct ibv_cq *cq = ibv_create_cq(dev->ctx, (int)o->depth * 2 + 2, NULL, NULL, 0);
	if (!src || !land || !cq) {
		fail(w, "memory or CQ", errno ? errno : ENOMEM);
		goto out;
	}
	if (RAND_bytes(src, (int)src_len) != 1) {
		fail(w, "RAND_bytes", EIO);
		goto out;
	}
	for (unsigned v = 0; v < NVALS; v++)
		if (o->md && EVP_Digest(src + (size_t)v * o->size, o->size, digest[v], NULL, o->md,
					NULL) != 1) {
			fail(w, "digest", EIO);
			goto out;
		}
	src_mr = ibv_reg_mr(dev->pd, src, src_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	land_mr = ibv_reg_mr(dev->pd, land, land_len, IBV_ACCESS_LOCAL_WRITE);
	if (!src_mr || !land_mr) {
		fail(w, "ibv_reg_mr", errno);
		goto out;
	}
	struct qpg_qp_opts qo;
	qpg_qp_opts_default(&qo);
	qo.send_cq = qo.recv_cq = cq;
	qo.max_send_wr = o->depth;
	qo.max_recv_wr = 1;
	if (dev->max_qp_rd_atom > 0 && qo.rd_atomic > dev->max_qp_rd_atom)
		qo.rd_atomic = (uint8_t)dev->max_qp_rd_atom;
	int rc;
	uint32_t psn_a, psn_b;
	struct qpg_qp_addr addr_a, addr_b;
	if ((rc = qpg_qp_create(dev, &qo, &a)) || (rc = qpg_qp_create(dev, &qo, &b)) ||
	    (rc = qpg_psn_random(&psn_a)) || (rc = qpg_psn_random(&psn_b))) {
		fail(w, "QP", rc);
		goto out;
	}
	qpg_qp_local_addr(dev, a, psn_a, &addr_a);
	qpg_qp_local_addr(dev, b, psn_b, &addr_b);
	if ((rc = qpg_qp_to_init(dev, a, 0)) || (rc = qpg_qp_to_rtr(dev, a, &addr_b, &qo)) ||
	    (rc = qpg_qp_to_rts(dev, a, psn_a, &qo)) ||
	    (rc = qpg_qp_to_init(dev, b, IBV_ACCESS_REMOTE_READ)) ||
	    (rc = qpg_qp_to_rtr(dev, b, &addr_a, &qo)) ||
	    (rc = qpg_qp_to_rts(dev, b, psn_b, &qo))) {
		fail(w, "QP bring-up", rc);
		goto out;
	}
	unsigned next_val = 0, posted = 0;
	for (unsigned s = 0; s < o->depth; s++, posted++)
		if ((rc = post_read(a, land_mr, src_mr, o->size, s, next_val++ % NVALS)) != 0) {
			fail(w, "ibv_post_send", rc);
			goto out;
		}
	w->t_start = now_s();
	double end = w->t_start + o->secs;
	bool stop = false;
	while (posted) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		if (n < 0) {
			fail(w, "ibv_poll_cq", EIO);
			break;
		}
		for (int i = 0; i < n; i++) {
			posted--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				snprintf(w->why, sizeof(w->why), "READ: %s",
					 ibv_wc_status_str(wc[i].status));
				w->failed = 1;
				stop = true;
				continue;
			}
			unsigned slot = (unsigned)(wc[i].wr_id >> 8), val = wc[i].wr_id & 0xff;
			if (o->md) {
				uint8_t d[32];
				if (EVP_Digest(land + (size_t)slot * o->size, o->size, d, NULL,
					       o->md, NULL) != 1 ||
				    memcmp(d, digest[val], sizeof(d)) != 0)
					w->mismatches++;
			}
			w->reads++;
			w->bytes += o->size;
			if (stop)
				continue;
			if ((rc = post_read(a, land_mr, src_mr, o->size, slot,
					    next_val++ % NVALS)) != 0) {
				fail(w, "ibv_post_send", rc);
				stop = true;
				continue;
			}
			posted++;
		}
		if (n && !stop && now_s() >= end)
			stop = true; /* let what is in flight land, post no more */
	}
	w->t_end = now_s();
out:
	if (a)
		qpg_qp_destroy(&a);
	if (b)
		qpg_qp_destroy(&b);
	if (src_mr)
		ibv_dereg_mr(src_mr);
	if (land_mr)
		ibv_dereg_mr(land_mr);
	if (cq)
		ibv_destroy_cq(cq);
	free(src);
	free(land);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: qpg_read_floor [-d DEV] [-s SIZE] [-q DEPTH] [-t THREADS] "
			"[-D SECONDS] [--verify sha256|sha512-256|none]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {.size = 65536,
			 .depth = 16,
			 .threads = 1,
			 .secs = 5,
			 .verify = "sha256",
			 .md = EVP_sha256()};
	static const struct option lo[] = {{"verify", required_argument, NULL, 'V'}, {0}};
	int c;
	while ((c = getopt_long(argc, argv, "d:s:q:t:D:", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.dev = optarg;
			break;
		case 's':
			o.size = (uint32_t)floor_num("qpg_read_floor", optarg, 1, 1 << 24);
			break;
		case 'q':
			o.depth = (unsigned)floor_num("qpg_read_floor", optarg, 1, 1024);
			break;
		case 't':
			o.threads = (unsigned)floor_num("qpg_read_floor", optarg, 1, 64);
			break;
		case 'D':
			o.secs = (double)floor_num("qpg_read_floor", optarg, 1, 3600);
			break;
		case 'V':
			o.verify = optarg;
			if (strcmp(optarg, "sha256") == 0)
				o.md = EVP_sha256();
			else if (strcmp(optarg, "sha512-256") == 0)
				o.md = EVP_sha512_256();
			else if (strcmp(optarg, "none") == 0)
				o.md = NULL;
			else
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	struct qpg_rdma_dev dev;
	int rc = qpg_rdma_dev_open(&dev, o.dev, 1, -1);
	if (rc) {
		fprintf(stderr, "qpg_read_floor: cannot open an RDMA device: %s\n", strerror(-rc));
		return 1;
	}
	struct worker *w = calloc(o.threads, sizeof(*w));
	if (!w)
		return 1;
	unsigned started = 0;
	for (unsigned i = 0; i < o.threads; i++, started++) {
		w[i].o = &o;
		w[i].dev = &dev;
		if (pthread_create(&w[i].tid, NULL, run, &w[i]) != 0) {
			fprintf(stderr, "qpg_read_floor: cannot start thread %u\n", i);
			break;
		}
	}
	long long reads = 0, bytes = 0, mism = 0;
	double t0 = 0, t1 = 0;
	int failed = started != o.threads;
	for (unsigned i = 0; i < started; i++) {
		pthread_join(w[i].tid, NULL);
		reads += w[i].reads;
		bytes += w[i].bytes;
		mism += w[i].mismatches;
		if (w[i].t_end > 0) {
			t0 = t0 == 0 || w[i].t_start < t0 ? w[i].t_start : t0;
			t1 = w[i].t_end > t1 ? w[i].t_end : t1;
		}
		if (w[i].failed) {
			fprintf(stderr, "qpg_read_floor: thread %u: %s\n", i, w[i].why);
			failed = 1;
		}
	}
	double secs = t1 > t0 ? t1 - t0 : 1; /* the READ loops, not the set-up */
	printf(" %-10s %8s %6s %8s %12s %12s %10s\n", "verify", "threads", "depth", "size", "READs",
	       "MB/s", "mismatches");
	printf(" %-10s %8u %6u %8u %12lld %12.2f %10lld\n", o.verify, o.threads, o.depth, o.size,
	       reads, (double)bytes / secs / 1e6, mism);
	printf("floor verify=%s threads=%u bytes_per_s=%.0f reads=%lld mismatches=%lld\n", o.verify,
	       o.threads, (double)bytes / secs, reads, mism);
	free(w);
	qpg_rdma_dev_close(&dev);
	return failed || mism || reads == 0 ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A fleet of clients that ask for a lot and then stop reading.
 *
 *   slow_reader TRANSPORT PORT CA NCONNS CREDITS KEY HOLD_MS
 *
 * Each connection sends CREDITS GETs of KEY (a large value), then the whole
 * process stops running its event loop for HOLD_MS: over tcp nothing reads
 * the socket, over rdma nothing polls the CQ, so no receive is posted
 * again and the server's sends meet RNR. Then it runs the loop for a few
 * seconds and reports how many connections the server had closed.
 * A server that holds up closes every one of them by its own deadline
 * (progress timeout, or a finite RNR retry), with memory bounded meanwhile. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvtest.h"
#include "qpgate/kv.h"

struct slow {
	struct qpg_client_conn *c;
	int established, closed;
	unsigned answered; /* GETs whose last chunk arrived */
	int pending;	   /* 3+ GETs (3 MiB) unanswered when we stopped reading */
	enum qpg_err_class err;
};

static int n_up, n_closed;
static char last_why[256];

static void on_established(struct qpg_client_conn *c, void *user)
{
	((struct slow *)user)->established = 1;
	n_up++;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct qpg_kv_reply r;
	if (qpg_kv_decode_reply(p, len, &r) >= 0 &&
	    (r.status != QPG_KV_OK || r.offset + (len - QPG_KV_HDR_LEN) >= r.value_len))
		((struct slow *)user)->answered++;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct slow *s = user;
	s->closed = 1;
	s->err = err;
	n_closed++;
	snprintf(last_why, sizeof(last_why), "%s", why);
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: slow_reader rdma|tcp PORT CA NCONNS CREDITS KEY HOLD_MS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* the server closes on us mid-write */
	struct qpg_client_opts o;
	kvtest_opts(&o, argv[1], argv[2], argv[3]);
	int n = atoi(argv[4]);
	o.credits = (uint16_t)atoi(argv[5]);
	const char *key = argv[6];
	int hold_ms = atoi(argv[7]);
	/* Receives for the credits and no more (the library's minimum), so a
	 * client that stops polling runs out after a few chunks; the pool
	 * has room for every GET to be sent as well. */
	o.srq_depth = 16;
	o.pool_max = (uint32_t)(4 * n * o.credits + 1024);
	static const struct qpg_client_cbs cbs = {
	    .established = on_established, .reply = on_reply, .closed = on_closed};
	struct qpg_client *cl = kvtest_client(&o, &cbs, "slow_reader");
	struct slow *s = calloc((size_t)n, sizeof(*s));
	kvtest_connect_all(cl, n, 16, s, sizeof(*s), &n_up, &n_closed);
	if (n_up < n) {
		printf("slow_reader: only %d of %d connected (%s)\n", n_up, n, last_why);
		return 1;
	}
	uint8_t req[QPG_KV_REQ_HDR_LEN + QPG_KV_MAX_KEY];
	int sent = 0;
	for (int i = 0; i < n; i++)
		for (unsigned k = 0; k < o.credits; k++) {
			struct qpg_kv_req r = {.op = QPG_KV_GET,
					       .key_len = (uint16_t)strlen(key),
					       .req_id = k + 1,
					       .key = (const uint8_t *)key};
			int len = qpg_kv_encode_req(req, sizeof(req), &r);
			if (len > 0 &&
			    qpg_client_send(s[i].c, QPG_FRAME_KV_REQ, req, (uint32_t)len) == 0)
				sent++;
		}
	/* One short turn so the requests leave, then silence. */
	for (int k = 0; k < 5; k++)
		qpg_client_run(cl, 10);
	/* The short turn reads too, and one connection can be read to the
	 * end while the server streams: a connection with every GET answered
	 * is not a slow reader, and the server rightly leaves it open. */
	int served = 0;
	for (int i = 0; i < n; i++) {
		/* A slow reader from here on: more left unanswered than the
		 * kernel can absorb (the test caps each side's socket buffer
		 * at 1 MiB; over rdma far less), so the server must still hold
		 * some of it. With less, every send may well have completed. */
		s[i].pending = s[i].answered + 3 <= o.credits;
		served += !s[i].pending;
	}
	printf("slow_reader: %d connected, %d GETs sent, %d connections fully answered before "
	       "the hold; not reading for %d ms\n",
	       n, sent, served, hold_ms);
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	int closed_before = n_closed;
	uint64_t t0 = kvtest_now_ms();
	while (n_closed < n && kvtest_now_ms() - t0 < 5000)
		qpg_client_run(cl, 50);
	int pending = 0, pending_open = 0;
	for (int i = 0; i < n; i++)
		if (s[i].pending) {
			pending++;
			pending_open += !s[i].closed;
		}
	printf("slow_reader: closed by the server: %d of %d (%d while we slept); e.g. \"%s\"\n",
	       n_closed, n, closed_before, last_why);
	printf("slow_reader: left with 3+ GETs unanswered: %d; of those still open: %d\n", pending,
	       pending_open);
	for (int i = 0; i < n; i++)
		if (!s[i].closed)
			qpg_client_close(s[i].c);
	kvtest_client_done(cl);
	free(s);
	return 0;
}

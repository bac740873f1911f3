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

#include "qpgate/client.h"
#include "qpgate/kv.h"
#include "qpgate/wire.h"

struct slow {
	struct qpg_client_conn *c;
	int established, closed;
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

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: slow_reader rdma|tcp PORT CA NCONNS CREDITS KEY HOLD_MS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* the server closes on us mid-write */
	struct qpg_client_opts o;
	qpg_client_opts_default(&o);
	o.transport = strcmp(argv[1], "tcp") == 0 ? QPG_KIND_TCP : QPG_KIND_RDMA;
	o.port = (uint16_t)atoi(argv[2]);
	o.ca = argv[3];
	o.host = "127.0.0.1";
	o.servername = "localhost";
	int n = atoi(argv[4]);
	o.credits = (uint16_t)atoi(argv[5]);
	const char *key = argv[6];
	int hold_ms = atoi(argv[7]);
	o.service = QPG_SERVICE_KV;
	o.max_msg = 8192;
	/* Receives for the credits and no more (the library's minimum), so a
	 * client that stops polling runs out after a few chunks; the pool
	 * has room for every GET to be sent as well. */
	o.srq_depth = 16;
	o.pool_max = (uint32_t)(4 * n * o.credits + 1024);
	static const struct qpg_client_cbs cbs = {
	    .established = on_established, .reply = on_reply, .closed = on_closed};
	struct qpg_client *cl;
	char err[256];
	if (qpg_client_create(&cl, &o, &cbs, err, sizeof(err))) {
		fprintf(stderr, "slow_reader: %s\n", err);
		return 1;
	}
	struct slow *s = calloc((size_t)n, sizeof(*s));
	/* At most 16 handshakes at a time: under emulation 100 at once can
	 * outlast the server's handshake deadline, and this test is about
	 * what comes after. */
	int started = 0;
	uint64_t t0 = now_ms();
	while (n_up + n_closed < n && now_ms() - t0 < 60000) {
		while (started < n && started - (n_up + n_closed) < 16)
			if (qpg_client_connect(cl, &s[started], &s[started].c)) {
				fprintf(stderr, "slow_reader: cannot start connection %d\n",
					started);
				return 1;
			} else {
				started++;
			}
		qpg_client_run(cl, 50);
	}
	if (n_up < n) {
		printf("slow_reader: only %d of %d connected (%s)\n", n_up, n, last_why);
		return 1;
	}
	uint8_t req[QPG_KV_HDR_LEN + QPG_KV_MAX_KEY];
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
	printf("slow_reader: %d connected, %d GETs sent; not reading for %d ms\n", n, sent,
	       hold_ms);
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	int closed_before = n_closed;
	t0 = now_ms();
	while (n_closed < n && now_ms() - t0 < 5000)
		qpg_client_run(cl, 50);
	printf("slow_reader: closed by the server: %d of %d (%d while we slept); e.g. \"%s\"\n",
	       n_closed, n, closed_before, last_why);
	for (int i = 0; i < n; i++)
		if (!s[i].closed)
			qpg_client_close(s[i].c);
	for (int k = 0; k < 200 && qpg_client_conn_count(cl); k++)
		qpg_client_run(cl, 10);
	qpg_client_destroy(cl);
	free(s);
	return 0;
}

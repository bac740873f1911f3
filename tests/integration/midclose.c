/* SPDX-License-Identifier: BSD-2-Clause */
/* Connections that close in the middle of their multi-packet SENDs.
 *
 *   midclose rdma|tcp PORT CA ROUNDS QPS BYTES CREDITS [HOST]
 *
 * Each round opens one session of QPS connections (one handshake), fills
 * every connection's CREDITS with echo requests of BYTES, runs the loop 0
 * to 3 ms, and closes the session. On RDMA a SEND of 1 MiB is a thousand
 * packets, and the device sends only a window of them before it waits for
 * acknowledgements: the QPs leave RTS with SENDs half delivered, and the
 * server's QPs are closed while their receives are partly filled.
 * Prints the QPs closed and the requests begun; exit 0 unless a round
 * could not connect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kvtest.h"

struct mc {
	struct qpg_client_conn *c;
	int up, closed;
};

static int n_up, n_closed;

static void on_established(struct qpg_client_conn *c, void *user)
{
	((struct mc *)user)->up = 1;
	n_up++;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	((struct mc *)user)->closed = 1;
	n_closed++;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
}

int main(int argc, char **argv)
{
	if (argc != 8 && argc != 9) {
		fprintf(stderr, "usage: midclose rdma|tcp PORT CA ROUNDS QPS BYTES CREDITS [HOST]\n");
		return 2;
	}
	struct qpg_client_opts o;
	kvtest_opts(&o, argv[1], argv[2], argv[3]);
	o.service = QPG_SERVICE_ECHO;
	if (argc == 9)
		o.host = argv[8]; /* the server's certificate still names localhost */
	int rounds = atoi(argv[4]), nq = atoi(argv[5]);
	uint32_t bytes = (uint32_t)strtoul(argv[6], NULL, 0);
	o.max_msg = bytes;
	o.credits = (uint32_t)atoi(argv[7]);
	o.srq_depth = 16; /* receives of BYTES each: keep the registered memory small */
	if (rounds < 1 || nq < 1 || nq > 64 || bytes < 1 || o.credits < 1 || o.credits > 64) {
		fprintf(stderr, "midclose: ROUNDS >= 1, QPS 1 to 64, BYTES >= 1, CREDITS 1 to 64\n");
		return 2;
	}
	static const struct qpg_client_cbs cbs = {
	    .established = on_established, .reply = on_reply, .closed = on_closed};
	struct qpg_client *cl = kvtest_client(&o, &cbs, "midclose");
	uint8_t *payload = malloc(bytes);
	struct mc *m = calloc((size_t)nq, sizeof(*m));
	void **users = calloc((size_t)nq, sizeof(*users));
	struct qpg_client_conn **out = calloc((size_t)nq, sizeof(*out));
	if (!payload || !m || !users || !out)
		return 1;
	memset(payload, 0xa5, bytes);
	unsigned long long closed = 0, begun = 0;
	for (int r = 0; r < rounds; r++) {
		memset(m, 0, (size_t)nq * sizeof(*m));
		n_up = n_closed = 0;
		for (int i = 0; i < nq; i++)
			users[i] = &m[i];
		int got = o.transport == QPG_KIND_TCP
			      ? qpg_client_connect(cl, users[0], &out[0])
			      : qpg_client_connect_session(cl, (unsigned)nq, users, out);
		if (got < 0) {
			fprintf(stderr, "midclose: round %d: cannot connect: %s\n", r, strerror(-got));
			return 1;
		}
		int want = o.transport == QPG_KIND_TCP ? 1 : got;
		uint64_t t0 = kvtest_now_ms();
		while (n_up + n_closed < want && kvtest_now_ms() - t0 < 30000)
			qpg_client_run(cl, 20);
		if (n_up < want) {
			fprintf(stderr, "midclose: round %d: %d of %d up\n", r, n_up, want);
			return 1;
		}
		for (int i = 0; i < want; i++)
			while (qpg_client_send(out[i], QPG_FRAME_ECHO_REQ, payload, bytes) == 0)
				begun++;
		uint8_t rnd;
		if (getrandom(&rnd, 1, 0) != 1)
			rnd = 0;
		uint64_t t1 = kvtest_now_ms();
		do
			qpg_client_run(cl, 0);
		while (kvtest_now_ms() - t1 < (uint64_t)(rnd % 4));
		if (!m[0].closed)
			qpg_client_close(out[0]); /* the session: all its QPs close */
		for (int i = 1; o.transport == QPG_KIND_TCP && i < want; i++)
			qpg_client_close(out[i]);
		t0 = kvtest_now_ms();
		while (n_closed < want && kvtest_now_ms() - t0 < 30000)
			qpg_client_run(cl, 20);
		closed += (unsigned long long)n_closed;
	}
	printf("midclose: %d rounds, %llu QPs closed with %llu requests of %u bytes begun\n", rounds,
	       closed, begun, bytes);
	kvtest_client_done(cl);
	free(payload);
	free(m);
	free(users);
	free(out);
	return 0;
}

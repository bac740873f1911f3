/* SPDX-License-Identifier: BSD-2-Clause */
/* Clients that begin a PUT and never finish it.
 *
 *   stall_put TRANSPORT PORT CA NCONNS VALUE_BYTES HOLD_MS
 *
 * Each connection sends the first chunk of a PUT of VALUE_BYTES (so the
 * server reserves the whole value), then nothing for HOLD_MS while its
 * connection stays up. Then it sends the next chunk and prints how the
 * server answered it: a server whose --kv-put-timeout passed meanwhile has
 * given the space back and refuses the late chunk. SIGUSR1 ends the hold
 * early: a caller that has seen the deadline do its work need not wait out
 * the rest of HOLD_MS. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtest.h"
#include "qpgate/kv.h"

struct staller {
	struct qpg_client_conn *c;
	int up, closed, answers;
	uint8_t last_status;
};

static int n_up, n_closed;
static volatile sig_atomic_t hold_over;

static void on_usr1(int sig)
{
	(void)sig;
	hold_over = 1;
}

static void on_established(struct qpg_client_conn *c, void *user)
{
	((struct staller *)user)->up = 1;
	n_up++;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct staller *s = user;
	struct qpg_kv_reply r;
	if (qpg_kv_decode_reply(p, len, &r) >= 0) {
		s->answers++;
		s->last_status = r.status;
	}
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	((struct staller *)user)->closed = 1;
	n_closed++;
}

/* Run the loop for MS, or until DONE says so. */
static void run_for(struct qpg_client *cl, int ms, int (*done)(struct staller *, int),
		    struct staller *s, int n)
{
	uint64_t t0 = kvtest_now_ms();
	while (kvtest_now_ms() - t0 < (uint64_t)ms && !(done ? done(s, n) : hold_over))
		qpg_client_run(cl, 20);
}

static int all_answered(struct staller *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!s[i].closed && s[i].answers == 0)
			return 0;
	return 1;
}

static int put_chunk(struct staller *s, int i, uint32_t value_len, uint32_t off, uint32_t chunk)
{
	static uint8_t frame[QPG_KV_REQ_HDR_LEN + 16 + 4096];
	static uint8_t data[4096];
	char key[16];
	int key_len = snprintf(key, sizeof(key), "stalled%d", i);
	struct qpg_kv_req r = {.op = QPG_KV_PUT,
			       .key_len = (uint16_t)key_len,
			       .key = (const uint8_t *)key,
			       .req_id = 1,
			       .value_len = value_len,
			       .offset = off};
	int len = qpg_kv_encode_req(frame, sizeof(frame), &r);
	if (len < 0)
		return -1;
	memcpy(frame + len, data, chunk); /* the header and key, then the chunk */
	return qpg_client_send(s->c, QPG_FRAME_KV_REQ, frame, (uint32_t)len + chunk);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: stall_put rdma|tcp PORT CA NCONNS VALUE_BYTES HOLD_MS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR1, on_usr1);
	struct qpg_client_opts o;
	kvtest_opts(&o, argv[1], argv[2], argv[3]);
	o.credits = 1;
	int n = atoi(argv[4]);
	uint32_t value_len = (uint32_t)strtoul(argv[5], NULL, 0);
	int hold_ms = atoi(argv[6]);
	static const struct qpg_client_cbs cbs = {
	    .established = on_established, .reply = on_reply, .closed = on_closed};
	struct qpg_client *cl = kvtest_client(&o, &cbs, "stall_put");
	struct staller *s = calloc((size_t)n, sizeof(*s));
	kvtest_connect_all(cl, n, n, s, sizeof(*s), &n_up, &n_closed);
	if (n_up < n) {
		printf("stall_put: only %d of %d connected\n", n_up, n);
		return 1;
	}
	/* The first chunk: the server reserves the whole value. */
	for (int i = 0; i < n; i++)
		put_chunk(&s[i], i, value_len, 0, 4096);
	run_for(cl, 10000, all_answered, s, n);
	int ok = 0;
	for (int i = 0; i < n; i++)
		ok += s[i].answers == 1 && s[i].last_status == QPG_KV_OK;
	printf("stall_put: %d of %d PUTs of %u bytes begun (first chunk acknowledged: %s); "
	       "silent for %d ms\n",
	       ok, n, value_len, n ? qpg_kv_status_name(s[0].last_status) : "-", hold_ms);
	fflush(stdout);
	run_for(cl, hold_ms, NULL, s, n); /* keep the connections alive, send nothing */
	for (int i = 0; i < n; i++) {
		s[i].answers = 0;
		if (!s[i].closed)
			put_chunk(&s[i], i, value_len, 4096, 4096);
	}
	run_for(cl, 10000, all_answered, s, n);
	int open = 0, refused = 0;
	for (int i = 0; i < n; i++) {
		open += !s[i].closed;
		refused += s[i].answers == 1 && s[i].last_status != QPG_KV_OK;
	}
	printf("stall_put: after the hold %d of %d connections still up; %d late chunks refused "
	       "(e.g. %s)\n",
	       open, n, refused, n ? qpg_kv_status_name(s[0].last_status) : "-");
	for (int i = 0; i < n; i++)
		if (!s[i].closed)
			qpg_client_close(s[i].c);
	kvtest_client_done(cl);
	free(s);
	return ok == n ? 0 : 1;
}

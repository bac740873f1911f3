/* SPDX-License-Identifier: BSD-2-Clause */
/* Store a value in a qpgate KV server and read it back through a pool.
 *   kv_putget HOST PORT CA KEY VALUE [tcp|rdma] */
#include <pthread.h>
#include <qpgate/kv_client.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wait {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int done, status;
	char got[256];
	size_t got_len;
};

static void on_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		     uint32_t total)
{
	struct wait *w = r->user;
	if (off + len <= sizeof(w->got)) {
		memcpy(w->got + off, data, len);
		w->got_len = off + len;
	}
}

static void on_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct wait *w = r->user;
	pthread_mutex_lock(&w->lock);
	w->done = 1;
	w->status = status;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

/* Submit R and wait for its done callback (which runs on a pool thread). */
static int run(struct qpg_kv_pool *p, struct qpg_kv_request *r, struct wait *w)
{
	w->done = 0;
	r->user = w;
	r->done = on_done;
	if (qpg_kv_submit(p, r))
		return -1;
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return w->status;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: kv_putget HOST PORT CA KEY VALUE [tcp|rdma]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct qpg_kv_pool_opts o;
	qpg_kv_pool_opts_default(&o);
	o.client.host = argv[1];
	o.client.port = (uint16_t)atoi(argv[2]);
	o.client.ca = argv[3];
	o.client.servername = "localhost";
	o.client.transport = argc > 6 && !strcmp(argv[6], "rdma") ? QPG_KIND_RDMA : QPG_KIND_TCP;
	o.threads = 1;
	o.conns = 1;
	struct qpg_kv_pool *p;
	char err[256];
	if (qpg_kv_pool_create(&p, &o, err, sizeof(err))) {
		fprintf(stderr, "kv_putget: %s\n", err);
		return 1;
	}
	const char *key = argv[4], *val = argv[5];
	struct wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
	struct qpg_kv_request put = {.op = QPG_KV_PUT, .key = key, .key_len = (uint16_t)strlen(key),
				     .value = val, .value_len = (uint32_t)strlen(val)};
	struct qpg_kv_request get = {
	    .op = QPG_KV_GET, .key = key, .key_len = (uint16_t)strlen(key), .chunk = on_chunk};
	int ps = run(p, &put, &w);
	int gs = run(p, &get, &w);
	printf("kv_putget: PUT %s, GET %s: \"%.*s\"\n", qpg_kv_status_name((uint8_t)ps),
	       qpg_kv_status_name((uint8_t)gs), (int)w.got_len, w.got);
	qpg_kv_pool_destroy(p);
	return ps == QPG_KV_OK && gs == QPG_KV_OK && w.got_len == strlen(val) &&
			   !memcmp(w.got, val, w.got_len)
		       ? 0
		       : 1;
}

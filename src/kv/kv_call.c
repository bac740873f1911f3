/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/kv_call.h: a request the library keeps, for bindings. */
#include "qpgate/kv_call.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct call {
	struct qpg_kv_request r; /* first */
	uint8_t *buf;
	uint32_t cap;
	qpg_kv_call_done done;
	void *arg;
	uint64_t token;
	uint8_t key[]; /* the key, copied */
};

static void on_chunk(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		     uint32_t value_len)
{
	struct call *c = (struct call *)op;
	if (offset < c->cap)
		memcpy(c->buf + offset, data, len < c->cap - offset ? len : c->cap - offset);
}

static void on_done(struct qpg_kv_request *op, int status, uint32_t value_len)
{
	struct call *c = (struct call *)op;
	c->done(c->arg, c->token, status, value_len);
	free(c);
}

int qpg_kv_call(struct qpg_kv_pool *p, uint8_t op, const void *key, uint16_t key_len,
		const void *value, uint32_t value_len, void *buf, uint32_t cap,
		qpg_kv_call_done done, void *arg, uint64_t token)
{
	if ((op != QPG_KV_PUT && op != QPG_KV_GET && op != QPG_KV_DEL) || !done ||
	    (key_len && !key) || (value_len && !value) || (cap && !buf))
		return -EINVAL;
	struct call *c = calloc(1, sizeof(*c) + key_len);
	if (!c)
		return -ENOMEM;
	memcpy(c->key, key, key_len);
	c->r.op = op;
	c->r.key = c->key;
	c->r.key_len = key_len;
	c->r.value = value;
	c->r.value_len = value_len;
	c->r.chunk = op == QPG_KV_GET ? on_chunk : NULL;
	c->r.done = on_done;
	c->buf = buf;
	c->cap = cap;
	c->done = done;
	c->arg = arg;
	c->token = token;
	int rc = qpg_kv_submit(p, &c->r);
	if (rc)
		free(c);
	return rc;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int status;
	uint32_t len;
	int finished;
};

static void wake(void *arg, uint64_t token, int status, uint32_t value_len)
{
	struct waiter *w = arg;
	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->len = value_len;
	w->finished = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

int qpg_kv_call_wait(struct qpg_kv_pool *p, uint8_t op, const void *key, uint16_t key_len,
		     const void *value, uint32_t value_len, void *buf, uint32_t cap,
		     uint32_t *value_len_out)
{
	struct waiter w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int rc = qpg_kv_call(p, op, key, key_len, value, value_len, buf, cap, wake, &w, 0);
	if (rc)
		return rc;
	pthread_mutex_lock(&w.lock);
	while (!w.finished)
		pthread_cond_wait(&w.cv, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cv);
	if (value_len_out)
		*value_len_out = w.len;
	return w.status;
}

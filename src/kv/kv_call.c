/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/kv_call.h: a request the library keeps, for bindings. */
#include "qpgate/kv_call.h"

#include "kv_client_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct call {
	struct qpg_kv_request r; /* first */
	uint8_t *buf;
	uint32_t cap;
	bool owned; /* BUF is ours (a GET given none), sized at the first chunk */
	bool oom;
	qpg_kv_call_done done;
	void *arg;
	uint64_t token;
	uint8_t key[]; /* the key, copied */
};

static void on_chunk(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		     uint32_t value_len)
{
	struct call *c = (struct call *)op;
	if (c->owned && !c->buf && !c->oom) {
		c->buf = malloc(value_len ? value_len : 1);
		c->cap = c->buf ? value_len : 0;
		c->oom = !c->buf;
	}
	/* (A zero-copy GET's value is already where it goes.) */
	if (offset < c->cap && data != c->buf + offset)
		memcpy(c->buf + offset, data, len < c->cap - offset ? len : c->cap - offset);
}

static void on_done(struct qpg_kv_request *op, int status, uint32_t value_len)
{
	struct call *c = (struct call *)op;
	if (c->owned && status == QPG_KV_OK && !c->buf && !c->oom)
		c->buf = malloc(1); /* an empty value: no chunk came */
	if (c->owned && status == QPG_KV_OK && (c->oom || !c->buf))
		status = -ENOMEM;
	if (c->owned && status != QPG_KV_OK) {
		free(c->buf);
		c->buf = NULL;
	}
	c->done(c->arg, c->token, status, value_len, c->owned ? c->buf : NULL);
	free(c);
}

void qpg_kv_free(void *data)
{
	free(data);
}

static int pool_open(struct qpg_kv_target **out, const char *host, uint16_t port,
		     const char *servername, const char *ca, const char *cert, const char *key,
		     const char *transport, unsigned conns, unsigned threads, uint32_t busy_poll_us,
		     bool external, char *err, size_t err_len)
{
	struct qpg_kv_pool_opts o;
	qpg_kv_pool_opts_default(&o);
	if (!host || !transport ||
	    (strcmp(transport, "rdma") != 0 && strcmp(transport, "tcp") != 0)) {
		snprintf(err, err_len, "transport is 'rdma' or 'tcp', and a host is needed");
		return -EINVAL;
	}
	o.client.host = host;
	o.client.port = port;
	o.client.servername = servername ? servername : host;
	o.client.ca = ca;
	o.client.cert = cert;
	o.client.key = key;
	o.client.transport = strcmp(transport, "tcp") == 0 ? QPG_KIND_TCP : QPG_KIND_RDMA;
	if (conns)
		o.conns = conns;
	if (threads)
		o.threads = threads;
	if (o.threads > o.conns)
		o.threads = o.conns;
	o.client.busy_poll_us = busy_poll_us;
	struct qpg_kv_pool *p = NULL;
	int rc = qpg__kv_pool_create(&p, &o, external, err, err_len);
	*out = rc ? NULL : qpg_kv_pool_target(p);
	return rc;
}

int qpg_kv_pool_open(struct qpg_kv_target **out, const char *host, uint16_t port,
		     const char *servername, const char *ca, const char *cert, const char *key,
		     const char *transport, unsigned conns, unsigned threads, uint32_t busy_poll_us,
		     char *err, size_t err_len)
{
	return pool_open(out, host, port, servername, ca, cert, key, transport, conns, threads,
			 busy_poll_us, false, err, err_len);
}

int qpg_kv_pool_open_external(struct qpg_kv_target **out, const char *host, uint16_t port,
			      const char *servername, const char *ca, const char *cert,
			      const char *key, const char *transport, unsigned conns, char *err,
			      size_t err_len)
{
	/* (No busy polling: the loop is the caller's, which polls the fd.) */
	return pool_open(out, host, port, servername, ca, cert, key, transport, conns, 1, 0, true,
			 err, err_len);
}

static int call(struct qpg_kv_target *t, uint8_t op, const void *key, uint16_t key_len,
		const void *value, uint32_t value_len, void *buf, uint32_t cap, uint32_t ttl_ms,
		qpg_kv_call_done done, void *arg, uint64_t token)
{
	bool reads = op == QPG_KV_GET || op == QPG_KV_STAT; /* an answer with bytes */
	if ((op != QPG_KV_PUT && op != QPG_KV_DEL && !reads) || !done || (key_len && !key) ||
	    (value_len && !value) || (cap && !buf) || (!buf && !reads && cap))
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
	c->r.ttl_ms = op == QPG_KV_PUT ? ttl_ms : 0;
	c->r.chunk = reads ? on_chunk : NULL;
	c->r.done = on_done;
	c->buf = buf;
	c->cap = cap;
	c->owned = reads && !buf;
	if (op == QPG_KV_GET && buf) { /* READ straight into it, if registered */
		c->r.into = buf;
		c->r.into_cap = cap;
	}
	c->done = done;
	c->arg = arg;
	c->token = token;
	int rc = qpg_kv_target_submit(t, &c->r);
	if (rc)
		free(c);
	return rc;
}

int qpg_kv_call(struct qpg_kv_target *t, uint8_t op, const void *key, uint16_t key_len,
		const void *value, uint32_t value_len, void *buf, uint32_t cap,
		qpg_kv_call_done done, void *arg, uint64_t token)
{
	return call(t, op, key, key_len, value, value_len, buf, cap, 0, done, arg, token);
}

int qpg_kv_call_many(struct qpg_kv_target *t, const struct qpg_kv_call_req *reqs, int n,
		     qpg_kv_call_done done, void *arg)
{
	int k = 0;
	for (; k < n; k++) {
		const struct qpg_kv_call_req *r = &reqs[k];
		int rc = call(t, r->op, r->key, r->key_len, r->value, r->value_len, r->buf, r->cap,
			      r->ttl_ms, done, arg, r->token);
		if (rc)
			return k ? k : rc;
	}
	return k;
}

/* An EXISTS batch for a binding: its completion as qpg_kv_call's. */
struct xcall {
	qpg_kv_call_done done;
	void *arg;
	uint64_t token;
};

static void on_exists(void *arg, int status, uint32_t prefix)
{
	struct xcall x = *(struct xcall *)arg;
	free(arg);
	x.done(x.arg, x.token, status, prefix, NULL);
}

int qpg_kv_call_exists(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
		       uint8_t *present, qpg_kv_call_done done, void *arg, uint64_t token)
{
	if (!done)
		return -EINVAL;
	struct xcall *x = malloc(sizeof(*x));
	if (!x)
		return -ENOMEM;
	*x = (struct xcall){.done = done, .arg = arg, .token = token};
	int rc = qpg_kv_target_exists(t, keys, n, present, on_exists, x);
	if (rc)
		free(x);
	return rc;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int status;
	uint32_t len;
	void *data;
	int finished;
};

static void wake(void *arg, uint64_t token, int status, uint32_t value_len, void *data)
{
	struct waiter *w = arg;
	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->len = value_len;
	w->data = data;
	w->finished = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

int qpg_kv_call_wait(struct qpg_kv_target *t, uint8_t op, const void *key, uint16_t key_len,
		     const void *value, uint32_t value_len, void *buf, uint32_t cap,
		     uint32_t *value_len_out, void **data)
{
	struct qpg_kv_call_req r = {.key = key,
				    .value = value,
				    .buf = buf,
				    .value_len = value_len,
				    .cap = cap,
				    .key_len = key_len,
				    .op = op};
	return qpg_kv_call_req_wait(t, &r, value_len_out, data);
}

/* Until W's call is done (one that started). */
static void wait_for(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->finished)
		pthread_cond_wait(&w->cv, &w->lock);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cv);
}

int qpg_kv_call_req_wait(struct qpg_kv_target *t, const struct qpg_kv_call_req *r,
			 uint32_t *value_len_out, void **data)
{
	void *buf = r->buf;
	struct waiter w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int rc = call(t, r->op, r->key, r->key_len, r->value, r->value_len, r->buf, r->cap,
		      r->ttl_ms, wake, &w, 0);
	if (rc)
		return rc;
	wait_for(&w);
	if (value_len_out)
		*value_len_out = w.len;
	if (data)
		*data = w.data;
	else if (!buf)
		free(w.data);
	return w.status;
}

int qpg_kv_call_exists_wait(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
			    uint8_t *present, uint32_t *prefix)
{
	struct waiter w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int rc = qpg_kv_call_exists(t, keys, n, present, wake, &w, 0);
	if (rc)
		return rc;
	wait_for(&w);
	if (prefix)
		*prefix = w.len;
	return w.status;
}

/* A pooled, thread-safe KV client: THREADS event-loop threads share CONNS
 * secure connections to one server. Any thread may submit operations;
 * each connection pipelines up to its credits, and every completion is
 * delivered to the operation's own callback (on a pool thread).
 *
 * GET values arrive in the pool's registered receive buffers; the chunk
 * callback sees each piece where it landed (no copy), already verified
 * against its message authentication tag. */
#ifndef QPGATE_KV_CLIENT_H
#define QPGATE_KV_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "qpgate/client.h"
#include "qpgate/kv.h"

struct qpg_kv_pool;

struct qpg_kv_request {
	/* set by the caller */
	uint8_t op; /* QPG_KV_PUT | QPG_KV_GET | QPG_KV_DEL */
	const void *key;
	uint16_t key_len;
	const void *value; /* PUT: must stay valid until done */
	uint32_t value_len;
	/* GET, optional: each piece of the value, in order; valid during the call. */
	void (*chunk)(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		      uint32_t value_len);
	/* STATUS is an enum qpg_kv_status, or a negative errno when the
	 * connection failed (-ECONNRESET) or the pool is shutting down. */
	void (*done)(struct qpg_kv_request *op, int status, uint32_t value_len);
	void *user;
	bool test_unknown_op; /* test hook: send an operation the server does not know */
	/* the pool's */
	struct qpg_kv_request *next;
	uint32_t req_id, sent, acked, got;
	uint8_t refused; /* PUT: the first error status of its chunks, QPG_KV_OK: none */
	int slot;
};

struct qpg_kv_pool_opts {
	struct qpg_client_opts client; /* service is set to KV */
	unsigned threads;	       /* default 4 */
	unsigned conns;		       /* default 4 */
};
void qpg_kv_pool_opts_default(struct qpg_kv_pool_opts *o);

/* Starts the threads and connects every connection; returns once all are
 * up (0) or one failed (negative errno, reason in ERR). */
int qpg_kv_pool_create(struct qpg_kv_pool **out, const struct qpg_kv_pool_opts *o, char *err,
		       size_t err_len);
/* Thread-safe. OP must stay valid until its done callback. */
int qpg_kv_submit(struct qpg_kv_pool *p, struct qpg_kv_request *op);
/* Fails what is still queued (-ECANCELED), closes, joins the threads. */
void qpg_kv_pool_destroy(struct qpg_kv_pool *p);

struct qpg_kv_pool_info {
	unsigned threads, conns, connected;
	uint16_t credits; /* per connection, as agreed */
};
void qpg_kv_pool_info(const struct qpg_kv_pool *p, struct qpg_kv_pool_info *out);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV client for callers that cannot keep a struct qpg_kv_request and
 * its callbacks alive themselves (a language binding): the library keeps
 * the request, a GET's value lands in the caller's buffer, and one
 * completion callback, or a wait, reports it. Every call takes a target
 * (qpgate/kv_target.h): a pool opened here, or a cluster
 * (qpgate/kv_cluster.h: qpg_kv_cluster_open), the same way. */
#ifndef QPGATE_KV_CALL_H
#define QPGATE_KV_CALL_H

#include <stdint.h>

#include "qpgate/kv_client.h"
#include "qpgate/kv_target.h"

/* A pool from plain arguments, for a binding that cannot lay out struct
 * qpg_kv_pool_opts: qpg_kv_pool_opts_default's, but for these. TRANSPORT is
 * "rdma" or "tcp"; SERVERNAME NULL: HOST; CA NULL: the system store; CERT
 * and KEY for mutual TLS (or NULL); CONNS and THREADS 0: the defaults.
 * BUSY_POLL_US: how long the pool's threads poll before they sleep
 * (QPG_BUSY_POLL_US_DEFAULT: the transport's own). A binding whose requests
 * come from its own thread wants 0: a thread polling for work that only a
 * wake brings takes a core from the caller (on two cores, the Python
 * binding's GETs/s were 6,383 with the default and 18,341 with 0). */
int qpg_kv_pool_open(struct qpg_kv_target **out, const char *host, uint16_t port,
		     const char *servername, const char *ca, const char *cert, const char *key,
		     const char *transport, unsigned conns, unsigned threads, uint32_t busy_poll_us,
		     char *err, size_t err_len);

/* The same pool with no threads of its own, for a binding with an event
 * loop (asyncio), as hiredis's adapters do: its connections run in
 * qpg_kv_target_run(), which the caller calls when qpg_kv_target_fd() is
 * readable and after it has submitted requests. Every callback then runs
 * inside qpg_kv_target_run, on the caller's thread, and no request crosses
 * threads (on two cores, each crossing was a context switch each way).
 * Opening runs the loop until the connections are up. One thread at a
 * time uses such a pool; qpg_kv_target_destroy closes it on the caller's. */
int qpg_kv_pool_open_external(struct qpg_kv_target **out, const char *host, uint16_t port,
			      const char *servername, const char *ca, const char *cert,
			      const char *key, const char *transport, unsigned conns, char *err,
			      size_t err_len);
/* Called once per qpg_kv_call that returned 0, on a pool thread (inside
 * qpg_kv_target_run for an external pool, or qpg_kv_target_destroy): STATUS is
 * an enum qpg_kv_status or a negative errno (the connection failed, the
 * pool is closing: -ECANCELED); VALUE_LEN is a GET's whole value length, of
 * which min(VALUE_LEN, CAP) bytes are in the caller's BUF; for a GET given
 * no BUF, DATA is a buffer of VALUE_LEN bytes the library allocated (when
 * STATUS is QPG_KV_OK), which the callee frees with qpg_kv_free. DATA is
 * NULL otherwise. */
typedef void (*qpg_kv_call_done)(void *arg, uint64_t token, int status, uint32_t value_len,
				 void *data);

/* OP (QPG_KV_PUT, GET or DEL) on KEY. A PUT sends VALUE; a GET writes the
 * value into BUF (up to CAP bytes), or into a buffer of its own size when
 * BUF is NULL. KEY is copied; VALUE and BUF must stay valid until DONE. 0,
 * or a negative errno with no callback to come (-EINVAL: a bad op or
 * argument, -ENOMEM). */
int qpg_kv_call(struct qpg_kv_target *t, uint8_t op, const void *key, uint16_t key_len,
		const void *value, uint32_t value_len, void *buf, uint32_t cap,
		qpg_kv_call_done done, void *arg, uint64_t token);
/* Many at once: one call for a batch (a binding pays its crossing into C
 * once, not per request). Each is qpg_kv_call's arguments, and a PUT's
 * TTL_MS (qpg_kv_request.ttl_ms; 0: none). Returns how many of them, from
 * the first, were started (each gets its DONE); a negative errno when none
 * was. */
struct qpg_kv_call_req {
	uint64_t token;
	const void *key;
	const void *value;
	void *buf;
	uint32_t value_len;
	uint32_t cap;
	uint16_t key_len;
	uint8_t op;
	uint8_t reserved; /* 0 */
	uint32_t ttl_ms;
};
int qpg_kv_call_many(struct qpg_kv_target *t, const struct qpg_kv_call_req *reqs, int n,
		     qpg_kv_call_done done, void *arg);
/* One such request, waiting for it (never from a pool thread): what
 * qpg_kv_call_wait does, with a TTL. */
int qpg_kv_call_req_wait(struct qpg_kv_target *t, const struct qpg_kv_call_req *r,
			 uint32_t *value_len_out, void **data);

/* The same, waiting for it (never from a pool thread): the status, or a
 * negative errno; *VALUE_LEN_OUT gets a GET's whole value length, and
 * *DATA (if not NULL) the buffer as DONE would have. */
int qpg_kv_call_wait(struct qpg_kv_target *t, uint8_t op, const void *key, uint16_t key_len,
		     const void *value, uint32_t value_len, void *buf, uint32_t cap,
		     uint32_t *value_len_out, void **data);
/* EXISTS of N keys in one round trip (qpg_kv_target_exists): PRESENT gets
 * the bitmap ((N + 7) / 8 bytes, valid until DONE), and DONE's VALUE_LEN is
 * how many keys from the first are stored; DATA is NULL. KEYS are copied. */
int qpg_kv_call_exists(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
		       uint8_t *present, qpg_kv_call_done done, void *arg, uint64_t token);
/* The same, waiting for it (never from a pool thread): the status, and the
 * stored prefix in *PREFIX. */
int qpg_kv_call_exists_wait(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
			    uint8_t *present, uint32_t *prefix);
/* Frees what a GET given no buffer allocated. */
void qpg_kv_free(void *data);

/* Completions without a callback into the caller's runtime (a binding's
 * pool threads must not wait for its interpreter lock): pass
 * qpg_kv_cq_done as DONE and a queue as ARG; the completion is queued, and
 * the queue's fd (an eventfd) becomes readable. One reader drains it. */
struct qpg_kv_cq;
struct qpg_kv_cq_entry {
	uint64_t token;
	int32_t status;
	uint32_t value_len;
	void *data;
};
struct qpg_kv_cq *qpg_kv_cq_new(void);
void qpg_kv_cq_done(void *cq, uint64_t token, int status, uint32_t value_len, void *data);
int qpg_kv_cq_fd(const struct qpg_kv_cq *cq);
/* Up to MAX queued completions into OUT (clearing the fd's readiness when
 * it takes the last); how many. */
int qpg_kv_cq_poll(struct qpg_kv_cq *cq, struct qpg_kv_cq_entry *out, int max);
/* Waits (up to TIMEOUT_MS; -1: no limit) until one is queued: 1, or 0. */
int qpg_kv_cq_wait(struct qpg_kv_cq *cq, int timeout_ms);
void qpg_kv_cq_free(struct qpg_kv_cq *cq);

#endif

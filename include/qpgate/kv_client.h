/* SPDX-License-Identifier: BSD-2-Clause */
/* A pooled, thread-safe KV client: THREADS event-loop threads share CONNS
 * secure connections to one server. Any thread may submit operations;
 * each connection pipelines up to its credits, and every completion is
 * delivered to the operation's own callback (on a pool thread).
 *
 * Two-sided GET values arrive in the pool's registered receive buffers; the
 * chunk callback sees each piece where it landed (no copy), already verified
 * against its message authentication tag. One-sided (RDMA READ through the
 * window the server granted), the whole value is checked against the
 * digest in the grant (SHA-256 or SHA-512/256, as the grant names it),
 * with message authentication on or off,
 * before the chunk callback sees any of it: a value one READ brings
 * (qpg_conn_info.read_max) is then delivered where it landed, in that
 * READ's pieces, and a longer one is gathered and delivered as one piece.
 * A value that does not match never reaches the chunk callback, and the
 * done callback's status is QPG_KV_CORRUPT. */
#ifndef QPGATE_KV_CLIENT_H
#define QPGATE_KV_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "qpgate/client.h"
#include "qpgate/kv.h"

struct qpg_kv_pool;
struct qpg_kv_target;

struct qpg_kv_request {
	/* set by the caller */
	uint8_t op; /* QPG_KV_PUT | QPG_KV_GET | QPG_KV_DEL | QPG_KV_EXISTS */
	const void *key;
	uint16_t key_len;
	/* PUT: the value, valid until done. EXISTS: its key list (qpgate/kv.h:
	 * a u8 length and the key, for each; key NULL, key_len 0), which must
	 * fit one message (else the answer is QPG_KV_VALUE_TOO_LARGE):
	 * qpg_kv_target_exists (qpgate/kv_target.h) builds and splits lists. */
	const void *value;
	uint32_t value_len;
	/* PUT: the value's time to live in milliseconds, from when the server
	 * commits it (0: until evicted or replaced). */
	uint32_t ttl_ms;
	/* GET, optional: each piece of the value, in order; valid during the
	 * call. EXISTS: its bitmap, once (LEN bytes; VALUE_LEN keys). */
	void (*chunk)(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		      uint32_t value_len);
	/* STATUS is an enum qpg_kv_status, or a negative errno when the
	 * connection failed (-ECONNRESET) or the pool is shutting down.
	 * VALUE_LEN: a GET's value length; EXISTS: how many keys from the
	 * first are all stored. */
	void (*done)(struct qpg_kv_request *op, int status, uint32_t value_len);
	void *user;
	/* Set by a cluster (qpgate/kv_target.h) to the etcd revision of the
	 * view it routed the key by; 0 otherwise. */
	uint64_t view_rev;
	/* Set on QPG_KV_WRONG_OWNER: the server's view revision. */
	uint64_t owner_rev;
	/* GET, optional: where its value goes, INTO_CAP bytes. When that lies
	 * inside memory the caller registered (qpg_kv_register) and the GET
	 * is one-sided, the value is READ straight into it and checked there
	 * before done; CHUNK then sees the value where it already is (DATA ==
	 * INTO + OFFSET). Otherwise it changes nothing: CHUNK gets the pieces
	 * and copies them. Over tcp, or for a value longer than INTO_CAP, the
	 * GET takes the copy path. */
	void *into;
	uint32_t into_cap;
	/* The target's own while it holds the request (its queues, its
	 * progress): never read or written by the caller. As libuv's private
	 * fields, kept out of the caller's reach; their size is ABI. */
	uint64_t qpg__private[14];
};

#define QPG_KV_MAX_SESSION_QPS 256 /* QPG_WIRE_MAX_EXTRA_QPS + 1 */

struct qpg_kv_pool_opts {
	struct qpg_client_opts client; /* service is set to KV */
	unsigned threads;	       /* default 4 */
	unsigned conns;		       /* default 4 */
	uint8_t get_mode;	       /* enum qpg_kv_get_mode; default AUTO */
	/* Handshakes in progress at once over the whole pool (default 32): a
	 * pool of a thousand connections does not arrive as one burst. */
	unsigned connect_window;
	/* Tries per connection (default 6): the client's connect_attempts
	 * for the pool's connections; one that fails for a transient reason
	 * (a server at a limit, a handshake past its deadline) is tried again
	 * after a jittered, doubling backoff (qpgate/client.h). */
	unsigned connect_attempts;
	/* rdma: bring up to this many of a thread's connections over one TLS
	 * session (qpg_client_connect_session; default 1: one each). A
	 * session shares one fate, so a lost one takes all of its
	 * connections; the window counts connections, and a session may
	 * start while it has room for one. */
	unsigned qps_per_session;
	/* A connection with requests outstanding and no answer for this long
	 * is closed, and its requests fail with -ETIMEDOUT (default 10000; 0:
	 * never). Without it a server that hangs, or a host that drops
	 * packets, holds them until the pool is destroyed. */
	unsigned request_timeout_ms;
};

/* How GETs fetch values over rdma (over tcp they are always sent). */
enum qpg_kv_get_mode {
	QPG_KV_GET_AUTO,      /* the server decides by size: READ for large values */
	QPG_KV_GET_TWO_SIDED, /* the server SENDs the value in chunks */
	QPG_KV_GET_ONE_SIDED, /* RDMA READ of a window the server grants */
};
void qpg_kv_pool_opts_default(struct qpg_kv_pool_opts *o);

/* Starts the threads and connects every connection; returns once all are
 * up (0) or one failed (negative errno, reason in ERR). */
int qpg_kv_pool_create(struct qpg_kv_pool **out, const struct qpg_kv_pool_opts *o, char *err,
		       size_t err_len);
/* Thread-safe. OP must stay valid until its done callback. Requests go to
 * the pool's connections in turn; one submitted from a callback (a done
 * callback that issues the next request) goes to a connection of the
 * thread that ran it, with no other thread woken. */
int qpg_kv_submit(struct qpg_kv_pool *p, struct qpg_kv_request *op);
/* Fails what is still queued (-ECANCELED), closes, joins the threads. */
void qpg_kv_pool_destroy(struct qpg_kv_pool *p);

struct qpg_kv_pool_info {
	unsigned threads, conns, connected;
	unsigned retries;     /* connections tried again while the pool started */
	uint16_t credits;     /* per connection, as agreed */
	uint32_t max_msg;     /* the largest message, as agreed (0: none up yet) */
	char last_error[200]; /* why the last connection to fail failed */
};
void qpg_kv_pool_info(const struct qpg_kv_pool *p, struct qpg_kv_pool_info *out);

/* The pool as a KV target (qpgate/kv_target.h), the same object: what
 * serves one server and a cluster alike takes this. */
struct qpg_kv_target *qpg_kv_pool_target(struct qpg_kv_pool *p);

#endif

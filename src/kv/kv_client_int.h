/* SPDX-License-Identifier: BSD-2-Clause */
/* The pooled KV client's structures, shared by kv_client.c (the pool, its
 * threads, requests and replies) and kv_client_read.c (one-sided GETs:
 * grants, READs, digests, RELEASEs). */
#ifndef QPG_KV_CLIENT_INT_H
#define QPG_KV_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv_digest.h"
#include "kv_target_int.h"
#include "qpgate/kv_client.h"

/* GETs that may be ahead of their READs at once, per connection: asking
 * for a grant, or granted and not yet read. A grant's window lives only
 * --kv-grant-ttl on the server, and READs go one value after another:
 * asking for more than are read soon lets the last expire before they are
 * read. A GET that has read its value no longer counts, though its RELEASE
 * is still on the way: the next one asks meanwhile, so the READs of one
 * value follow the last of another's without waiting for that round trip.
 * Past this, an auto GET is sent two-sided, a one-sided one waits. */
#define QPG__KVC_GRANTS_MAX 2

#define SLOT_BITS 11 /* up to 2048 requests in flight per connection */

/* In the req_id of a RELEASE sent on its own (no request slot is its):
 * never set in a request's. */
#define QPG__KVC_REL_TAG 0x80000000u

struct pool_thread;

/* The pool's part of a request, in its qpg__private words. */
struct qpg__kvr {
	struct qpg_kv_request *next;
	uint32_t req_id, sent, acked, got;
	uint8_t refused; /* PUT: the first error status of its chunks, QPG_KV_OK: none */
	uint8_t phase;	 /* one-sided GET: where it is */
	uint8_t result;	 /* one-sided GET: the status once read and checked */
	uint8_t hooks;	 /* test hooks (kv_testing.h) */
	int slot;
	uint32_t total;		   /* one-sided GET: the value's length */
	uint32_t posted;	   /* one-sided GET: bytes of READs posted */
	uint8_t *stage;		   /* one-sided GET: the value, held until it is checked */
	struct qpg_kv_grant grant; /* one-sided GET */
	struct kv_region *zc;	   /* one-sided GET READing into OP->into (kv_register.c) */
};
_Static_assert(sizeof(struct qpg__kvr) <= sizeof(((struct qpg_kv_request *)0)->qpg__private),
	       "the pool's request fields outgrew qpg_kv_request's private words");

static inline struct qpg__kvr *KR(struct qpg_kv_request *op)
{
	return (struct qpg__kvr *)(void *)op->qpg__private;
}

/* A one-sided GET: the request, the grant's READs, then its RELEASE. */
enum get_phase { PH_NONE, PH_REQUEST, PH_READING, PH_RELEASE_QUEUED, PH_RELEASING };

/* A read's cookie: the request, tagged when it is a test hook's probe that
 * should have failed. */
#define PROBE_TAG 1u

struct kv_conn {
	struct pool_thread *th;
	struct qpg_client_conn *conn;
	bool up, dead;
	uint16_t credits;
	uint32_t max_msg;
	unsigned outstanding; /* request frames awaiting their last reply */
	/* The last answer, or the request that found none outstanding: with
	 * requests outstanding and none answered for the pool's
	 * request_timeout_ms, the connection is closed (kv_client.c). */
	uint64_t answer_ns; /* qpg__coarse_ns: only a deadline of seconds reads it */
	bool timed_out;	    /* closed for that: its requests fail with -ETIMEDOUT */
	struct qpg_kv_request **slots;
	unsigned nslots;
	uint32_t gen;
	struct qpg_kv_request *head, *tail; /* waiting for a slot */
	struct qpg_kv_request *put_cur;	    /* a PUT with chunks still to send */
	struct qpg_kv_request *unsent;	    /* a GET/DEL whose request found the queue full */
	/* one-sided GETs */
	uint8_t get_flags; /* on each GET: whether (or when) to ask for a grant */
	bool pumping;	   /* tcp completes sends inside the send call: no nesting */
	uint32_t read_max;
	void *md;	       /* the digest of the value being read (EVP_MD_CTX) */
	unsigned reads;	       /* READs in flight */
	unsigned grants_ahead; /* asked for a grant, or granted and not yet read */
	unsigned grants_held;  /* asked for a grant, not yet released (with a GET,
				* or by a RELEASE sent): the server holds these;
				* at most the credits (it has twice as many) */
	uint32_t *rel_ids;     /* grants read and checked, their GETs done: to
				* release with the next GET, else on their own */
	unsigned rel_n, rel_cap;
	unsigned rel_out;			  /* RELEASEs sent on their own, not yet answered */
	bool last_granted;			  /* the last GET that asked for a grant got one */
	unsigned index;				  /* in its thread */
	struct qpg_kv_request *rd_head, *rd_tail; /* granted: READs to post or land */
	struct qpg_kv_request *rel_head, *rel_tail; /* read and checked: to RELEASE */
	/* while the pool starts */
	bool connecting; /* its attempts are in progress (it holds a window slot) */
};

struct pool_thread {
	struct qpg_kv_pool *pool;
	pthread_t tid;
	bool started;
	struct qpg_client *cl;
	pthread_mutex_t lock;
	struct qpg_kv_request *in_head, *in_tail; /* submitted, KR(op)->slot = local conn index */
	struct kv_conn *conns;
	unsigned nconns;
	unsigned rr; /* the next of its connections for a request submitted on it */
	/* requests completed on it, by outcome (qpg_kv_target_stats) */
	atomic_ullong n_ops, n_misses, n_unavailable, n_wrong_owner, n_errors;
	atomic_ullong n_zero_copy; /* of n_ops: read into the caller's registered memory */
};

struct qpg_kv_pool {
	struct qpg_kv_target base; /* first: a pool is a target */
	struct qpg_kv_pool_opts o; /* (its strings are the caller's: read at create only) */
	char id[64];		   /* HOST:PORT, for the target's stats */
	struct pool_thread *th;
	unsigned nthreads, nconns;
	struct qpg__kv_digests digests; /* whichever a grant names */
	atomic_uint rr;
	atomic_bool stop;
	atomic_bool started;	/* qpg_kv_pool_create returned: no more retries */
	atomic_uint connecting; /* handshakes in progress, pool-wide (the window) */
	pthread_mutex_t lock;	/* guards the fields below */
	pthread_cond_t cv;
	unsigned up, failed, exited;
	unsigned retries; /* connections tried again while the pool started */
	uint16_t credits;
	uint32_t max_msg; /* as the last connection up agreed */
	char err[256];
	char last_error[200];
	atomic_ullong abuse_succeeded;
	bool external; /* no threads: the caller's loop runs th[0] (qpg_kv_pool_run) */
	/* the caller's registered memory (kv_register.c) */
	pthread_rwlock_t regions_lock;
	struct kv_region *regions;
};

/* kv_client.c: the pool of qpg_kv_pool_create, with no threads of its own
 * when EXTERNAL (qpgate/kv_call.h: qpg_kv_pool_open_external). */
int qpg__kv_pool_create(struct qpg_kv_pool **out, const struct qpg_kv_pool_opts *o, bool external,
			char *err, size_t err_len);

/* An external pool's fd, and one turn of its loop (-EINVAL: it has threads). */
int qpg__kv_pool_fd(const struct qpg_kv_pool *p);
int qpg__kv_pool_run(struct qpg_kv_pool *p);
/* kv_register.c: the caller's memory, registered with every pool thread's
 * device (qpg_kv_register). Registering the same buffer again is 0; one
 * that overlaps another is -EEXIST. Unregistering one that a GET is
 * READing into is -EBUSY. */
struct kv_region;
int qpg__kv_pool_register(struct qpg_kv_pool *p, void *addr, size_t len, char *err, size_t err_len);
int qpg__kv_pool_unregister(struct qpg_kv_pool *p, void *addr);
/* The region holding [ADDR, ADDR + LEN) with a registration for THREAD,
 * taken (busy) until qpg__kv_region_put; NULL: none. */
struct kv_region *qpg__kv_region_take(struct qpg_kv_pool *p, unsigned thread, const void *addr,
				      size_t len);
uint32_t qpg__kv_region_lkey(const struct kv_region *r, unsigned thread);
void qpg__kv_region_put(struct kv_region *r);
/* At destroy, with every thread stopped and before their clients go. */
void qpg__kv_regions_free(struct qpg_kv_pool *p);
/* kv_pool_target.c: the pool's ops as a target. */
extern const struct qpg_kv_target_ops qpg__kv_pool_target_ops;

/* kv_client_done.c */
/* OP is over: its done callback, with STATUS. */
void qpg__kvc_complete(struct pool_thread *th, struct qpg_kv_request *op, int status,
		       uint32_t value_len);
/* K's connection is gone: every request on it or waiting for it fails. */
void qpg__kvc_fail_all(struct kv_conn *k, int status);
void qpg__kvc_fail_conn(struct kv_conn *k, const char *why, int rc);
void qpg__kvc_finish_slot(struct kv_conn *k, struct qpg_kv_request *op, int status, uint32_t len);
void qpg__kvc_list_push(struct qpg_kv_request **head, struct qpg_kv_request **tail,
			struct qpg_kv_request *op);
struct qpg_kv_request *qpg__kvc_list_pop(struct qpg_kv_request **head,
					 struct qpg_kv_request **tail);

/* kv_client_req.c: one request frame, R's header and key, then CHUNK,
 * built in a registered buffer and sent. 0, or why not (-EAGAIN: no
 * credit, -ENOBUFS...). */
int qpg__kvc_send_req(struct kv_conn *k, const struct qpg_kv_req *r, const void *chunk,
		      uint32_t chunk_len);

/* kv_client_io.c: send what K may send now (releases, chunks, requests). */
void qpg__kvc_pump(struct kv_conn *k);
/* The connection's callbacks on the request path (the pool's qpg_client_cbs). */
void qpg__kvc_on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		       uint32_t len);
void qpg__kvc_on_sent(struct qpg_client_conn *c, void *user);
/* A READ landed (kv_client_read.c), then whatever it made possible. */
void qpg__kvc_on_read_done(struct qpg_client_conn *c, void *user, uint64_t cookie,
			   const struct iovec *iov, unsigned iovcnt);

/* kv_client_read.c */
int qpg__kvc_send_release(struct kv_conn *k, struct qpg_kv_request *op);
void qpg__kvc_flush_releases(struct kv_conn *k);
/* The oldest grant due for release went out, with a GET or in a RELEASE. */
void qpg__kvc_release_sent(struct kv_conn *k);
int qpg__kvc_post_probe(struct kv_conn *k, struct qpg_kv_request *op);
void qpg__kvc_read_pump(struct kv_conn *k);
void qpg__kvc_on_grant(struct kv_conn *k, struct qpg_kv_request *op, const struct qpg_kv_reply *r);
/* A READ landed; the caller pumps afterwards. */
void qpg__kvc_on_read(struct qpg_client_conn *c, void *user, uint64_t cookie,
		      const struct iovec *iov, unsigned iovcnt);

#endif

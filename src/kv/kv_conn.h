/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service's state per connection, shared by the files that serve
 * it: kv_service.c (the requests), kv_reply.c (the queue of replies and
 * its pump) and kv_grants.c (one-sided grants: windows bound, invalidated,
 * and their values let go). */
#ifndef QPG_KV_CONN_H
#define QPG_KV_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv_park.h"
#include "kv_service.h"
#include "kv_store.h"
#include "qpgate/kv.h"
#include "qpgate/service.h"

enum job_kind {
	JOB_REPLY,     /* a status, or a GET's value in chunks */
	JOB_GRANT,     /* bind a window and send the grant (two work requests) */
	JOB_REVOKE,    /* invalidate a window and acknowledge the RELEASE (two) */
	JOB_INVALIDATE /* invalidate a window, no reply: a grant past its deadline,
			* or one released with a GET (one) */
};

enum grant_state { GRANT_FREE, GRANT_QUEUED, GRANT_ACTIVE, GRANT_RELEASING, GRANT_REVOKING };

struct kv_grant {
	struct qpg__kv_value *v; /* held from the GET until the window is invalid */
	void *window;
	uint64_t expires_ns; /* ACTIVE: revoked unless RELEASEd by then */
	uint16_t gen;	     /* in the grant id, so a stale id never matches */
	uint8_t state;
};

struct kv_job {
	struct kv_job *next;
	uint8_t kind;
	uint16_t grant;
	uint8_t op, status;
	uint32_t req_id;
	uint32_t value_len;
	uint32_t off;		 /* status: the offset to report; GET: next chunk */
	struct qpg__kv_value *v; /* GET: the value being streamed (a reference) */
	uint8_t nbits;		 /* EXISTS: bytes of BITS to send */
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint8_t *blob; /* STAT: its record (VALUE_LEN bytes), freed with the job */
};

struct kv_conn {
	struct kv_job *head, *tail;
	unsigned queued;
	struct qpg__kv_value *put; /* a PUT whose chunks are still arriving */
	uint32_t put_req, put_got;
	uint64_t put_last_ns; /* the last chunk of the PUT in progress */
	uint32_t failed_req;  /* a PUT refused at its first chunk: refuse the rest too */
	uint8_t failed_status;
	bool have_failed;
	bool pumping; /* a transport may complete a send inside the send call */
	struct kv_grant *grants;
	unsigned ngrants;
	struct qpg__kv_park_q park; /* requests the gate said to wait with, in order */
	struct qpg_kv_service *service;
	struct qpg__kv_tenant *tenant; /* whose keys it names (admit() chose) */
};

static inline struct qpg_kv_service *service_of(struct qpg_conn *c)
{
	return qpg_conn_service_ctx(c);
}

static inline struct qpg__kv_store *store_of(struct qpg_conn *c)
{
	return &service_of(c)->store;
}

static inline void add(atomic_ullong *a, uint64_t n)
{
	atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

/* kv_reply.c. A job at the queue's tail (-ENOMEM: none). */
int qpg__kv_queue_job(struct kv_conn *kc, uint8_t kind, uint16_t grant, uint8_t op, uint8_t status,
		      uint32_t req_id, uint32_t value_len, uint32_t off, struct qpg__kv_value *v);
/* A reply, counted as the answer to its request (a PUT chunk taken is not:
 * the PUT counts once, as it commits). */
int qpg__kv_queue(struct kv_conn *kc, uint8_t op, uint8_t status, uint32_t req_id,
		  uint32_t value_len, uint32_t off, struct qpg__kv_value *v);
/* The head job gone (its value's reference and record with it). */
void qpg__kv_pop(struct qpg_conn *c, struct kv_conn *kc);
/* Send queued replies while the send queue has room. */
void qpg__kv_pump(struct qpg_conn *c);

/* kv_grants.c */
uint32_t qpg__kv_grant_id(const struct kv_conn *kc, uint16_t i);
void qpg__kv_grant_drop(struct qpg_conn *c, struct kv_grant *g);
int qpg__kv_run_grant(struct qpg_conn *c, struct kv_conn *kc, const struct kv_job *j,
		      struct qpg_buf *b);
int qpg__kv_revoke_grant(struct qpg_conn *c, struct kv_grant *g);
int qpg__kv_run_revoke(struct qpg_conn *c, struct kv_conn *kc, const struct kv_job *j,
		       struct qpg_buf *b);

#endif

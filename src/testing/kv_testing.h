/* SPDX-License-Identifier: BSD-2-Clause */
/* Test hooks of the KV client, for qpgate's own tests and the --test-*
 * flags of its tools; not installed. */
#ifndef QPG_KV_TESTING_H
#define QPG_KV_TESTING_H

#include <stdbool.h>

#include "qpgate/kv_client.h"

/* Ways a test client misuses a grant, to prove the server's windows hold. */
enum qpg_kv_test_abuse { /* in the low 7 bits of hooks */
			 QPG_KV_ABUSE_NONE,
			 QPG_KV_ABUSE_READ_PAST_END, /* READ one byte more than the grant */
			 QPG_KV_ABUSE_OTHER_QP, /* READ with the grant's rkey on another connection
						 */
			 QPG_KV_ABUSE_WRITE,	/* RDMA WRITE into the (read-only) grant */
			 QPG_KV_ABUSE_AFTER_RELEASE, /* READ again with the rkey after the RELEASE
						      */
			 QPG_KV_ABUSE_WRONG_DIGEST,  /* take the grant's digest as changed on the
							way:  the GET must end QPG_KV_CORRUPT */
			 QPG_KV_ABUSE_EXPIRED, /* hold the grant 3 s, then READ: past a server's
						  --kv-grant-ttl the window must be gone */
			 QPG_KV_ABUSE_BOGUS_RELEASE, /* the GET carries the release of a grant
							never given: it must be refused */
};

#define QPG__KV_HOOK_UNKNOWN_OP 0x80 /* send an operation the server does not know */

/* Set OP's test hooks (kept in the pool's private words: kv_client.c). */
void qpg__kv_request_hooks(struct qpg_kv_request *op, bool unknown_op, uint8_t abuse);
uint8_t qpg__kv_abuse_of(const struct qpg_kv_request *op);

/* Misuses of a grant that the server let through: any nonzero count is a
 * hole in the isolation. */
unsigned long long qpg__kv_pool_abuse_succeeded(const struct qpg_kv_pool *p);

#endif

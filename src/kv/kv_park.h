/* SPDX-License-Identifier: BSD-2-Clause */
/* Requests a KV connection holds while the cluster's gate says wait (the
 * server's view is older than the client's, or the key was gained less
 * than the staleness bound ago): kv_park.c. Each is a copy of the
 * request, so no message buffer is held; they are answered in order. The
 * bound is the connection's credits (kv_service.c) and the service's
 * parked bytes; the deadline is QPG__KV_PARK_NS. */
#ifndef QPG_KV_PARK_H
#define QPG_KV_PARK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A parked request older than this is answered UNAVAILABLE: past the
 * staleness bound's wait for a gained key (1.03 s by default), well before
 * a cluster client takes the silence for a dead member (2.5 s). */
#define QPG__KV_PARK_NS 1500000000ull
/* At most this many bytes of requests parked in one service. */
#define QPG__KV_PARK_MAX_BYTES (16u << 20)

struct qpg__kv_parked {
	struct qpg__kv_parked *next;
	uint64_t since_ns;
	uint32_t len;
	uint8_t data[];
};

struct qpg__kv_park_q {
	struct qpg__kv_parked *head, *tail;
	unsigned n;
};

/* A copy of the LEN bytes at P at the tail of Q, counted in *BYTES.
 * -ENOSPC past QPG__KV_PARK_MAX_BYTES, -ENOMEM. */
int qpg__kv_park(struct qpg__kv_park_q *q, atomic_ullong *bytes, const void *p, uint32_t len,
		 uint64_t now_ns);
/* Free Q's head. */
void qpg__kv_park_pop(struct qpg__kv_park_q *q, atomic_ullong *bytes);
/* Free all of Q. */
void qpg__kv_park_clear(struct qpg__kv_park_q *q, atomic_ullong *bytes);

#endif

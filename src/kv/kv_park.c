/* SPDX-License-Identifier: BSD-2-Clause */
/* Parked KV requests (kv_park.h): copies in a FIFO, bounded in bytes
 * across the service. */
#include "kv_park.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int qpg__kv_park(struct qpg__kv_park_q *q, atomic_ullong *bytes, const void *p, uint32_t len,
		 uint64_t now_ns)
{
	uint64_t size = sizeof(struct qpg__kv_parked) + len;
	if (atomic_fetch_add(bytes, size) + size > QPG__KV_PARK_MAX_BYTES) {
		atomic_fetch_sub(bytes, size);
		return -ENOSPC;
	}
	struct qpg__kv_parked *r = malloc(size);
	if (!r) {
		atomic_fetch_sub(bytes, size);
		return -ENOMEM;
	}
	r->next = NULL;
	r->since_ns = now_ns;
	r->len = len;
	memcpy(r->data, p, len);
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->n++;
	return 0;
}

void qpg__kv_park_pop(struct qpg__kv_park_q *q, atomic_ullong *bytes)
{
	struct qpg__kv_parked *r = q->head;
	if (!r)
		return;
	if (!(q->head = r->next))
		q->tail = NULL;
	q->n--;
	atomic_fetch_sub(bytes, sizeof(*r) + r->len);
	free(r);
}

void qpg__kv_park_clear(struct qpg__kv_park_q *q, atomic_ullong *bytes)
{
	while (q->head)
		qpg__kv_park_pop(q, bytes);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* How the pooled KV client ends requests: a request's completion (its
 * done callback), a connection's failure (every request on it), and the
 * queues requests wait in. Below the pool (kv_client.c) and the one-sided
 * path (kv_client_read.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_client_int.h"

/* A count that only TH's thread writes, read by qpg_kv_target_stats. */
static void bump(atomic_ullong *n)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void qpg__kvc_complete(struct pool_thread *th, struct qpg_kv_request *op, int status,
		       uint32_t value_len)
{
	free(KR(op)->stage);
	KR(op)->stage = NULL;
	if (status == QPG_KV_OK && KR(op)->zc)
		bump(&th->n_zero_copy);
	qpg__kv_region_put(KR(op)->zc); /* its READs are over, or its QP in error */
	KR(op)->zc = NULL;
	KR(op)->phase = PH_NONE;
	if (status == QPG_KV_OK || status == QPG_KV_NOT_FOUND)
		bump(&th->n_ops);
	if (status == QPG_KV_NOT_FOUND)
		bump(&th->n_misses);
	else if (status == QPG_KV_UNAVAILABLE)
		bump(&th->n_unavailable);
	else if (status == QPG_KV_WRONG_OWNER)
		bump(&th->n_wrong_owner);
	else if (status != QPG_KV_OK)
		bump(&th->n_errors);
	if (op->done)
		op->done(op, status, value_len);
}

void qpg__kvc_fail_all(struct kv_conn *k, int status)
{
	for (unsigned i = 0; i < k->nslots; i++) {
		struct qpg_kv_request *op = k->slots[i];
		if (op) {
			k->slots[i] = NULL;
			qpg__kvc_complete(k->th, op, status, 0);
		}
	}
	k->outstanding = 0;
	k->put_cur = NULL;
	k->unsent = NULL;
	k->rd_head = k->rd_tail = k->rel_head = k->rel_tail = NULL;
	k->reads = 0; /* a failed connection's READs never complete */
	k->grants_ahead = k->grants_held = 0;
	k->rel_n = k->rel_out = 0; /* the server drops a closed connection's grants */
	while (k->head) {
		struct qpg_kv_request *op = k->head;
		k->head = KR(op)->next;
		qpg__kvc_complete(k->th, op, status, 0);
	}
	k->tail = NULL;
}

void qpg__kvc_finish_slot(struct kv_conn *k, struct qpg_kv_request *op, int status, uint32_t len)
{
	/* It asked for a grant: another GET may. */
	if ((KR(op)->phase == PH_REQUEST || KR(op)->phase == PH_READING) && k->grants_ahead)
		k->grants_ahead--;
	if (KR(op)->phase != PH_NONE && k->grants_held)
		k->grants_held--;
	k->slots[KR(op)->slot] = NULL;
	if (k->put_cur == op)
		k->put_cur = NULL;
	qpg__kvc_complete(k->th, op, status, len);
}

/* Close K's connection for a reason of ours; the pool remembers why. */
void qpg__kvc_fail_conn(struct kv_conn *k, const char *why, int rc)
{
	struct qpg_kv_pool *p = k->th->pool;
	pthread_mutex_lock(&p->lock);
	snprintf(p->last_error, sizeof(p->last_error), "client: %s%s%s", why, rc ? ": " : "",
		 rc ? strerror(-rc) : "");
	pthread_mutex_unlock(&p->lock);
	if (k->conn)
		qpg_client_close(k->conn);
}

void qpg__kvc_list_push(struct qpg_kv_request **head, struct qpg_kv_request **tail,
			struct qpg_kv_request *op)
{
	KR(op)->next = NULL;
	if (*tail)
		KR(*tail)->next = op;
	else
		*head = op;
	*tail = op;
}

struct qpg_kv_request *qpg__kvc_list_pop(struct qpg_kv_request **head, struct qpg_kv_request **tail)
{
	struct qpg_kv_request *op = *head;
	if (op) {
		*head = KR(op)->next;
		if (!*head)
			*tail = NULL;
		KR(op)->next = NULL;
	}
	return op;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service's replies on one connection: a queue of jobs (a status, a
 * GET's value in chunks, an EXISTS bitmap, a STAT record, a grant to bind
 * or revoke), pumped while the connection's send queue has room, so a
 * 1 MiB value never needs more than a few buffers at a time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kv_conn.h"
#include "kv_ref.h"

int qpg__kv_queue_job(struct kv_conn *kc, uint8_t kind, uint16_t grant, uint8_t op, uint8_t status,
		      uint32_t req_id, uint32_t value_len, uint32_t off, struct qpg__kv_value *v)
{
	struct kv_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct kv_job){.kind = kind,
			     .grant = grant,
			     .op = op,
			     .status = status,
			     .req_id = req_id,
			     .value_len = value_len,
			     .off = off,
			     .v = v};
	QPG__QUEUE_APPEND(kc->head, kc->tail, j, next);
	kc->queued++;
	return 0;
}

void qpg__kv_count(struct qpg_kv_service *k, uint8_t op, uint8_t status)
{
	if (op <= QPG_KV_OP_MAX && status <= QPG_KV_STATUS_MAX)
		atomic_fetch_add_explicit(&k->m.ops[op][status], 1, memory_order_relaxed);
}

/* A reply: counted as the answer to its request, except a PUT chunk that
 * was taken (the PUT is counted once, when its last chunk commits it). */
int qpg__kv_queue(struct kv_conn *kc, uint8_t op, uint8_t status, uint32_t req_id,
		  uint32_t value_len, uint32_t off, struct qpg__kv_value *v)
{
	if (op != QPG_KV_PUT || status != QPG_KV_OK)
		qpg__kv_count(kc->service, op, status);
	return qpg__kv_queue_job(kc, JOB_REPLY, 0, op, status, req_id, value_len, off, v);
}

void qpg__kv_pop(struct qpg_conn *c, struct kv_conn *kc)
{
	struct kv_job *j = kc->head;
	kc->head = j->next;
	if (!kc->head)
		kc->tail = NULL;
	kc->queued--;
	qpg__kv_release(store_of(c), j->v);
	free(j->blob);
	free(j);
}

/* Send queued replies while the send queue has room. */
void qpg__kv_pump(struct qpg_conn *c)
{
	struct kv_conn *kc = qpg_conn_data(c);
	struct qpg__kv_store *st = store_of(c);
	if (!kc || kc->pumping)
		return; /* the outer pump goes on while there is room */
	kc->pumping = true;
	while (kc->head && qpg_conn_is_open(c)) {
		struct kv_job *j = kc->head;
		uint32_t need = j->kind == JOB_REPLY || j->kind == JOB_INVALIDATE ? 1 : 2; /* WRs */
		if (qpg_conn_send_room(c) < need)
			break;
		if (j->kind == JOB_INVALIDATE) {
			/* No reply: the client did not ask, or its GET is the
			 * answer. A RELEASE of an expired grant that comes later
			 * finds it gone and is refused. */
			struct kv_grant *g = &kc->grants[j->grant];
			qpg__kv_pop(c, kc);
			if (qpg__kv_revoke_grant(c, g))
				break;
			continue;
		}
		struct qpg_buf *b = qpg_conn_buf_get(c);
		if (!b) {
			if (qpg_conn_in_flight(c) == 0) /* no completion of ours will wake us */
				qpg_conn_close(c, QPG_ERR_LOCAL, "server out of message buffers");
			break;
		}
		if (j->kind != JOB_REPLY) {
			struct kv_job job = *j;
			j->v = NULL; /* a grant's reference is the grant's, not the job's */
			qpg__kv_pop(c, kc);
			int rc = job.kind == JOB_GRANT ? qpg__kv_run_grant(c, kc, &job, b)
						       : qpg__kv_run_revoke(c, kc, &job, b);
			if (rc)
				break;
			continue;
		}
		uint8_t *p = qpg_buf_payload(b);
		struct qpg_kv_reply r = {.op = j->op,
					 .status = j->status,
					 .req_id = j->req_id,
					 .value_len = j->value_len,
					 .offset = j->off};
		uint32_t chunk = 0;
		uint16_t flags = 0;
		struct qpg_buf *ref = NULL;
		struct qpg_region *region = NULL;
		if (j->v) {
			chunk =
			    QPG_MIN(j->value_len - j->off, qpg_conn_max_msg(c) - QPG_KV_HDR_LEN);
			if ((ref = qpg__kv_ref_new(st, j->v, j->off, chunk)) != NULL)
				region = j->v->region;
			else
				memcpy(p + QPG_KV_HDR_LEN, qpg__kv_data(st, j->v) + j->off, chunk);
			if (j->off + chunk < j->value_len)
				flags = QPG_FRAME_FLAG_MORE;
		} else if (j->nbits) {
			chunk = j->nbits;
			memcpy(p + QPG_KV_HDR_LEN, j->bits, chunk);
		} else if (j->blob) {
			chunk = j->value_len;
			memcpy(p + QPG_KV_HDR_LEN, j->blob, chunk);
		}
		qpg_kv_encode_reply(p, QPG_KV_HDR_LEN, &r);
		/* Advance before sending: the send may complete (and pump) inline. */
		j->off += chunk;
		if (!j->v || j->off >= j->value_len)
			qpg__kv_pop(c, kc);
		int rc =
		    ref ? qpg_conn_send_ref(c, b, QPG_FRAME_KV_REPLY, flags, QPG_KV_HDR_LEN, region,
					    ref)
			: qpg_conn_send(c, b, QPG_FRAME_KV_REPLY, flags, QPG_KV_HDR_LEN + chunk);
		if (rc)
			break; /* the connection is closing; closed() frees the queue */
	}
	kc->pumping = false;
}

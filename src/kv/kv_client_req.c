/* SPDX-License-Identifier: BSD-2-Clause */
/* One request of the pooled KV client, below everything that moves it: its
 * test hooks (kept in the pool's private words) and its frame, built
 * straight into a registered buffer and sent. */
#include <errno.h>
#include <string.h>

#include "kv_client_int.h"
#include "kv_testing.h"

void qpg__kv_request_hooks(struct qpg_kv_request *op, bool unknown_op, uint8_t abuse)
{
	KR(op)->hooks = (uint8_t)((unknown_op ? QPG__KV_HOOK_UNKNOWN_OP : 0) | (abuse & 0x7f));
}

uint8_t qpg__kv_abuse_of(const struct qpg_kv_request *op)
{
	return KR((struct qpg_kv_request *)op)->hooks & 0x7f;
}

int qpg__kvc_send_req(struct kv_conn *k, const struct qpg_kv_req *r, const void *chunk,
		      uint32_t chunk_len)
{
	/* Encoded straight into a registered buffer: no copy of the header,
	 * and a PUT's chunk copied once, from the caller's value. */
	struct qpg_buf *b = qpg_client_buf_get(k->conn);
	if (!b)
		return -ENOBUFS;
	uint8_t *p = qpg_buf_payload(b);
	int n = qpg_kv_encode_req(p, k->max_msg, r);
	if (n < 0 || chunk_len > k->max_msg - (uint32_t)n) {
		qpg_client_buf_put(k->conn, b);
		return n < 0 ? n : -EMSGSIZE;
	}
	if (chunk_len)
		memcpy(p + n, chunk, chunk_len);
	return qpg_client_send_buf(k->conn, b, QPG_FRAME_KV_REQ, (uint32_t)n + chunk_len);
}

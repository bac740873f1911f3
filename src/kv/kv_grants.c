/* SPDX-License-Identifier: BSD-2-Clause */
/* One-sided grants of the KV service: a read-only window over exactly one
 * value, bound to the asking client's QP, holding the value's reference
 * until the window is invalid again (released by the client, with its next
 * GET or a RELEASE, or revoked at its deadline). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kv_conn.h"

/* Send a reply header (and PAYLOAD) in B, which the caller got first: a
 * window bound or invalidated is always followed by its reply. */
static int send_reply(struct qpg_conn *c, struct qpg_buf *b, const struct qpg_kv_reply *r,
		      uint16_t frame_flags, const void *payload, uint32_t len)
{
	uint8_t *p = qpg_buf_payload(b);
	qpg_kv_encode_reply(p, QPG_KV_HDR_LEN, r);
	if (len)
		memcpy(p + QPG_KV_HDR_LEN, payload, len);
	return qpg_conn_send(c, b, QPG_FRAME_KV_REPLY, frame_flags, QPG_KV_HDR_LEN + len);
}

uint32_t qpg__kv_grant_id(const struct kv_conn *kc, uint16_t i)
{
	return (uint32_t)kc->grants[i].gen << 16 | i;
}

void qpg__kv_grant_drop(struct qpg_conn *c, struct kv_grant *g)
{
	if (g->window) /* it was bound */
		atomic_fetch_sub_explicit(&service_of(c)->m.grants_live, 1, memory_order_relaxed);
	qpg__kv_release(store_of(c), g->v);
	g->v = NULL;
	g->window = NULL;
	g->state = GRANT_FREE;
}

/* JOB_GRANT: bind the window, then send the grant; the bind is ahead of the
 * reply on the send queue, so the window is valid before the client knows
 * its key. */
int qpg__kv_run_grant(struct qpg_conn *c, struct kv_conn *kc, const struct kv_job *j,
		      struct qpg_buf *b)
{
	struct kv_grant *g = &kc->grants[j->grant];
	struct qpg__kv_store *st = store_of(c);
	struct qpg_kv_reply r = {.op = QPG_KV_GET, .req_id = j->req_id, .value_len = g->v->len};
	struct qpg_kv_grant gr = {.addr = (uintptr_t)qpg__kv_data(st, g->v)};
	int rc = qpg_conn_grant_read(c, g->v->region, qpg__kv_data(st, g->v), g->v->len, g,
				     &g->window, &gr.rkey);
	if (rc) {
		/* Out of windows or send queue: the client may retry. */
		qpg__kv_grant_drop(c, g);
		if (rc == -ENOTCONN) {
			qpg_conn_buf_put(c, b);
			return rc;
		}
		r.status = QPG_KV_BUSY;
		return send_reply(c, b, &r, 0, NULL, 0);
	}
	g->state = GRANT_ACTIVE;
	add(&service_of(c)->m.grants, 1);
	atomic_fetch_add_explicit(&service_of(c)->m.grants_live, 1, memory_order_relaxed);
	g->expires_ns =
	    service_of(c)->grant_ttl_ns ? qpg__now_ns() + service_of(c)->grant_ttl_ns : 0;
	gr.grant_id = qpg__kv_grant_id(kc, j->grant);
	gr.digest_alg = service_of(c)->digest_alg;
	memcpy(gr.digest, g->v->digest, sizeof(gr.digest));
	uint8_t payload[QPG_KV_GRANT_LEN];
	qpg_kv_encode_grant(payload, sizeof(payload), &gr);
	r.flags = QPG_KV_R_GRANT;
	return send_reply(c, b, &r, 0, payload, sizeof(payload));
}

/* Post the invalidation of G's window. A window that cannot be invalidated
 * must not outlive the connection: closing puts the QP in error, which
 * ends it. */
int qpg__kv_revoke_grant(struct qpg_conn *c, struct kv_grant *g)
{
	int rc = qpg_conn_revoke(c, g->window);
	if (rc)
		qpg_conn_close(c, QPG_ERR_QP, "cannot invalidate a memory window: %s",
			       strerror(-rc));
	else
		g->state = GRANT_REVOKING;
	return rc;
}

int qpg__kv_run_revoke(struct qpg_conn *c, struct kv_conn *kc, const struct kv_job *j,
		       struct qpg_buf *b)
{
	int rc = qpg__kv_revoke_grant(c, &kc->grants[j->grant]);
	if (rc) {
		qpg_conn_buf_put(c, b);
		return rc;
	}
	struct qpg_kv_reply r = {.op = QPG_KV_RELEASE, .req_id = j->req_id};
	return send_reply(c, b, &r, 0, NULL, 0);
}

void qpg__kv_revoked(struct qpg_conn *c, void *user)
{
	qpg__kv_grant_drop(c, user);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV client's request path on one connection: what it may send now
 * (releases, PUT chunks, requests, within its credits), and the replies
 * and completions that come back. Runs on the connection's pool thread. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_testing.h"
#include "common.h"
#include "kv_client_int.h"
#include "kv_testing.h"

static int send_frame(struct kv_conn *k, struct qpg_kv_request *op, uint32_t off, uint32_t chunk)
{
	/* 0x7f: no such operation (the test hook), answered "malformed". */
	struct qpg_kv_req r = {.op = (KR(op)->hooks & QPG__KV_HOOK_UNKNOWN_OP) ? 0x7f : op->op,
			       .flags = KR(op)->phase == PH_REQUEST ? k->get_flags : 0,
			       .key_len = op->key_len,
			       .req_id = KR(op)->req_id,
			       .value_len = op->op == QPG_KV_PUT ? op->value_len : 0,
			       .offset = off,
			       .view_rev = op->view_rev,
			       .key = op->key};
	if (op->op == QPG_KV_PUT && off == 0 && op->ttl_ms) { /* it leads the first chunk */
		r.flags |= QPG_KV_F_TTL;
		r.ttl_ms = op->ttl_ms;
	}
	/* A GET takes the oldest grant due for release along: no message,
	 * and no answer, of its own. */
	bool carries = false;
	if (op->op == QPG_KV_GET && qpg__kv_abuse_of(op) == QPG_KV_ABUSE_BOGUS_RELEASE) {
		r.flags |= QPG_KV_F_RELEASE; /* slot 0xffff: never a grant's */
		r.offset = 0xffffffffu;
	} else if (op->op == QPG_KV_GET && k->rel_n > 0) {
		carries = true;
		r.flags |= QPG_KV_F_RELEASE;
		r.offset = k->rel_ids[0];
	}
	if (op->op == QPG_KV_EXISTS) { /* no key: its list, whole */
		r.key_len = 0;
		r.key = NULL;
		r.value_len = KR(op)->total;
		chunk = op->value_len;
	}
	int rc = qpg__kvc_send_req(k, &r, chunk ? (const uint8_t *)op->value + off : NULL, chunk);
	if (rc == 0) {
		if (k->outstanding++ == 0)
			k->answer_ns = qpg__coarse_ns();
		if (carries)
			qpg__kvc_release_sent(k);
	}
	return rc;
}

/* Send the next chunk of the PUT in progress. */
static int put_next(struct kv_conn *k)
{
	struct qpg_kv_request *op = k->put_cur;
	uint32_t room = k->max_msg - QPG_KV_REQ_HDR_LEN - op->key_len -
			(KR(op)->sent == 0 && op->ttl_ms ? QPG_KV_TTL_LEN : 0);
	uint32_t chunk = op->value_len - KR(op)->sent < room ? op->value_len - KR(op)->sent : room;
	int rc = send_frame(k, op, KR(op)->sent, chunk);
	if (rc)
		return rc;
	KR(op)->sent += chunk;
	KR(op)->got++; /* chunks in flight */
	if (KR(op)->sent >= op->value_len)
		k->put_cur = NULL;
	return 0;
}

static int free_slot(struct kv_conn *k)
{
	for (unsigned i = 0; i < k->nslots; i++)
		if (!k->slots[i])
			return (int)i;
	return -1;
}

/* A READ landed (kv_client_read.c), then whatever it made possible. */
void qpg__kvc_on_read_done(struct qpg_client_conn *c, void *user, uint64_t cookie,
			   const struct iovec *iov, unsigned iovcnt)
{
	qpg__kvc_on_read(c, user, cookie, iov, iovcnt);
	qpg__kvc_pump(user);
}

void qpg__kvc_on_sent(struct qpg_client_conn *c, void *user)
{
	(void)c;
	struct kv_conn *k = user;
	if (k->rd_head)
		qpg__kvc_read_pump(k);
	qpg__kvc_pump(k); /* a request may have found the send queue full */
}

static void pump_unguarded(struct kv_conn *k);

void qpg__kvc_pump(struct kv_conn *k)
{
	if (k->pumping)
		return; /* the outer call goes on while there is credit */
	k->pumping = true;
	pump_unguarded(k);
	k->pumping = false;
}

static void pump_unguarded(struct kv_conn *k)
{
	while (k->up && !k->dead && k->outstanding < k->credits) {
		if (k->rel_head) { /* releases first: they free the server's windows */
			if (qpg__kvc_send_release(k, k->rel_head))
				return; /* full: it stays first, a send completion retries */
			qpg__kvc_list_pop(&k->rel_head, &k->rel_tail);
			continue;
		}
		if (k->unsent) {
			if (send_frame(k, k->unsent, 0, 0))
				return;
			k->unsent = NULL;
			continue;
		}
		if (k->put_cur) {
			if (put_next(k))
				return;
			continue;
		}
		struct qpg_kv_request *op = k->head;
		if (!op)
			return;
		bool grant = op->op == QPG_KV_GET && k->get_flags;
		/* (A grant this GET releases is not held once it is sent.) */
		unsigned held = k->grants_held - (op->op == QPG_KV_GET && k->rel_n > 0);
		if (grant && (k->grants_ahead >= QPG__KVC_GRANTS_MAX ||
			      held >= QPG_MAX(QPG__KVC_GRANTS_MAX, k->credits))) {
			/* Insisted on, or left to the server while it grants what
			 * this connection asks for (its values are large): waits
			 * for a grant to end. Else sent: small values come faster
			 * that way than after a wait. */
			if ((k->get_flags & QPG_KV_F_ONE_SIDED) || k->last_granted)
				return;
			grant = false;
		}
		if (op->op == QPG_KV_EXISTS && op->value_len > k->max_msg - QPG_KV_REQ_HDR_LEN) {
			/* A list that one message cannot carry is never sent. */
			k->head = KR(op)->next;
			if (!k->head)
				k->tail = NULL;
			KR(op)->next = NULL;
			qpg__kvc_complete(k->th, op, QPG_KV_VALUE_TOO_LARGE, 0);
			continue;
		}
		int slot = free_slot(k);
		if (slot < 0)
			return;
		k->head = KR(op)->next;
		if (!k->head)
			k->tail = NULL;
		KR(op)->next = NULL;
		KR(op)->slot = slot;
		KR(op)->req_id = ((++k->gen << SLOT_BITS) | (uint32_t)slot) & ~QPG__KVC_REL_TAG;
		KR(op)->sent = KR(op)->acked = KR(op)->got = 0;
		KR(op)->refused = QPG_KV_OK;
		KR(op)->phase = grant ? PH_REQUEST : PH_NONE;
		if (op->op == QPG_KV_EXISTS) /* its keys, checked at submit */
			KR(op)->total = (uint32_t)qpg_kv_exists_count(op->value, op->value_len);
		k->grants_ahead += grant;
		k->grants_held += grant;
		k->slots[slot] = op;
		if (op->op == QPG_KV_PUT) {
			k->put_cur = op;
			if (put_next(k))
				return;
		} else if (send_frame(k, op, 0, 0)) {
			k->unsent = op; /* in its slot; sent when there is room */
			return;
		}
	}
}

/* A RELEASE sent on its own was answered. Refused only if the grant had
 * expired: the server invalidated it then. */
static void reply_release_alone(struct kv_conn *k, const struct qpg_kv_reply *r)
{
	if (r->op != QPG_KV_RELEASE || k->rel_out == 0) {
		qpg__kvc_fail_conn(k, "a RELEASE answer for no RELEASE", 0);
		return;
	}
	k->rel_out--;
	k->outstanding--;
	qpg__kvc_pump(k);
	qpg__kvc_flush_releases(k);
}

/* A PUT's fragment was answered: the first refusal is the answer, and the
 * PUT ends once every fragment sent is answered. */
static void reply_put(struct kv_conn *k, struct qpg_kv_request *op, const struct qpg_kv_reply *r)
{
	k->outstanding--;
	KR(op)->got--;
	if (r->status != QPG_KV_OK && KR(op)->refused == QPG_KV_OK) {
		KR(op)->refused = r->status;
		if (k->put_cur == op)
			k->put_cur = NULL; /* send no more of it */
	} else if (r->status == QPG_KV_OK) {
		KR(op)->acked = r->offset;
	}
	bool failed = KR(op)->refused != QPG_KV_OK;
	if (KR(op)->got == 0 && (failed || KR(op)->acked >= op->value_len) && k->put_cur != op)
		qpg__kvc_finish_slot(k, op, KR(op)->refused, op->value_len);
}

/* A one-sided GET's RELEASE was answered. 0: go on pumping. */
static int reply_get_release(struct kv_conn *k, struct qpg_kv_request *op,
			     const struct qpg_kv_reply *r)
{
	k->outstanding--;
	if (KR(op)->phase != PH_RELEASING) {
		qpg__kvc_fail_conn(k, "a RELEASE answer for no RELEASE", 0);
		return -1;
	}
	if (r->status != QPG_KV_OK && KR(op)->result == QPG_KV_OK)
		KR(op)->result = r->status;
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_AFTER_RELEASE) {
		/* The window is invalid now: reading it again must fail. */
		k->outstanding++; /* the slot stays busy until the probe ends */
		int rc = qpg__kvc_post_probe(k, op);
		if (rc)
			qpg__kvc_fail_conn(k, "the after-release probe could not be posted", rc);
		return -1;
	}
	qpg__kvc_finish_slot(k, op, KR(op)->result, KR(op)->total);
	return 0;
}

/* A two-sided GET's chunk, in order. 0: go on pumping. */
static int reply_get_chunk(struct kv_conn *k, struct qpg_kv_request *op,
			   const struct qpg_kv_reply *r)
{
	if (KR(op)->phase == PH_REQUEST)
		k->last_granted = false; /* asked, and sent the value */
	if (r->offset != KR(op)->got) {
		qpg__kvc_fail_conn(k, "a GET answer out of order", 0);
		return -1;
	}
	if (op->chunk)
		op->chunk(op, r->chunk, r->chunk_len, r->offset, r->value_len);
	KR(op)->got += r->chunk_len;
	if (KR(op)->got >= r->value_len) {
		k->outstanding--;
		qpg__kvc_finish_slot(k, op, QPG_KV_OK, r->value_len);
	}
	return 0;
}

/* EXISTS's or STAT's one frame, which the decoder checked: EXISTS's bitmap
 * against its count and prefix, STAT's record. It completes with the
 * stored prefix, or the record's length. 0: go on pumping. */
static int reply_one_frame(struct kv_conn *k, struct qpg_kv_request *op,
			   const struct qpg_kv_reply *r)
{
	bool exists = op->op == QPG_KV_EXISTS;
	if (r->op != op->op || (exists && r->value_len != KR(op)->total)) {
		qpg__kvc_fail_conn(k,
				   exists ? "an EXISTS answer for another number of keys"
					  : "a STAT answer for another request",
				   0);
		return -1;
	}
	k->outstanding--;
	if (op->chunk)
		op->chunk(op, r->chunk, r->chunk_len, 0, r->value_len);
	qpg__kvc_finish_slot(k, op, QPG_KV_OK, exists ? r->offset : r->value_len);
	return 0;
}

/* The request a valid reply answers, or NULL. */
static struct qpg_kv_request *answered(const struct kv_conn *k, const struct qpg_kv_reply *r)
{
	unsigned slot = r->req_id & ((1u << SLOT_BITS) - 1);
	if (slot < k->nslots && k->slots[slot] && KR(k->slots[slot])->req_id == r->req_id)
		return k->slots[slot];
	return NULL;
}

void qpg__kvc_on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		       uint32_t len)
{
	(void)c;
	struct kv_conn *k = user;
	struct qpg_kv_reply r;
	k->answer_ns = qpg__coarse_ns();
	bool valid = type == QPG_FRAME_KV_REPLY && qpg_kv_decode_reply(p, len, &r) == 0;
	if (valid && (r.req_id & QPG__KVC_REL_TAG)) {
		reply_release_alone(k, &r);
		return;
	}
	struct qpg_kv_request *op = valid ? answered(k, &r) : NULL;
	if (!op) {
		qpg__kvc_fail_conn(k, "the server answered no request of ours", 0);
		return;
	}
	if (r.status == QPG_KV_WRONG_OWNER)
		op->owner_rev = (uint64_t)r.value_len << 32 | r.offset;
	int rc = 0;
	if (op->op == QPG_KV_PUT) {
		reply_put(k, op, &r);
	} else if (op->op == QPG_KV_GET && r.op == QPG_KV_RELEASE) {
		rc = reply_get_release(k, op, &r);
	} else if (op->op == QPG_KV_GET && r.status == QPG_KV_OK && (r.flags & QPG_KV_R_GRANT)) {
		k->outstanding--;
		k->last_granted = true;
		qpg__kvc_on_grant(k, op, &r);
		rc = k->dead ? -1 : 0;
	} else if (op->op == QPG_KV_GET && r.status == QPG_KV_OK) {
		rc = reply_get_chunk(k, op, &r);
	} else if ((op->op == QPG_KV_EXISTS || op->op == QPG_KV_STAT) && r.status == QPG_KV_OK) {
		rc = reply_one_frame(k, op, &r);
	} else {
		k->outstanding--;
		qpg__kvc_finish_slot(k, op, r.status, 0);
	}
	if (rc == 0)
		qpg__kvc_pump(k);
}

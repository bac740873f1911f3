/* SPDX-License-Identifier: BSD-2-Clause */
/* One-sided GETs in the pooled KV client: the server's grant, the READs
 * that fetch the value into registered buffers (pipelined up to the
 * credits, each up to read_max bytes), the digest check before any of it
 * is delivered, and the release that lets the server invalidate the
 * window. A GET is done once its value is checked; its grant is released
 * by the connection's next GET (kv_client.c's send_frame), or, if none is
 * sent by the end of the loop's turn, by a RELEASE of its own. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client_testing.h"
#include "kv_client_int.h"
#include "kv_testing.h"

/* A RELEASE of grant ID, answered under REQ_ID; it takes a credit. */
static int send_release_frame(struct kv_conn *k, uint32_t req_id, uint32_t id)
{
	struct qpg_kv_req r = {.op = QPG_KV_RELEASE, .req_id = req_id, .offset = id};
	int rc = qpg__kvc_send_req(k, &r, NULL, 0);
	if (rc == 0)
		k->outstanding++;
	return rc;
}

int qpg__kvc_send_release(struct kv_conn *k, struct qpg_kv_request *op)
{
	int rc = send_release_frame(k, KR(op)->req_id, KR(op)->grant.grant_id);
	if (rc == 0)
		KR(op)->phase = PH_RELEASING;
	return rc;
}

void qpg__kvc_release_sent(struct kv_conn *k)
{
	memmove(k->rel_ids, k->rel_ids + 1, --k->rel_n * sizeof(*k->rel_ids));
	k->grants_held--;
}

/* Send the grants due for release that no GET took along, each in a
 * RELEASE of its own (answered, and taking a credit), unless a GET waiting
 * for a credit will take one. */
void qpg__kvc_flush_releases(struct kv_conn *k)
{
	const struct qpg_kv_request *next = k->unsent ? k->unsent : k->head;
	if (k->pumping || (next && next->op == QPG_KV_GET))
		return; /* (that GET takes one along when it goes) */
	while (k->rel_n > 0 && k->up && !k->dead && k->outstanding < k->credits) {
		uint32_t id = k->rel_ids[0];
		if (send_release_frame(k, QPG__KVC_REL_TAG | id, id))
			return; /* full: a send completion pumps, and a reply flushes */
		k->rel_out++;
		qpg__kvc_release_sent(k);
	}
}

/* Test hooks: misuse OP's grant in a way the server must refuse. A probe
 * that succeeds anyway is counted (abuse_succeeded). */
int qpg__kvc_post_probe(struct kv_conn *k, struct qpg_kv_request *op)
{
	const struct qpg_kv_grant *g = &KR(op)->grant;
	uint64_t tagged = (uintptr_t)op | PROBE_TAG;
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_READ_PAST_END) {
		/* The grant's last bytes and one more. */
		uint32_t len = KR(op)->total + 1 < k->read_max ? KR(op)->total + 1 : k->read_max;
		int rc = qpg_client_read(k->conn, g->addr + KR(op)->total + 1 - len, g->rkey, len,
					 tagged);
		if (rc == 0) {
			k->reads++;
			KR(op)->posted = KR(op)->total; /* this probe is the only READ */
		}
		return rc;
	}
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_WRITE) {
		static const uint8_t junk[8] = "overwrt";
		/* A WRITE that lands comes back through on_read with the
		 * probe's tag and no request: counted as a misuse. */
		int rc = qpg__client_test_write(k->conn, g->addr, g->rkey, junk, sizeof(junk),
						PROBE_TAG);
		if (rc == 0)
			k->reads++;
		return rc;
	}
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_OTHER_QP) {
		struct pool_thread *th = k->th;
		struct kv_conn *other = &th->conns[(k->index + 1) % th->nconns];
		if (other == k || !other->up)
			return -ENOTCONN; /* needs two connections on one pool thread */
		int rc = qpg_client_read(other->conn, g->addr, g->rkey, 1, 0);
		if (rc == 0)
			other->reads++;
		return rc;
	}
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_EXPIRED) {
		/* Hold the grant past the server's deadline (this loop thread
		 * sleeps: a test hook), then READ it as if it were still ours. */
		struct timespec ts = {3, 0};
		nanosleep(&ts, NULL);
		int rc = qpg_client_read(k->conn, g->addr, g->rkey, 1, (uintptr_t)PROBE_TAG);
		if (rc == 0)
			k->reads++;
		return rc;
	}
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_AFTER_RELEASE) {
		int rc = qpg_client_read(k->conn, g->addr, g->rkey, 1, tagged);
		if (rc == 0)
			k->reads++;
		return rc;
	}
	return 0;
}

/* Post READs for granted GETs, in order, while the read window has room. */
void qpg__kvc_read_pump(struct kv_conn *k)
{
	for (struct qpg_kv_request *op = k->rd_head; op; op = KR(op)->next) {
		if (KR(op)->posted == 0 && qpg__kv_abuse_of(op) != QPG_KV_ABUSE_NONE &&
		    qpg__kv_abuse_of(op) != QPG_KV_ABUSE_AFTER_RELEASE) {
			int rc = qpg__kvc_post_probe(k, op);
			if (rc == -EAGAIN)
				return; /* the next send completion calls us again */
			if (rc < 0) {
				qpg__kvc_fail_conn(k, "a grant misuse could not be posted", rc);
				return;
			}
			KR(op)->hooks &= (uint8_t)~0x7f; /* once */
			if (k->dead)
				return;
		}
		while (KR(op)->posted < KR(op)->total) {
			if (!k->up || k->dead || k->reads >= k->credits)
				return;
			uint32_t len = KR(op)->total - KR(op)->posted;
			uint64_t raddr = KR(op)->grant.addr + KR(op)->posted;
			int rc;
			if (KR(op)->zc) {
				struct qpg_kv_pool *p = k->th->pool;
				if (len > QPG_CLIENT_READ_INTO_MAX)
					len = QPG_CLIENT_READ_INTO_MAX;
				rc = qpg_client_read_into(
				    k->conn, raddr, KR(op)->grant.rkey,
				    (uint8_t *)op->into + KR(op)->posted,
				    qpg__kv_region_lkey(KR(op)->zc, (unsigned)(k->th - p->th)), len,
				    (uintptr_t)op);
			} else {
				if (len > k->read_max)
					len = k->read_max;
				rc = qpg_client_read(k->conn, raddr, KR(op)->grant.rkey, len,
						     (uintptr_t)op);
			}
			if (rc == -EAGAIN)
				return; /* the next send completion calls us again */
			if (rc) {
				qpg__kvc_fail_conn(k, "a one-sided READ could not be posted", rc);
				return;
			}
			KR(op)->posted += len;
			k->reads++;
		}
	}
}

void qpg__kvc_on_grant(struct kv_conn *k, struct qpg_kv_request *op, const struct qpg_kv_reply *r)
{
	if (!k->get_flags || KR(op)->phase != PH_REQUEST ||
	    qpg_kv_decode_grant(r->chunk, r->chunk_len, &KR(op)->grant) || r->value_len == 0) {
		qpg__kvc_fail_conn(k, "the server sent an invalid grant", 0);
		return;
	}
	if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_WRONG_DIGEST)
		KR(op)->grant.digest[0] ^= 1;
	KR(op)->total = r->value_len;
	KR(op)->posted = KR(op)->got = 0;
	KR(op)->result = QPG_KV_OK;
	KR(op)->phase = PH_READING;
	/* Zero copy: the READs go straight into the caller's registered
	 * destination when the value fits it (test hooks read as before). */
	struct qpg_kv_pool *p = k->th->pool;
	if (op->into && r->value_len <= op->into_cap &&
	    (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_NONE ||
	     qpg__kv_abuse_of(op) == QPG_KV_ABUSE_WRONG_DIGEST))
		KR(op)->zc =
		    qpg__kv_region_take(p, (unsigned)(k->th - p->th), op->into, r->value_len);

	qpg__kvc_list_push(&k->rd_head, &k->rd_tail, op);
	qpg__kvc_read_pump(k);
}

/* Checked whether or not frames are authenticated: nothing read reaches
 * the caller before the whole value matches the grant's digest. READs land
 * in the order they were posted, one GET's after another's, so one running
 * digest per connection serves them all. A value that one READ brought
 * whole (up to read_max) is checked and delivered where it landed, in the
 * READ's pieces; a longer one is gathered in a stage, allocated at its
 * first READ, and delivered whole. One READ into the caller's registered
 * destination (zero copy) lands where it is delivered: no stage, and the
 * value is handed over once, in place, when the last READ is checked. */
static bool landed(struct kv_conn *k, struct qpg_kv_request *op, const struct iovec *iov,
		   unsigned iovcnt)
{
	size_t len = 0;
	for (unsigned i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (op != k->rd_head || KR(op)->phase != PH_READING || len > KR(op)->total - KR(op)->got) {
		qpg__kvc_fail_conn(k, "a READ completed out of order", 0);
		return false;
	}
	bool whole = (KR(op)->got == 0 && len == KR(op)->total) || KR(op)->zc;
	if (KR(op)->got == 0 &&
	    !EVP_DigestInit_ex(
		k->md, qpg__kv_digest_md(&k->th->pool->digests, KR(op)->grant.digest_alg), NULL))
		KR(op)->result = QPG_KV_CORRUPT;
	if (!whole && !KR(op)->stage && !(KR(op)->stage = malloc(KR(op)->total))) {
		qpg__kvc_fail_conn(k, "out of memory for a one-sided GET", 0);
		return false;
	}
	for (unsigned i = 0; i < iovcnt; i++) {
		if (KR(op)->stage)
			memcpy(KR(op)->stage + KR(op)->got, iov[i].iov_base, iov[i].iov_len);
		if (KR(op)->result == QPG_KV_OK &&
		    !EVP_DigestUpdate(k->md, iov[i].iov_base, iov[i].iov_len))
			KR(op)->result = QPG_KV_CORRUPT;
		KR(op)->got += (uint32_t)iov[i].iov_len;
	}
	if (KR(op)->got < KR(op)->total)
		return true;
	uint8_t d[QPG_KV_DIGEST_LEN];
	unsigned dl = 0;
	if (KR(op)->result == QPG_KV_OK && (!EVP_DigestFinal_ex(k->md, d, &dl) || dl != sizeof(d) ||
					    CRYPTO_memcmp(d, KR(op)->grant.digest, sizeof(d)) != 0))
		KR(op)->result = QPG_KV_CORRUPT;
	if (KR(op)->result != QPG_KV_OK || !op->chunk)
		return true;
	if (KR(op)->stage) {
		op->chunk(op, KR(op)->stage, KR(op)->total, 0, KR(op)->total);
		return true;
	}
	if (KR(op)->zc) {
		op->chunk(op, op->into, KR(op)->total, 0, KR(op)->total);
		return true;
	}
	for (unsigned i = 0, off = 0; i < iovcnt; off += (uint32_t)iov[i++].iov_len)
		op->chunk(op, iov[i].iov_base, (uint32_t)iov[i].iov_len, off, KR(op)->total);
	return true;
}

void qpg__kvc_on_read(struct qpg_client_conn *c, void *user, uint64_t cookie,
		      const struct iovec *iov, unsigned iovcnt)
{
	struct kv_conn *k = user;
	struct qpg_kv_pool *p = k->th->pool;
	k->reads--;
	struct qpg_kv_request *op = (void *)(uintptr_t)(cookie & ~(uint64_t)PROBE_TAG);
	if (!op || (cookie & PROBE_TAG)) {
		/* A misuse went through: the hole this hook exists to find. */
		atomic_fetch_add(&p->abuse_succeeded, 1);
		if (op && KR(op)->phase == PH_READING) { /* past the end: fail it, in order */
			KR(op)->result = QPG_KV_MALFORMED;
			KR(op)->got = KR(op)->total;
		} else if (op && KR(op)->phase == PH_RELEASING) { /* after the release */
			k->outstanding--;
			qpg__kvc_finish_slot(k, op, QPG_KV_MALFORMED, KR(op)->total);
			return; /* the caller pumps */
		}
		if (!op)
			return;
	} else {
		if (!landed(k, op, iov, iovcnt))
			return;
	}
	if (KR(op)->got >= KR(op)->total) {
		free(KR(op)->stage);
		KR(op)->stage = NULL;
		qpg__kvc_list_pop(&k->rd_head, &k->rd_tail);
		/* Read: the next GET may ask, while this one's release is due. */
		if (k->grants_ahead)
			k->grants_ahead--;
		if (qpg__kv_abuse_of(op) == QPG_KV_ABUSE_AFTER_RELEASE) {
			/* The probe needs the RELEASE's answer: a RELEASE of
			 * this GET's own, and the GET ends after the probe. */
			KR(op)->phase = PH_RELEASE_QUEUED;
			qpg__kvc_list_push(&k->rel_head, &k->rel_tail, op);
		} else {
			/* Done now; the grant stays held until released (at
			 * most rel_cap are: the pump asks for no more). */
			if (k->rel_n == k->rel_cap) {
				qpg__kvc_fail_conn(k, "more grants held than allowed", 0);
				return;
			}
			k->rel_ids[k->rel_n++] = KR(op)->grant.grant_id;
			KR(op)->phase = PH_NONE;
			qpg__kvc_finish_slot(k, op, KR(op)->result, KR(op)->total);
			/* Free from here: the end of this turn flushes it. */
			qpg_client_wake(k->th->cl);
		}
	}
	qpg__kvc_read_pump(k); /* the caller pumps the sends */
}

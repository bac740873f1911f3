/* SPDX-License-Identifier: BSD-2-Clause */
/* Frames: every message is version|type|flags|len|seq + payload + a
 * 16-byte tag (auth.c), sent through the transport's ops table and checked
 * on arrival (sequence, tag, flags) before the service sees it. One-sided
 * work requests are counted in flight like sends. */
#include <errno.h>
#include <string.h>

#include "bytes.h"
#include "common.h"
#include "core.h"
#include "frame.h"

int qpg__conn_send(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint32_t payload_len)
{
	return qpg__conn_send_flags(c, b, type, 0, payload_len);
}

uint32_t qpg__conn_send_depth(const struct qpg__conn *c)
{
	/* A request answered with a grant takes two work requests (bind and
	 * reply), its RELEASE two more (invalidate and reply). */
	uint32_t per_request = c->ep->grants_reads ? 2 : 1;
	return QPG_MAX(per_request * c->credits, c->ep->qp_max_send_wr);
}

uint32_t qpg__conn_send_room(const struct qpg__conn *c)
{
	uint32_t depth = qpg__conn_send_depth(c);
	return c->in_flight < depth ? depth - c->in_flight : 0;
}

/* Whether C may send a frame of PAYLOAD_LEN now; if not, B (and V, a
 * value sent by reference) go back and the reason is returned. */
static int may_send(struct qpg__conn *c, struct qpg_buf *b, struct qpg_buf *v, uint32_t payload_len)
{
	struct qpg__endpoint *ep = c->ep;
	int rc = 0;
	if (c->state != QPG_CONN_ESTABLISHED)
		rc = -ENOTCONN;
	else if (payload_len > c->max_msg && !c->oversize_next)
		rc = -EMSGSIZE;
	/* Full: a peer's reply can arrive before the ACK of our request does
	 * (lost ACKs are only repaired by the next one), so a full send queue
	 * is normal under loss. The caller retries on the next completion. */
	else if (qpg__conn_send_room(c) == 0)
		rc = -EAGAIN;
	if (rc) {
		qpg_pool_put(&ep->pool, b);
		qpg_pool_put(&ep->pool, v);
	}
	return rc;
}

/* Frames B's header for TYPE, FLAGS and PAYLOAD_LEN and tags header and
 * payload: B's first HEAD payload bytes, then MORE_LEN bytes at MORE (all
 * of it in B when MORE_LEN is 0). The tag goes right after B's HEAD bytes.
 * 0, or the tag's failure (B and V then go back). */
static int seal(struct qpg__conn *c, struct qpg_buf *b, struct qpg_buf *v, uint8_t type,
		uint16_t flags, uint32_t head, const uint8_t *more, uint32_t more_len)
{
	struct qpg_frame_hdr h = {QPG_WIRE_VERSION, type, flags, head + more_len, c->auth.tx.seq++};
	uint8_t *p = b->addr;
	qpg_frame_hdr_encode(p, &h);
	if (!c->auth.enabled)
		return 0;
	uint8_t *tag = p + QPG_FRAME_HDR_LEN + head;
	int rc =
	    qpg__auth_tag2(&c->auth.tx, h.seq, p, QPG_FRAME_HDR_LEN + head, more, more_len, tag);
	if (rc) {
		qpg_pool_put(&c->ep->pool, b);
		qpg_pool_put(&c->ep->pool, v);
		return rc;
	}
	if (c->corrupt_next_tag) {
		tag[0] ^= 0x80;
		c->corrupt_next_tag = false;
	}
	return 0;
}

/* The frame is sealed: count it in flight and hand it to the transport
 * (POST's result); a failure closes C. */
static int posted(struct qpg__conn *c, uint32_t payload_len, int rc)
{
	struct qpg__endpoint *ep = c->ep;
	qpg__stat_add(&ep->stats.msgs_out, 1);
	qpg__stat_add(&ep->stats.bytes_out, payload_len);
	if (rc) {
		c->in_flight--;
		qpg__conn_close(c, QPG_ERR_QP, "send failed: %s", strerror(-rc));
	}
	return rc;
}

static void begin_flight(struct qpg__conn *c)
{
	if (c->in_flight++ == 0)
		c->progress_ns = qpg__coarse_ns();
}

int qpg__conn_send_flags(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
			 uint32_t payload_len)
{
	int rc = may_send(c, b, NULL, payload_len);
	if (rc || (rc = seal(c, b, NULL, type, flags, payload_len, NULL, 0)) != 0)
		return rc;
	begin_flight(c);
	return posted(c, payload_len,
		      c->t->send(c, b, qpg_frame_len(payload_len, c->auth.enabled)));
}

int qpg__conn_send_ref(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
		       uint32_t head, struct qpg_buf *v, void *region)
{
	uint32_t vlen = v->io_len, payload_len = head + vlen;
	/* (No oversize test hook here: the value would not fit B's slot.) */
	int rc = vlen > c->max_msg || head > c->max_msg - vlen ? -EMSGSIZE : 0;
	if (rc) {
		qpg_pool_put(&c->ep->pool, b);
		qpg_pool_put(&c->ep->pool, v);
		return rc;
	}
	if ((rc = may_send(c, b, v, payload_len)) != 0)
		return rc;
	if (!region || !c->t->send_ref || !c->t->can_ref(c)) {
		/* Copied whole: the value lands after the head, and V goes
		 * back at once. */
		memcpy((uint8_t *)b->addr + QPG_FRAME_HDR_LEN + head, v->addr, vlen);
		qpg_pool_put(&c->ep->pool, v);
		return qpg__conn_send_flags(c, b, type, flags, payload_len);
	}
	if ((rc = seal(c, b, v, type, flags, head, v->addr, vlen)) != 0)
		return rc;
	begin_flight(c);
	qpg__stat_add(&c->ep->stats.frames_by_ref, 1);
	return posted(c, payload_len,
		      c->t->send_ref(c, b, QPG_FRAME_HDR_LEN + head, v, region,
				     c->auth.enabled ? QPG_FRAME_TAG_LEN : 0));
}

/* One-sided work requests are in flight like sends until they complete. */
static int one_sided_posted(struct qpg__conn *c, int rc)
{
	if (rc == 0 && c->in_flight++ == 0)
		c->progress_ns = qpg__coarse_ns();
	return rc;
}

static int one_sided_unusable(const struct qpg__conn *c, bool has_op)
{
	if (!has_op)
		return -EOPNOTSUPP;
	return c->state == QPG_CONN_ESTABLISHED ? 0 : -ENOTCONN;
}

int qpg__conn_grant_read(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			 void *user, void **window, uint32_t *rkey)
{
	int rc = one_sided_unusable(c, c->t->grant_read != NULL);
	return rc ? rc
		  : one_sided_posted(c, c->t->grant_read(c, region, addr, len, user, window, rkey));
}

int qpg__conn_revoke(struct qpg__conn *c, void *window)
{
	int rc = one_sided_unusable(c, c->t->revoke != NULL);
	return rc ? rc : one_sided_posted(c, c->t->revoke(c, window));
}

int qpg__conn_read(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	int rc = one_sided_unusable(c, c->t->read != NULL);
	return rc ? rc : one_sided_posted(c, c->t->read(c, b, raddr, rkey));
}

int qpg__conn_test_write(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	int rc = one_sided_unusable(c, c->t->test_write != NULL);
	return rc ? rc : one_sided_posted(c, c->t->test_write(c, b, raddr, rkey));
}

void qpg__conn_on_revoked(struct qpg__conn *c, void *user)
{
	/* A closing connection's service state is already gone (and its QP in
	 * error, so nothing can be read through the window any more). */
	if (c->state == QPG_CONN_ESTABLISHED && c->ep->cbs.revoked)
		c->ep->cbs.revoked(c, user);
}

void qpg__conn_on_read(struct qpg__conn *c, struct qpg_buf *b, bool ok, const char *why)
{
	c->in_flight--;
	c->progress_ns = c->active_ns = qpg__coarse_ns();
	if (c->state != QPG_CONN_ESTABLISHED || !ok || !c->ep->cbs.read_done) {
		qpg_pool_put(&c->ep->pool, b);
		if (!ok && c->state == QPG_CONN_ESTABLISHED)
			qpg__conn_close(c, QPG_ERR_QP, "one-sided read failed: %s", why);
		return;
	}
	c->ep->cbs.read_done(c, b);
}

void qpg__conn_oversize_next(struct qpg__conn *c)
{
	c->oversize_next = true;
}

void qpg__conn_corrupt_next_tag(struct qpg__conn *c)
{
	c->corrupt_next_tag = true;
}

void qpg__conn_on_sent(struct qpg__conn *c, bool ok, const char *why)
{
	c->in_flight--;
	if (c->state != QPG_CONN_ESTABLISHED)
		return;
	c->progress_ns = c->active_ns = qpg__coarse_ns();
	if (!ok) {
		qpg__conn_close(c, QPG_ERR_QP, "send completion failed: %s", why);
		return;
	}
	if (c->ep->cbs.sent)
		c->ep->cbs.sent(c);
}

void qpg__conn_on_frame(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct qpg__endpoint *ep = c->ep;
	struct qpg_frame_hdr h;
	if (c->state != QPG_CONN_ESTABLISHED) {
		qpg_pool_put(&ep->pool, b);
		return;
	}
	int rc = qpg_frame_hdr_decode(b->addr, len, c->auth.enabled, ep->max_msg, &h);
	if (rc == 0 && qpg_frame_len(h.len, c->auth.enabled) != len)
		rc = -EPROTO;
	if (rc) {
		qpg_pool_put(&ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed frame (%zu bytes)", len);
		return;
	}
	if (h.seq != c->auth.rx.seq) {
		qpg_pool_put(&ep->pool, b);
		qpg__stat_add(&ep->stats.seq_failures, 1);
		qpg__conn_close(c, QPG_ERR_AUTH,
				"out-of-order message: sequence %llu, expected %llu",
				(unsigned long long)h.seq, (unsigned long long)c->auth.rx.seq);
		return;
	}
	if (c->auth.enabled &&
	    qpg__auth_verify(&c->auth.rx, h.seq, b->addr, QPG_FRAME_HDR_LEN + h.len,
			     (uint8_t *)b->addr + QPG_FRAME_HDR_LEN + h.len)) {
		qpg_pool_put(&ep->pool, b);
		qpg__stat_add(&ep->stats.auth_failures, 1);
		qpg__conn_close(c, QPG_ERR_AUTH, "message %llu failed authentication (bad tag)",
				(unsigned long long)h.seq);
		return;
	}
	c->auth.rx.seq++;
	c->active_ns = qpg__coarse_ns();
	c->got_frame = true; /* authenticated: the peer holds the keys */
	if (h.flags & ~QPG_FRAME_FLAGS_KNOWN) {
		qpg_pool_put(&ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unknown frame flags 0x%04x", h.flags);
		return;
	}
	if (h.flags & QPG_FRAME_FLAG_KEEPALIVE) {
		qpg_pool_put(&ep->pool, b);
		if (h.type != 0 || h.len != 0 || h.flags != QPG_FRAME_FLAG_KEEPALIVE)
			qpg__conn_close(c, QPG_ERR_PROTOCOL,
					"keepalive frame with a type, a payload or other flags");
		return; /* only "still here": done above */
	}
	qpg__stat_add(&ep->stats.msgs_in, 1);
	qpg__stat_add(&ep->stats.bytes_in, h.len);
	ep->cbs.message(c, &h, b);
}

/* Every frame but the last is copied into a slot of its own, which the
 * service takes as it takes any frame; the last is moved to the start of
 * B. The whole message is checked before any frame of it is delivered, so
 * a malformed one delivers nothing. */
void qpg__conn_on_message(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct qpg__endpoint *ep = c->ep;
	unsigned n = 0;
	if (c->state == QPG_CONN_ESTABLISHED &&
	    qpg_message_check(b->addr, len, c->auth.enabled, ep->max_msg, &n)) {
		qpg_pool_put(&ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed message (%zu bytes)", len);
		return;
	}
	if (n <= 1) {
		qpg__conn_on_frame(c, b, len);
		return;
	}
	uint8_t *p = b->addr;
	size_t off = 0;
	for (unsigned i = 0; i + 1 < n && c->state == QPG_CONN_ESTABLISHED; i++) {
		size_t flen = qpg_frame_len(qpg__get32(p + off + 4), c->auth.enabled);
		struct qpg_buf *f = qpg_pool_get(&ep->pool);
		if (!f) {
			qpg__conn_close(c, QPG_ERR_LOCAL, "receive pool exhausted");
			break;
		}
		memcpy(f->addr, p + off, flen);
		qpg__conn_on_frame(c, f, flen);
		off += flen;
	}
	if (c->state != QPG_CONN_ESTABLISHED) {
		qpg_pool_put(&ep->pool, b);
		return;
	}
	memmove(p, p + off, len - off);
	qpg__conn_on_frame(c, b, len - off);
}

/* ---- endpoint ---- */

/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service: PUT, GET and DEL of binary keys over any transport.
 *
 * Requests arrive as authenticated frames. Each connection has a queue of
 * replies to send (a status, or a GET's value streamed in chunks), pumped
 * while the connection's send queue has room: a 1 MiB value never needs
 * more than a few buffers at a time, and one client cannot starve the
 * others of the endpoint's pool.
 *
 * A PUT's chunks are acknowledged one by one (a reply per request frame
 * keeps the client's credits honest); the value becomes visible only when
 * its last chunk is in. A GET holds a reference to the value it streams, so
 * a concurrent replace or DEL on another thread never tears it.
 *
 * A one-sided GET (RDMA) is answered with a grant: a read-only window over
 * exactly the value, bound to the client's QP, and the value's digest. The
 * grant holds its reference until the client releases it (with its next
 * GET, or a RELEASE) and the window is invalid again, so the space is never
 * reused while it can still be read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kv_conn.h"

static struct kv_conn *kv_conn_of(struct qpg_conn *c)
{
	if (!qpg_conn_data(c)) {
		struct kv_conn *kc = calloc(1, sizeof(*kc));
		if (kc) {
			kc->service = service_of(c);
			kc->tenant = qpg_conn_principal(c);
			if (!kc->tenant)
				kc->tenant = kc->service->store.tenants[0];
		}
		qpg_conn_set_data(c, kc);
	}
	return qpg_conn_data(c);
}

/* The store's answers as the wire's statuses. */
static uint8_t wire_status(int kvs)
{
	switch (kvs) {
	case QPG__KVS_OK:
		return QPG_KV_OK;
	case QPG__KVS_TOO_LARGE:
		return QPG_KV_VALUE_TOO_LARGE;
	case QPG__KVS_FULL:
		return QPG_KV_STORE_FULL;
	case QPG__KVS_OVER_QUOTA:
		return QPG_KV_OVER_QUOTA;
	default:
		return QPG_KV_NOT_FOUND;
	}
}

static void handle_put(struct qpg_conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	struct qpg__kv_store *st = store_of(c);
	if (r->offset == 0) {
		if (kc->put) {
			qpg__kv_queue(kc, QPG_KV_PUT, QPG_KV_BUSY, r->req_id, r->value_len, 0,
				      NULL);
			return;
		}
		struct qpg__kv_value *v;
		int status = wire_status(
		    qpg__kv_reserve(st, kc->tenant, r->key, r->key_len, r->value_len, &v));
		if (status == QPG_KV_OVER_QUOTA)
			add(&kc->tenant->refused, 1);
		if (status != QPG_KV_OK) {
			kc->have_failed = true;
			kc->failed_req = r->req_id;
			kc->failed_status = (uint8_t)status;
			qpg__kv_queue(kc, QPG_KV_PUT, (uint8_t)status, r->req_id, r->value_len, 0,
				      NULL);
			return;
		}
		kc->have_failed = false;
		v->ttl_ms = r->ttl_ms; /* (its clock starts at the commit) */
		kc->put = v;
		kc->put_req = r->req_id;
		kc->put_got = 0;
		kc->put_last_ns = qpg__now_ns();
	} else if (!kc->put || kc->put_req != r->req_id || kc->put_got != r->offset) {
		bool refused = kc->have_failed && kc->failed_req == r->req_id;
		qpg__kv_queue(kc, QPG_KV_PUT, refused ? kc->failed_status : QPG_KV_MALFORMED,
			      r->req_id, r->value_len, r->offset, NULL);
		return;
	}
	if (r->key_len != kc->put->key_len || memcmp(r->key, kc->put->key, r->key_len) ||
	    r->value_len != kc->put->len) {
		qpg__kv_queue(kc, QPG_KV_PUT, QPG_KV_MALFORMED, r->req_id, r->value_len, r->offset,
			      NULL);
		return;
	}
	memcpy(qpg__kv_data(st, kc->put) + r->offset, r->chunk, r->chunk_len);
	kc->put_got += r->chunk_len;
	kc->put_last_ns = qpg__now_ns();
	if (kc->put_got == kc->put->len) {
		struct qpg__kv_value *v = kc->put;
		kc->put = NULL;
		/* Its own region: a window over it cannot reach a neighbour. */
		if (service_of(c)->one_sided && v->len &&
		    qpg_conn_region_open(c, qpg__kv_data(st, v), v->len,
					 (struct qpg_region **)&v->region)) {
			qpg__kv_release(st, v);
			qpg__kv_queue(kc, QPG_KV_PUT, QPG_KV_STORE_FULL, r->req_id, r->value_len,
				      r->offset, NULL);
			return;
		}
		uint32_t vlen = v->len;
		uint64_t rev;
		int gated = qpg__kv_gated_commit(kc->service, v, r->view_rev, &rev);
		if (gated != QPG_KV_OK) {
			qpg__kv_queue(kc, QPG_KV_PUT, (uint8_t)gated, r->req_id,
				      (uint32_t)(rev >> 32), (uint32_t)rev, NULL);
			return;
		}
		qpg__kv_count(kc->service, QPG_KV_PUT, QPG_KV_OK);
		add(&kc->service->m.bytes_in, vlen);
	}
	qpg__kv_queue(kc, QPG_KV_PUT, QPG_KV_OK, r->req_id, r->value_len, r->offset + r->chunk_len,
		      NULL);
}

/* Release the grant called ID (a RELEASE's, or a GET's that carries one):
 * its window is invalidated by JOB, queued ahead of anything this request
 * still has to send. False if ID names no grant of this connection that is
 * still active (never granted, released already, or expired). */
static bool release_grant(struct kv_conn *kc, uint32_t id, uint8_t job, uint32_t req_id)
{
	uint32_t i = id & 0xffff;
	if (!kc->grants || i >= kc->ngrants || kc->grants[i].state != GRANT_ACTIVE ||
	    qpg__kv_grant_id(kc, (uint16_t)i) != id)
		return false;
	if (qpg__kv_queue_job(kc, job, (uint16_t)i, QPG_KV_RELEASE, QPG_KV_OK, req_id, 0, 0, NULL))
		return false;
	kc->grants[i].state = GRANT_RELEASING;
	add(&kc->service->m.releases[job == JOB_INVALIDATE], 1);
	return true;
}

/* A GET: the value sent in chunks, or a grant to READ it. The client may
 * insist on a grant (QPG_KV_F_ONE_SIDED) or leave it to the server
 * (QPG_KV_F_GRANT_LARGE): small values go faster two-sided, large ones by
 * READ (the figures are in docs/performance.md). */
static void handle_get(struct qpg_conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	struct qpg_kv_service *k = service_of(c);
	/* The grant it releases first: its invalidation goes out before this
	 * GET's answer. A release of no grant of ours refuses the GET. */
	if ((r->flags & QPG_KV_F_RELEASE) && !release_grant(kc, r->offset, JOB_INVALIDATE, 0)) {
		qpg__kv_queue(kc, QPG_KV_GET, QPG_KV_MALFORMED, r->req_id, 0, 0, NULL);
		return;
	}
	bool force = r->flags & QPG_KV_F_ONE_SIDED;
	if (force && !k->one_sided) {
		qpg__kv_queue(kc, QPG_KV_GET, QPG_KV_UNSUPPORTED, r->req_id, 0, 0, NULL);
		return;
	}
	struct qpg__kv_value *v = qpg__kv_get(store_of(c), kc->tenant, r->key, r->key_len);
	if (!v) {
		add(&k->m.misses, 1);
		add(&kc->tenant->misses, 1);
		qpg__kv_queue(kc, QPG_KV_GET, QPG_KV_NOT_FOUND, r->req_id, 0, 0, NULL);
		return;
	}
	add(&k->m.hits, 1);
	add(&kc->tenant->hits, 1);
	bool large = (r->flags & QPG_KV_F_GRANT_LARGE) && v->len >= k->grant_min;
	/* An empty value has no region: a window cannot be empty. */
	if (!k->one_sided || !v->region || !(force || large)) {
		add(&k->m.bytes_out, v->len);
		if (qpg__kv_queue(kc, QPG_KV_GET, QPG_KV_OK, r->req_id, v->len, 0, v))
			qpg__kv_release(store_of(c), v);
		return;
	}
	/* Twice the credits: a released grant's slot frees only when its
	 * invalidation completes, which may trail the client's next GET. */
	if (!kc->grants) {
		kc->ngrants = 2u * qpg_conn_credits(c);
		kc->grants = calloc(kc->ngrants, sizeof(*kc->grants));
	}
	unsigned i = 0;
	while (kc->grants && i < kc->ngrants && kc->grants[i].state != GRANT_FREE)
		i++;
	if (!kc->grants || i == kc->ngrants) {
		qpg__kv_release(store_of(c), v);
		qpg__kv_queue(kc, QPG_KV_GET, QPG_KV_BUSY, r->req_id, 0, 0, NULL);
		return;
	}
	struct kv_grant *g = &kc->grants[i];
	g->v = v;
	g->gen++;
	g->state = GRANT_QUEUED;
	if (qpg__kv_queue_job(kc, JOB_GRANT, (uint16_t)i, QPG_KV_GET, QPG_KV_OK, r->req_id, v->len,
			      0, NULL)) {
		qpg__kv_grant_drop(c, g);
		return;
	}
	qpg__kv_count(k, QPG_KV_GET, QPG_KV_OK);
	add(&k->m.bytes_out, v->len);
}

/* EXISTS: each key of the list looked up, none read or pinned; the
 * answer is the bitmap and the stored prefix. */
static void handle_exists(struct qpg_conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	struct qpg_kv_service *k = service_of(c);
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t prefix =
	    qpg__kv_exists_list(store_of(c), kc->tenant, r->chunk, r->chunk_len, bits);
	unsigned present = 0;
	for (unsigned i = 0; i < sizeof(bits); i++)
		present += (unsigned)__builtin_popcount(bits[i]);
	if (qpg__kv_queue(kc, QPG_KV_EXISTS, QPG_KV_OK, r->req_id, r->value_len, prefix, NULL))
		return; /* out of memory: no answer, and the client's deadline ends it */
	kc->tail->nbits = (uint8_t)((r->value_len + 7) / 8);
	memcpy(kc->tail->bits, bits, kc->tail->nbits);
	add(&k->m.exists_keys[1], present);
	add(&k->m.exists_keys[0], r->value_len - present);
}

/* STAT: the caller's tenant, its record in one frame (a name of at most
 * 255 bytes fits the smallest message). */
static void handle_stat(struct qpg_conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	uint8_t *rec = malloc(QPG_KV_STAT_LEN + QPG__KV_TENANT_NAME);
	int n = rec ? qpg__kv_tenant_stat(store_of(c), kc->tenant, rec,
					  QPG_KV_STAT_LEN + QPG__KV_TENANT_NAME)
		    : -ENOMEM;
	if (n < 0 || qpg__kv_queue(kc, QPG_KV_STAT, QPG_KV_OK, r->req_id, (uint32_t)n, 0, NULL)) {
		free(rec); /* out of memory: no answer, and the client's deadline ends it */
		return;
	}
	kc->tail->blob = rec;
}

static void handle_release(struct qpg_conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	if (release_grant(kc, r->offset, JOB_REVOKE, r->req_id))
		qpg__kv_count(kc->service, QPG_KV_RELEASE, QPG_KV_OK);
	else
		qpg__kv_queue(kc, QPG_KV_RELEASE, QPG_KV_MALFORMED, r->req_id, 0, 0, NULL);
}

/* Serve the request in P. False, with nothing done, when the gate says
 * wait and LAST is not set; at its last chance a request that would wait
 * is refused UNAVAILABLE. */
static bool serve(struct qpg_conn *c, struct kv_conn *kc, const uint8_t *p, uint32_t len, bool last)
{
	struct qpg_kv_req r;
	char why[96];
	uint64_t rev = 0;
	int status = qpg_kv_decode_req(p, len, &r, why, sizeof(why));
	if (status != 0) {
		/* Refuse the request, keep the connection: the frame itself was
		 * authentic, only its content is wrong. */
		uint8_t op = r.op >= QPG_KV_PUT && r.op <= QPG_KV_OP_MAX ? r.op : 0;
		qpg__kv_queue(kc, op, (uint8_t)status, r.req_id, 0, 0, NULL);
		return true;
	}
	if (r.op != QPG_KV_RELEASE && !(r.op == QPG_KV_PUT && r.offset) &&
	    (status = qpg__kv_gate(kc->service, &r, &rev)) != QPG_KV_OK) {
		if (status == QPG_KV_GATE_WAIT && !last)
			return false;
		if (status == QPG_KV_GATE_WAIT)
			status = QPG_KV_UNAVAILABLE;
		/* In a cluster, not ours to serve (now): a PUT's later chunks
		 * are refused the same way. */
		if (r.op == QPG_KV_PUT) {
			kc->have_failed = true;
			kc->failed_req = r.req_id;
			kc->failed_status = (uint8_t)status;
		}
		qpg__kv_queue(kc, r.op, (uint8_t)status, r.req_id, (uint32_t)(rev >> 32),
			      (uint32_t)rev, NULL);
	} else if (r.op == QPG_KV_PUT) {
		handle_put(c, kc, &r);
	} else if (r.op == QPG_KV_GET) {
		handle_get(c, kc, &r);
	} else if (r.op == QPG_KV_RELEASE) {
		handle_release(c, kc, &r);
	} else if (r.op == QPG_KV_EXISTS) {
		handle_exists(c, kc, &r);
	} else if (r.op == QPG_KV_STAT) {
		handle_stat(c, kc, &r);
	} else {
		qpg__kv_queue(kc, QPG_KV_DEL,
			      wire_status(qpg__kv_del(store_of(c), kc->tenant, r.key, r.key_len)),
			      r.req_id, 0, 0, NULL);
	}
	return true;
}

/* Serve what is parked, in order, while the gate lets it through (or its
 * deadline has come); ask for the next tick if any is left. */
static void unpark(struct qpg_conn *c, struct kv_conn *kc, uint64_t now)
{
	while (kc->park.head) {
		struct qpg__kv_parked *p = kc->park.head;
		if (!serve(c, kc, p->data, p->len,
			   qpg__age_ns(now, p->since_ns) >= QPG__KV_PARK_NS))
			break;
		qpg__kv_park_pop(&kc->park, &kc->service->parked_bytes);
	}
	if (kc->park.head)
		qpg_conn_tick_soon(c);
}

/* Hold the request in B until the gate lets it through. A service out of
 * room for parked requests refuses it at once. */
static void park(struct qpg_conn *c, struct kv_conn *kc, struct qpg_buf *b, uint32_t len,
		 uint64_t now)
{
	if (qpg__kv_park(&kc->park, &kc->service->parked_bytes, qpg_buf_payload(b), len, now)) {
		serve(c, kc, qpg_buf_payload(b), len, true);
		return;
	}
	add(&kc->service->m.parked, 1);
	qpg_conn_tick_soon(c);
}

void qpg__kv_message(struct qpg_conn *c, uint8_t type, uint16_t flags, struct qpg_buf *b,
		     uint32_t len)
{
	(void)type, (void)flags;
	struct kv_conn *kc = kv_conn_of(c);
	if (!kc) {
		qpg_conn_buf_put(c, b);
		qpg_conn_close(c, QPG_ERR_LOCAL, "out of memory");
		return;
	}
	/* Every request is answered, so a client within its credits never has
	 * more than that many replies queued and requests parked here. */
	/* (Twice that again: expiries of up to 2 x credits grants queue too.) */
	if (kc->queued + kc->park.n >= 4u * qpg_conn_credits(c) + 4) {
		qpg_conn_buf_put(c, b);
		qpg_conn_close(c, QPG_ERR_PROTOCOL, "client exceeded its %u credits",
			       qpg_conn_credits(c));
		return;
	}
	/* The clock is read only where a request is parked: a request that
	 * goes straight through needs no time, and a precise read is a system
	 * call wherever the clock source is not the vDSO's (a VM's HPET: 5.8%
	 * of the server's CPU in a 4 KiB GET run in the lab, at one read per
	 * request). */
	if (kc->park.head)
		unpark(c, kc, qpg__now_ns());
	/* Behind a parked request, every later one waits too: a PUT's chunks
	 * follow their first, and replies keep the requests' order. */
	if (kc->park.head || !serve(c, kc, qpg_buf_payload(b), len, false))
		park(c, kc, b, len, qpg__now_ns());
	qpg_conn_buf_put(c, b);
	qpg__kv_pump(c);
}

void qpg__kv_sent(struct qpg_conn *c)
{
	qpg__kv_pump(c);
}

/* Grants past their deadline queued for invalidation: whether any was. */
static bool expire_grants(struct kv_conn *kc, uint64_t now)
{
	bool queued = false;
	for (unsigned i = 0; i < kc->ngrants; i++) {
		struct kv_grant *g = &kc->grants[i];
		if (g->state != GRANT_ACTIVE || !g->expires_ns || now < g->expires_ns)
			continue;
		g->state = GRANT_RELEASING;
		if (qpg__kv_queue_job(kc, JOB_INVALIDATE, (uint16_t)i, QPG_KV_RELEASE, QPG_KV_OK, 0,
				      0, 0, NULL)) {
			g->state = GRANT_ACTIVE; /* out of memory: try again next tick */
			continue;
		}
		add(&kc->service->m.grants_expired, 1);
		queued = true;
	}
	return queued;
}

/* Deadlines: grants not released in time are revoked; a PUT whose chunks
 * stopped coming gives its reserved space back (a later chunk of it is
 * refused as malformed). */
void qpg__kv_tick(struct qpg_conn *c, uint64_t now)
{
	struct kv_conn *kc = qpg_conn_data(c);
	struct qpg_kv_service *k = service_of(c);
	if (!kc)
		return;
	if (kc->park.head) {
		unpark(c, kc, now);
		qpg__kv_pump(c);
	}
	if (kc->put && k->put_timeout_ns && qpg__age_ns(now, kc->put_last_ns) > k->put_timeout_ns) {
		qpg__kv_release(store_of(c), kc->put);
		kc->put = NULL;
		add(&k->m.puts_abandoned, 1);
	}
	if (expire_grants(kc, now))
		qpg__kv_pump(c);
}

void qpg__kv_closed(struct qpg_conn *c)
{
	struct kv_conn *kc = qpg_conn_data(c);
	if (!kc)
		return;
	while (kc->head)
		qpg__kv_pop(c, kc);
	/* The QP is already in error: no window can be read any more. */
	for (unsigned i = 0; i < kc->ngrants; i++)
		if (kc->grants[i].state != GRANT_FREE)
			qpg__kv_grant_drop(c, &kc->grants[i]);
	free(kc->grants);
	qpg__kv_park_clear(&kc->park, &kc->service->parked_bytes);
	qpg__kv_release(store_of(c), kc->put); /* an unfinished PUT is dropped */
	free(kc);
	qpg_conn_set_data(c, NULL);
}

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
 * a concurrent replace or DEL on another thread never tears it. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kv_store.h"
#include "qpgate/kv.h"
#include "service.h"

struct qpg__kv_service {
	struct qpg__kv_store store;
};

struct kv_job {
	struct kv_job *next;
	uint8_t op, status;
	uint32_t req_id;
	uint32_t value_len;
	uint32_t off;		 /* status: the offset to report; GET: next chunk */
	struct qpg__kv_value *v; /* GET: the value being streamed (a reference) */
};

struct kv_conn {
	struct kv_job *head, *tail;
	unsigned queued;
	struct qpg__kv_value *put; /* a PUT whose chunks are still arriving */
	uint32_t put_req, put_got;
	uint32_t failed_req; /* a PUT refused at its first chunk: refuse the rest too */
	uint8_t failed_status;
	bool have_failed;
	bool pumping; /* a transport may complete a send inside the send call */
};

int qpg__kv_service_create(struct qpg__kv_service **out, size_t capacity, uint32_t max_value)
{
	struct qpg__kv_service *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	int rc = qpg__kv_store_init(&k->store, capacity, max_value);
	if (rc) {
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

void qpg__kv_service_destroy(struct qpg__kv_service *k)
{
	if (!k)
		return;
	qpg__kv_store_fini(&k->store);
	free(k);
}

static struct qpg__kv_store *store_of(struct qpg__conn *c)
{
	return &((struct qpg__kv_service *)c->ep->service_ctx)->store;
}

static struct kv_conn *kv_conn_of(struct qpg__conn *c)
{
	if (!c->svc)
		c->svc = calloc(1, sizeof(struct kv_conn));
	return c->svc;
}

static int queue(struct kv_conn *kc, uint8_t op, uint8_t status, uint32_t req_id,
		 uint32_t value_len, uint32_t off, struct qpg__kv_value *v)
{
	struct kv_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct kv_job){.op = op,
			     .status = status,
			     .req_id = req_id,
			     .value_len = value_len,
			     .off = off,
			     .v = v};
	if (kc->tail)
		kc->tail->next = j;
	else
		kc->head = j;
	kc->tail = j;
	kc->queued++;
	return 0;
}

static void pop(struct qpg__conn *c, struct kv_conn *kc)
{
	struct kv_job *j = kc->head;
	kc->head = j->next;
	if (!kc->head)
		kc->tail = NULL;
	kc->queued--;
	qpg__kv_release(store_of(c), j->v);
	free(j);
}

/* Send queued replies while the send queue has room. */
static void pump(struct qpg__conn *c)
{
	struct kv_conn *kc = c->svc;
	struct qpg__kv_store *st = store_of(c);
	if (!kc || kc->pumping)
		return; /* the outer pump goes on while there is room */
	kc->pumping = true;
	while (kc->head && c->state == QPG_CONN_ESTABLISHED && qpg__conn_send_room(c) > 0) {
		struct qpg_buf *b = qpg_pool_get(&c->ep->pool);
		if (!b) {
			if (c->in_flight == 0) /* no completion of ours will wake us */
				qpg__conn_close(c, QPG_ERR_LOCAL, "server out of message buffers");
			break;
		}
		struct kv_job *j = kc->head;
		uint8_t *p = qpg__frame_payload(b);
		struct qpg_kv_reply r = {.op = j->op,
					 .status = j->status,
					 .req_id = j->req_id,
					 .value_len = j->value_len,
					 .offset = j->off};
		uint32_t chunk = 0;
		uint16_t flags = 0;
		if (j->v) {
			chunk = QPG_MIN(j->value_len - j->off, c->max_msg - QPG_KV_HDR_LEN);
			memcpy(p + QPG_KV_HDR_LEN, qpg__kv_data(st, j->v) + j->off, chunk);
			if (j->off + chunk < j->value_len)
				flags = QPG_FRAME_FLAG_MORE;
		}
		qpg_kv_encode_reply(p, QPG_KV_HDR_LEN, &r);
		/* Advance before sending: the send may complete (and pump) inline. */
		j->off += chunk;
		if (!j->v || j->off >= j->value_len)
			pop(c, kc);
		if (qpg__conn_send_flags(c, b, QPG_FRAME_KV_REPLY, flags, QPG_KV_HDR_LEN + chunk))
			break; /* the connection is closing; closed() frees the queue */
	}
	kc->pumping = false;
}

static void handle_put(struct qpg__conn *c, struct kv_conn *kc, const struct qpg_kv_req *r)
{
	struct qpg__kv_store *st = store_of(c);
	if (r->offset == 0) {
		if (kc->put) {
			queue(kc, QPG_KV_PUT, QPG_KV_BUSY, r->req_id, r->value_len, 0, NULL);
			return;
		}
		struct qpg__kv_value *v;
		int status = qpg__kv_reserve(st, r->key, r->key_len, r->value_len, &v);
		if (status != QPG_KV_OK) {
			kc->have_failed = true;
			kc->failed_req = r->req_id;
			kc->failed_status = (uint8_t)status;
			queue(kc, QPG_KV_PUT, (uint8_t)status, r->req_id, r->value_len, 0, NULL);
			return;
		}
		kc->have_failed = false;
		kc->put = v;
		kc->put_req = r->req_id;
		kc->put_got = 0;
	} else if (!kc->put || kc->put_req != r->req_id || kc->put_got != r->offset) {
		bool refused = kc->have_failed && kc->failed_req == r->req_id;
		queue(kc, QPG_KV_PUT, refused ? kc->failed_status : QPG_KV_MALFORMED, r->req_id,
		      r->value_len, r->offset, NULL);
		return;
	}
	if (r->key_len != kc->put->key_len || memcmp(r->key, kc->put->key, r->key_len) ||
	    r->value_len != kc->put->len) {
		queue(kc, QPG_KV_PUT, QPG_KV_MALFORMED, r->req_id, r->value_len, r->offset, NULL);
		return;
	}
	memcpy(qpg__kv_data(st, kc->put) + r->offset, r->chunk, r->chunk_len);
	kc->put_got += r->chunk_len;
	if (kc->put_got == kc->put->len) {
		qpg__kv_commit(st, kc->put);
		kc->put = NULL;
	}
	queue(kc, QPG_KV_PUT, QPG_KV_OK, r->req_id, r->value_len, r->offset + r->chunk_len, NULL);
}

static void kv_message(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b)
{
	if (h->type != QPG_FRAME_KV_REQ) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unexpected frame type %u for kv", h->type);
		return;
	}
	struct kv_conn *kc = kv_conn_of(c);
	if (!kc) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_LOCAL, "out of memory");
		return;
	}
	/* Every request is answered, so a client within its credits never has
	 * more than that many replies queued here. */
	if (kc->queued >= 2u * c->credits + 4) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "client exceeded its %u credits", c->credits);
		return;
	}
	struct qpg_kv_req r;
	char why[96];
	int status = qpg_kv_decode_req(qpg__frame_payload(b), h->len, &r, why, sizeof(why));
	if (status != 0) {
		/* Refuse the request, keep the connection: the frame itself was
		 * authentic, only its content is wrong. */
		uint8_t op = r.op >= QPG_KV_PUT && r.op <= QPG_KV_DEL ? r.op : 0;
		queue(kc, op, (uint8_t)status, r.req_id, 0, 0, NULL);
	} else if (r.op == QPG_KV_PUT) {
		handle_put(c, kc, &r);
	} else if (r.op == QPG_KV_GET) {
		struct qpg__kv_value *v = qpg__kv_get(store_of(c), r.key, r.key_len);
		if (!v)
			queue(kc, QPG_KV_GET, QPG_KV_NOT_FOUND, r.req_id, 0, 0, NULL);
		else if (queue(kc, QPG_KV_GET, QPG_KV_OK, r.req_id, v->len, 0, v))
			qpg__kv_release(store_of(c), v);
	} else {
		queue(kc, QPG_KV_DEL, (uint8_t)qpg__kv_del(store_of(c), r.key, r.key_len), r.req_id,
		      0, 0, NULL);
	}
	qpg_pool_put(&c->ep->pool, b);
	pump(c);
}

static void kv_sent(struct qpg__conn *c)
{
	pump(c);
}

static void kv_closed(struct qpg__conn *c)
{
	struct kv_conn *kc = c->svc;
	if (!kc)
		return;
	while (kc->head)
		pop(c, kc);
	qpg__kv_release(store_of(c), kc->put); /* an unfinished PUT is dropped */
	free(kc);
	c->svc = NULL;
}

const struct qpg__service qpg__service_kv = {
    .id = QPG_SERVICE_KV,
    .name = "kv",
    .message = kv_message,
    .sent = kv_sent,
    .closed = kv_closed,
};

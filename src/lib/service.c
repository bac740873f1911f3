/* SPDX-License-Identifier: BSD-2-Clause */
/* The public service API (qpgate/service.h) over the connection core: a
 * struct qpg_conn is the core's connection, seen through these calls only. */
#include "qpgate/service.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "frame.h"
#include "tls.h"

struct qpg_region {
	const struct qpg__transport_ops *t;
	void *handle;
	atomic_llong *open; /* the opening endpoint's count of open regions */
};

static struct qpg__conn *core(const struct qpg_conn *c)
{
	return (struct qpg__conn *)c;
}

void *qpg_conn_data(const struct qpg_conn *c)
{
	return core(c)->svc;
}

void qpg_conn_set_data(struct qpg_conn *c, void *data)
{
	core(c)->svc = data;
}

int qpg_conn_peer_name(const struct qpg_conn *c, enum qpg_peer_name which, char *out,
		       size_t cap)
{
	return qpg__tls_peer_name(core(c)->ssl, (int)which, out, cap);
}

void qpg_conn_set_principal(struct qpg_conn *c, void *p)
{
	core(c)->principal = p;
}

void *qpg_conn_principal(const struct qpg_conn *c)
{
	return core(c)->principal;
}

void *qpg_conn_service_ctx(const struct qpg_conn *c)
{
	return core(c)->ep->service_ctx;
}

void qpg_conn_tick_soon(struct qpg_conn *c)
{
	struct qpg__conn *k = core(c);
	if (k->tick_soon || k->state != QPG_CONN_ESTABLISHED || !k->listed_established)
		return;
	k->tick_soon = true;
	k->ep->nsoon++;
}

bool qpg_conn_is_open(const struct qpg_conn *c)
{
	return core(c)->state == QPG_CONN_ESTABLISHED;
}

uint16_t qpg_conn_credits(const struct qpg_conn *c)
{
	return core(c)->credits;
}

uint32_t qpg_conn_max_msg(const struct qpg_conn *c)
{
	return core(c)->max_msg;
}

uint32_t qpg_conn_in_flight(const struct qpg_conn *c)
{
	return core(c)->in_flight;
}

uint32_t qpg_conn_send_room(const struct qpg_conn *c)
{
	return qpg__conn_send_room(core(c));
}

struct qpg_buf *qpg_conn_buf_get(struct qpg_conn *c)
{
	return qpg_pool_get(&core(c)->ep->pool);
}

void qpg_conn_buf_put(struct qpg_conn *c, struct qpg_buf *b)
{
	qpg_pool_put(&core(c)->ep->pool, b);
}

uint8_t *qpg_buf_payload(struct qpg_buf *b)
{
	return qpg__frame_payload(b);
}

int qpg_conn_send(struct qpg_conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags, uint32_t len)
{
	return qpg__conn_send_flags(core(c), b, type, flags, len);
}

int qpg_conn_send_ref(struct qpg_conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
		      uint32_t head_len, struct qpg_region *r, struct qpg_buf *value)
{
	struct qpg__conn *cc = core(c);
	value->chain = NULL;
	return qpg__conn_send_ref(cc, b, type, flags, head_len, value,
				  r && r->t == cc->t ? r->handle : NULL);
}

void qpg_conn_close(struct qpg_conn *c, enum qpg_err_class err, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	qpg__conn_close(core(c), err, "%s", why);
}

int qpg_conn_region_open(struct qpg_conn *c, void *addr, size_t len, struct qpg_region **out)
{
	const struct qpg__transport_ops *t = core(c)->t;
	if (!t->region_open)
		return -EOPNOTSUPP;
	struct qpg_region *r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->t = t;
	r->open = &core(c)->ep->stats.regions_open;
	int rc = t->region_open(core(c)->ep, addr, len, &r->handle);
	if (rc) {
		free(r);
		return rc;
	}
	atomic_fetch_add_explicit(r->open, 1, memory_order_relaxed);
	*out = r;
	return 0;
}

void qpg_region_close(struct qpg_region *r)
{
	if (!r)
		return;
	r->t->region_close(r->handle);
	atomic_fetch_sub_explicit(r->open, 1, memory_order_relaxed);
	free(r);
}

int qpg_conn_grant_read(struct qpg_conn *c, struct qpg_region *r, const void *addr, uint32_t len,
			void *user, void **window, uint32_t *rkey)
{
	return qpg__conn_grant_read(core(c), r->handle, addr, len, user, window, rkey);
}

int qpg_conn_revoke(struct qpg_conn *c, void *window)
{
	return qpg__conn_revoke(core(c), window);
}

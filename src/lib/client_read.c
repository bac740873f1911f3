/* SPDX-License-Identifier: BSD-2-Clause */
/* A client connection's one-sided operations: READs of a peer's window
 * into the pool's registered slots or into memory the caller registered
 * (qpg_client_reg_mr), and the tests' WRITE. Only the rdma transport has
 * them (c->t->read); over tcp each returns -EOPNOTSUPP. */
#include "qpgate/client.h"

#include "client_testing.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "common.h"
#include "core.h"
#include "frame.h"

/* Registered buffers for a one-sided operation of LEN bytes: one slot, or
 * (a READ) up to read_slots of them chained, each full but the last. */
static int one_sided_buf(struct qpg__conn *c, uint32_t len, unsigned max_slots,
			 struct qpg_buf **out)
{
	if (!c || c->state != QPG_CONN_ESTABLISHED)
		return -ENOTCONN;
	if (!c->t->read)
		return -EOPNOTSUPP;
	size_t slot = c->ep->pool.slot_size;
	if (len == 0 || len > slot * max_slots)
		return -EMSGSIZE;
	if (qpg__conn_send_room(c) == 0)
		return -EAGAIN;
	struct qpg_buf *head = NULL, **tail = &head;
	for (uint32_t off = 0; off < len; off += (uint32_t)slot) {
		struct qpg_buf *b = qpg_pool_get(&c->ep->pool);
		if (!b) {
			qpg_pool_put(&c->ep->pool, head);
			return -ENOBUFS;
		}
		b->io_len = (uint32_t)QPG_MIN(slot, (size_t)(len - off));
		*tail = b;
		tail = &b->chain;
	}
	*out = head;
	return 0;
}

int qpg_client_read(struct qpg_client_conn *cc, uint64_t raddr, uint32_t rkey, uint32_t len,
		    uint64_t cookie)
{
	struct qpg__conn *c = cc->c;
	struct qpg_buf *b;
	int rc = one_sided_buf(c, len, c ? c->read_slots : 0, &b);
	if (rc)
		return rc;
	b->cookie = cookie;
	if ((rc = qpg__conn_read(c, b, raddr, rkey)) != 0)
		qpg_pool_put(&c->ep->pool, b);
	return rc;
}

int qpg_client_reg_mr(struct qpg_client *cl, void *addr, size_t len, void **mr, uint32_t *lkey)
{
	if (!cl->t->setup || !cl->dev.pd)
		return -EOPNOTSUPP;
	if (!addr || len == 0)
		return -EINVAL;
	struct ibv_mr *m = ibv_reg_mr(cl->dev.pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (!m)
		return errno ? -errno : -ENOMEM;
	*mr = m;
	*lkey = m->lkey;
	return 0;
}

void qpg_client_dereg_mr(void *mr)
{
	if (mr)
		ibv_dereg_mr(mr);
}

static void free_into(struct qpg_buf *b)
{
	free(b);
}

int qpg_client_read_into(struct qpg_client_conn *cc, uint64_t raddr, uint32_t rkey, void *local,
			 uint32_t lkey, uint32_t len, uint64_t cookie)
{
	struct qpg__conn *c = cc->c;
	if (!c || c->state != QPG_CONN_ESTABLISHED)
		return -ENOTCONN;
	if (!c->t->read)
		return -EOPNOTSUPP;
	if (len == 0 || len > QPG_CLIENT_READ_INTO_MAX)
		return -EMSGSIZE;
	if (qpg__conn_send_room(c) == 0)
		return -EAGAIN;
	struct qpg_buf *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = (struct qpg_buf){.addr = local,
			      .lkey = lkey,
			      .len = len,
			      .io_len = len,
			      .cookie = cookie,
			      .release = free_into};
	int rc = qpg__conn_read(c, b, raddr, rkey);
	if (rc)
		free(b);
	return rc;
}

int qpg__client_test_write(struct qpg_client_conn *cc, uint64_t raddr, uint32_t rkey,
			   const void *data, uint32_t len, uint64_t cookie)
{
	struct qpg__conn *c = cc->c;
	struct qpg_buf *b;
	int rc = one_sided_buf(c, len, 1, &b);
	if (rc)
		return rc;
	memcpy(b->addr, data, len);
	b->cookie = cookie;
	if ((rc = qpg__conn_test_write(c, b, raddr, rkey)) != 0)
		qpg_pool_put(&c->ep->pool, b);
	return rc;
}

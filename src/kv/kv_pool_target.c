/* SPDX-License-Identifier: BSD-2-Clause */
/* A single server's pool as a KV target (qpgate/kv_target.h): one member,
 * the server it connects to. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_client_int.h"

static struct qpg_kv_pool *pool_of(struct qpg_kv_target *t)
{
	return (struct qpg_kv_pool *)t; /* base first */
}

struct qpg_kv_target *qpg_kv_pool_target(struct qpg_kv_pool *p)
{
	return p ? &p->base : NULL;
}

static int pool_submit(struct qpg_kv_target *t, struct qpg_kv_request *op)
{
	return qpg_kv_submit(pool_of(t), op);
}

static void pool_destroy(struct qpg_kv_target *t)
{
	qpg_kv_pool_destroy(pool_of(t));
}

static void pool_info(struct qpg_kv_target *t, struct qpg_kv_target_info *out)
{
	struct qpg_kv_pool_info pi;
	qpg_kv_pool_info(pool_of(t), &pi);
	out->members = 1;
	out->members_up = pi.connected > 0;
	out->conns = pi.conns;
	out->connected = pi.connected;
	out->retries = pi.retries;
	out->credits = pi.credits;
	out->max_msg = pi.max_msg;
	snprintf(out->last_error, sizeof(out->last_error), "%s", pi.last_error);
}

static uint32_t pool_max_msg(struct qpg_kv_target *t)
{
	struct qpg_kv_pool *p = pool_of(t);
	pthread_mutex_lock(&p->lock); /* (never held across a join) */
	uint32_t m = p->max_msg;
	pthread_mutex_unlock(&p->lock);
	return m;
}

static int pool_stats(struct qpg_kv_target *t, struct qpg_kv_target_stats *out)
{
	struct qpg_kv_pool *p = pool_of(t);
	struct qpg_kv_member_stats *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	snprintf(m->id, sizeof(m->id), "%s", p->id);
	struct qpg_kv_pool_info pi;
	qpg_kv_pool_info(p, &pi);
	m->active = true;
	m->up = pi.connected > 0;
	for (unsigned i = 0; i < p->nthreads; i++) {
		struct pool_thread *th = &p->th[i];
		m->ops += atomic_load_explicit(&th->n_ops, memory_order_relaxed);
		m->misses += atomic_load_explicit(&th->n_misses, memory_order_relaxed);
		m->unavailable += atomic_load_explicit(&th->n_unavailable, memory_order_relaxed);
		m->wrong_owner += atomic_load_explicit(&th->n_wrong_owner, memory_order_relaxed);
		m->errors += atomic_load_explicit(&th->n_errors, memory_order_relaxed);
		m->zero_copy += atomic_load_explicit(&th->n_zero_copy, memory_order_relaxed);
	}
	out->etcd_ok = true;
	out->n = 1;
	out->m = m;
	return 0;
}

static int pool_fd(struct qpg_kv_target *t)
{
	return qpg__kv_pool_fd(pool_of(t));
}

static int pool_run(struct qpg_kv_target *t)
{
	struct qpg_kv_pool *p = pool_of(t);
	return p->external ? qpg__kv_pool_run(p) : 0;
}

static int pool_reg(struct qpg_kv_target *t, void *addr, size_t len)
{
	struct qpg_kv_pool *p = pool_of(t);
	char err[180];
	int rc = qpg__kv_pool_register(p, addr, len, err, sizeof(err));
	if (rc) {
		pthread_mutex_lock(&p->lock);
		snprintf(p->last_error, sizeof(p->last_error), "register: %s", err);
		pthread_mutex_unlock(&p->lock);
	}
	return rc;
}

static int pool_unreg(struct qpg_kv_target *t, void *addr)
{
	return qpg__kv_pool_unregister(pool_of(t), addr);
}

const struct qpg_kv_target_ops qpg__kv_pool_target_ops = {
    .kind = "pool",
    .submit = pool_submit,
    .destroy = pool_destroy,
    .info = pool_info,
    .stats = pool_stats,
    .fd = pool_fd,
    .run = pool_run,
    .max_msg = pool_max_msg,
    .reg = pool_reg,
    .unreg = pool_unreg,
};

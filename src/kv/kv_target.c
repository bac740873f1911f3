/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/kv_target.h: each call goes to the target's own op. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_target_int.h"

bool qpg__kv_request_ok(const struct qpg_kv_request *op)
{
	if (op->op == QPG_KV_EXISTS)
		return op->key_len == 0 && op->value &&
		       qpg_kv_exists_count(op->value, op->value_len) > 0;
	return op->key_len > 0 && op->key_len <= QPG_KV_MAX_KEY &&
	       ((op->op >= QPG_KV_PUT && op->op <= QPG_KV_DEL) || op->op == QPG_KV_STAT);
}

int qpg_kv_target_submit(struct qpg_kv_target *t, struct qpg_kv_request *op)
{
	if (!t || !op || !op->done || !qpg__kv_request_ok(op))
		return -EINVAL;
	return t->ops->submit(t, op);
}

void qpg_kv_target_destroy(struct qpg_kv_target *t)
{
	if (t)
		t->ops->destroy(t);
}

int qpg_kv_register(struct qpg_kv_target *t, void *addr, size_t len)
{
	if (!t || !addr || len == 0)
		return -EINVAL;
	return t->ops->reg ? t->ops->reg(t, addr, len) : -EOPNOTSUPP;
}

int qpg_kv_unregister(struct qpg_kv_target *t, void *addr)
{
	if (!t || !addr)
		return -EINVAL;
	return t->ops->unreg ? t->ops->unreg(t, addr) : -EOPNOTSUPP;
}

void qpg_kv_target_info(struct qpg_kv_target *t, struct qpg_kv_target_info *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = t->ops->kind;
	t->ops->info(t, out);
}

int qpg_kv_target_stats(struct qpg_kv_target *t, struct qpg_kv_target_stats *out)
{
	memset(out, 0, sizeof(*out));
	return t->ops->stats(t, out);
}

void qpg_kv_target_stats_free(struct qpg_kv_target_stats *s)
{
	if (!s)
		return;
	free(s->m);
	s->m = NULL;
	s->n = 0;
}

int qpg_kv_target_fd(struct qpg_kv_target *t)
{
	return t->ops->fd ? t->ops->fd(t) : -EINVAL;
}

int qpg_kv_target_run(struct qpg_kv_target *t)
{
	return t->ops->run ? t->ops->run(t) : 0;
}

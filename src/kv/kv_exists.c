/* SPDX-License-Identifier: BSD-2-Clause */
/* qpg_kv_target_exists: a batch of EXISTS in one round trip, on any target.
 * The keys are grouped by the member that owns them (the target's group
 * op: a cluster's owners; a pool has one), each group packed into as few
 * EXISTS requests as its messages hold, and every request sent at once.
 * The last answer scatters the bitmaps back into the caller's order, and
 * reports the stored prefix (what a prefix-cache lookup wants: how many
 * blocks from the first it can read). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kv_target_int.h"

struct xbatch;

struct xsub {
	struct qpg_kv_request rq; /* op EXISTS, value = its list */
	struct xbatch *b;
	uint16_t first, count; /* its keys: b->order[first .. first + count) */
	int status;
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
};

struct xbatch {
	atomic_uint left; /* requests not yet answered */
	unsigned n, nsub;
	uint8_t *present;
	qpg_kv_exists_done done;
	void *arg;
	uint16_t order[QPG_KV_EXISTS_MAX]; /* the caller's index of each key, by request */
	uint8_t *lists;			   /* every request's list, one after another */
	struct xsub sub[];
};

/* The last answer: the caller's bitmap, its prefix, its status. */
static void finish(struct xbatch *b)
{
	int status = QPG_KV_OK;
	for (unsigned s = 0; s < b->nsub; s++) {
		const struct xsub *x = &b->sub[s];
		if (x->status != QPG_KV_OK) {
			if (status == QPG_KV_OK)
				status = x->status;
			continue; /* its keys read as absent */
		}
		for (unsigned j = 0; j < x->count; j++)
			if (x->bits[j / 8] >> (j % 8) & 1) {
				unsigned i = b->order[x->first + j];
				b->present[i / 8] |= (uint8_t)(1u << (i % 8));
			}
	}
	uint32_t prefix = 0;
	while (prefix < b->n && (b->present[prefix / 8] >> (prefix % 8) & 1))
		prefix++;
	qpg_kv_exists_done done = b->done;
	void *arg = b->arg;
	free(b->lists);
	free(b);
	done(arg, status, prefix);
}

static void sub_bits(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		     uint32_t value_len)
{
	(void)offset, (void)value_len;
	struct xsub *x = op->user;
	memcpy(x->bits, data, len < sizeof(x->bits) ? len : sizeof(x->bits));
}

static void sub_done(struct qpg_kv_request *op, int status, uint32_t prefix)
{
	(void)prefix; /* of this request's keys only: the batch's is computed */
	struct xsub *x = op->user;
	x->status = status;
	if (status != QPG_KV_OK)
		memset(x->bits, 0, sizeof(x->bits));
	if (atomic_fetch_sub(&x->b->left, 1) == 1)
		finish(x->b);
}

/* The bytes one request's list may take: what a message holds past the
 * header, over every member the target has (unknown yet: the least any
 * KV server takes). Not qpg_kv_target_info: a cluster's takes the lock
 * its destroy holds while it joins the threads this may run on. */
static uint32_t list_budget(struct qpg_kv_target *t)
{
	uint32_t msg = t->ops->max_msg ? t->ops->max_msg(t) : 0;
	if (msg < QPG_KV_MIN_MSG)
		msg = QPG_KV_MIN_MSG;
	return msg - QPG_KV_REQ_HDR_LEN;
}

int qpg_kv_target_exists(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
			 uint8_t *present, qpg_kv_exists_done done, void *arg)
{
	if (!t || !keys || !present || !done || n == 0 || n > QPG_KV_EXISTS_MAX)
		return -EINVAL;
	int group[QPG_KV_EXISTS_MAX];
	size_t bytes = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!keys[i].key || keys[i].len == 0 || keys[i].len > QPG_KV_MAX_KEY)
			return -EINVAL;
		group[i] = t->ops->group ? t->ops->group(t, keys[i].key, keys[i].len) : 0;
		bytes += 1u + keys[i].len;
	}
	/* The keys in group order (stable: a group keeps the caller's order). */
	uint16_t order[QPG_KV_EXISTS_MAX];
	for (unsigned i = 0; i < n; i++) {
		unsigned j = i;
		while (j > 0 && group[order[j - 1]] > group[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = (uint16_t)i;
	}
	/* Cut into requests: a new one at each group, or when the message is
	 * full. */
	uint32_t budget = list_budget(t);
	unsigned nsub = 0;
	uint32_t used = 0;
	for (unsigned j = 0; j < n; j++) {
		unsigned i = order[j];
		if (j == 0 || group[i] != group[order[j - 1]] || used + 1u + keys[i].len > budget) {
			nsub++;
			used = 0;
		}
		used += 1u + keys[i].len;
	}
	struct xbatch *b = calloc(1, sizeof(*b) + nsub * sizeof(struct xsub));
	uint8_t *lists = malloc(bytes);
	if (!b || !lists) {
		free(b);
		free(lists);
		return -ENOMEM;
	}
	b->n = n;
	b->nsub = nsub;
	b->present = present;
	b->done = done;
	b->arg = arg;
	b->lists = lists;
	memcpy(b->order, order, n * sizeof(order[0]));
	memset(present, 0, (n + 7) / 8);
	struct xsub *x = NULL;
	uint8_t *w = lists;
	used = 0;
	for (unsigned j = 0, s = 0; j < n; j++) {
		unsigned i = order[j];
		if (j == 0 || group[i] != group[order[j - 1]] || used + 1u + keys[i].len > budget) {
			x = &b->sub[s++];
			x->b = b;
			x->first = (uint16_t)j;
			x->rq = (struct qpg_kv_request){.op = QPG_KV_EXISTS,
							.value = w,
							.chunk = sub_bits,
							.done = sub_done,
							.user = x};
			used = 0;
		}
		*w++ = (uint8_t)keys[i].len;
		memcpy(w, keys[i].key, keys[i].len);
		w += keys[i].len;
		x->rq.value_len += 1u + keys[i].len;
		x->count++;
		used += 1u + keys[i].len;
	}
	/* Every request answers once; the last answer finishes the batch. */
	atomic_init(&b->left, nsub);
	for (unsigned s = 0; s < nsub; s++) {
		int rc = qpg_kv_target_submit(t, &b->sub[s].rq);
		if (rc == 0)
			continue;
		if (s == 0) { /* nothing sent: no callback */
			free(lists);
			free(b);
			return rc;
		}
		/* The target is closing: these fail, and whichever request
		 * answers last (this thread, if all have) finishes. */
		unsigned failed = nsub - s;
		for (; s < nsub; s++)
			b->sub[s].status = rc;
		if (atomic_fetch_sub(&b->left, failed) == failed)
			finish(b);
		break;
	}
	return 0;
}

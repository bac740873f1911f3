/* SPDX-License-Identifier: BSD-2-Clause */
/* Views and key ownership: weighted rendezvous hashing (highest random
 * weight). Each active member scores a key with a hash of (its ID, the
 * key); the highest score owns it. A member that joins takes about 1/N of
 * the keys, one that leaves gives only its own away, and every server and
 * client computes the same owner from the same view. The hash is XXH3:
 * fast, and it need not be secret (ownership is public by design; what a
 * client may read is decided by TLS and the server, not by where a key
 * lands). */
#include "view.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The reference count lives just before the view. */
#define HDR 16

static atomic_long *refs_of(const struct qpg_cluster_view *v)
{
	return (atomic_long *)(void *)((char *)(uintptr_t)v - HDR);
}

struct qpg_cluster_view *qpg__view_new(unsigned n)
{
	char *p = calloc(1, HDR + sizeof(struct qpg_cluster_view) +
				(size_t)n * sizeof(struct qpg_cluster_member));
	if (!p)
		return NULL;
	atomic_init((atomic_long *)(void *)p, 1);
	return (struct qpg_cluster_view *)(void *)(p + HDR);
}

const struct qpg_cluster_view *qpg__view_ref(const struct qpg_cluster_view *v)
{
	atomic_fetch_add_explicit(refs_of(v), 1, memory_order_relaxed);
	return v;
}

void qpg_cluster_view_put(const struct qpg_cluster_view *v)
{
	if (v && atomic_fetch_sub_explicit(refs_of(v), 1, memory_order_acq_rel) == 1)
		free((char *)(uintptr_t)v - HDR);
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct qpg_cluster_member *)a)->id,
		      ((const struct qpg_cluster_member *)b)->id);
}

void qpg__view_sort(struct qpg_cluster_view *v)
{
	qsort(v->m, v->n, sizeof(v->m[0]), by_id);
}

int qpg_cluster_find(const struct qpg_cluster_view *v, const char *id)
{
	unsigned lo = 0, hi = v->n;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		int c = strcmp(v->m[mid].id, id);
		if (c == 0)
			return (int)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int qpg_cluster_owner(const struct qpg_cluster_view *v, const void *key, size_t len)
{
	int best = -1;
	double best_score = 0;
	for (unsigned i = 0; i < v->n; i++) {
		const struct qpg_cluster_member *m = &v->m[i];
		if (m->state != QPG_MEMBER_ACTIVE)
			continue;
		uint64_t seed = XXH3_64bits(m->id, strlen(m->id));
		uint64_t h = XXH3_64bits_withSeed(key, len, seed);
		/* u in (0, 1); score = w / -ln(u): weighted HRW (the chance to
		 * win is the member's share of the total weight). */
		double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
		double score = (double)m->weight / -log(u);
		if (best < 0 || score > best_score) {
			best = (int)i;
			best_score = score;
		}
	}
	return best;
}

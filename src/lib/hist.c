/* SPDX-License-Identifier: BSD-2-Clause */
#include "qpgate/hist.h"

#include <string.h>

void qpg_hist_init(struct qpg_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned qpg_hist_bucket_of(uint64_t v)
{
	/* Values below QPG_HIST_SUB map 1:1; above, the top SUB_BITS+1 bits pick
	 * the bucket: the exponent selects the group, the next bits the slot. */
	if (v < QPG_HIST_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - QPG_HIST_SUB_BITS;
	unsigned sub = (unsigned)(v >> shift) & (QPG_HIST_SUB - 1);
	return (shift + 1) * QPG_HIST_SUB + sub;
}

uint64_t qpg_hist_bucket_upper(unsigned b)
{
	if (b < QPG_HIST_SUB)
		return b;
	unsigned shift = b / QPG_HIST_SUB - 1;
	uint64_t sub = b % QPG_HIST_SUB;
	uint64_t lower = (QPG_HIST_SUB + sub) << shift;
	return lower + ((1ull << shift) - 1);
}

void qpg_hist_add(struct qpg_hist *h, uint64_t v)
{
	h->buckets[qpg_hist_bucket_of(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void qpg_hist_merge(struct qpg_hist *dst, const struct qpg_hist *src)
{
	for (unsigned i = 0; i < QPG_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t qpg_hist_quantile(const struct qpg_hist *h, double q)
{
	if (h->count == 0)
		return 0;
	if (q <= 0)
		return h->min;
	if (q > 1)
		q = 1;
	/* Rank of the q-th value, 1-based, rounded up (nearest-rank method). */
	uint64_t rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < QPG_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t up = qpg_hist_bucket_upper(i);
			return up > h->max ? h->max : (up < h->min ? h->min : up);
		}
	}
	return h->max;
}

double qpg_hist_mean(const struct qpg_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

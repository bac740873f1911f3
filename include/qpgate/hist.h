/* SPDX-License-Identifier: BSD-2-Clause */
/* A small mergeable log-linear histogram for latencies in nanoseconds.
 *
 * Values are grouped by power of two, and each power of two is split into
 * QPG_HIST_SUB linear sub-buckets, so the relative error of any percentile is
 * at most 1/QPG_HIST_SUB (128 sub-buckets: 0.78%, under 1%). Histograms merge
 * by adding counts, which is what lets per-thread or per-process results be
 * combined exactly. One takes 59 KB: keep one per thread, not per request
 * stream. */
#ifndef QPGATE_HIST_H
#define QPGATE_HIST_H

#include <stdint.h>

#define QPG_HIST_SUB_BITS 7
#define QPG_HIST_SUB	  (1u << QPG_HIST_SUB_BITS)
#define QPG_HIST_BUCKETS  ((64 - QPG_HIST_SUB_BITS + 1) * QPG_HIST_SUB)

struct qpg_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint64_t buckets[QPG_HIST_BUCKETS];
};

void qpg_hist_init(struct qpg_hist *h);
void qpg_hist_add(struct qpg_hist *h, uint64_t value);
void qpg_hist_merge(struct qpg_hist *dst, const struct qpg_hist *src);
/* Q in [0, 1]; returns an upper bound of the bucket holding that rank,
 * clamped to the observed max. 0 when empty. */
uint64_t qpg_hist_quantile(const struct qpg_hist *h, double q);
double qpg_hist_mean(const struct qpg_hist *h);

/* Bucket index and its inclusive upper bound, exposed for tests and for
 * exporting histograms (Prometheus buckets). */
unsigned qpg_hist_bucket_of(uint64_t value);
uint64_t qpg_hist_bucket_upper(unsigned bucket);

#endif

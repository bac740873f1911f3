/* SPDX-License-Identifier: BSD-2-Clause */

#include "unit.h"

#include "qpgate/hist.h"

static void test_bucket_bounds_are_monotonic_and_contain_value(void **state)
{
	uint64_t samples[] = {0,	 1, 15, 16, 17, 31, 32, 1000, 123456789, UINT64_MAX / 3,
			      UINT64_MAX};
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		unsigned b = qpg_hist_bucket_of(samples[i]);
		assert_true(b < QPG_HIST_BUCKETS);
		assert_true(qpg_hist_bucket_upper(b) >= samples[i]);
		if (b > 0)
			assert_true(qpg_hist_bucket_upper(b - 1) < samples[i]);
	}
	for (unsigned b = 1; b < QPG_HIST_BUCKETS; b++)
		assert_true(qpg_hist_bucket_upper(b) > qpg_hist_bucket_upper(b - 1));
}

static void test_quantiles_within_relative_error(void **state)
{
	struct qpg_hist h;
	qpg_hist_init(&h);
	for (uint64_t v = 1; v <= 100000; v++)
		qpg_hist_add(&h, v * 10);
	assert_int_equal(h.count, 100000);
	uint64_t p50 = qpg_hist_quantile(&h, 0.50);
	uint64_t p99 = qpg_hist_quantile(&h, 0.99);
	assert_true(p50 >= 500000 && p50 <= 500000 + 500000 / QPG_HIST_SUB);
	assert_true(p99 >= 990000 && p99 <= 990000 + 990000 / QPG_HIST_SUB);
	assert_int_equal(qpg_hist_quantile(&h, 1.0), 1000000);
	assert_int_equal(qpg_hist_quantile(&h, 0.0), 10);
}

static void test_merge_equals_single(void **state)
{
	struct qpg_hist a, b, all;
	qpg_hist_init(&a);
	qpg_hist_init(&b);
	qpg_hist_init(&all);
	for (uint64_t v = 0; v < 5000; v++) {
		uint64_t x = (v * 2654435761u) % 10000000;
		qpg_hist_add(v % 2 ? &a : &b, x);
		qpg_hist_add(&all, x);
	}
	qpg_hist_merge(&a, &b);
	assert_int_equal(a.count, all.count);
	assert_int_equal(a.sum, all.sum);
	assert_int_equal(a.min, all.min);
	assert_int_equal(a.max, all.max);
	assert_memory_equal(a.buckets, all.buckets, sizeof(a.buckets));
}

static void test_empty(void **state)
{
	struct qpg_hist h;
	qpg_hist_init(&h);
	assert_int_equal(qpg_hist_quantile(&h, 0.5), 0);
	assert_true(qpg_hist_mean(&h) == 0.0);
}

QPG_UNIT_MAIN(NULL, NULL,
	      cmocka_unit_test(test_bucket_bounds_are_monotonic_and_contain_value),
	      cmocka_unit_test(test_quantiles_within_relative_error),
	      cmocka_unit_test(test_merge_equals_single),
	      cmocka_unit_test(test_empty))

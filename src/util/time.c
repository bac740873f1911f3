/* SPDX-License-Identifier: BSD-2-Clause */
#include <time.h>

#include "common.h"

static uint64_t read_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t qpg__now_ns(void)
{
	return read_ns(CLOCK_MONOTONIC);
}

uint64_t qpg__coarse_ns(void)
{
	return read_ns(CLOCK_MONOTONIC_COARSE);
}

uint64_t qpg__thread_cpu_ns(void)
{
	return read_ns(CLOCK_THREAD_CPUTIME_ID);
}

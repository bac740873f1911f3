/* SPDX-License-Identifier: BSD-2-Clause */
/* What the floor programs (bench/NAME_floor.c) share: a clock in seconds and
 * a numeric argument checked against its range. */
#ifndef QPG_BENCH_FLOOR_H
#define QPG_BENCH_FLOOR_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CLOCK in seconds: CLOCK_MONOTONIC for wall time, CLOCK_THREAD_CPUTIME_ID
 * or CLOCK_PROCESS_CPUTIME_ID for CPU. */
static inline double floor_clock_s(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* S as a number in LO..HI, or PROG's usage error (exit 2). */
static inline long floor_num(const char *prog, const char *s, long lo, long hi)
{
	char *e;
	errno = 0;
	long v = strtol(s, &e, 10);
	if (errno || *e || v < lo || v > hi) {
		fprintf(stderr, "%s: '%s' is not a number in %ld..%ld\n", prog, s, lo, hi);
		exit(2);
	}
	return v;
}

#endif

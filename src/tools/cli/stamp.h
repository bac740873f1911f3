/* SPDX-License-Identifier: BSD-2-Clause */
/* The clock of the load tools' latency stamps: CLOCK_MONOTONIC, or (x86-64,
 * --clock tsc) the CPU's time-stamp counter, as perftest's cycles are.
 * Where the kernel's clocksource is not the TSC (a VM that reads its HPET:
 * a system call and a trap of about 1 us), a clock read costs more than
 * much of what an echo is timed for; rdtsc costs a few ns there. The
 * counter is calibrated against CLOCK_MONOTONIC when the stamp clock is set
 * up and checked against it again at the end: stamp_check() says how far
 * the whole run's rate was from the calibration's. */
#ifndef QPG_STAMP_H
#define QPG_STAMP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

enum stamp_source { STAMP_MONO, STAMP_TSC };

struct stamp {
	enum stamp_source source;
	double ns_per_tick;	  /* TSC: from the calibration */
	uint64_t cal_tsc, cal_ns; /* TSC: where the calibration began */
};

/* NAME is "mono" or "tsc". 0, or -EINVAL (unknown name) or -ENOTSUP (no
 * TSC on this CPU architecture). Takes about 20 ms for "tsc". */
int stamp_init(struct stamp *s, const char *name);
const char *stamp_name(const struct stamp *s);

static inline uint64_t stamp_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* For deadlines and progress, not for figures: CLOCK_MONOTONIC as of the
 * last timer tick (a few ms behind). It reads no clock device: in the lab
 * VM, CLOCK_MONOTONIC is the HPET, a trap of about 1 us per read, and the
 * traffic loop looks at its deadlines on every turn. */
static inline uint64_t stamp_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A stamp, in the source's own units. */
static inline uint64_t stamp_read(const struct stamp *s)
{
#if defined(__x86_64__)
	if (s->source == STAMP_TSC)
		return __rdtsc();
#endif
	(void)s;
	return stamp_mono_ns();
}

/* The nanoseconds between two stamps, FROM first. */
static inline uint64_t stamp_ns(const struct stamp *s, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	if (s->source == STAMP_TSC)
		return (uint64_t)((double)(to - from) * s->ns_per_tick);
	return to - from;
}

/* TSC: the counter's rate over the whole run so far against the
 * calibration's, minus 1 (0.001: the run's latencies read 0.1% long);
 * 0 for CLOCK_MONOTONIC. */
double stamp_check(const struct stamp *s);

#endif

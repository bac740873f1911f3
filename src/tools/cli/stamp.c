/* SPDX-License-Identifier: BSD-2-Clause */
#include "stamp.h"

#include <errno.h>
#include <string.h>

/* A pair read as close together as the two clocks allow: the monotonic
 * read between two counter reads, and the counter taken as their middle.
 * The tightest of a few tries: a CPU taken away between the reads (an
 * interrupt; under emulation, the host descheduling the vCPU) would put
 * the middle off by as long as it was gone, and over the 20 ms of
 * calibration a millisecond off is a 5% error in the rate. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
#if defined(__x86_64__)
	uint64_t best = UINT64_MAX;
	*tsc = *ns = 0; /* (every try below sets them; an optimiser cannot tell) */
	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc();
		uint64_t n = stamp_mono_ns();
		uint64_t b = __rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
#else
	*tsc = 0;
	*ns = stamp_mono_ns();
#endif
}

int stamp_init(struct stamp *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	if (!name || strcmp(name, "mono") == 0)
		return 0;
	if (strcmp(name, "tsc") != 0)
		return -EINVAL;
#if !defined(__x86_64__)
	return -ENOTSUP;
#else
	uint64_t t1, n1;
	for (int i = 0; i < 3; i++) /* warm: a first clock read can be slow */
		pair(&s->cal_tsc, &s->cal_ns);
	struct timespec d = {0, 20 * 1000 * 1000};
	while (nanosleep(&d, &d) != 0 && errno == EINTR)
		;
	pair(&t1, &n1);
	if (t1 <= s->cal_tsc || n1 <= s->cal_ns)
		return -ENOTSUP; /* a counter that does not count */
	s->ns_per_tick = (double)(n1 - s->cal_ns) / (double)(t1 - s->cal_tsc);
	s->source = STAMP_TSC;
	return 0;
#endif
}

const char *stamp_name(const struct stamp *s)
{
	return s->source == STAMP_TSC ? "tsc" : "mono";
}

double stamp_check(const struct stamp *s)
{
	if (s->source != STAMP_TSC)
		return 0;
	uint64_t t, n;
	pair(&t, &n);
	if (t <= s->cal_tsc || n <= s->cal_ns)
		return 0;
	return s->ns_per_tick / ((double)(n - s->cal_ns) / (double)(t - s->cal_tsc)) - 1;
}

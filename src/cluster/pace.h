/* SPDX-License-Identifier: BSD-2-Clause */
/* The cluster threads' pace: sleeps a stop flag cuts short, and jittered
 * backoff, so that many clients that lost etcd at once do not come back
 * at once (Kubernetes' re-list storms). */
#ifndef QPG_CLUSTER_PACE_H
#define QPG_CLUSTER_PACE_H

#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* Sleep MS, in steps of 10 ms, until STOP is set. */
static inline void qpg__nap(atomic_bool *stop, unsigned ms)
{
	for (unsigned t = 0; t < ms && !atomic_load(stop); t += 10)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
}

/* BASE, give or take half: between BASE / 2 and 3 BASE / 2. */
static inline unsigned qpg__jitter(unsigned base)
{
	uint32_t r = 0;
	RAND_bytes((unsigned char *)&r, sizeof(r));
	return base / 2 + r % (base + 1);
}

/* The next backoff: doubled, at most CAP. */
static inline unsigned qpg__backoff_next(unsigned backoff, unsigned cap)
{
	return backoff < cap / 2 ? backoff * 2 : cap;
}

#endif

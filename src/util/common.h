/* SPDX-License-Identifier: BSD-2-Clause */
/* Small helpers shared by every libqpgate source file. */
#ifndef QPG_COMMON_H
#define QPG_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define QPG_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Transports embed their base struct first and get back to their own with
 * this, as Redis' connection layer does. */
#define qpg__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define QPG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QPG_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Append E to the singly linked queue HEAD..TAIL through E's field NEXT
 * (E->NEXT must already be NULL). */
#define QPG__QUEUE_APPEND(head, tail, e, next)                                                     \
	do {                                                                                       \
		if (tail)                                                                          \
			(tail)->next = (e);                                                        \
		else                                                                               \
			(head) = (e);                                                              \
		(tail) = (e);                                                                      \
	} while (0)

uint64_t qpg__now_ns(void);
/* The same clock, read cheaply (the kernel's last tick, a few ms behind
 * qpg__now_ns read at the same moment, never ahead of it): for the
 * per-message stamps that only deadlines of seconds look at. Under a VM
 * without a fast clocksource a precise read is a trap of about 1 us; this
 * one is a memory read. A coarse stamp taken after a precise NOW was read
 * can be later than NOW: take ages with qpg__age_ns. */
uint64_t qpg__coarse_ns(void);
/* How long before NOW the stamp THEN was taken; 0 when THEN is later (a
 * stamp taken after NOW was read, as a tick's callbacks do). A plain
 * NOW - THEN would wrap to centuries, and a deadline would fire at once. */
static inline uint64_t qpg__age_ns(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}
/* The CPU time the calling thread has had (user and system), in ns. */
uint64_t qpg__thread_cpu_ns(void);

#endif

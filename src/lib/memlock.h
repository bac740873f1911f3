/* SPDX-License-Identifier: BSD-2-Clause */
/* Is RLIMIT_MEMLOCK enough for NEED pinned bytes? (memlock.c) */
#ifndef QPG_MEMLOCK_H
#define QPG_MEMLOCK_H

#include <stddef.h>
#include <stdint.h>

/* 0, or -ENOMEM with the numbers and the remedy in ERR. WHAT names who
 * needs it ("2 threads' message pools"). */
/* Pinned besides the pools: queues and completion queues some providers
 * keep in user memory. */
#define QPG__MEMLOCK_MARGIN (1ull << 20)

int qpg__memlock_check(uint64_t need, const char *what, char *err, size_t err_len);

#endif

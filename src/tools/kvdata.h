/* SPDX-License-Identifier: BSD-2-Clause */
/* Test values the KV tools write and verify: every byte depends on a seed
 * (the key's number) and its offset, so a misplaced, stale or corrupted
 * chunk shows. qpgate-kv prints FNV-1a 64 of what it read; qpgate-kvbench
 * checks each GET with XXH3-64 (libxxhash): 3.3 us for 64 KiB on the build
 * host, where this byte-wise FNV takes 72 us. */
#ifndef QPG_KVDATA_H
#define QPG_KVDATA_H

#include <stdint.h>

#define KV_FNV_INIT 1469598103934665603ull

static inline uint8_t kv_value_byte(uint32_t seed, uint32_t i)
{
	uint32_t x = seed * 2654435761u + i * 40503u;
	return (uint8_t)(x ^ (x >> 13) ^ (i >> 8));
}

static inline uint64_t kv_fnv_step(uint64_t h, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

#endif

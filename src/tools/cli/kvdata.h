/* SPDX-License-Identifier: BSD-2-Clause */
/* Test values the KV tools write and verify: every byte depends on a seed
 * (the key's number) and its offset, so a misplaced, stale or corrupted
 * chunk shows. qpgate-kv prints FNV-1a 64 of what it read; qpgate-kvbench
 * checks each GET with XXH64 (libxxhash), scalar 64-bit arithmetic that is
 * fast natively and under the lab's TCG alike. Per 64 KiB, in 8 KiB pieces:
 * 4.6 us on the build host and 22 us in the lab VM, where this byte-wise
 * FNV takes 72 and 117 us. XXH3 takes 3.5 us here but 189 us there: its
 * SIMD is emulated instruction by instruction. */
#ifndef QPG_KVDATA_H
#define QPG_KVDATA_H

#include <stdint.h>

#define KV_FNV_INIT 1469598103934665603ull

static inline uint8_t kv_value_byte(uint32_t seed, uint32_t i)
{
	uint32_t x = seed * 2654435761u + i * 40503u;
	return (uint8_t)(x ^ (x >> 13) ^ (i >> 8));
}

/* BUF = the LEN-byte value generated from SEED. */
static inline void kv_value_fill(uint8_t *buf, uint32_t seed, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		buf[i] = kv_value_byte(seed, i);
}

static inline uint64_t kv_fnv_step(uint64_t h, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

#endif

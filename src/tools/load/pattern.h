/* SPDX-License-Identifier: BSD-2-Clause */
/* The payload of the load tools' echoes, and its check. */
#ifndef QPG_PATTERN_H
#define QPG_PATTERN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Every byte of every message depends on the connection, the message number
 * and its offset, so a misrouted, reordered or corrupted echo is caught:
 * byte J of message MSG on connection CONN is CONN * 131 + MSG * 7 + J * 13
 * + 1, mod 256. It is made and checked 16 bytes at a time (loops of a fixed
 * 16 that the compiler turns into vector code). A byte at a time, the two
 * loops were 1,601 of the 4,000 instructions the client spends between a
 * reply's completion and the next request's post (64-byte echoes); in the
 * lab VM, where vector code is emulated, a 64-byte fill and check take 180
 * ns this way against 370. */
#define PATTERN_STEP 13
#define PATTERN_ROW  16

static inline uint8_t pattern_base(int conn, long msg)
{
	return (uint8_t)(conn * 131 + msg * 7 + 1);
}

/* Byte J of the message whose byte 0 is BASE. */
static inline uint8_t pattern_at(uint8_t base, uint32_t j)
{
	return (uint8_t)(base + j * PATTERN_STEP);
}

/* One row: the PATTERN_ROW bytes from the one that is FIRST. */
static inline void pattern_row(uint8_t out[PATTERN_ROW], uint8_t first)
{
	for (uint32_t i = 0; i < PATTERN_ROW; i++)
		out[i] = pattern_at(first, i);
}

static inline void pattern_fill(uint8_t *p, uint32_t len, uint8_t base)
{
	uint32_t j = 0;
	for (; j + PATTERN_ROW <= len; j += PATTERN_ROW)
		pattern_row(p + j, pattern_at(base, j));
	for (; j < len; j++)
		p[j] = pattern_at(base, j);
}

static inline bool pattern_ok(const uint8_t *p, uint32_t len, uint8_t base)
{
	uint8_t want[PATTERN_ROW];
	uint32_t j = 0;
	for (; j + PATTERN_ROW <= len; j += PATTERN_ROW) {
		pattern_row(want, pattern_at(base, j));
		if (memcmp(p + j, want, PATTERN_ROW) != 0)
			return false;
	}
	for (; j < len; j++)
		if (p[j] != pattern_at(base, j))
			return false;
	return true;
}

#endif

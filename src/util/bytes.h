/* SPDX-License-Identifier: BSD-2-Clause */
/* Big-endian (network order) field access for the fixed-layout wire
 * formats (bootstrap, frames, KV). */
#ifndef QPG_BYTES_H
#define QPG_BYTES_H

#include <stdint.h>

static inline void qpg__put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void qpg__put32(uint8_t *p, uint32_t v)
{
	qpg__put16(p, (uint16_t)(v >> 16));
	qpg__put16(p + 2, (uint16_t)v);
}
static inline void qpg__put64(uint8_t *p, uint64_t v)
{
	qpg__put32(p, (uint32_t)(v >> 32));
	qpg__put32(p + 4, (uint32_t)v);
}
static inline uint16_t qpg__get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t qpg__get32(const uint8_t *p)
{
	return ((uint32_t)qpg__get16(p) << 16) | qpg__get16(p + 2);
}
static inline uint64_t qpg__get64(const uint8_t *p)
{
	return ((uint64_t)qpg__get32(p) << 32) | qpg__get32(p + 4);
}

#endif

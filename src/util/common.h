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

uint64_t qpg__now_ns(void);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* Whether this process is at its memory-mapping limit (vm.max_map_count);
 * the public counts are in qpgate/qpgate.h. */
#ifndef QPG_MAPS_H
#define QPG_MAPS_H

#include <stdbool.h>

/* Mappings short of the limit that still count as at it. */
#define QPG__MAPS_SLACK 16

/* Reads /proc/self/maps: for after a failure, not for a fast path. */
bool qpg__maps_at_limit(void);

#endif

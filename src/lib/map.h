/* SPDX-License-Identifier: BSD-2-Clause */
/* u32 -> pointer map (open addressing, linear probing, backward-shift
 * deletion). Keys must be non-zero: QPNs 0 and 1 are never RC QPs. */
#ifndef QPG_MAP_H
#define QPG_MAP_H

#include <stddef.h>
#include <stdint.h>

struct qpg__map_slot {
	uint32_t key;
	void *val;
};

struct qpg__map {
	struct qpg__map_slot *slots;
	size_t cap; /* power of two */
	size_t len;
};

int qpg__map_put(struct qpg__map *m, uint32_t key, void *val);
void *qpg__map_get(const struct qpg__map *m, uint32_t key);
void qpg__map_del(struct qpg__map *m, uint32_t key);
void qpg__map_free(struct qpg__map *m);

#endif

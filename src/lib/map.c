/* SPDX-License-Identifier: BSD-2-Clause */
#include "map.h"

#include <errno.h>
#include <stdlib.h>

static size_t slot_of(uint32_t key, size_t cap)
{
	return (size_t)((key * 2654435761u) & (uint32_t)(cap - 1));
}

static int grow(struct qpg__map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	struct qpg__map_slot *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].key)
			continue;
		size_t j = slot_of(m->slots[i].key, ncap);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

int qpg__map_put(struct qpg__map *m, uint32_t key, void *val)
{
	if (!key)
		return -EINVAL;
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	size_t i = slot_of(key, m->cap);
	while (m->slots[i].key && m->slots[i].key != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->slots[i].key)
		m->len++;
	m->slots[i].key = key;
	m->slots[i].val = val;
	return 0;
}

void *qpg__map_get(const struct qpg__map *m, uint32_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].val;
		if (!m->slots[i].key)
			return NULL;
	}
}

void qpg__map_del(struct qpg__map *m, uint32_t key)
{
	if (!m->cap || !key)
		return;
	size_t i = slot_of(key, m->cap);
	while (m->slots[i].key != key) {
		if (!m->slots[i].key)
			return;
		i = (i + 1) & (m->cap - 1);
	}
	m->len--;
	/* Backward-shift: pull later members of the probe run into the hole so
	 * lookups never stop early at it. */
	size_t hole = i;
	for (size_t j = (i + 1) & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m->slots[j].key, m->cap);
		/* Move j into the hole unless its home lies cyclically in (hole, j]. */
		int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!in_range) {
			m->slots[hole] = m->slots[j];
			hole = j;
		}
	}
	m->slots[hole].key = 0;
	m->slots[hole].val = NULL;
}

void qpg__map_free(struct qpg__map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}

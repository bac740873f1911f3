/* SPDX-License-Identifier: BSD-2-Clause */
/* An exact LRU over dense ids (0 .. IDS - 1) holding at most CAP of them:
 * the reference a cache's hit ratio is compared with (bench/cache_sim.c,
 * and kvbench --workload prefix --lru-capacity). A list through two
 * arrays, the most recent at the head. */
#ifndef QPG_EXACT_LRU_H
#define QPG_EXACT_LRU_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct exact_lru {
	uint32_t *prev, *next;
	uint8_t *in;
	uint32_t head, tail, size, cap; /* UINT32_MAX: none */
};

/* 0, or -1 out of memory (then exact_lru_fini is still right). */
static inline int exact_lru_init(struct exact_lru *l, uint64_t ids, uint32_t cap)
{
	l->prev = malloc(ids * sizeof(uint32_t));
	l->next = malloc(ids * sizeof(uint32_t));
	l->in = calloc(ids, 1);
	l->head = l->tail = UINT32_MAX;
	l->size = 0;
	l->cap = cap;
	return l->prev && l->next && l->in ? 0 : -1;
}

static inline void exact_lru_fini(struct exact_lru *l)
{
	free(l->prev);
	free(l->next);
	free(l->in);
}

static inline void exact_lru_unlink(struct exact_lru *l, uint32_t id)
{
	if (l->prev[id] != UINT32_MAX)
		l->next[l->prev[id]] = l->next[id];
	else
		l->head = l->next[id];
	if (l->next[id] != UINT32_MAX)
		l->prev[l->next[id]] = l->prev[id];
	else
		l->tail = l->prev[id];
}

/* ID used: to the front if held (a read), else, with INSERT, put there
 * (a store), evicting the least recent when full. Returns whether it was
 * held. */
static inline bool exact_lru_touch(struct exact_lru *l, uint32_t id, bool insert)
{
	bool held = l->in[id];
	if (held) {
		exact_lru_unlink(l, id);
	} else if (!insert) {
		return false;
	} else if (l->size == l->cap) {
		uint32_t old = l->tail;
		exact_lru_unlink(l, old);
		l->in[old] = 0;
	} else {
		l->size++;
	}
	l->in[id] = 1;
	l->prev[id] = UINT32_MAX;
	l->next[id] = l->head;
	if (l->head != UINT32_MAX)
		l->prev[l->head] = id;
	l->head = id;
	if (l->tail == UINT32_MAX)
		l->tail = id;
	return held;
}

#endif

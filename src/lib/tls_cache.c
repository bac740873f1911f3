/* SPDX-License-Identifier: BSD-2-Clause */
/* A bounded store of TLS sessions by ID: MAX slots, kept in the order
 * they were filled (the oldest goes when a new one finds none free), and a
 * chained hash over them. The IDs are the server's own
 * (OpenSSL draws 32 random bytes for each), so their first bytes hash
 * well; a client only looks up. One lock: a lookup or a store is a few
 * hundred nanoseconds, next to a handshake's hundreds of microseconds. */
#include "tls_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NONE (-1)

struct slot {
	struct qpg__tls_cached e; /* e.sess NULL: free */
	uint8_t id[SSL_MAX_SSL_SESSION_ID_LENGTH];
	unsigned id_len;
	int32_t next;	     /* in its bucket's chain */
	int32_t older, newer; /* in the order of filling; a free slot: next free in NEWER */
};

struct qpg__tls_cache {
	pthread_mutex_t lock;
	unsigned max, len;
	struct slot *slots;
	int32_t oldest, newest, free_list;
	int32_t *buckets;
	unsigned nbuckets; /* a power of two, at least max */
};

static unsigned hash(const struct qpg__tls_cache *c, const uint8_t *id, unsigned len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the first 8 bytes */
	for (unsigned i = 0; i < len && i < 8; i++)
		h = (h ^ id[i]) * 1099511628211ull;
	return (unsigned)(h ^ h >> 32) & (c->nbuckets - 1);
}

struct qpg__tls_cache *qpg__tls_cache_new(unsigned max)
{
	if (max == 0 || max > (1u << 30))
		return NULL;
	struct qpg__tls_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max = max;
	for (c->nbuckets = 1; c->nbuckets < max; c->nbuckets <<= 1)
		;
	c->slots = calloc(max, sizeof(*c->slots));
	c->buckets = malloc(c->nbuckets * sizeof(*c->buckets));
	if (!c->slots || !c->buckets) {
		free(c->slots);
		free(c->buckets);
		free(c);
		return NULL;
	}
	for (unsigned i = 0; i < c->nbuckets; i++)
		c->buckets[i] = NONE;
	for (unsigned i = 0; i < max; i++)
		c->slots[i].newer = i + 1 < max ? (int32_t)i + 1 : NONE;
	c->free_list = 0;
	c->oldest = c->newest = NONE;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

/* Under the lock: slot I out of its chain and of the order, its session
 * released, the slot free. */
static void drop(struct qpg__tls_cache *c, int32_t i)
{
	struct slot *s = &c->slots[i];
	int32_t *p = &c->buckets[hash(c, s->id, s->id_len)];
	while (*p != i)
		p = &c->slots[*p].next;
	*p = s->next;
	*(s->older == NONE ? &c->oldest : &c->slots[s->older].newer) = s->newer;
	*(s->newer == NONE ? &c->newest : &c->slots[s->newer].older) = s->older;
	SSL_SESSION_free(s->e.sess);
	s->e.sess = NULL;
	s->newer = c->free_list;
	c->free_list = i;
	c->len--;
}

/* Under the lock: the slot holding ID, or NONE. */
static int32_t find(const struct qpg__tls_cache *c, const uint8_t *id, unsigned len)
{
	for (int32_t i = c->buckets[hash(c, id, len)]; i != NONE; i = c->slots[i].next)
		if (c->slots[i].id_len == len && memcmp(c->slots[i].id, id, len) == 0)
			return i;
	return NONE;
}

int qpg__tls_cache_put(struct qpg__tls_cache *c, const struct qpg__tls_cached *e)
{
	unsigned len;
	const uint8_t *id = SSL_SESSION_get_id(e->sess, &len);
	if (len == 0 || len > SSL_MAX_SSL_SESSION_ID_LENGTH) {
		SSL_SESSION_free(e->sess);
		return -EINVAL;
	}
	pthread_mutex_lock(&c->lock);
	int32_t old = find(c, id, len);
	if (old != NONE)
		drop(c, old); /* the same ID again: the newer wins */
	if (c->free_list == NONE)
		drop(c, c->oldest); /* full: the oldest goes */
	int32_t i = c->free_list;
	struct slot *s = &c->slots[i];
	c->free_list = s->newer;
	s->e = *e;
	memcpy(s->id, id, len);
	s->id_len = len;
	int32_t *b = &c->buckets[hash(c, id, len)];
	s->next = *b;
	*b = i;
	s->older = c->newest;
	s->newer = NONE;
	*(c->newest == NONE ? &c->oldest : &c->slots[c->newest].newer) = i;
	c->newest = i;
	c->len++;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int qpg__tls_cache_get(struct qpg__tls_cache *c, const uint8_t *id, unsigned id_len,
		       struct qpg__tls_cached *out)
{
	if (id_len == 0 || id_len > SSL_MAX_SSL_SESSION_ID_LENGTH)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	int32_t i = find(c, id, id_len);
	if (i != NONE) {
		*out = c->slots[i].e;
		SSL_SESSION_up_ref(out->sess);
	}
	pthread_mutex_unlock(&c->lock);
	return i == NONE ? -ENOENT : 0;
}

void qpg__tls_cache_remove(struct qpg__tls_cache *c, const uint8_t *id, unsigned id_len)
{
	if (id_len == 0 || id_len > SSL_MAX_SSL_SESSION_ID_LENGTH)
		return;
	pthread_mutex_lock(&c->lock);
	int32_t i = find(c, id, id_len);
	if (i != NONE)
		drop(c, i);
	pthread_mutex_unlock(&c->lock);
}

void qpg__tls_cache_clear(struct qpg__tls_cache *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->oldest != NONE)
		drop(c, c->oldest);
	pthread_mutex_unlock(&c->lock);
}

unsigned qpg__tls_cache_len(struct qpg__tls_cache *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned n = c->len;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void qpg__tls_cache_free(struct qpg__tls_cache *c)
{
	if (!c)
		return;
	qpg__tls_cache_clear(c);
	pthread_mutex_destroy(&c->lock);
	free(c->slots);
	free(c->buckets);
	free(c);
}

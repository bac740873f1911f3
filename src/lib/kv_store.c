#include "kv_store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIN_BLOCK 64u

static uint64_t hash_key(const uint8_t *k, uint16_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (uint16_t i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

static uint8_t class_of(uint32_t len)
{
	uint8_t c = 0;
	while ((size_t)(MIN_BLOCK << c) < len)
		c++;
	return c;
}

static size_t class_size(uint8_t c)
{
	return (size_t)MIN_BLOCK << c;
}

int qpg__kv_store_init(struct qpg__kv_store *s, size_t capacity, uint32_t max_value)
{
	memset(s, 0, sizeof(*s));
	/* Offsets are 32-bit: up to 4 GiB of values per store. */
	if (capacity < MIN_BLOCK || capacity > UINT32_MAX || max_value == 0 ||
	    max_value > QPG_KV_MAX_VALUE || max_value > capacity)
		return -EINVAL;
	/* Anonymous mapping: page-aligned for registration, and untouched pages
	 * cost nothing until a value lands there. */
	void *a = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return -ENOMEM;
	s->arena = a;
	s->capacity = capacity;
	s->max_value = max_value;
	s->nbuckets = 1024;
	while (s->nbuckets < capacity / 4096 && s->nbuckets < (1u << 24))
		s->nbuckets <<= 1;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (!s->buckets) {
		munmap(a, capacity);
		s->arena = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

void qpg__kv_store_fini(struct qpg__kv_store *s)
{
	if (!s->buckets)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		while (s->buckets[i]) {
			struct qpg__kv_value *v = s->buckets[i];
			s->buckets[i] = v->next;
			free(v);
		}
	}
	free(s->buckets);
	s->buckets = NULL;
	munmap(s->arena, s->capacity);
	s->arena = NULL;
	pthread_mutex_destroy(&s->lock);
}

/* Under the lock. Returns the offset, or -1 when the arena is full. */
static long alloc_block(struct qpg__kv_store *s, uint8_t c)
{
	if (s->free_head[c]) {
		uint32_t off = s->free_head[c] - 1;
		memcpy(&s->free_head[c], s->arena + off, sizeof(uint32_t));
		return off;
	}
	if (s->bump + class_size(c) > s->capacity)
		return -1;
	long off = (long)s->bump;
	s->bump += class_size(c);
	return off;
}

/* Under the lock: the block's first bytes link it into its class's list. */
static void free_block(struct qpg__kv_store *s, uint32_t off, uint8_t c)
{
	memcpy(s->arena + off, &s->free_head[c], sizeof(uint32_t));
	s->free_head[c] = off + 1;
}

int qpg__kv_reserve(struct qpg__kv_store *s, const uint8_t *key, uint16_t key_len, uint32_t len,
		    struct qpg__kv_value **out)
{
	*out = NULL;
	if (len > s->max_value)
		return QPG_KV_VALUE_TOO_LARGE;
	uint8_t c = class_of(len);
	struct qpg__kv_value *v = malloc(sizeof(*v) + key_len);
	if (!v)
		return QPG_KV_STORE_FULL;
	pthread_mutex_lock(&s->lock);
	long off = alloc_block(s, c);
	pthread_mutex_unlock(&s->lock);
	if (off < 0) {
		free(v);
		return QPG_KV_STORE_FULL;
	}
	memset(v, 0, sizeof(*v));
	atomic_init(&v->refs, 1); /* the writer's, becomes the table's on commit */
	v->hash = hash_key(key, key_len);
	v->len = len;
	v->off = (uint32_t)off;
	v->cls = c;
	v->key_len = key_len;
	memcpy(v->key, key, key_len);
	*out = v;
	return QPG_KV_OK;
}

/* Under the lock: unlink KEY's entry and return it, or NULL. */
static struct qpg__kv_value *unlink_key(struct qpg__kv_store *s, uint64_t h, const uint8_t *key,
					uint16_t key_len)
{
	struct qpg__kv_value **pp = &s->buckets[h & (s->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->next) {
		struct qpg__kv_value *v = *pp;
		if (v->hash == h && v->key_len == key_len && !memcmp(v->key, key, key_len)) {
			*pp = v->next;
			v->next = NULL;
			s->nkeys--;
			s->live_bytes -= v->len;
			return v;
		}
	}
	return NULL;
}

void qpg__kv_commit(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *old = unlink_key(s, v->hash, v->key, v->key_len);
	struct qpg__kv_value **b = &s->buckets[v->hash & (s->nbuckets - 1)];
	v->next = *b;
	*b = v;
	s->nkeys++;
	s->live_bytes += v->len;
	pthread_mutex_unlock(&s->lock);
	if (old)
		qpg__kv_release(s, old);
}

struct qpg__kv_value *qpg__kv_get(struct qpg__kv_store *s, const uint8_t *key, uint16_t key_len)
{
	uint64_t h = hash_key(key, key_len);
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *v = s->buckets[h & (s->nbuckets - 1)];
	for (; v; v = v->next)
		if (v->hash == h && v->key_len == key_len && !memcmp(v->key, key, key_len))
			break;
	if (v)
		atomic_fetch_add(&v->refs, 1);
	pthread_mutex_unlock(&s->lock);
	return v;
}

void qpg__kv_release(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	pthread_mutex_lock(&s->lock);
	free_block(s, v->off, v->cls);
	pthread_mutex_unlock(&s->lock);
	free(v);
}

int qpg__kv_del(struct qpg__kv_store *s, const uint8_t *key, uint16_t key_len)
{
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *v = unlink_key(s, hash_key(key, key_len), key, key_len);
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return QPG_KV_NOT_FOUND;
	qpg__kv_release(s, v);
	return QPG_KV_OK;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include "kv_store.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "qpgate/kv.h"

#define MIN_BLOCK 256u

/* A key's hash within its tenant: the tenant's index, then the key. */
static uint64_t hash_key(const struct qpg__kv_store *s, uint16_t tenant, const uint8_t *key,
			 uint16_t n)
{
	const uint8_t id[2] = {(uint8_t)(tenant >> 8), (uint8_t)tenant};
	return qpg__khash2(&s->hash, id, sizeof(id), key, n);
}

static struct qpg__kv_tenant *tenant_of(struct qpg__kv_store *s, const struct qpg__kv_value *v)
{
	return s->tenants[v->tenant];
}

/* Past its TTL: the clock is read only for a value that has one, so a
 * store without TTLs reads none on its lookups. */
static bool expired(struct qpg__kv_store *s, const struct qpg__kv_value *v)
{
	return v->expires_ns && s->clock() >= v->expires_ns;
}

static uint8_t order_of(uint32_t len)
{
	uint8_t c = 0;
	while ((size_t)(MIN_BLOCK << c) < len)
		c++;
	return c;
}

static size_t block_size(uint8_t c)
{
	return (size_t)MIN_BLOCK << c;
}

/* Free blocks form doubly linked lists per order; the links (offset + 1,
 * 0 = none) live in the first 16 bytes of the free block itself. */
static uint64_t *links(struct qpg__kv_store *s, uint64_t off)
{
	return (uint64_t *)(void *)(s->arena + off);
}

static void push_free(struct qpg__kv_store *s, uint64_t off, uint8_t c)
{
	uint64_t *l = links(s, off);
	l[0] = s->free_head[c]; /* next */
	l[1] = 0;		/* prev */
	if (s->free_head[c])
		links(s, s->free_head[c] - 1)[1] = off + 1;
	s->free_head[c] = off + 1;
	s->free_order[off / MIN_BLOCK] = (uint8_t)(c + 1);
}

static void unlink_free(struct qpg__kv_store *s, uint64_t off, uint8_t c)
{
	uint64_t *l = links(s, off);
	if (l[1])
		links(s, l[1] - 1)[0] = l[0];
	else
		s->free_head[c] = l[0];
	if (l[0])
		links(s, l[0] - 1)[1] = l[1];
	s->free_order[off / MIN_BLOCK] = 0;
}

int qpg__kv_store_init(struct qpg__kv_store *s, size_t capacity, uint32_t max_value)
{
	memset(s, 0, sizeof(*s));
	if (capacity < MIN_BLOCK || capacity > QPG__KVS_MAX_CAPACITY || max_value == 0 ||
	    max_value > QPG__KVS_MAX_VALUE || block_size(order_of(max_value)) > capacity)
		return -EINVAL;
	capacity -= capacity % MIN_BLOCK;
	/* Anonymous mapping: page-aligned for registration, and untouched pages
	 * cost nothing until a value lands there (MAP_NORESERVE: a store larger
	 * than memory plus swap is the operator's call, not the heuristic's). */
	void *a = mmap(NULL, capacity, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED)
		return -ENOMEM;
	s->arena = a;
	s->capacity = capacity;
	s->max_value = max_value;
	s->top_order = order_of(max_value);
	s->digest = EVP_sha256();
	s->evict = true;
	s->clock = qpg__now_ns;
	s->nbuckets = 1024;
	while (s->nbuckets < capacity / 4096 && s->nbuckets < (1u << 24))
		s->nbuckets <<= 1;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	s->free_order = calloc(capacity / MIN_BLOCK, 1);
	pthread_mutex_init(&s->lock, NULL);
	int rc = s->buckets && s->free_order ? qpg__khash_init(&s->hash) : -ENOMEM;
	if (rc == 0 && !qpg__kv_tenant_get(s, "default"))
		rc = -ENOMEM;
	if (rc == 0)
		s->tenants[0]->listed = true;
	if (rc) {
		free(s->tenants[0]);
		pthread_mutex_destroy(&s->lock);
		qpg__khash_fini(&s->hash);
		free(s->buckets);
		free(s->free_order);
		munmap(a, capacity);
		memset(s, 0, sizeof(*s));
		return rc;
	}
	/* Carve the arena into the largest aligned blocks that fit. */
	size_t off = 0;
	for (int c = s->top_order; c >= 0; c--)
		while (off + block_size((uint8_t)c) <= capacity) {
			push_free(s, off, (uint8_t)c);
			off += block_size((uint8_t)c);
		}
	return 0;
}

void qpg__kv_store_fini(struct qpg__kv_store *s)
{
	if (!s->buckets)
		return;
	qpg__kv_store_close_regions(s); /* none are left if the service stopped */
	for (size_t i = 0; i < s->nbuckets; i++) {
		while (s->buckets[i]) {
			struct qpg__kv_value *v = s->buckets[i];
			s->buckets[i] = v->next;
			free(v);
		}
	}
	free(s->buckets);
	free(s->free_order);
	for (unsigned i = 0; i < s->ntenants; i++)
		free(s->tenants[i]);
	s->buckets = NULL;
	munmap(s->arena, s->capacity);
	s->arena = NULL;
	pthread_mutex_destroy(&s->lock);
	qpg__khash_fini(&s->hash);
}

void qpg__kv_store_close_regions(struct qpg__kv_store *s)
{
	if (!s->buckets)
		return;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nbuckets; i++)
		for (struct qpg__kv_value *v = s->buckets[i]; v; v = v->next)
			if (v->region) {
				s->region_close(v->region);
				v->region = NULL;
			}
	pthread_mutex_unlock(&s->lock);
}

/* Under the lock. Returns the offset, or -1 when no block is big enough. */
static int64_t alloc_block(struct qpg__kv_store *s, uint8_t c)
{
	uint8_t k = c;
	while (k <= s->top_order && !s->free_head[k])
		k++;
	if (k > s->top_order)
		return -1;
	uint64_t off = s->free_head[k] - 1;
	unlink_free(s, off, k);
	while (k > c) { /* split, keeping the lower half */
		k--;
		push_free(s, off + block_size(k), k);
	}
	s->allocated += block_size(c);
	return (int64_t)off;
}

/* Under the lock: merge with free buddies as far as they go. */
static void free_block(struct qpg__kv_store *s, uint64_t off, uint8_t c)
{
	s->allocated -= block_size(c);
	while (c < s->top_order) {
		uint64_t buddy = off ^ block_size(c);
		if (buddy + block_size(c) > s->capacity ||
		    s->free_order[buddy / MIN_BLOCK] != c + 1)
			break;
		unlink_free(s, buddy, c);
		off = off < buddy ? off : buddy;
		c++;
	}
	push_free(s, off, c);
}

/* Under the lock: V's tenant's SIEVE queue, and its count of keys. */
static void queue_push(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	struct qpg__kv_tenant *t = tenant_of(s, v);
	v->visited = false;
	v->older = t->head;
	v->newer = NULL;
	if (t->head)
		t->head->newer = v;
	t->head = v;
	if (!t->tail)
		t->tail = v;
	t->nkeys++;
}

static void queue_remove(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	struct qpg__kv_tenant *t = tenant_of(s, v);
	if (t->hand == v)
		t->hand = v->newer;
	if (v->newer)
		v->newer->older = v->older;
	else
		t->head = v->older;
	if (v->older)
		v->older->newer = v->newer;
	else
		t->tail = v->newer;
	v->newer = v->older = NULL;
	t->nkeys--;
}

static bool same_key(const struct qpg__kv_value *v, uint64_t h, uint16_t tenant, const uint8_t *key,
		     uint16_t key_len)
{
	return v->hash == h && v->tenant == tenant && v->key_len == key_len &&
	       !memcmp(v->key, key, key_len);
}

/* Under the lock: unlink KEY's entry (of TENANT) and return it, or NULL. */
static struct qpg__kv_value *unlink_key(struct qpg__kv_store *s, uint64_t h, uint16_t tenant,
					const uint8_t *key, uint16_t key_len)
{
	struct qpg__kv_value **pp = &s->buckets[h & (s->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->next) {
		struct qpg__kv_value *v = *pp;
		if (same_key(v, h, tenant, key, key_len)) {
			*pp = v->next;
			v->next = NULL;
			queue_remove(s, v);
			s->nkeys--;
			s->live_bytes -= v->len;
			return v;
		}
	}
	return NULL;
}

/* Under the lock: SIEVE's choice among T's values, taken out of the table
 * and the queue (its reference is the caller's to release), or NULL when
 * T has none. */
static struct qpg__kv_value *sieve_victim(struct qpg__kv_store *s, struct qpg__kv_tenant *t)
{
	struct qpg__kv_value *p = t->hand ? t->hand : t->tail;
	if (!p)
		return NULL;
	/* A value past its TTL goes where the hand finds it, visited or not
	 * (counted as expired, not evicted). */
	while (p->visited && !expired(s, p)) {
		p->visited = false;
		p = p->newer ? p->newer : t->tail;
	}
	t->hand = p->newer;
	bool late = expired(s, p);
	struct qpg__kv_value *v = unlink_key(s, p->hash, p->tenant, p->key, p->key_len);
	if (late) {
		s->expired++;
	} else {
		s->evictions++;
		s->evicted_bytes += v->len;
		t->evictions++;
		t->evicted_bytes += v->len;
	}
	return v;
}

/* Under the lock: whose values make room in a full store for ASKER (NULL:
 * the trimmer). The tenant furthest over its quota; else, of the tenants
 * without one, the one holding the most; else ASKER itself. A tenant under
 * its quota gives nothing up for another. NULL: nobody has a value to
 * give. Linear in the tenants (at most QPG__KV_TENANTS_MAX). */
static struct qpg__kv_tenant *victim_tenant(struct qpg__kv_store *s, struct qpg__kv_tenant *asker)
{
	struct qpg__kv_tenant *over = NULL, *free_rider = NULL;
	size_t most_over = 0, most = 0;
	for (unsigned i = 0; i < s->ntenants; i++) {
		struct qpg__kv_tenant *t = s->tenants[i];
		if (!t->tail)
			continue;
		if (t->quota && t->used > t->quota && t->used - t->quota > most_over) {
			most_over = t->used - t->quota;
			over = t;
		} else if (!t->quota && t->used >= most) {
			most = t->used;
			free_rider = t;
		}
	}
	if (over)
		return over;
	if (free_rider)
		return free_rider;
	return asker && asker->tail ? asker : NULL;
}

/* Under the lock: take one victim out (NULL: none), the lock dropped while
 * its table reference goes (it frees its space unless it is still read). */
static bool evict_one(struct qpg__kv_store *s, struct qpg__kv_tenant *t)
{
	struct qpg__kv_value *victim = t ? sieve_victim(s, t) : NULL;
	if (!victim)
		return false;
	pthread_mutex_unlock(&s->lock);
	qpg__kv_release(s, victim);
	pthread_mutex_lock(&s->lock);
	return true;
}

/* Under the lock: evict T's own values while a new value of BLOCK bytes
 * (a new key when FRESH) would take it past its limits. False when it
 * cannot get under them: eviction is off, or what is left is still read
 * or being written. */
static bool within_limits(struct qpg__kv_store *s, struct qpg__kv_tenant *t, size_t block,
			  bool fresh)
{
	for (size_t left = t->nkeys + 1;; left--) {
		bool bytes = t->quota && t->used + block > t->quota;
		bool keys = fresh && t->max_keys && t->nkeys >= t->max_keys;
		if (!bytes && !keys)
			return true;
		size_t before = t->used;
		if (!s->evict || left == 0 || !evict_one(s, t))
			return false;
		if (bytes && !keys && t->used >= before)
			return false; /* its victim is still read: no room comes back now */
	}
}

/* Under the lock: KEY's value in TENANT (its hash H), or NULL. */
static struct qpg__kv_value *find(struct qpg__kv_store *s, uint64_t h, uint16_t tenant,
				  const uint8_t *key, uint16_t key_len)
{
	struct qpg__kv_value *v = s->buckets[h & (s->nbuckets - 1)];
	for (; v; v = v->next)
		if (same_key(v, h, tenant, key, key_len))
			break;
	return v;
}

int qpg__kv_reserve(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		    uint16_t key_len, uint32_t len, struct qpg__kv_value **out)
{
	*out = NULL;
	if (!t)
		t = s->tenants[0];
	if (len > s->max_value)
		return QPG__KVS_TOO_LARGE;
	uint8_t c = order_of(len);
	struct qpg__kv_value *v = malloc(sizeof(*v) + key_len);
	if (!v)
		return QPG__KVS_FULL;
	uint64_t h = hash_key(s, t->id, key, key_len);
	pthread_mutex_lock(&s->lock);
	int64_t off = -1;
	int status = QPG__KVS_FULL;
	/* (T's limits change under the lock: a reload.) Larger than T may ever
	 * hold: refused, and nothing evicted for it. */
	bool fresh = t->max_keys && !find(s, h, t->id, key, key_len);
	if ((t->max_value && len > t->max_value) || (t->quota && block_size(c) > t->quota) ||
	    !within_limits(s, t, block_size(c), fresh)) {
		status = QPG__KVS_OVER_QUOTA;
		goto out;
	}
	off = alloc_block(s, c);
	/* At most every key there is now: each pass takes one out. */
	for (size_t left = s->nkeys; off < 0 && s->evict && left > 0; left--) {
		if (!evict_one(s, victim_tenant(s, t)))
			break;
		off = alloc_block(s, c);
	}
	if (off >= 0)
		t->used += block_size(c);
out:;
	bool high = off >= 0 && s->wm_high && s->allocated > s->wm_high;
	pthread_mutex_unlock(&s->lock);
	if (off < 0) {
		free(v);
		return status;
	}
	if (high && s->on_high)
		s->on_high(s->on_high_user);
	memset(v, 0, sizeof(*v));
	atomic_init(&v->refs, 1); /* the writer's, becomes the table's on commit */
	v->hash = h;
	v->tenant = t->id;
	v->len = len;
	v->off = (uint64_t)off;
	v->cls = c;
	v->key_len = key_len;
	memcpy(v->key, key, key_len);
	*out = v;
	return QPG__KVS_OK;
}

void qpg__kv_commit(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	/* Outside the lock: hashing a 1 MiB value takes a while. A failure
	 * leaves a zero digest, which a one-sided reader reports as corrupt
	 * rather than trusting. */
	if (!EVP_Digest(qpg__kv_data(s, v), v->len, v->digest, NULL, s->digest, NULL))
		memset(v->digest, 0, sizeof(v->digest));
	v->expires_ns = v->ttl_ms ? s->clock() + (uint64_t)v->ttl_ms * 1000000ull : 0;
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *old = unlink_key(s, v->hash, v->tenant, v->key, v->key_len);
	struct qpg__kv_value **b = &s->buckets[v->hash & (s->nbuckets - 1)];
	v->next = *b;
	*b = v;
	queue_push(s, v);
	s->nkeys++;
	s->live_bytes += v->len;
	pthread_mutex_unlock(&s->lock);
	if (old)
		qpg__kv_release(s, old);
}

static uint16_t id_of(struct qpg__kv_tenant *t)
{
	return t ? t->id : 0;
}

bool qpg__kv_exists(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		    uint16_t key_len)
{
	uint64_t h = hash_key(s, id_of(t), key, key_len);
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *v = find(s, h, id_of(t), key, key_len);
	bool there = v && !expired(s, v);
	pthread_mutex_unlock(&s->lock);
	return there;
}

uint32_t qpg__kv_exists_list(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *list,
			     size_t len, uint8_t *bits)
{
	uint16_t id = id_of(t);
	memset(bits, 0, QPG_KV_EXISTS_BITMAP);
	size_t pos = 0;
	const uint8_t *key;
	uint8_t n;
	uint32_t i = 0, prefix = 0;
	pthread_mutex_lock(&s->lock);
	while ((n = qpg_kv_exists_next(list, len, &pos, &key)) && i < QPG_KV_EXISTS_MAX) {
		const struct qpg__kv_value *v = find(s, hash_key(s, id, key, n), id, key, n);
		if (v && !expired(s, v)) {
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
			prefix += prefix == i;
		}
		i++;
	}
	pthread_mutex_unlock(&s->lock);
	return prefix;
}

struct qpg__kv_value *qpg__kv_get(struct qpg__kv_store *s, struct qpg__kv_tenant *t,
				  const uint8_t *key, uint16_t key_len)
{
	uint64_t h = hash_key(s, id_of(t), key, key_len);
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *v = find(s, h, id_of(t), key, key_len), *gone = NULL;
	if (v && expired(s, v)) {
		gone = unlink_key(s, v->hash, v->tenant, key, key_len); /* the table's reference */
		s->expired++;
		v = NULL;
	} else if (v) {
		atomic_fetch_add(&v->refs, 1);
		v->visited = true;
	}
	pthread_mutex_unlock(&s->lock);
	qpg__kv_release(s, gone);
	return v;
}

void qpg__kv_release(struct qpg__kv_store *s, struct qpg__kv_value *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	if (v->region)
		s->region_close(v->region);
	pthread_mutex_lock(&s->lock);
	free_block(s, v->off, v->cls);
	tenant_of(s, v)->used -= block_size(v->cls);
	pthread_mutex_unlock(&s->lock);
	free(v);
}

int qpg__kv_del(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		uint16_t key_len)
{
	uint16_t id = id_of(t);
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_value *v = unlink_key(s, hash_key(s, id, key, key_len), id, key, key_len);
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return QPG__KVS_NOT_FOUND;
	qpg__kv_release(s, v);
	return QPG__KVS_OK;
}

size_t qpg__kv_store_trim(struct qpg__kv_store *s, size_t max_keys)
{
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	while (n < max_keys && s->wm_high && s->allocated > s->wm_low) {
		struct qpg__kv_tenant *t = victim_tenant(s, NULL);
		struct qpg__kv_value *v = t ? sieve_victim(s, t) : NULL;
		if (!v)
			break;
		s->evictions_ahead++;
		size_t before = s->allocated;
		pthread_mutex_unlock(&s->lock);
		qpg__kv_release(s, v); /* the table's reference: frees it unless read */
		pthread_mutex_lock(&s->lock);
		n++;
		if (s->allocated >= before)
			break; /* still read (or another PUT took the room): later */
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

bool qpg__kv_store_over_high(struct qpg__kv_store *s)
{
	pthread_mutex_lock(&s->lock);
	bool high = s->wm_high && s->allocated > s->wm_high;
	pthread_mutex_unlock(&s->lock);
	return high;
}

size_t qpg__kv_store_drop(struct qpg__kv_store *s,
			  bool (*keep)(void *user, const uint8_t *key, uint16_t key_len),
			  void *user)
{
	struct qpg__kv_value *gone = NULL;
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t b = 0; b < s->nbuckets; b++) {
		struct qpg__kv_value **pp = &s->buckets[b];
		while (*pp) {
			struct qpg__kv_value *v = *pp;
			if (keep && keep(user, v->key, v->key_len)) {
				pp = &v->next;
				continue;
			}
			*pp = v->next;
			queue_remove(s, v);
			s->nkeys--;
			s->live_bytes -= v->len;
			v->next = gone;
			gone = v;
			n++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	while (gone) {
		struct qpg__kv_value *v = gone;
		gone = v->next;
		qpg__kv_release(s, v);
	}
	return n;
}

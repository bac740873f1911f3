/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service's store: one contiguous arena, a chained hash table of
 * keys, and power-of-two size classes for the values. When a value finds
 * no room, the store may evict others (SIEVE, NSDI '24: a FIFO of keys,
 * a visited bit set by each GET, and a hand that walks from the oldest,
 * clearing visited bits and evicting the first key it finds unvisited).
 * It knows nothing of
 * the wire or of RDMA: a value may carry a region (opaque; the service
 * opens it for one-sided reads), which the store closes through
 * region_close when the value's last reference goes.
 *
 * Tenants (kv_tenant.c): every value belongs to one, and a key names a
 * value only within its tenant (the hash and the match take both). Each
 * tenant has a SIEVE queue of its own and optional limits: a tenant over
 * its byte quota or key count evicts its own values first, and a store
 * that is full takes victims from the tenant most over its quota, then from
 * tenants without one, and only then from the tenant asking. Without
 * tenants every value is the default tenant's, and the store is one SIEVE
 * cache as before.
 *
 * Shared by the server's loop threads: a mutex guards the table and the
 * allocator; values are reference-counted so a GET streaming one keeps it
 * alive while another thread replaces or deletes the key. */
#ifndef QPG_KV_STORE_H
#define QPG_KV_STORE_H

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "khash.h"

/* What the store answers, in its own terms (the service maps these to the
 * wire's statuses). */
enum qpg__kvs_status {
	QPG__KVS_OK = 0,
	QPG__KVS_TOO_LARGE, /* over the store's largest value */
	QPG__KVS_FULL,	    /* no block that size is free */
	QPG__KVS_NOT_FOUND,
	QPG__KVS_OVER_QUOTA, /* over the tenant's own quota or largest value */
};

#define QPG__KVS_DIGEST_LEN 32	       /* SHA-256 or SHA-512/256 */
#define QPG__KVS_MAX_VALUE  (1u << 31) /* a value's length fits in 32 bits */
/* Offsets are 64-bit; the bound is what the per-256-byte free map and the
 * address space make sensible (1 TiB: a 4 GiB map). */
#define QPG__KVS_MAX_CAPACITY ((size_t)1 << 40)

struct qpg__kv_value {
	struct qpg__kv_value *next;	    /* hash chain */
	struct qpg__kv_value *newer, *older; /* the SIEVE queue (committed values) */
	bool visited;			    /* read since the hand last passed */
	uint32_t ttl_ms;		    /* set before commit: a time to live (0: none) */
	uint64_t expires_ns;		    /* from commit + ttl_ms, on the store's clock; 0: never */
	atomic_int refs;	    /* the table's + each reader's */
	uint64_t hash;
	uint32_t len;
	uint64_t off;			     /* in the arena */
	uint8_t cls;			     /* buddy order of the allocation */
	uint8_t digest[QPG__KVS_DIGEST_LEN]; /* under the store's digest, set at commit */
	void *region;			     /* registered for one-sided GETs, or NULL */
	uint16_t tenant;		     /* its tenant's index in the store */
	uint16_t key_len;
	uint8_t key[];
};

#define QPG__KV_ORDERS 32

/* Tenants a store holds at most (the default one included): a server
 * without a tenants file makes one per client identity, and refuses new
 * identities past this. */
#define QPG__KV_TENANTS_MAX 4096
#define QPG__KV_TENANT_NAME 256 /* a name's bytes, with its NUL */

struct qpg__kv_tenant {
	char name[QPG__KV_TENANT_NAME];
	uint16_t id;  /* its index in the store's table */
	bool listed;  /* named by the operator (metrics give it labels of its own) */
	/* Limits, 0: none (set under the store's lock: qpg__kv_tenant_limits). */
	size_t quota;	    /* bytes of blocks it may hold */
	size_t max_keys;    /* keys it may hold */
	uint32_t max_value; /* its largest value */
	/* Under the store's lock. */
	size_t used;  /* bytes of blocks it holds: stored, being written, or still read */
	size_t nkeys; /* its keys stored */
	struct qpg__kv_value *head, *tail, *hand; /* its SIEVE queue */
	uint64_t evictions, evicted_bytes;	  /* of its values, for any reason but TTL */
	/* Counted by the service. */
	atomic_ullong hits, misses, refused; /* refused: PUTs over its own limits */
};

/* Values live in buddy blocks of 256 << order bytes: a freed block merges
 * with its free buddy, so space freed by large values serves small ones and
 * the other way round. */
struct qpg__kv_store {
	pthread_mutex_t lock;
	struct qpg__khash hash; /* keyed: clients choose the keys */
	uint8_t *arena;
	size_t capacity;
	size_t allocated;  /* bytes in blocks handed out */
	size_t live_bytes; /* bytes of committed values */
	uint32_t max_value;
	uint8_t top_order;		    /* largest block */
	uint64_t free_head[QPG__KV_ORDERS]; /* offset + 1 of a free block, 0: none */
	uint8_t *free_order; /* per 256-byte unit: order + 1 if a free block starts here */
	struct qpg__kv_value **buckets;
	size_t nbuckets;
	size_t nkeys;
	void (*region_close)(void *region); /* drops a value's region as it is freed */
	/* Each tenant's SIEVE queue: newest at the head; the hand walks from
	 * the tail toward the head. [0] is the default tenant, always there;
	 * the rest come and never go (a tenant dropped from the operator's
	 * list keeps its values until they are evicted). */
	struct qpg__kv_tenant *tenants[QPG__KV_TENANTS_MAX];
	unsigned ntenants;
	bool evict;		/* make room by evicting (default), or answer FULL */
	uint64_t expired;	/* values found past their TTL, and dropped */
	/* Watermarks (bytes of blocks in use; 0: off): a reservation that
	 * leaves more than WM_HIGH in use calls ON_HIGH (outside the lock),
	 * whose owner then trims (qpg__kv_store_trim) down to WM_LOW. */
	size_t wm_high, wm_low;
	void (*on_high)(void *user);
	void *on_high_user;
	uint64_t evictions_ahead; /* of evictions, made by a trim */
	uint64_t (*clock)(void); /* monotonic ns (a test sets its own) */
	uint64_t evictions;	/* keys evicted to make room */
	uint64_t evicted_bytes; /* their values' bytes */
	/* Of every value, at commit: SHA-256 unless the owner sets another
	 * (of QPG__KVS_DIGEST_LEN bytes) before the first. */
	const EVP_MD *digest;
};

/* CAPACITY bytes of value space, values up to MAX_VALUE. -ENOMEM, -EINVAL. */
int qpg__kv_store_init(struct qpg__kv_store *s, size_t capacity, uint32_t max_value);
void qpg__kv_store_fini(struct qpg__kv_store *s);
/* Close every value's region (the values stay, served two-sided from now
 * on): before the device they were registered with goes. */
void qpg__kv_store_close_regions(struct qpg__kv_store *s);

/* Reserve space for a value of LEN bytes under KEY of tenant T (NULL: the
 * default one; so for every call below), not yet visible to readers.
 * Returns QPG__KVS_OK with *OUT set, QPG__KVS_TOO_LARGE, QPG__KVS_FULL or
 * QPG__KVS_OVER_QUOTA (larger than T's quota or largest value, or T's own
 * values, all still read, hold its quota). T evicts its own values while
 * the new one would take it past its quota or key limit. Fill it through qpg__kv_data(), then commit or drop.
 * With eviction on, keys are evicted in SIEVE order until a block of the
 * size is free: FULL only when every value left is still being read or
 * written (a value being read is unlinked at once, and its space comes
 * back when its last reader is done). */
int qpg__kv_reserve(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		    uint16_t key_len, uint32_t len, struct qpg__kv_value **out);
/* Make V the value of its key, replacing (and releasing) any previous one.
 * Values are immutable from here on, so their digest is computed once. */
void qpg__kv_commit(struct qpg__kv_store *s, struct qpg__kv_value *v);
/* Look KEY up and take a reference, or NULL (none, or past its TTL: then
 * dropped, and counted in expired). Release with qpg__kv_release. */
struct qpg__kv_value *qpg__kv_get(struct qpg__kv_store *s, struct qpg__kv_tenant *t,
				  const uint8_t *key, uint16_t key_len);
/* Whether KEY is stored (and within its TTL): no reference taken, and no
 * read counted for eviction (an existence check never pins a value or
 * keeps it). */
bool qpg__kv_exists(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		    uint16_t key_len);
/* The same for each key of an EXISTS list (qpgate/kv.h) under one lock:
 * sets bit i of BITS (zeroed first, QPG_KV_EXISTS_BITMAP bytes) when key i
 * is stored, and returns how many keys from the first are all stored. */
uint32_t qpg__kv_exists_list(struct qpg__kv_store *s, struct qpg__kv_tenant *t,
			     const uint8_t *list, size_t len, uint8_t *bits);
/* Take one more reference to V (a reader's: a send of its bytes in flight). */
static inline void qpg__kv_retain(struct qpg__kv_value *v)
{
	atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
}
/* Drop a reference; the last one frees the value's space. Also drops a
 * reservation that was never committed. */
void qpg__kv_release(struct qpg__kv_store *s, struct qpg__kv_value *v);
/* Remove KEY. Returns QPG__KVS_OK or QPG__KVS_NOT_FOUND. */
int qpg__kv_del(struct qpg__kv_store *s, struct qpg__kv_tenant *t, const uint8_t *key,
		uint16_t key_len);
/* Evict in SIEVE's order while more than wm_low is in use, at most
 * MAX_KEYS keys, and no further than an eviction that frees nothing (its
 * value still read: its space comes back later, and evicting more would
 * not help). Returns how many keys went. */
size_t qpg__kv_store_trim(struct qpg__kv_store *s, size_t max_keys);
/* Whether more than wm_high is in use. */
bool qpg__kv_store_over_high(struct qpg__kv_store *s);

/* kv_tenant.c. The tenant named NAME (1 to QPG__KV_TENANT_NAME - 1
 * printable bytes), made if it is new: NULL when the store holds
 * QPG__KV_TENANTS_MAX already, or out of memory. Any thread. */
struct qpg__kv_tenant *qpg__kv_tenant_get(struct qpg__kv_store *s, const char *name);
/* The tenant at index I, or NULL past the last. Any thread. */
struct qpg__kv_tenant *qpg__kv_tenant_at(struct qpg__kv_store *s, unsigned i);
/* Set T's limits (0: none) and whether it is listed. Values it holds past
 * a lowered quota go as its next PUTs need room, or at the next trim. */
void qpg__kv_tenant_limits(struct qpg__kv_store *s, struct qpg__kv_tenant *t, size_t quota,
			   size_t max_keys, uint32_t max_value, bool listed);
/* T's figures, read together under the lock. */
struct qpg__kv_tenant_figures {
	size_t quota, max_keys, used, nkeys;
	uint64_t evictions, evicted_bytes;
	uint32_t max_value;
	bool listed;
};
void qpg__kv_tenant_read(struct qpg__kv_store *s, const struct qpg__kv_tenant *t,
			 struct qpg__kv_tenant_figures *out);

/* Remove every key KEEP says no to (KEEP NULL: every key), in one pass
 * under the lock; values still being read live on until their readers
 * are done. Returns how many keys went. */
size_t qpg__kv_store_drop(struct qpg__kv_store *s,
			  bool (*keep)(void *user, const uint8_t *key, uint16_t key_len),
			  void *user);

static inline uint8_t *qpg__kv_data(struct qpg__kv_store *s, const struct qpg__kv_value *v)
{
	return s->arena + v->off;
}

#endif

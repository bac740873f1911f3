/* SPDX-License-Identifier: BSD-2-Clause */
#include "peers.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An address's entry, or its prefix's (IPv4 /24, IPv6 /48): a prefix
 * entry counts the pending handshakes of all its addresses, and in CONNS
 * the address entries that point at it. */
struct qpg__peer {
	struct qpg__peer *next;
	struct qpg__peer *prefix; /* an address's: its prefix's entry */
	unsigned char addr[16];
	unsigned pending;
	unsigned conns;
	unsigned qps;	 /* admitted QPs (a session's each count) */
	uint64_t tat_ns; /* GCRA: when the bucket is full again (0: full) */
	bool is_prefix;
};

int qpg__peers_init(struct qpg__peers *p, size_t nbuckets)
{
	int rc = qpg__khash_init(&p->hash);
	if (rc)
		return rc;
	p->buckets = calloc(nbuckets, sizeof(*p->buckets));
	if (!p->buckets) {
		qpg__khash_fini(&p->hash);
		return -ENOMEM;
	}
	p->nbuckets = nbuckets;
	p->nentries = 0;
	pthread_mutex_init(&p->lock, NULL);
	return 0;
}

void qpg__peers_fini(struct qpg__peers *p)
{
	if (!p->buckets)
		return;
	for (size_t i = 0; i < p->nbuckets; i++) {
		while (p->buckets[i]) {
			struct qpg__peer *e = p->buckets[i];
			p->buckets[i] = e->next;
			free(e);
		}
	}
	free(p->buckets);
	p->buckets = NULL;
	pthread_mutex_destroy(&p->lock);
	qpg__khash_fini(&p->hash);
}

/* IPv4 is stored v4-mapped so one key format serves both families. An IPv6
 * peer is counted per /64: one host usually holds a whole /64, and would
 * otherwise get a fresh limit from every address in it. */
static void key_of(const struct sockaddr_storage *ss, unsigned char key[16])
{
	memset(key, 0, 16);
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		memcpy(key, a, IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_LOOPBACK(a) ? 16 : 8);
	} else if (ss->ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

/* The prefix key of an address key: its /24 (IPv4) or /48 (IPv6), marked
 * where no address key has anything (IPv4: byte 9; IPv6: byte 14), so the
 * two kinds share one table and never meet. */
static void prefix_of(const unsigned char key[16], unsigned char out[16])
{
	static const unsigned char v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(out, 0, 16);
	if (memcmp(key, v4, 12) == 0) {
		memcpy(out, key, 15);
		out[9] = 1;
	} else {
		memcpy(out, key, 6);
		out[14] = 0xfe;
	}
}

static size_t hash_of(const struct qpg__peers *p, const unsigned char key[16])
{
	return (size_t)(qpg__khash(&p->hash, key, 16) % p->nbuckets);
}

/* GCRA: a handshake at NOW is within rate and burst if the bucket's
 * theoretical arrival time is no more than (burst - 1) intervals ahead. */
static bool rate_allows(struct qpg__peer *e, const struct qpg__peer_limits *l, uint64_t now)
{
	if (!l->rate)
		return true;
	uint64_t interval = 1000000000ull / l->rate;
	uint64_t tau = (uint64_t)(l->burst ? l->burst - 1 : 0) * interval;
	uint64_t tat = e->tat_ns > now ? e->tat_ns : now;
	if (tat - now > tau)
		return false;
	e->tat_ns = tat + interval;
	return true;
}

static bool idle(const struct qpg__peer *e, uint64_t now)
{
	return e->pending == 0 && e->conns == 0 && e->qps == 0 && e->tat_ns <= now;
}

static void unlink_entry(struct qpg__peers *p, struct qpg__peer *e)
{
	struct qpg__peer **pp = &p->buckets[hash_of(p, e->addr)];
	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	struct qpg__peer *pre = e->prefix;
	p->nentries -= !e->is_prefix;
	free(e);
	if (pre && --pre->conns == 0 && pre->pending == 0)
		unlink_entry(p, pre);
}

/* KEY's entry, made if it is not there (NULL: no memory). */
static struct qpg__peer *find(struct qpg__peers *p, const unsigned char key[16], bool make,
			      bool is_prefix)
{
	size_t h = hash_of(p, key);
	struct qpg__peer *e = p->buckets[h];
	while (e && memcmp(e->addr, key, 16) != 0)
		e = e->next;
	if (e || !make)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	memcpy(e->addr, key, 16);
	e->is_prefix = is_prefix;
	e->next = p->buckets[h];
	p->buckets[h] = e;
	p->nentries += !is_prefix; /* addresses only */
	return e;
}

/* One pending handshake fewer for E and its prefix. */
static void pending_done(struct qpg__peer *e)
{
	e->pending--;
	e->prefix->pending--;
}

struct qpg__peer *qpg__peers_enter(struct qpg__peers *p, const struct sockaddr_storage *addr,
				   const struct qpg__peer_limits *l, uint64_t now_ns,
				   enum qpg__peer_verdict *why)
{
	unsigned char key[16], pkey[16];
	key_of(addr, key);
	prefix_of(key, pkey);
	pthread_mutex_lock(&p->lock);
	*why = QPG_PEER_OK;
	struct qpg__peer *e = find(p, key, true, false);
	if (e && !e->prefix && (e->prefix = find(p, pkey, true, true)) != NULL)
		e->prefix->conns++;
	if (!e || !e->prefix) {
		if (e && idle(e, now_ns))
			unlink_entry(p, e);
		pthread_mutex_unlock(&p->lock);
		return NULL; /* no memory: QPG_PEER_OK */
	}
	if (l->max_pending && e->pending >= l->max_pending)
		*why = QPG_PEER_PENDING;
	else if (l->max_pending_prefix && e->prefix->pending >= l->max_pending_prefix)
		*why = QPG_PEER_PREFIX;
	else if (l->max_conns && e->conns >= l->max_conns)
		*why = QPG_PEER_CONNS;
	else if (!rate_allows(e, l, now_ns))
		*why = QPG_PEER_RATE;
	if (*why != QPG_PEER_OK) {
		if (idle(e, now_ns))
			unlink_entry(p, e);
		pthread_mutex_unlock(&p->lock);
		return NULL;
	}
	e->pending++;
	e->prefix->pending++;
	e->conns++;
	pthread_mutex_unlock(&p->lock);
	return e;
}

unsigned qpg__peers_pending_of(struct qpg__peers *p, const struct sockaddr_storage *addr)
{
	unsigned char key[16];
	key_of(addr, key);
	pthread_mutex_lock(&p->lock);
	const struct qpg__peer *e = find(p, key, false, false);
	unsigned n = e ? e->pending : 0;
	pthread_mutex_unlock(&p->lock);
	return n;
}

unsigned qpg__peer_pending_locked(const struct qpg__peer *e)
{
	return e->pending;
}

void qpg__peers_handshake_done(struct qpg__peers *p, struct qpg__peer *e)
{
	pthread_mutex_lock(&p->lock);
	pending_done(e);
	pthread_mutex_unlock(&p->lock);
}

void qpg__peers_leave(struct qpg__peers *p, struct qpg__peer *e, bool handshake_done,
		      uint64_t now_ns)
{
	pthread_mutex_lock(&p->lock);
	if (!handshake_done)
		pending_done(e);
	e->conns--;
	/* Forget idle peers so the table tracks live ones only; one with
	 * spent tokens stays until the sweep finds its bucket full. */
	if (idle(e, now_ns))
		unlink_entry(p, e);
	pthread_mutex_unlock(&p->lock);
}

bool qpg__peers_take_qp(struct qpg__peers *p, struct qpg__peer *e, unsigned max,
			unsigned *held)
{
	pthread_mutex_lock(&p->lock);
	bool ok = !max || e->qps < max;
	e->qps += ok;
	*held = e->qps;
	pthread_mutex_unlock(&p->lock);
	return ok;
}

void qpg__peers_put_qp(struct qpg__peers *p, struct qpg__peer *e, uint64_t now_ns)
{
	pthread_mutex_lock(&p->lock);
	e->qps--;
	if (idle(e, now_ns))
		unlink_entry(p, e);
	pthread_mutex_unlock(&p->lock);
}

void qpg__peers_sweep(struct qpg__peers *p, uint64_t now_ns)
{
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nbuckets; i++) {
		struct qpg__peer **pp = &p->buckets[i];
		while (*pp) {
			struct qpg__peer *e = *pp;
			if (idle(e, now_ns)) {
				/* Its prefix, idle now, goes in this sweep or the next. */
				if (e->prefix)
					e->prefix->conns--;
				*pp = e->next;
				p->nentries -= !e->is_prefix;
				free(e);
			} else {
				pp = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&p->lock);
}

size_t qpg__peers_count(struct qpg__peers *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->nentries;
	pthread_mutex_unlock(&p->lock);
	return n;
}

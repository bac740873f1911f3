/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-peer-address accounting for admission (pending handshakes, live
 * connections and their QPs per IP). Shared by the server's threads, so it has a lock. */
#ifndef QPG_PEERS_H
#define QPG_PEERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "khash.h"

struct qpg__peer;

struct qpg__peers {
	pthread_mutex_t lock;
	struct qpg__khash hash; /* keyed: peers choose their addresses */
	struct qpg__peer **buckets;
	size_t nbuckets;
	size_t nentries;
};

/* What one address may hold. 0: no limit. */
struct qpg__peer_limits {
	unsigned max_pending;	     /* unfinished handshakes */
	unsigned max_pending_prefix; /* ... of all addresses in an IPv4 /24, an IPv6 /48 */
	unsigned max_conns;   /* connections */
	/* New handshakes per second, with a burst of BURST at once: a token
	 * bucket (kept as GCRA's theoretical arrival time, one integer). */
	unsigned rate, burst;
};

enum qpg__peer_verdict {
	QPG_PEER_OK,
	QPG_PEER_PENDING,
	QPG_PEER_PREFIX,
	QPG_PEER_CONNS,
	QPG_PEER_RATE
};

int qpg__peers_init(struct qpg__peers *p, size_t nbuckets);
void qpg__peers_fini(struct qpg__peers *p);
/* Count a new connection from ADDR at NOW_NS if it stays within L. Returns
 * the entry, or NULL with *WHY saying which limit (QPG_PEER_OK: no memory). */
struct qpg__peer *qpg__peers_enter(struct qpg__peers *p, const struct sockaddr_storage *addr,
				   const struct qpg__peer_limits *l, uint64_t now_ns,
				   enum qpg__peer_verdict *why);
/* One more admitted QP for E, if it holds fewer than MAX (0: no limit);
 * *HELD gets what it holds then. Each QP taken is put back once. */
bool qpg__peers_take_qp(struct qpg__peers *p, struct qpg__peer *e, unsigned max,
			unsigned *held);
void qpg__peers_put_qp(struct qpg__peers *p, struct qpg__peer *e, uint64_t now_ns);
/* Unfinished handshakes ADDR holds now (0: none, or not known). */
unsigned qpg__peers_pending_of(struct qpg__peers *p, const struct sockaddr_storage *addr);
/* The same for an entry, with the lock held (qpg__peers_lock). */
unsigned qpg__peer_pending_locked(const struct qpg__peer *e);
static inline void qpg__peers_lock(struct qpg__peers *p)
{
	pthread_mutex_lock(&p->lock);
}
static inline void qpg__peers_unlock(struct qpg__peers *p)
{
	pthread_mutex_unlock(&p->lock);
}
void qpg__peers_handshake_done(struct qpg__peers *p, struct qpg__peer *e);
void qpg__peers_leave(struct qpg__peers *p, struct qpg__peer *e, bool handshake_done,
		      uint64_t now_ns);
/* Forget addresses that hold nothing and whose bucket has refilled. An
 * address that left with tokens spent is remembered until then, so that
 * connecting and leaving again does not refill it. */
void qpg__peers_sweep(struct qpg__peers *p, uint64_t now_ns);
size_t qpg__peers_count(struct qpg__peers *p);

#endif

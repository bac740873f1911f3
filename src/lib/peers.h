/* Per-peer-address accounting for admission (pending handshakes and live
 * connections per IP). Shared by the server's threads, so it has a lock. */
#ifndef QPG_PEERS_H
#define QPG_PEERS_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "khash.h"

struct qpg__peer;

struct qpg__peers {
	pthread_mutex_t lock;
	struct qpg__khash hash; /* keyed: peers choose their addresses */
	struct qpg__peer **buckets;
	size_t nbuckets;
};

int qpg__peers_init(struct qpg__peers *p, size_t nbuckets);
void qpg__peers_fini(struct qpg__peers *p);
/* Count a new connection from ADDR if it stays within both limits (0: no
 * limit). Returns the entry, or NULL with *why_pending telling which limit. */
struct qpg__peer *qpg__peers_enter(struct qpg__peers *p, const struct sockaddr_storage *addr,
				   unsigned max_pending, unsigned max_conns, bool *pending_limit);
void qpg__peers_handshake_done(struct qpg__peers *p, struct qpg__peer *e);
void qpg__peers_leave(struct qpg__peers *p, struct qpg__peer *e, bool handshake_done);

#endif

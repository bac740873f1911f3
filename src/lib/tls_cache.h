/* SPDX-License-Identifier: BSD-2-Clause */
/* A bounded store of server-side TLS sessions by session ID (tls_cache.c):
 * what an mTLS server resumes from instead of a stateless ticket, so that a
 * resumption does not decode the client's certificate from the ticket
 * again. It only stores; tls_tickets.c decides what may be resumed. */
#ifndef QPG_TLS_CACHE_H
#define QPG_TLS_CACHE_H

#include <openssl/ssl.h>
#include <stdint.h>
#include <time.h>

/* What is kept beside a session: the generation of the context it was made
 * on, when it was stored, and the window in which every certificate (and
 * CRL) its full handshake verified is still valid. */
struct qpg__tls_cached {
	SSL_SESSION *sess;
	unsigned gen;
	time_t born;
	time_t valid_from, valid_until;
};

struct qpg__tls_cache;

/* Room for MAX sessions (at least 1); NULL when out of memory. */
struct qpg__tls_cache *qpg__tls_cache_new(unsigned max);
void qpg__tls_cache_free(struct qpg__tls_cache *c);
/* Keep E (its session reference passes to the cache) under its session's
 * ID; the oldest session goes when the cache is full. 0, or -ENOMEM /
 * -EINVAL (E's reference is released then). */
int qpg__tls_cache_put(struct qpg__tls_cache *c, const struct qpg__tls_cached *e);
/* The session stored under ID: 0 and *OUT (with a reference of the
 * caller's; the cache keeps its own), or -ENOENT. A ticket is good for
 * several connections, as a stateless one is: a client resumes all the
 * connections it opens together from its newest ticket. */
int qpg__tls_cache_get(struct qpg__tls_cache *c, const uint8_t *id, unsigned id_len,
		       struct qpg__tls_cached *out);
/* Forget the session stored under ID (one that may not resume any more). */
void qpg__tls_cache_remove(struct qpg__tls_cache *c, const uint8_t *id, unsigned id_len);
/* Drop every session. */
void qpg__tls_cache_clear(struct qpg__tls_cache *c);
unsigned qpg__tls_cache_len(struct qpg__tls_cache *c);

#endif

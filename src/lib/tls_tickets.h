/* SPDX-License-Identifier: BSD-2-Clause */
/* Server: stateless TLS session tickets (tls_tickets.c). It knows only
 * OpenSSL's context; tls.c attaches it to the contexts it makes. */
#ifndef QPG_TLS_TICKETS_H
#define QPG_TLS_TICKETS_H

#include <openssl/ssl.h>

struct qpg__tls_tickets;
/* The keys rotate every PERIOD_S seconds; a ticket is accepted for at most
 * two periods, and none past RESUME_MAX_S after the full handshake it
 * came from (0: no such bound). */
int qpg__tls_tickets_new(struct qpg__tls_tickets **out, unsigned period_s, unsigned resume_max_s);
void qpg__tls_tickets_free(struct qpg__tls_tickets *t);
/* Before any attach: contexts that verify client certificates (mTLS)
 * resume from a cache of at most MAX sessions instead of stateless
 * tickets, under the same bounds (0: no cache). 0 or -ENOMEM. */
int qpg__tls_tickets_cache(struct qpg__tls_tickets *t, unsigned max);
/* Sessions the cache holds now. */
unsigned qpg__tls_tickets_cached(struct qpg__tls_tickets *t);
/* Issue tickets from CTX under T, and accept them. */
int qpg__tls_tickets_attach(SSL_CTX *ctx, struct qpg__tls_tickets *t);
/* Server, once the handshake is over: send SSL one ticket ahead of what it
 * writes next (the bootstrap's answer), if its context resumes. 1 queued,
 * 0 none (no tickets here), -EIO. */
int qpg__tls_ticket_offer(SSL *ssl);
/* Forget every key (so every ticket), e.g. when the certificates change,
 * and start a new generation: NEXT (attached, not yet in use; may be NULL)
 * is of it, every context attached before is not, and the tickets those
 * seal never open. Call it before NEXT replaces the old context. */
int qpg__tls_tickets_forget_all(struct qpg__tls_tickets *t, SSL_CTX *next);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* Server: stateless TLS session tickets (tls_tickets.c). It knows only
 * OpenSSL's context; tls.c attaches it to the contexts it makes. */
#ifndef QPG_TLS_TICKETS_H
#define QPG_TLS_TICKETS_H

#include <openssl/ssl.h>

struct qpg__tls_tickets;
/* The keys rotate every PERIOD_S seconds; a ticket is accepted for at most
 * two periods. */
int qpg__tls_tickets_new(struct qpg__tls_tickets **out, unsigned period_s);
void qpg__tls_tickets_free(struct qpg__tls_tickets *t);
/* Issue tickets from CTX under T, and accept them. */
int qpg__tls_tickets_attach(SSL_CTX *ctx, struct qpg__tls_tickets *t);
/* Forget every key (so every ticket), e.g. when the certificates change. */
int qpg__tls_tickets_forget_all(struct qpg__tls_tickets *t);

#endif

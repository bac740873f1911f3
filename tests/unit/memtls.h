/* SPDX-License-Identifier: BSD-2-Clause */
/* A TLS handshake in memory, through a BIO pair, for tests of resumption
 * and of certificate checks. */
#ifndef QPG_TESTS_MEMTLS_H
#define QPG_TESTS_MEMTLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

/* A server of SCTX and a client of CCTX joined by a BIO pair, each in its
 * state (accept, connect), nothing sent yet. */
void memtls_pair(SSL_CTX *sctx, SSL_CTX *cctx, SSL **s, SSL **c);
/* One handshake between a server of SCTX and a client of CCTX (servername
 * localhost) that offers OFFER (or nothing), given a ticket as a HELLO that
 * asks for one is (if SCTX resumes). Returns the client's newest
 * session (with the ticket it was given) and whether it resumed; *PEER (if
 * not NULL): whether the server holds a client certificate. Both ends are
 * then freed as qpgate frees them after the bootstrap (qpg__tls_release):
 * OpenSSL marks the session of a connection freed in the middle not
 * resumable. Fails the test when the handshake does not finish. */
SSL_SESSION *memtls_handshake(SSL_CTX *sctx, SSL_CTX *cctx, SSL_SESSION *offer, bool *resumed,
			      bool *peer);
/* One handshake between a server of SCTX and a client of CCTX that checks
 * HOST (NULL: no name), as qpg__tls_session has it check: X509_V_OK, or
 * the verification result of the end that checks a chain (the client's,
 * or with SERVER_SIDE the server's; -1: the handshake failed otherwise).
 * *CHAIN (if not NULL): the length of that end's verified chain. */
long memtls_verify(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, bool server_side, int *chain);
/* Fails the test unless CTX's cache of verified chains (tls_vcache.c) found
 * HITS, verified MISSES and holds ENTRIES. */
void memtls_vcache_counts(SSL_CTX *ctx, uint64_t hits, uint64_t misses, unsigned entries);

#endif

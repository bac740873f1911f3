/* SPDX-License-Identifier: BSD-2-Clause */
/* A TLS handshake in memory, through a BIO pair, for tests of resumption
 * and of certificate checks. */
#ifndef QPG_TESTS_MEMTLS_H
#define QPG_TESTS_MEMTLS_H

#include <openssl/ssl.h>
#include <stdbool.h>

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

#endif

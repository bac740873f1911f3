/* SPDX-License-Identifier: BSD-2-Clause */
/* TLS 1.3 for the control channel, isolated here as curl isolates its TLS
 * backends. Nothing outside tls*.c and auth.c calls OpenSSL's
 * SSL API. */
#ifndef QPG_TLS_H
#define QPG_TLS_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qpg__tls_files {
	const char *cert; /* our certificate chain (server: required; client: for mTLS) */
	const char *key;
	const char *ca; /* client: CA that signs the server; server: CA for client certs (mTLS) */
	const uint8_t *spki_pin; /* client: SHA-256 of the server's public key, or NULL */
	const char *const *crls; /* server with a client CA: revocation lists (PEM) */
	unsigned ncrls;
};
/* Client: accept only a server whose certificate's public key (DER SPKI)
 * hashes to SHA256, on top of the chain and host-name checks (tls_pin.c). */
int qpg__tls_pin_spki(SSL_CTX *ctx, const uint8_t sha256[32]);

/* Remember the peer chains this context verified (tls_vcache.c): a
 * client's of servers, a server's of clients (mTLS). A full handshake with
 * a peer verified within TTL_S seconds checks the peer's proof of its key
 * (CertificateVerify) but does not build and verify the same chain again.
 * Keyed by every certificate the peer sent and the names checked; at most
 * MAX chains, each still inside its validity period (and the store's CRLs
 * inside theirs) when it is used. 0 or -1. */
#define QPG__TLS_VCACHE_MAX	   32	/* a client's: the servers it talks to */
#define QPG__TLS_VCACHE_SERVER_MAX 1024 /* a server's: its clients' identities */
#define QPG__TLS_VCACHE_TTL_S	   600	/* verify_cache_s's default, both sides */
int qpg__tls_vcache_attach(SSL_CTX *ctx, unsigned ttl_s, unsigned max);
/* What the cache of CTX did: chains found, chains verified (each lookup
 * that found none), and the chains it holds now. -1 when CTX has none. */
int qpg__tls_vcache_counts(SSL_CTX *ctx, uint64_t *hits, uint64_t *misses, unsigned *entries);

#include "tls_tickets.h"

/* Return a context or NULL with a reason in ERR. A server context issues
 * and accepts session tickets under TICKETS (NULL: no resumption). */
SSL_CTX *qpg__tls_server_ctx(const struct qpg__tls_files *f, struct qpg__tls_tickets *tickets,
			     char *err, size_t err_len);
SSL_CTX *qpg__tls_client_ctx(const struct qpg__tls_files *f, char *err, size_t err_len);

/* A non-blocking session on FD. SERVERNAME (client only) is checked against
 * the server certificate and sent as SNI. */
SSL *qpg__tls_session(SSL_CTX *ctx, int fd, int is_server, const char *servername);

/* The context an endpoint makes its sessions from, replaceable while they
 * are being made (a server reloading its certificate): a session is made
 * under the lock and holds its own reference to the context, so an old
 * context lives on exactly as long as the sessions made from it. */
struct qpg__tls_slot {
	pthread_mutex_t lock;
	SSL_CTX *ctx;
	/* Client: resume with the newest ticket the server gave us (NULL:
	 * none yet, or resumption off). */
	SSL_SESSION *ticket;
	bool resume; /* client: qpg__tls_slot_resume was called */
};
void qpg__tls_slot_init(struct qpg__tls_slot *s, SSL_CTX *ctx);
SSL *qpg__tls_slot_session(struct qpg__tls_slot *s, int fd, int is_server, const char *servername);
/* Sessions from now on use CTX (the slot takes it); the old one is let go. */
void qpg__tls_slot_replace(struct qpg__tls_slot *s, SSL_CTX *ctx);
void qpg__tls_slot_fini(struct qpg__tls_slot *s);
/* Client: keep the tickets the server sends, and offer the newest one on
 * every new session from this slot (a full handshake follows when the
 * server no longer accepts it). */
int qpg__tls_slot_resume(struct qpg__tls_slot *s);
/* The verified peer certificate's name of kind WHICH (enum qpg_peer_name)
 * into OUT: its length, or -ENOTCONN (no verified certificate), -ENOENT
 * (none of that kind), -EILSEQ (not printable ASCII, or two CNs),
 * -ENAMETOOLONG (CAP - 1 is too short). tls_peer.c. */
int qpg__tls_peer_name(const SSL *ssl, int which, char *out, size_t cap);
/* True when this session was resumed from a ticket (no certificates). */
bool qpg__tls_resumed(const SSL *ssl);
/* Client, its handshake over: should its HELLO ask for a ticket? Yes when
 * it resumes and SSL was a full handshake, or the ticket it holds is gone
 * or past a quarter of its lifetime (a server's key accepts a ticket at
 * least half that long after sealing it, so a client that connects this
 * often never falls back to a full handshake). */
bool qpg__tls_slot_wants_ticket(struct qpg__tls_slot *s, const SSL *ssl);

enum qpg__tls_io {
	QPG_TLS_DONE = 1,
	QPG_TLS_WANT_READ = 2,
	QPG_TLS_WANT_WRITE = 3,
	QPG_TLS_CLOSED = 4, /* EOF or a reset from the peer, no TLS alert */
	QPG_TLS_FAILED = 5,
	/* A record failed to authenticate (its AEAD tag): tampered with on
	 * the way, as a frame whose tag fails is. */
	QPG_TLS_FORGED = 6,
};

/* One handshake step; on FAILED or CLOSED, WHY explains it for a person. */
enum qpg__tls_io qpg__tls_handshake(SSL *ssl, char *why, size_t why_len);
/* Read or write; *N gets the bytes moved when the result is DONE. */
enum qpg__tls_io qpg__tls_read(SSL *ssl, void *buf, size_t len, size_t *n, char *why,
			       size_t why_len);
enum qpg__tls_io qpg__tls_write(SSL *ssl, const void *buf, size_t len, size_t *n, char *why,
				size_t why_len);
/* True when the last failure was certificate verification (so the caller
 * can say "certificate verification failed" rather than "TLS error"). */
int qpg__tls_verify_failed(SSL *ssl);
/* True when the peer has not sent a single byte yet: a close at that point
 * is a refusal before TLS (a limit), not a TLS failure. */
bool qpg__tls_peer_sent_nothing(const SSL *ssl);

/* Bytes waiting in SSL's buffers, decrypted or read ahead (epoll cannot
 * see them). */
bool qpg__tls_pending(const SSL *ssl);
/* A polite close_notify on a healthy session; never blocks. */
void qpg__tls_close_notify(SSL *ssl);
void qpg__tls_free(SSL *ssl);
/* Free an established session whose connection goes on without TLS. */
void qpg__tls_release(SSL *ssl);
void qpg__tls_ctx_free(SSL_CTX *ctx);

#endif

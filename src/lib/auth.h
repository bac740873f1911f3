/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-message authentication with keys exported from the TLS session.
 *
 * Each direction has its own AES-128 key K, Poly1305 key R and 4-byte salt.
 * A frame's tag is Poly1305-AES over header||payload: Poly1305 under R,
 * with the one-time pad S = AES-128(K, salt || seq || 0^32), so the
 * header's sequence number is bound to the tag: a replayed, reordered or
 * forged frame fails (docs/protocol.md). Payloads stay in clear (they are
 * not secret in qpgate's threat model, and zero-copy paths need them as
 * they are). */
#ifndef QPG_AUTH_H
#define QPG_AUTH_H

#include <nettle/hmac.h>
#include <nettle/poly1305.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdint.h>

/* Key material of one direction, as exported: AES key, Poly1305 key, salt. */
#define QPG__AUTH_KEY_LEN  32 /* K (16) || R (16) */
#define QPG__AUTH_SALT_LEN 4

/* Frames up to this long are tagged through nettle, longer ones through
 * OpenSSL's EVP_MAC: the same function, the faster code for each (auth.c). */
#define QPG__AUTH_SHORT 512

/* One direction. */
struct qpg__auth_dir {
	struct poly1305_aes_ctx pa; /* AES-128 under K and Poly1305 under R (nettle) */
	EVP_MAC_CTX *mac;	    /* Poly1305 for long frames, keyed per message with R || S;
				       made by the first one */
	int keyed;		    /* the keys are set */
	uint8_t r[16];
	int broken; /* the MAC failed: every tag fails */
	uint8_t salt[QPG__AUTH_SALT_LEN];
	uint64_t seq; /* next sequence number to send, or to expect */
};

struct qpg__auth {
	int enabled;
	struct qpg__auth_dir tx;
	struct qpg__auth_dir rx;
};

/* Derive both directions of a session's own QP (its first) from SSL.
 * IS_SERVER picks which half is tx. */
int qpg__auth_init_from_tls(struct qpg__auth *a, SSL *ssl, int is_server, int enabled);

/* A session's other QPs (docs/protocol.md, "The tag"): one secret exported
 * from SSL for all of them, then each QP's keys from it by HKDF-Expand with
 * the QP's index, so every QP of a session has keys of its own at the cost
 * of a few hashes, not one TLS exporter call each. */
struct qpg__auth_session {
	struct hmac_sha256_ctx prk; /* HMAC keyed with the exported secret */
};
int qpg__auth_session_init(struct qpg__auth_session *s, SSL *ssl);
void qpg__auth_session_free(struct qpg__auth_session *s);
/* QP_INDEX: the QP's place in its session, 1 and up. */
int qpg__auth_init_member(struct qpg__auth *a, struct qpg__auth_session *s, int is_server,
			  int enabled, uint32_t qp_index);
/* Deterministic keys, for fuzzers and unit tests. */
int qpg__auth_init_raw(struct qpg__auth *a, const uint8_t tx_key[QPG__AUTH_KEY_LEN],
		       const uint8_t tx_salt[QPG__AUTH_SALT_LEN],
		       const uint8_t rx_key[QPG__AUTH_KEY_LEN],
		       const uint8_t rx_salt[QPG__AUTH_SALT_LEN]);
void qpg__auth_free(struct qpg__auth *a);

/* Tag DATA[0..len) for sequence SEQ into TAG[16]. */
int qpg__auth_tag(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		  uint8_t tag[16]);
/* The same tag over DATA[0..len) followed by MORE[0..more_len), which need
 * not follow it in memory (a frame whose payload ends in a value sent from
 * where it is stored). */
int qpg__auth_tag2(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		   const uint8_t *more, size_t more_len, uint8_t tag[16]);
/* 0 when TAG matches, -EBADMSG otherwise. Constant time. */
int qpg__auth_verify(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		     const uint8_t tag[16]);

#endif

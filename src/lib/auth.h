/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-message authentication with keys exported from the TLS session.
 *
 * Each direction has its own AES-128-GCM key and 4-byte salt. A frame's tag
 * is GMAC over header||payload with nonce = salt || seq, so the header's
 * sequence number is bound to the tag: a replayed, reordered or forged frame
 * fails. Payloads stay in clear (they are not secret in qpgate's threat model,
 * and zero-copy paths need them as they are). */
#ifndef QPG_AUTH_H
#define QPG_AUTH_H

#include <openssl/evp.h>
#include <openssl/modes.h>
#include <openssl/ssl.h>
#include <stdint.h>

/* One direction. Its GHASH context points back at it (the AES block
 * function's key), so a direction is used where it was initialised, never
 * copied or moved. */
struct qpg__auth_dir {
	GCM128_CONTEXT *gcm; /* GHASH under H = E(K, 0), and the tag's mask */
	EVP_CIPHER_CTX *ecb; /* AES-128 under K, one block at a time */
	int broken;	     /* the block cipher failed: every tag fails */
	uint8_t salt[4];
	uint64_t seq; /* next sequence number to send, or to expect */
	/* A mask computed ahead (qpg__auth_prepare): E(K, NEXT_J0). */
	uint8_t next_j0[16], next_mask[16];
	int next_ready;
};

struct qpg__auth {
	int enabled;
	struct qpg__auth_dir tx;
	struct qpg__auth_dir rx;
};

/* Derive both directions from SSL. IS_SERVER picks which half is tx.
 * QP_INDEX is the QP's place in its session: 0 (the session's own QP)
 * exports with no context, each extra QP with its index as the context, so
 * every QP of a session has keys of its own (docs/protocol.md). */
int qpg__auth_init_from_tls(struct qpg__auth *a, SSL *ssl, int is_server, int enabled,
			    uint32_t qp_index);
/* Deterministic keys, for fuzzers and unit tests. */
int qpg__auth_init_raw(struct qpg__auth *a, const uint8_t tx_key[16], const uint8_t tx_salt[4],
		       const uint8_t rx_key[16], const uint8_t rx_salt[4]);
void qpg__auth_free(struct qpg__auth *a);

/* Tag DATA[0..len) for sequence SEQ into TAG[16]. */
int qpg__auth_tag(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		  uint8_t tag[16]);
/* Compute the mask of sequence SEQ's tag now (its one AES block), so that
 * tagging or verifying SEQ later costs only GHASH. For after a message has
 * gone out, while the peer works on it: it takes the block cipher off the
 * path of the next message. A mask prepared for a sequence never used is
 * simply not used. */
void qpg__auth_prepare(struct qpg__auth_dir *d, uint64_t seq);
/* 0 when TAG matches, -EBADMSG otherwise. Constant time. */
int qpg__auth_verify(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		     const uint8_t tag[16]);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
#include "auth.h"

#include <errno.h>
#include <nettle/aes.h>
#include <nettle/hkdf.h>
#include <openssl/crypto.h>
#include <string.h>

#include "bytes.h"

#define EXPORT_LABEL	"EXPORTER-qpgate-message-auth-v2"
#define SESSION_LABEL	"EXPORTER-qpgate-session-qps-v1"
#define MEMBER_INFO	"qpgate qp keys"
#define MEMBER_INFO_LEN (sizeof(MEMBER_INFO) - 1)

/* c2s K | c2s R | c2s salt | s2c K | s2c R | s2c salt */
enum { DIR_LEN = QPG__AUTH_KEY_LEN + QPG__AUTH_SALT_LEN, KM_LEN = 2 * DIR_LEN };

/* Poly1305-AES (Bernstein, 2005), as TLS's ChaCha20-Poly1305 uses Poly1305
 * with a one-time pad: tag = Poly1305_R(frame) + S mod 2^128, where
 * S = AES-128(K, salt || seq || 0^32) is new for every frame of a
 * direction. Forgery succeeds with probability at most 8 * ceil(L/16) /
 * 2^106 per attempt for frames of up to L bytes (about 2^-91 at 64 KiB),
 * plus AES's distinguishing advantage.
 *
 * Two implementations of that one function, chosen by length:
 * - up to QPG__AUTH_SHORT bytes, nettle's poly1305_aes: a plain call on a
 *   context held in the direction itself. OpenSSL 3 has no Poly1305 outside
 *   EVP_MAC, whose per-call setup (a key through EVP_MAC_init, the size
 *   through OSSL_PARAM at final) costs more than Poly1305 itself for a
 *   small frame: per 80-byte tag, pad included, 36 against 118 ns on this
 *   host, 0.57 against 1.23 us in the lab VM (qemu TCG), and 0.80 against
 *   1.6-2.0 us there when 1,000 connections take turns;
 * - above it, OpenSSL's EVP_MAC, whose vector code wins on long frames:
 *   at 2 KiB, 276 against 420 ns on this host (AVX2). */

/* The nonce of SEQ: the block that AES turns into the pad. */
static void nonce_of(const struct qpg__auth_dir *d, uint64_t seq, uint8_t in[16])
{
	memcpy(in, d->salt, QPG__AUTH_SALT_LEN);
	qpg__put64(in + QPG__AUTH_SALT_LEN, seq);
	memset(in + QPG__AUTH_SALT_LEN + 8, 0, 16 - QPG__AUTH_SALT_LEN - 8);
}

static int dir_init(struct qpg__auth_dir *d, const uint8_t key[QPG__AUTH_KEY_LEN],
		    const uint8_t salt[QPG__AUTH_SALT_LEN])
{
	d->broken = 0;
	d->keyed = 1;
	poly1305_aes_set_key(&d->pa, key); /* K || R, as exported */
	d->mac = NULL;		    /* made by the first long frame: most QPs never send one */
	memcpy(d->r, key + 16, 16); /* Poly1305 clamps it */
	memcpy(d->salt, salt, QPG__AUTH_SALT_LEN);
	d->seq = 0;
	return 0;
}

/* D's OpenSSL Poly1305, for frames over QPG__AUTH_SHORT bytes. */
static int dir_mac(struct qpg__auth_dir *d)
{
	if (d->mac)
		return 0;
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "POLY1305", NULL);
	if (!mac)
		return -EIO;
	d->mac = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac); /* the context holds its own reference */
	return d->mac ? 0 : -ENOMEM;
}

static void dir_free(struct qpg__auth_dir *d)
{
	OPENSSL_cleanse(&d->pa, sizeof(d->pa));
	OPENSSL_cleanse(d->r, sizeof(d->r));
	EVP_MAC_CTX_free(d->mac);
	d->mac = NULL;
	d->keyed = 0;
}

int qpg__auth_init_raw(struct qpg__auth *a, const uint8_t tx_key[QPG__AUTH_KEY_LEN],
		       const uint8_t tx_salt[QPG__AUTH_SALT_LEN],
		       const uint8_t rx_key[QPG__AUTH_KEY_LEN],
		       const uint8_t rx_salt[QPG__AUTH_SALT_LEN])
{
	memset(a, 0, sizeof(*a));
	a->enabled = 1;
	int rc = dir_init(&a->tx, tx_key, tx_salt);
	if (rc == 0)
		rc = dir_init(&a->rx, rx_key, rx_salt);
	if (rc)
		qpg__auth_free(a);
	return rc;
}

/* Both directions from KM (KM_LEN bytes, client to server first). */
static int init_km(struct qpg__auth *a, const uint8_t *km, int is_server)
{
	const uint8_t *c2s = km, *s2c = km + DIR_LEN;
	return is_server ? qpg__auth_init_raw(a, s2c, s2c + QPG__AUTH_KEY_LEN, c2s,
					      c2s + QPG__AUTH_KEY_LEN)
			 : qpg__auth_init_raw(a, c2s, c2s + QPG__AUTH_KEY_LEN, s2c,
					      s2c + QPG__AUTH_KEY_LEN);
}

int qpg__auth_init_from_tls(struct qpg__auth *a, SSL *ssl, int is_server, int enabled)
{
	memset(a, 0, sizeof(*a));
	if (!enabled)
		return 0;
	uint8_t km[KM_LEN];
	if (SSL_export_keying_material(ssl, km, sizeof(km), EXPORT_LABEL, strlen(EXPORT_LABEL),
				       NULL, 0, 0) != 1)
		return -EIO;
	int rc = init_km(a, km, is_server);
	OPENSSL_cleanse(km, sizeof(km));
	return rc;
}

int qpg__auth_session_init(struct qpg__auth_session *s, SSL *ssl)
{
	uint8_t secret[SHA256_DIGEST_SIZE];
	if (SSL_export_keying_material(ssl, secret, sizeof(secret), SESSION_LABEL,
				       strlen(SESSION_LABEL), NULL, 0, 0) != 1)
		return -EIO;
	hmac_sha256_set_key(&s->prk, sizeof(secret), secret);
	OPENSSL_cleanse(secret, sizeof(secret));
	return 0;
}

void qpg__auth_session_free(struct qpg__auth_session *s)
{
	OPENSSL_cleanse(s, sizeof(*s));
}

int qpg__auth_init_member(struct qpg__auth *a, struct qpg__auth_session *s, int is_server,
			  int enabled, uint32_t qp_index)
{
	memset(a, 0, sizeof(*a));
	if (!enabled)
		return 0;
	uint8_t info[MEMBER_INFO_LEN + 4], km[KM_LEN];
	memcpy(info, MEMBER_INFO, MEMBER_INFO_LEN);
	qpg__put32(info + MEMBER_INFO_LEN, qp_index);
	/* HKDF-Expand (RFC 5869) under the session's secret; nettle's HMAC
	 * returns to its keyed state after each digest, so S serves every QP. */
	hkdf_expand(&s->prk, (nettle_hash_update_func *)hmac_sha256_update,
		    (nettle_hash_digest_func *)hmac_sha256_digest, SHA256_DIGEST_SIZE, sizeof(info),
		    info, sizeof(km), km);
	int rc = init_km(a, km, is_server);
	OPENSSL_cleanse(km, sizeof(km));
	return rc;
}

void qpg__auth_free(struct qpg__auth *a)
{
	dir_free(&a->tx);
	dir_free(&a->rx);
	a->enabled = 0;
}

int qpg__auth_tag2(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		   const uint8_t *more, size_t more_len, uint8_t tag[16])
{
	if (!d->keyed || d->broken)
		return -EIO;
	uint8_t nonce[16];
	nonce_of(d, seq, nonce);
	if (len + more_len <= QPG__AUTH_SHORT) {
		poly1305_aes_set_nonce(&d->pa, nonce);
		poly1305_aes_update(&d->pa, len, data);
		if (more_len)
			poly1305_aes_update(&d->pa, more_len, more);
		poly1305_aes_digest(&d->pa, 16, tag);
		return 0;
	}
	uint8_t key[32];
	memcpy(key, d->r, 16);
	aes128_encrypt(&d->pa.aes, 16, key + 16, nonce); /* S */
	int rc = dir_mac(d);
	size_t outl = 0;
	if (rc || EVP_MAC_init(d->mac, key, sizeof(key), NULL) != 1 ||
	    EVP_MAC_update(d->mac, data, len) != 1 ||
	    (more_len && EVP_MAC_update(d->mac, more, more_len) != 1) ||
	    EVP_MAC_final(d->mac, tag, &outl, 16) != 1 || outl != 16) {
		d->broken = 1;
		rc = rc ? rc : -EIO;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int qpg__auth_tag(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		  uint8_t tag[16])
{
	return qpg__auth_tag2(d, seq, data, len, NULL, 0, tag);
}

int qpg__auth_verify(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		     const uint8_t tag[16])
{
	uint8_t want[16];
	int rc = qpg__auth_tag(d, seq, data, len, want);
	if (rc)
		return rc;
	return CRYPTO_memcmp(want, tag, 16) == 0 ? 0 : -EBADMSG;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include "auth.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <string.h>

#define EXPORT_LABEL "EXPORTER-qpgate-message-auth-v1"

static int dir_init(struct qpg__auth_dir *d, const uint8_t key[16], const uint8_t salt[4])
{
	d->ctx = EVP_CIPHER_CTX_new();
	if (!d->ctx)
		return -ENOMEM;
	if (EVP_EncryptInit_ex(d->ctx, EVP_aes_128_gcm(), NULL, key, NULL) != 1)
		return -EIO;
	memcpy(d->salt, salt, 4);
	d->seq = 0;
	return 0;
}

int qpg__auth_init_raw(struct qpg__auth *a, const uint8_t tx_key[16], const uint8_t tx_salt[4],
		       const uint8_t rx_key[16], const uint8_t rx_salt[4])
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

int qpg__auth_init_from_tls(struct qpg__auth *a, SSL *ssl, int is_server, int enabled,
			    uint32_t qp_index)
{
	memset(a, 0, sizeof(*a));
	if (!enabled)
		return 0;
	/* c2s key | c2s salt | s2c key | s2c salt */
	uint8_t km[40];
	const uint8_t ctx[4] = {(uint8_t)(qp_index >> 24), (uint8_t)(qp_index >> 16),
				(uint8_t)(qp_index >> 8), (uint8_t)qp_index};
	if (SSL_export_keying_material(ssl, km, sizeof(km), EXPORT_LABEL, strlen(EXPORT_LABEL),
				       qp_index ? ctx : NULL, qp_index ? sizeof(ctx) : 0,
				       qp_index != 0) != 1)
		return -EIO;
	const uint8_t *c2s = km, *s2c = km + 20;
	int rc = is_server ? qpg__auth_init_raw(a, s2c, s2c + 16, c2s, c2s + 16)
			   : qpg__auth_init_raw(a, c2s, c2s + 16, s2c, s2c + 16);
	OPENSSL_cleanse(km, sizeof(km));
	return rc;
}

void qpg__auth_free(struct qpg__auth *a)
{
	EVP_CIPHER_CTX_free(a->tx.ctx);
	EVP_CIPHER_CTX_free(a->rx.ctx);
	a->tx.ctx = a->rx.ctx = NULL;
	a->enabled = 0;
}

int qpg__auth_tag(struct qpg__auth_dir *d, uint64_t seq, const uint8_t *data, size_t len,
		  uint8_t tag[16])
{
	uint8_t iv[12];
	int outl;
	memcpy(iv, d->salt, 4);
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
	if (len > INT32_MAX)
		return -EMSGSIZE;
	/* The tag through the provider's parameter directly: the legacy
	 * ctrl builds the same parameter on every call (169 -> 153 ns per
	 * 80-byte tag on the host). */
	OSSL_PARAM p[2] = {OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16),
			   OSSL_PARAM_END};
	if (EVP_EncryptInit_ex(d->ctx, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(d->ctx, NULL, &outl, data, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(d->ctx, NULL, &outl) != 1 || EVP_CIPHER_CTX_get_params(d->ctx, p) != 1)
		return -EIO;
	return 0;
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

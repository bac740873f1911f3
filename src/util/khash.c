/* SPDX-License-Identifier: BSD-2-Clause */
#include "khash.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <string.h>

int qpg__khash_init(struct qpg__khash *h)
{
	uint8_t key[16];
	memset(h, 0, sizeof(*h));
	if (RAND_bytes(key, sizeof(key)) != 1)
		return -EIO;
	int rc = qpg__khash_init_key(h, key);
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int qpg__khash_init_key(struct qpg__khash *h, const uint8_t key[16])
{
	memset(h, 0, sizeof(*h));
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
	if (!mac)
		return -ENOSYS;
	h->keyed = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac); /* the context holds its own reference */
	size_t outlen = 8;
	OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &outlen),
			       OSSL_PARAM_construct_end()};
	if (!h->keyed || EVP_MAC_init(h->keyed, key, 16, params) != 1) {
		qpg__khash_fini(h);
		return -ENOMEM;
	}
	return 0;
}

void qpg__khash_fini(struct qpg__khash *h)
{
	EVP_MAC_CTX_free(h->keyed); /* OpenSSL cleanses a SipHash context as it frees it */
	h->keyed = NULL;
}

uint64_t qpg__khash(const struct qpg__khash *h, const void *data, size_t n)
{
	return qpg__khash2(h, data, n, NULL, 0);
}

uint64_t qpg__khash2(const struct qpg__khash *h, const void *a, size_t na, const void *b,
		     size_t nb)
{
	/* A copy of the keyed context per call: the tables are hashed from
	 * several threads outside their locks, and copying a SipHash context
	 * costs less than keying a new one (EVP_MAC_init parses parameters). */
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(h->keyed);
	uint8_t out[8] = {0};
	size_t got = 0;
	if (ctx && EVP_MAC_update(ctx, a, na) == 1 && (!nb || EVP_MAC_update(ctx, b, nb) == 1))
		EVP_MAC_final(ctx, out, &got, sizeof(out));
	EVP_MAC_CTX_free(ctx);
	uint64_t v;
	memcpy(&v, out, sizeof(v)); /* out of memory: 0, every key in one bucket, still correct */
	return v;
}

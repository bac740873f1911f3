/* SPDX-License-Identifier: BSD-2-Clause */
#include "khash.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <string.h>

int qpg__khash_init(struct qpg__khash *h)
{
	memset(h, 0, sizeof(*h));
	if (RAND_bytes(h->key, sizeof(h->key)) != 1)
		return -EIO;
	h->mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
	return h->mac ? 0 : -ENOSYS;
}

void qpg__khash_fini(struct qpg__khash *h)
{
	EVP_MAC_free(h->mac);
	h->mac = NULL;
	OPENSSL_cleanse(h->key, sizeof(h->key));
}

uint64_t qpg__khash(const struct qpg__khash *h, const void *data, size_t n)
{
	/* A context per call: the tables are hashed from several threads
	 * outside their locks, and a SipHash context is small. */
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(h->mac);
	size_t outlen = 8;
	OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &outlen),
			       OSSL_PARAM_construct_end()};
	uint8_t out[8] = {0};
	size_t got = 0;
	if (ctx && EVP_MAC_init(ctx, h->key, sizeof(h->key), params) == 1 &&
	    EVP_MAC_update(ctx, data, n) == 1)
		EVP_MAC_final(ctx, out, &got, sizeof(out));
	EVP_MAC_CTX_free(ctx);
	uint64_t v;
	memcpy(&v, out, sizeof(v)); /* out of memory: 0, every key in one bucket, still correct */
	return v;
}

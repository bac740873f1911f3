/* SPDX-License-Identifier: BSD-2-Clause */
/* Keyed hashing for tables whose keys a client chooses (the KV index, the
 * per-address peer table): SipHash-2-4 from OpenSSL's EVP_MAC under a
 * random key drawn for each table, so nobody outside the process can build
 * keys that all land in one bucket (hash flooding). */
#ifndef QPG_KHASH_H
#define QPG_KHASH_H

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

struct qpg__khash {
	/* SipHash-2-4 keyed once, 64-bit output; never updated after init,
	 * so threads may copy it at once. */
	EVP_MAC_CTX *keyed;
};

/* Draw a key and key SipHash with it. 0, or a negative errno. */
int qpg__khash_init(struct qpg__khash *h);
/* The same under a given KEY (the reference vectors). */
int qpg__khash_init_key(struct qpg__khash *h, const uint8_t key[16]);
void qpg__khash_fini(struct qpg__khash *h);
/* 64-bit SipHash of DATA under H's key. Thread-safe. */
uint64_t qpg__khash(const struct qpg__khash *h, const void *data, size_t n);
/* The same of A (NA bytes) followed by B (NB bytes). */
uint64_t qpg__khash2(const struct qpg__khash *h, const void *a, size_t na, const void *b,
		     size_t nb);

#endif

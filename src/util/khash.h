/* SPDX-License-Identifier: BSD-2-Clause */
/* Keyed hashing for tables whose keys a client chooses (the KV index, the
 * per-address peer table): SipHash-2-4 under a random key drawn for each
 * table, so nobody outside the process can build keys that all land in one
 * bucket (hash flooding).
 *
 * SipHash is written out here (khash.c, some 60 lines) rather than taken
 * from OpenSSL's EVP_MAC: EVP can only hash from a keyed context it copies
 * per call (two allocations, a provider call), which cost twice the hash
 * itself on this host and most of a 64-key EXISTS's lookups in the lab VM
 * (docs/kv.md). Nettle 3.8 has no SipHash. tests/unit/test_khash.c checks
 * this one against the reference vectors and against OpenSSL's. */
#ifndef QPG_KHASH_H
#define QPG_KHASH_H

#include <stddef.h>
#include <stdint.h>

struct qpg__khash {
	/* The key, as SipHash's two 64-bit words; never changed after init,
	 * so any thread may hash at once. */
	uint64_t k0, k1;
};

/* Draw a key. 0, or a negative errno. */
int qpg__khash_init(struct qpg__khash *h);
/* The same under a given KEY (the reference vectors). Always 0. */
int qpg__khash_init_key(struct qpg__khash *h, const uint8_t key[16]);
/* Wipes the key. */
void qpg__khash_fini(struct qpg__khash *h);
/* 64-bit SipHash-2-4 of DATA under H's key (the reference's output bytes,
 * read as a little-endian number). Thread-safe. */
uint64_t qpg__khash(const struct qpg__khash *h, const void *data, size_t n);
/* The same of A (NA bytes) followed by B (NB bytes). */
uint64_t qpg__khash2(const struct qpg__khash *h, const void *a, size_t na, const void *b,
		     size_t nb);

#endif

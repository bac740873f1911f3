/* SPDX-License-Identifier: BSD-2-Clause */
/* The keyed hash of the KV index and the peer table: stable under one key,
 * different under another (a table's key is drawn at random, so a client
 * cannot know which keys collide), and SipHash-2-4 itself (the reference
 * vector for key 00..0f and the empty message), agreeing with OpenSSL's
 * SipHash on random keys, messages of every length to 200 bytes, and every
 * split of a message into two pieces. */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>

#include "unit.h"

#include "khash.h"

static void stable_under_one_key(void **state)
{
	struct qpg__khash h;
	assert_int_equal(qpg__khash_init(&h), 0);
	assert_true(qpg__khash(&h, "key-1", 5) == qpg__khash(&h, "key-1", 5));
	assert_true(qpg__khash(&h, "key-1", 5) != qpg__khash(&h, "key-2", 5));
	qpg__khash_fini(&h);
}

static void tables_have_their_own_keys(void **state)
{
	/* Eight tables: the chance that a random key repeats one is nil, and
	 * a fixed key (no defence) makes all eight agree. */
	uint64_t v[8];
	for (int i = 0; i < 8; i++) {
		struct qpg__khash h;
		assert_int_equal(qpg__khash_init(&h), 0);
		v[i] = qpg__khash(&h, "same input", 10);
		qpg__khash_fini(&h);
	}
	int same = 0;
	for (int i = 1; i < 8; i++)
		same += v[i] == v[0];
	assert_int_equal(same, 0);
}

static void siphash_reference_vector(void **state)
{
	/* SipHash-2-4, 64-bit output, key 00 01 .. 0f, empty message:
	 * 0x726fdb47dd0e0e31 (the reference implementation's vectors.h). */
	struct qpg__khash h;
	uint8_t key[16];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	assert_int_equal(qpg__khash_init_key(&h, key), 0);
	uint64_t v = qpg__khash(&h, "", 0);
	const uint8_t want[8] = {0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72};
	assert_memory_equal(&v, want, 8);
	/* And a 15-byte message 00..0e: 0xa129ca6149be45e5 (vectors.h, row 15),
	 * hashed twice from the one keyed context. */
	uint8_t msg[15];
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	const uint8_t want15[8] = {0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1};
	for (int i = 0; i < 2; i++) {
		v = qpg__khash(&h, msg, sizeof(msg));
		assert_memory_equal(&v, want15, 8);
	}
	qpg__khash_fini(&h);
}

/* OpenSSL's SipHash-2-4, 64-bit output, as the oracle. */
static uint64_t openssl_siphash(const uint8_t key[16], const uint8_t *m, size_t n)
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
	assert_non_null(mac);
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
	size_t outlen = 8, got = 0;
	OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &outlen),
			       OSSL_PARAM_construct_end()};
	uint8_t out[8];
	assert_int_equal(EVP_MAC_init(ctx, key, 16, params), 1);
	assert_int_equal(EVP_MAC_update(ctx, m, n), 1);
	assert_int_equal(EVP_MAC_final(ctx, out, &got, sizeof(out)), 1);
	assert_int_equal(got, 8);
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | out[i];
	return v;
}

static void agrees_with_openssl(void **state)
{
	uint8_t key[16], msg[200];
	for (int round = 0; round < 4; round++) {
		assert_int_equal(RAND_bytes(key, sizeof(key)), 1);
		assert_int_equal(RAND_bytes(msg, sizeof(msg)), 1);
		struct qpg__khash h;
		assert_int_equal(qpg__khash_init_key(&h, key), 0);
		for (size_t n = 0; n <= sizeof(msg); n++) {
			uint64_t want = openssl_siphash(key, msg, n);
			assert_true(qpg__khash(&h, msg, n) == want);
			/* Two pieces, split anywhere: the same hash. */
			for (size_t cut = 0; cut <= n && n <= 40; cut++)
				assert_true(qpg__khash2(&h, msg, cut, msg + cut, n - cut) == want);
			if (n > 40)
				assert_true(qpg__khash2(&h, msg, 2, msg + 2, n - 2) == want);
		}
		qpg__khash_fini(&h);
	}
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(stable_under_one_key),
	      cmocka_unit_test(tables_have_their_own_keys),
	      cmocka_unit_test(siphash_reference_vector), cmocka_unit_test(agrees_with_openssl))

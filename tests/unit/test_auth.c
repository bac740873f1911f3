/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <string.h>

#include "unit.h"

#include "auth.h"

static const uint8_t k1[16] = {1}, k2[16] = {2}, s1[4] = {9}, s2[4] = {8};

/* The wire format pinned (docs/protocol.md, "The tag"): AES-128-GCM with an
 * empty plaintext (GMAC), key k1, nonce = salt s1 || seq 7 big-endian, the
 * frame as associated data (bytes 0..99). Computed independently, with
 * Python's cryptography package:
 *   AESGCM(bytes([1]+[0]*15)).encrypt(bytes([9,0,0,0]) +
 *       (7).to_bytes(8, "big"), b"", bytes(range(100))) */
static const uint8_t kat_tag[16] = {0x2f, 0x9c, 0x59, 0xf7, 0x93, 0xb0, 0x2a, 0x61,
				    0x61, 0xbb, 0xa2, 0x1b, 0x15, 0xd7, 0x3f, 0x05};

static void test_tag_verifies_and_binds_seq_and_bytes(void **state)
{
	struct qpg__auth tx, rx;
	assert_int_equal(qpg__auth_init_raw(&tx, k1, s1, k2, s2), 0);
	assert_int_equal(qpg__auth_init_raw(&rx, k2, s2, k1, s1), 0);
	uint8_t msg[100], tag[16];
	for (int i = 0; i < 100; i++)
		msg[i] = (uint8_t)i;
	assert_int_equal(qpg__auth_tag(&tx.tx, 7, msg, sizeof(msg), tag), 0);
	assert_memory_equal(tag, kat_tag, 16);
	assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), 0);
	/* another sequence number: a replay or reorder */
	assert_int_equal(qpg__auth_verify(&rx.rx, 8, msg, sizeof(msg), tag), -EBADMSG);
	/* any flipped bit in the message */
	for (int i = 0; i < 100; i += 13) {
		msg[i] ^= 1;
		assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
		msg[i] ^= 1;
	}
	tag[15] ^= 1;
	assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
	/* the other direction's key does not verify */
	tag[15] ^= 1;
	assert_int_equal(qpg__auth_verify(&tx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
	qpg__auth_free(&tx);
	qpg__auth_free(&rx);
	qpg__auth_free(&rx);
}

QPG_UNIT_MAIN(NULL, NULL,
	      cmocka_unit_test(test_tag_verifies_and_binds_seq_and_bytes))

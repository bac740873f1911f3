/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <string.h>

#include "unit.h"

#include "auth.h"

static const uint8_t k1[16] = {1}, k2[16] = {2}, s1[4] = {9}, s2[4] = {8};

static void test_tag_verifies_and_binds_seq_and_bytes(void **state)
{
	struct qpg__auth tx, rx;
	assert_int_equal(qpg__auth_init_raw(&tx, k1, s1, k2, s2), 0);
	assert_int_equal(qpg__auth_init_raw(&rx, k2, s2, k1, s1), 0);
	uint8_t msg[100], tag[16];
	for (int i = 0; i < 100; i++)
		msg[i] = (uint8_t)i;
	assert_int_equal(qpg__auth_tag(&tx.tx, 7, msg, sizeof(msg), tag), 0);
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

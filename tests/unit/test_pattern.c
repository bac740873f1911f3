/* SPDX-License-Identifier: BSD-2-Clause */
/* The load tools' echo payload (src/tools/load/pattern.h): made 16 bytes at a
 * time, it is byte for byte the formula it documents, and its check finds
 * any one byte changed (in a full row or in the tail), another message's
 * payload, another connection's, and a payload cut short by a byte. */
#include <string.h>

#include "unit.h"

#include "pattern.h"

static uint8_t formula(int conn, long msg, uint32_t j)
{
	return (uint8_t)(conn * 131 + msg * 7 + (long)j * 13 + 1);
}

static const int conns[] = {0, 1, 7, 999, 49999};
static const long msgs[] = {0, 1, 36, 255, 256, 1000003};

static void fill_is_the_formula(void **state)
{
	uint8_t p[200];
	for (size_t c = 0; c < sizeof(conns) / sizeof(conns[0]); c++)
		for (size_t m = 0; m < sizeof(msgs) / sizeof(msgs[0]); m++)
			for (uint32_t len = 0; len <= sizeof(p); len++) {
				memset(p, 0xee, sizeof(p));
				pattern_fill(p, len, pattern_base(conns[c], msgs[m]));
				for (uint32_t j = 0; j < len; j++)
					assert_int_equal(p[j], formula(conns[c], msgs[m], j));
				for (uint32_t j = len; j < sizeof(p); j++)
					assert_int_equal(p[j], 0xee); /* nothing past LEN */
				assert_true(pattern_ok(p, len, pattern_base(conns[c], msgs[m])));
			}
}

static void check_finds_every_changed_byte(void **state)
{
	uint8_t p[100];
	uint8_t base = pattern_base(3, 42);
	for (uint32_t len = 1; len <= sizeof(p); len++)
		for (uint32_t j = 0; j < len; j++)
			for (int bit = 0; bit < 8; bit += 7) {
				pattern_fill(p, len, base);
				p[j] ^= (uint8_t)(1u << bit);
				assert_false(pattern_ok(p, len, base));
			}
}

static void check_finds_the_wrong_message(void **state)
{
	uint8_t p[64];
	pattern_fill(p, sizeof(p), pattern_base(5, 10));
	assert_true(pattern_ok(p, sizeof(p), pattern_base(5, 10)));
	assert_false(pattern_ok(p, sizeof(p), pattern_base(5, 11))); /* the next message */
	assert_false(pattern_ok(p, sizeof(p), pattern_base(5, 9)));  /* the one before */
	assert_false(pattern_ok(p, sizeof(p), pattern_base(6, 10))); /* another connection */
	/* A reply one byte short, read as the message it should be: */
	assert_false(pattern_ok(p + 1, sizeof(p) - 1, pattern_base(5, 10)));
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(fill_is_the_formula),
	      cmocka_unit_test(check_finds_every_changed_byte),
	      cmocka_unit_test(check_finds_the_wrong_message))

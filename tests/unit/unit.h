/* SPDX-License-Identifier: BSD-2-Clause */
/* What every unit test shares: cmocka and its prerequisites, and one main.
 *   QPG_UNIT_MAIN(setup, teardown, cmocka_unit_test(a), cmocka_unit_test(b))
 * QPG_TEST_FILTER=PATTERN in the environment runs only the matching cases
 * (one at a time under a sanitizer, for example). */
#ifndef QPG_TESTS_UNIT_H
#define QPG_TESTS_UNIT_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#define QPG_UNIT_MAIN(setup, teardown, ...)                                                    \
	int main(void)                                                                         \
	{                                                                                      \
		const struct CMUnitTest tests[] = {__VA_ARGS__};                               \
		if (getenv("QPG_TEST_FILTER"))                                                 \
			cmocka_set_test_filter(getenv("QPG_TEST_FILTER"));                     \
		return cmocka_run_group_tests(tests, setup, teardown);                         \
	}

#endif

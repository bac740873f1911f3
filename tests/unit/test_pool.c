/* SPDX-License-Identifier: BSD-2-Clause */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

#include "qpgate/verbs.h"

/* The pool without a PD is the TCP transport's; the slot logic is shared. */
static void test_pool_grows_by_chunks_and_caps(void **state)
{
	struct qpg_pool p;
	assert_int_equal(qpg_pool_init(&p, NULL, 100, 4, 10, 0), 0);
	assert_int_equal(p.slot_size, 128);
	struct qpg_buf *b[10];
	for (int i = 0; i < 10; i++) {
		b[i] = qpg_pool_get(&p);
		assert_non_null(b[i]);
		memset(b[i]->addr, i, 128);
	}
	assert_int_equal(p.nslots, 10);
	assert_int_equal(p.in_use, 10);
	assert_null(qpg_pool_get(&p));
	for (int i = 0; i < 10; i++)
		for (int j = i + 1; j < 10; j++)
			assert_ptr_not_equal(b[i]->addr, b[j]->addr);
	for (int i = 0; i < 10; i++)
		assert_int_equal(((unsigned char *)b[i]->addr)[127], i);
	qpg_pool_put(&p, b[3]);
	assert_ptr_equal(qpg_pool_get(&p), b[3]);
	for (int i = 0; i < 10; i++)
		qpg_pool_put(&p, b[i]);
	assert_int_equal(p.in_use, 0);
	assert_int_equal(qpg_pool_bytes(&p), 1280);
	qpg_pool_destroy(&p);
	qpg_pool_destroy(&p);
}

static void test_pool_rejects_bad_sizes(void **state)
{
	struct qpg_pool p;
	assert_int_equal(qpg_pool_init(&p, NULL, 0, 4, 0, 0), -22);
	assert_int_equal(qpg_pool_init(&p, NULL, 64, 0, 0, 0), -22);
}

static void test_psn_is_24_bit(void **state)
{
	uint32_t or_all = 0;
	for (int i = 0; i < 1000; i++) {
		uint32_t psn;
		assert_int_equal(qpg_psn_random(&psn), 0);
		assert_true(psn <= 0xffffff);
		or_all |= psn;
	}
	/* 1000 draws leave a given bit unset with probability 2^-1000. */
	assert_int_equal(or_all, 0xffffff);
}

/* PSNs are drawn from the CSPRNG many at a time (verbs.c): a forked
 * child must not hand out the parent's next ones. The parent draws once
 * (filling its draw), then both draw 8 more: equal by chance with
 * probability 2^-192. */
static void test_psn_not_repeated_after_fork(void **state)
{
	uint32_t first, mine[8], theirs[8];
	assert_int_equal(qpg_psn_random(&first), 0);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 8; i++)
			if (qpg_psn_random(&mine[i]) != 0)
				_exit(1);
		_exit(write(fds[1], mine, sizeof(mine)) == (ssize_t)sizeof(mine) ? 0 : 1);
	}
	close(fds[1]);
	for (int i = 0; i < 8; i++)
		assert_int_equal(qpg_psn_random(&mine[i]), 0);
	assert_int_equal(read(fds[0], theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
	close(fds[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_memory_not_equal(mine, theirs, sizeof(mine));
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_pool_grows_by_chunks_and_caps),
	      cmocka_unit_test(test_pool_rejects_bad_sizes), cmocka_unit_test(test_psn_is_24_bit),
	      cmocka_unit_test(test_psn_not_repeated_after_fork))

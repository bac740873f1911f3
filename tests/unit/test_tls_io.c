/* SPDX-License-Identifier: BSD-2-Clause */
/* The TLS reads and writes of a connection (src/lib/tls.c) and OpenSSL's
 * per-thread error queue: SSL_get_error reads that queue, so an error that
 * the application (or anything else on the thread) left there would make a
 * read that only has to wait look like a failed one. qpgate clears the
 * queue before each read and write when it holds anything. Real
 * connections over the tcp transport to an echo server on loopback; the
 * client runs on the test's thread, where the stale errors are put. */
#include <openssl/err.h>

#include "unit.h"

#include "loopback.h"
#include "qpgate/wire.h"

/* Echoes on one connection, each sent with a stale error on the queue. */
static void a_stale_error_fails_no_echo(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	assert_int_equal(qpg_loopback_start(&lb), 0);
	struct qpg_client_opts o;
	qpg_loopback_client_opts(&lb, &o);
	struct qpg_client *cl;
	char err[256];
	assert_int_equal(qpg_client_create(&cl, &o, &qpg_loopback_cbs, err, sizeof(err)), 0);
	struct qpg_loopback_conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.up || k.closed);
	assert_int_equal(k.up, 1);
	for (int i = 1; i <= 3; i++) {
		ERR_raise(ERR_LIB_USER, 42); /* as an application might leave it */
		assert_true(ERR_peek_error() != 0);
		assert_int_equal(qpg_client_send(k.c, QPG_FRAME_ECHO_REQ, "hello", 5), 0);
		RUN_UNTIL(cl, k.replies == i || k.closed);
		if (k.closed)
			fail_msg("echo %d: the connection closed: %s", i, k.why);
		assert_int_equal(k.replies, i);
		assert_true(ERR_peek_error() == 0); /* cleared, not left for later */
	}
	qpg_client_close(k.c);
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(a_stale_error_fails_no_echo))

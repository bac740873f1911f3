/* SPDX-License-Identifier: BSD-2-Clause */
/* Resumption stays bounded by the full handshake it came from
 * (src/lib/tls_tickets.c):
 * - renewed or not, no resumption past --tls-resume-max after it;
 * - a ticket key opens nothing once it is two periods old, even on a
 *   server quiet enough never to have rotated it away;
 * - a handshake that finishes on a context a reload replaced gets a ticket
 *   that never opens (the reload race), in memory, step by step;
 * - with mTLS, the carried client certificate is checked again on every
 *   resumption: one that expired since is refused, resumed or not.
 * Real connections over the tcp transport on loopback, but the race. */
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

#include "certgen.h"
#include "loopback.h"
#include "memtls.h"
#include "qpgate/wire.h"
#include "tls.h"
#include "tls_tickets.h"

static struct qpg_client *client(const struct qpg_loopback *lb, const char *cert, const char *key)
{
	struct qpg_client *cl = qpg_loopback_client(lb, cert, key);
	assert_non_null(cl);
	return cl;
}

/* One connection: 1 resumed, 0 a full handshake, -1 refused. */
static int one(struct qpg_client *cl)
{
	char why[256];
	int rc = qpg_loopback_echo_once(cl, why, sizeof(why));
	assert_int_not_equal(rc, -2);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	double d = t - now_s();
	if (d > 0)
		usleep((useconds_t)(d * 1e6));
}

static void resumption_ends_at_the_cap(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	lb.o.tls_ticket_period_s = 3600;
	lb.o.tls_resume_max_s = 2;
	assert_int_equal(qpg_loopback_start(&lb), 0);
	struct qpg_client *cl = client(&lb, NULL, NULL);
	double full = now_s();
	assert_int_equal(one(cl), 0);
	/* Renewed every half second: resumed while within 2 s of the full
	 * handshake (seconds are whole on the server: keep clear of the edge). */
	while (now_s() < full + 1.0) {
		assert_int_equal(one(cl), 1);
		usleep(300 * 1000);
	}
	sleep_until(full + 3.5);
	assert_int_equal(one(cl), 0); /* a full handshake again... */
	assert_int_equal(one(cl), 1); /* ...which starts a new bound */
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

static void an_old_key_opens_nothing(void **state)
{
	/* The server counts whole seconds: start just past one, so that what
	 * follows falls in known seconds (K + n). */
	sleep_until((double)(long)now_s() + 1.05);
	double k = (double)(long)now_s();
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	lb.o.tls_ticket_period_s = 2; /* a key seals for 2 s, opens for 2 more */
	assert_int_equal(qpg_loopback_start(&lb), 0); /* the first key: born at K */
	struct qpg_client *a = client(&lb, NULL, NULL), *b = client(&lb, NULL, NULL);
	sleep_until(k + 1.3);
	assert_int_equal(one(a), 0); /* A's ticket, under the first key */
	sleep_until(k + 3.3);
	assert_int_equal(one(b), 0); /* a rotation: the first key is the previous, */
	sleep_until(k + 4.4);	     /* the second is 1 s old and not due, */
	/* ...and the first is two periods old: it opens nothing. */
	assert_int_equal(one(a), 0);
	qpg_client_destroy(a);
	qpg_client_destroy(b);
	qpg_loopback_fini(&lb);
}

static SSL_SESSION *handshake(SSL_CTX *sctx, SSL_CTX *cctx, SSL_SESSION *offer, bool *resumed)
{
	return memtls_handshake(sctx, cctx, offer, resumed, NULL);
}

static void a_handshake_on_a_replaced_context_gets_a_dead_ticket(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	char ca[128];
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	struct qpg__tls_files sf = {.cert = lb.o.cert, .key = lb.o.key}, cf = {.ca = ca};
	char err[256];
	struct qpg__tls_tickets *t;
	assert_int_equal(qpg__tls_tickets_new(&t, 3600, 86400), 0);
	SSL_CTX *old = qpg__tls_server_ctx(&sf, t, err, sizeof(err));
	SSL_CTX *cctx = qpg__tls_client_ctx(&cf, err, sizeof(err));
	assert_non_null(old);
	assert_non_null(cctx);
	SSL_CTX_set_session_cache_mode(cctx, SSL_SESS_CACHE_CLIENT);
	bool resumed;
	/* Before any reload, a ticket from OLD resumes on OLD. */
	SSL_SESSION *s1 = handshake(old, cctx, NULL, &resumed);
	assert_false(resumed);
	SSL_SESSION *s2 = handshake(old, cctx, s1, &resumed);
	assert_true(resumed);
	/* The reload: a new context, the keys forgotten, then the swap. A
	 * handshake that was running on OLD finishes after it. */
	SSL_CTX *next = qpg__tls_server_ctx(&sf, t, err, sizeof(err));
	assert_non_null(next);
	assert_int_equal(qpg__tls_tickets_forget_all(t, next), 0);
	SSL_SESSION *late = handshake(old, cctx, NULL, &resumed);
	assert_false(resumed);
	/* Its ticket opens nowhere: not on the new context, not on the old. */
	SSL_SESSION *s3 = handshake(next, cctx, late, &resumed);
	assert_false(resumed);
	SSL_SESSION *s4 = handshake(old, cctx, late, &resumed);
	assert_false(resumed);
	/* The new context's own tickets resume. */
	SSL_SESSION *s5 = handshake(next, cctx, s3, &resumed);
	assert_true(resumed);
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
	SSL_SESSION_free(late);
	SSL_SESSION_free(s3);
	SSL_SESSION_free(s4);
	SSL_SESSION_free(s5);
	SSL_CTX_free(old);
	SSL_CTX_free(next);
	SSL_CTX_free(cctx);
	qpg__tls_tickets_free(t);
	qpg_loopback_fini(&lb);
}

static void an_expired_client_certificate_does_not_resume(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	char ca[128], crt[128], key[128];
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	snprintf(crt, sizeof(crt), "%s/brief.crt", lb.dir);
	snprintf(key, sizeof(key), "%s/brief.key", lb.dir);
	lb.o.client_ca = ca;
	assert_int_equal(qpg_loopback_start(&lb), 0);
	assert_int_equal(certgen_client(lb.dir, "brief", 3, 1001), 0); /* good for 3 s */
	struct qpg_client *cl = client(&lb, crt, key);
	double made = now_s();
	assert_int_equal(one(cl), 0);
	assert_int_equal(one(cl), 1);
	sleep_until(made + 4.5);
	/* Expired: refused although its ticket is well within its periods. */
	assert_int_equal(one(cl), -1);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(a_handshake_on_a_replaced_context_gets_a_dead_ticket),
	      cmocka_unit_test(resumption_ends_at_the_cap),
	      cmocka_unit_test(an_old_key_opens_nothing),
	      cmocka_unit_test(an_expired_client_certificate_does_not_resume))

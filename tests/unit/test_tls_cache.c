/* SPDX-License-Identifier: BSD-2-Clause */
/* mTLS resumes from a bounded stateful cache (tls_cache.c, tls_tickets.c),
 * not from a stateless ticket that carries the client's certificate:
 * - the client's ticket is a session ID, and the server holds the session;
 * - a ticket resumes several connections, as a stateless one does (each
 *   resumed connection gets a new one);
 * - the cache holds at most its size, the oldest going first;
 * - the bounds of stateless tickets hold: none past --tls-resume-max after
 *   the full handshake, and a handshake that finishes on a context a reload
 *   replaced leaves nothing that resumes.
 * (An expired client certificate, and one revoked by a reloaded CRL: see
 * test_resume_bounds and test_crl, whose mTLS servers use the cache.)
 * TLS handshakes in memory, through a BIO pair. */
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "loopback.h"
#include "memtls.h"
#include "tls.h"
#include "tls_tickets.h"

struct pair {
	struct qpg_loopback lb; /* only its certificates */
	struct qpg__tls_tickets *t;
	SSL_CTX *sctx, *cctx;
	struct qpg__tls_files sf, cf;
	char ca[128], crt[128], key[128];
};

static void pair_init(struct pair *p, unsigned cache_max, unsigned resume_max_s)
{
	assert_int_equal(qpg_loopback_init(&p->lb), 0);
	snprintf(p->ca, sizeof(p->ca), "%s/ca.crt", p->lb.dir);
	snprintf(p->crt, sizeof(p->crt), "%s/client.crt", p->lb.dir);
	snprintf(p->key, sizeof(p->key), "%s/client.key", p->lb.dir);
	p->sf = (struct qpg__tls_files){.cert = p->lb.o.cert, .key = p->lb.o.key, .ca = p->ca};
	p->cf = (struct qpg__tls_files){.cert = p->crt, .key = p->key, .ca = p->ca};
	char err[256];
	assert_int_equal(qpg__tls_tickets_new(&p->t, 3600, resume_max_s), 0);
	assert_int_equal(qpg__tls_tickets_cache(p->t, cache_max), 0);
	p->sctx = qpg__tls_server_ctx(&p->sf, p->t, err, sizeof(err));
	p->cctx = qpg__tls_client_ctx(&p->cf, err, sizeof(err));
	assert_non_null(p->sctx);
	assert_non_null(p->cctx);
	/* As a qpgate client holds its tickets (qpg__tls_slot_resume): outside
	 * OpenSSL's cache, which marks a session it resumed not resumable. */
	SSL_CTX_set_session_cache_mode(p->cctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
}

static void pair_fini(struct pair *p)
{
	SSL_CTX_free(p->sctx);
	SSL_CTX_free(p->cctx);
	qpg__tls_tickets_free(p->t);
	qpg_loopback_fini(&p->lb);
}

/* One handshake; the server always holds the client's certificate. */
static SSL_SESSION *handshake(SSL_CTX *sctx, SSL_CTX *cctx, SSL_SESSION *offer, bool *resumed)
{
	bool peer = false;
	SSL_SESSION *got = memtls_handshake(sctx, cctx, offer, resumed, &peer);
	assert_true(peer); /* mTLS, resumed or not */
	return got;
}

static size_t ticket_len(SSL_SESSION *s)
{
	const unsigned char *tick;
	size_t len = 0;
	SSL_SESSION_get0_ticket(s, &tick, &len);
	return len;
}

static void mtls_resumes_from_the_cache(void **state)
{
	struct pair p;
	pair_init(&p, 16, 86400);
	bool resumed;
	SSL_SESSION *s1 = handshake(p.sctx, p.cctx, NULL, &resumed);
	assert_false(resumed);
	/* A session ID, not a sealed session with a certificate in it. */
	assert_int_equal(ticket_len(s1), 32);
	assert_int_equal(qpg__tls_tickets_cached(p.t), 1);
	SSL_SESSION *s = s1;
	for (int i = 0; i < 3; i++) { /* each resumption gets a session of its own */
		SSL_SESSION *next = handshake(p.sctx, p.cctx, s, &resumed);
		assert_true(resumed);
		assert_int_equal(ticket_len(next), 32);
		assert_int_equal(qpg__tls_tickets_cached(p.t), i + 2);
		SSL_SESSION_free(s);
		s = next;
	}
	SSL_SESSION_free(s);
	pair_fini(&p);
}

static void a_ticket_resumes_several_connections(void **state)
{
	/* As a stateless ticket does: a client resumes every connection it
	 * opens together from its newest ticket. */
	struct pair p;
	pair_init(&p, 16, 86400);
	bool resumed;
	SSL_SESSION *s1 = handshake(p.sctx, p.cctx, NULL, &resumed);
	/* The same ticket twice (each a copy: OpenSSL's client will not offer
	 * a session object it has resumed once). */
	SSL_SESSION *c1 = SSL_SESSION_dup(s1), *c2 = SSL_SESSION_dup(s1);
	SSL_SESSION *s2 = handshake(p.sctx, p.cctx, c1, &resumed);
	assert_true(resumed);
	SSL_SESSION *s3 = handshake(p.sctx, p.cctx, c2, &resumed);
	assert_true(resumed);
	assert_int_equal(qpg__tls_tickets_cached(p.t), 3); /* each got its own */
	SSL_SESSION_free(c1);
	SSL_SESSION_free(c2);
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
	SSL_SESSION_free(s3);
	pair_fini(&p);
}

static void the_cache_is_bounded(void **state)
{
	struct pair p;
	pair_init(&p, 3, 86400);
	bool resumed;
	SSL_SESSION *s[5];
	for (int i = 0; i < 5; i++) {
		s[i] = handshake(p.sctx, p.cctx, NULL, &resumed);
		assert_false(resumed);
	}
	assert_int_equal(qpg__tls_tickets_cached(p.t), 3);
	SSL_SESSION *a = handshake(p.sctx, p.cctx, s[0], &resumed); /* the oldest went */
	assert_false(resumed);
	SSL_SESSION *b = handshake(p.sctx, p.cctx, s[4], &resumed);
	assert_true(resumed);
	assert_int_equal(qpg__tls_tickets_cached(p.t), 3);
	for (int i = 0; i < 5; i++)
		SSL_SESSION_free(s[i]);
	SSL_SESSION_free(a);
	SSL_SESSION_free(b);
	pair_fini(&p);
}

static void no_resumption_past_the_cap(void **state)
{
	struct pair p;
	pair_init(&p, 16, 2);
	bool resumed;
	SSL_SESSION *s1 = handshake(p.sctx, p.cctx, NULL, &resumed);
	SSL_SESSION *s2 = handshake(p.sctx, p.cctx, s1, &resumed);
	assert_true(resumed); /* renewed: S2 carries S1's full handshake */
	sleep(4);	      /* whole seconds on the server: past 2 s with room */
	SSL_SESSION *s3 = handshake(p.sctx, p.cctx, s2, &resumed);
	assert_false(resumed);
	SSL_SESSION *s4 = handshake(p.sctx, p.cctx, s3, &resumed);
	assert_true(resumed); /* a new full handshake starts a new bound */
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
	SSL_SESSION_free(s3);
	SSL_SESSION_free(s4);
	pair_fini(&p);
}

static void a_handshake_on_a_replaced_context_leaves_nothing_to_resume(void **state)
{
	struct pair p;
	pair_init(&p, 16, 86400);
	char err[256];
	bool resumed;
	SSL_SESSION *s1 = handshake(p.sctx, p.cctx, NULL, &resumed);
	/* The reload: a new context, the old generation forgotten, then a
	 * handshake still running on the old context finishes. */
	SSL_CTX *next = qpg__tls_server_ctx(&p.sf, p.t, err, sizeof(err));
	assert_non_null(next);
	assert_int_equal(qpg__tls_tickets_forget_all(p.t, next), 0);
	assert_int_equal(qpg__tls_tickets_cached(p.t), 0);
	SSL_SESSION *late = handshake(p.sctx, p.cctx, NULL, &resumed);
	assert_false(resumed);
	/* Neither the session from before the reload nor the late one
	 * resumes, on either context. */
	SSL_SESSION *a = handshake(next, p.cctx, s1, &resumed);
	assert_false(resumed);
	SSL_SESSION *b = handshake(next, p.cctx, late, &resumed);
	assert_false(resumed);
	SSL_SESSION *late2 = handshake(p.sctx, p.cctx, NULL, &resumed);
	SSL_SESSION *c = handshake(p.sctx, p.cctx, late2, &resumed);
	assert_false(resumed);
	/* The new context's own sessions resume. */
	SSL_SESSION *d = handshake(next, p.cctx, b, &resumed);
	assert_true(resumed);
	SSL_SESSION *all[] = {s1, late, a, b, late2, c, d};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		SSL_SESSION_free(all[i]);
	SSL_CTX_free(next);
	pair_fini(&p);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(mtls_resumes_from_the_cache),
	      cmocka_unit_test(a_ticket_resumes_several_connections), cmocka_unit_test(the_cache_is_bounded),
	      cmocka_unit_test(no_resumption_past_the_cap),
	      cmocka_unit_test(a_handshake_on_a_replaced_context_leaves_nothing_to_resume))

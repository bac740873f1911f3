/* SPDX-License-Identifier: BSD-2-Clause */
/* A server's cache of verified client chains (mTLS, tls_vcache.c):
 * - a client chain verified once is found again, and the session still
 *   gets its verified chain (the mTLS session cache reads it);
 * - a revoked client is refused every time, and nothing of it is kept;
 * - once a CRL of the store is past its next update, a cached chain is
 *   verified again and refused, as without the cache;
 * - a server of default options keeps the chains of its clients, says so
 *   in its stats, and a reload starts an empty cache.
 * TLS handshakes in memory, through a BIO pair; the last case over real
 * connections (the tcp transport on loopback). */
#include <openssl/ssl.h>
#include <stdio.h>
#include <unistd.h>

#include "unit.h"

#include "certgen.h"
#include "loopback.h"
#include "memtls.h"
#include "tls.h"

static struct qpg_loopback lb;

/* A server of lb's certificates asking for a client certificate from lb's
 * CA, checked against the CRL at CRL, with its cache of client chains. */
static SSL_CTX *server_ctx(const char *crl)
{
	char crt[160], key[160], ca[160], err[256];
	snprintf(crt, sizeof(crt), "%s/server.crt", lb.dir);
	snprintf(key, sizeof(key), "%s/server.key", lb.dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	const char *crls[] = {crl};
	struct qpg__tls_files f = {.cert = crt, .key = key, .ca = ca, .crls = crls, .ncrls = 1};
	SSL_CTX *c = qpg__tls_server_ctx(&f, NULL, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(
	    qpg__tls_vcache_attach(c, QPG__TLS_VCACHE_TTL_S, QPG__TLS_VCACHE_SERVER_MAX), 0);
	return c;
}

/* A client of lb's CA presenting NAME.crt. */
static SSL_CTX *client_ctx(const char *name)
{
	char crt[160], key[160], ca[160], err[256];
	snprintf(crt, sizeof(crt), "%s/%s.crt", lb.dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", lb.dir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	struct qpg__tls_files f = {.cert = crt, .key = key, .ca = ca};
	SSL_CTX *c = qpg__tls_client_ctx(&f, err, sizeof(err));
	assert_non_null(c);
	return c;
}

static long handshake(SSL_CTX *sctx, SSL_CTX *cctx, int *chain)
{
	return memtls_verify(sctx, cctx, NULL, true, chain);
}

static void a_client_chain_verified_once_is_found_again(void **state)
{
	(void)state;
	char crl[160];
	snprintf(crl, sizeof(crl), "%s/none.crl", lb.dir);
	assert_int_equal(certgen_crl(lb.dir, NULL, 0, crl), 0);
	SSL_CTX *s = server_ctx(crl), *c = client_ctx("client");
	for (int i = 0; i < 3; i++) {
		int chain = 0;
		assert_int_equal(handshake(s, c, &chain), X509_V_OK);
		assert_int_equal(chain, 2); /* the leaf and the CA, hit or not */
	}
	memtls_vcache_counts(s, 2, 1, 1);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void a_revoked_client_is_refused_and_not_kept(void **state)
{
	(void)state;
	char crl[160];
	snprintf(crl, sizeof(crl), "%s/revoked.crl", lb.dir);
	const long serial[] = {5001};
	assert_int_equal(certgen_client(lb.dir, "revoked", 3600, 5001), 0);
	assert_int_equal(certgen_crl(lb.dir, serial, 1, crl), 0);
	SSL_CTX *s = server_ctx(crl), *r = client_ctx("revoked"), *c = client_ctx("client");
	for (int i = 0; i < 2; i++)
		assert_int_equal(handshake(s, r, NULL), X509_V_ERR_CERT_REVOKED);
	assert_int_equal(handshake(s, c, NULL), X509_V_OK);
	memtls_vcache_counts(s, 0, 3, 1);
	SSL_CTX_free(s);
	SSL_CTX_free(r);
	SSL_CTX_free(c);
}

static void a_stale_crl_ends_every_entry(void **state)
{
	(void)state;
	char crl[160];
	snprintf(crl, sizeof(crl), "%s/brief.crl", lb.dir);
	assert_int_equal(certgen_crl_until(lb.dir, NULL, 0, 2, crl), 0);
	SSL_CTX *s = server_ctx(crl), *c = client_ctx("client");
	assert_int_equal(handshake(s, c, NULL), X509_V_OK);
	assert_int_equal(handshake(s, c, NULL), X509_V_OK);
	memtls_vcache_counts(s, 1, 1, 1);
	sleep(3); /* the CRL is past its next update: no news of revocations */
	assert_int_equal(handshake(s, c, NULL), X509_V_ERR_CRL_HAS_EXPIRED);
	memtls_vcache_counts(s, 1, 2, 0);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

/* One connection of a new client presenting NAME (a worker process of its
 * own: no ticket, a full handshake). 0, or -1 if it never came up. */
static int worker(struct qpg_loopback *srv, const char *name)
{
	char crt[160], key[160], why[256] = "";
	snprintf(crt, sizeof(crt), "%s/%s.crt", srv->dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", srv->dir, name);
	struct qpg_client *cl = qpg_loopback_client(srv, crt, key);
	assert_non_null(cl);
	int rc = qpg_loopback_echo_once(cl, why, sizeof(why));
	assert_int_not_equal(rc, 1); /* never resumed: each a full handshake */
	qpg_client_destroy(cl);
	return rc;
}

static void a_server_keeps_its_clients_chains(void **state)
{
	(void)state;
	struct qpg_loopback srv;
	assert_int_equal(qpg_loopback_init(&srv), 0);
	char ca[160], err[256];
	snprintf(ca, sizeof(ca), "%s/ca.crt", srv.dir);
	srv.o.client_ca = ca; /* verify_cache_s: its default */
	assert_int_equal(qpg_loopback_start(&srv), 0);
	struct qpg_server_stats st;
	for (int i = 0; i < 3; i++)
		assert_int_equal(worker(&srv, "client"), 0);
	qpg_server_stats(srv.srv, &st);
	assert_int_equal(st.tls_chains_cached, 1);
	assert_int_equal(st.tls_chain_hits, 2);
	assert_int_equal(qpg_server_reload_tls(srv.srv, err, sizeof(err)), 0);
	qpg_server_stats(srv.srv, &st);
	assert_int_equal(st.tls_chains_cached, 0);
	assert_int_equal(worker(&srv, "client"), 0);
	qpg_server_stats(srv.srv, &st);
	assert_int_equal(st.tls_chains_cached, 1);
	assert_int_equal(st.tls_chain_hits, 0);
	qpg_loopback_fini(&srv);
}

static int setup(void **state)
{
	(void)state;
	return qpg_loopback_init(&lb) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	qpg_loopback_fini(&lb);
	return 0;
}

QPG_UNIT_MAIN(setup, teardown, cmocka_unit_test(a_client_chain_verified_once_is_found_again),
	      cmocka_unit_test(a_revoked_client_is_refused_and_not_kept),
	      cmocka_unit_test(a_stale_crl_ends_every_entry),
	      cmocka_unit_test(a_server_keeps_its_clients_chains))

/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's cache of verified server chains (tls_vcache.c):
 * - a chain verified once is found again, and the session still gets its
 *   verified chain;
 * - another host name, another chain, an untrusted chain and a chain past
 *   its validity are verified (and refused) as without the cache;
 * - a failure is never kept, and an entry lives its TTL;
 * - it holds at most QPG__TLS_VCACHE_MAX chains, the oldest replaced.
 * TLS handshakes in memory, through a BIO pair. */
#include <openssl/ssl.h>
#include <stdio.h>
#include <unistd.h>

#include "unit.h"

#include "certgen.h"
#include "loopback.h"
#include "memtls.h"
#include "tls.h"

static struct qpg_loopback lb, other; /* their certificates: two CAs */

static SSL_CTX *server_ctx(const char *dir, const char *name)
{
	char crt[160], key[160], err[256];
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	struct qpg__tls_files f = {.cert = crt, .key = key};
	SSL_CTX *c = qpg__tls_server_ctx(&f, NULL, err, sizeof(err));
	assert_non_null(c);
	return c;
}

static SSL_CTX *client_ctx_ttl(unsigned ttl_s)
{
	char ca[160], err[256];
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	struct qpg__tls_files f = {.ca = ca};
	SSL_CTX *c = qpg__tls_client_ctx(&f, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(qpg__tls_vcache_attach(c, ttl_s, QPG__TLS_VCACHE_MAX), 0);
	return c;
}

static SSL_CTX *client_ctx(void)
{
	return client_ctx_ttl(QPG__TLS_VCACHE_TTL_S); /* the clients' default */
}

static long handshake(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, int *chain)
{
	return memtls_verify(sctx, cctx, host, false, chain);
}

static void a_chain_verified_once_is_found_again(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(lb.dir, "server"), *c = client_ctx();
	for (int i = 0; i < 3; i++) {
		int chain = 0;
		assert_int_equal(handshake(s, c, "localhost", &chain), X509_V_OK);
		assert_int_equal(chain, 2); /* the leaf and the CA, hit or not */
	}
	memtls_vcache_counts(c, 2, 1, 1);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void another_name_is_checked_again(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(lb.dir, "server"), *c = client_ctx();
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s, c, "other.example", NULL), X509_V_ERR_HOSTNAME_MISMATCH);
	assert_int_equal(handshake(s, c, "LOCALHOST", NULL), X509_V_OK); /* its own entry */
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, 3, 2);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void a_failure_is_not_kept(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(lb.dir, "server"), *c = client_ctx();
	for (int i = 0; i < 2; i++)
		assert_int_equal(handshake(s, c, "other.example", NULL),
				 X509_V_ERR_HOSTNAME_MISMATCH);
	/* A server whose CA this client does not trust, with the right name. */
	SSL_CTX *u = server_ctx(other.dir, "server");
	for (int i = 0; i < 2; i++)
		assert_int_not_equal(handshake(u, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 0, 4, 0);
	SSL_CTX_free(u);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void another_chain_is_verified(void **state)
{
	(void)state;
	assert_int_equal(certgen_leaf(lb.dir, "second", "localhost", 3600, 2001), 0);
	SSL_CTX *s = server_ctx(lb.dir, "server"), *s2 = server_ctx(lb.dir, "second");
	SSL_CTX *c = client_ctx();
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s2, c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s2, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, 2, 2);
	SSL_CTX_free(s);
	SSL_CTX_free(s2);
	SSL_CTX_free(c);
}

static void a_chain_past_its_validity_is_refused(void **state)
{
	(void)state;
	assert_int_equal(certgen_leaf(lb.dir, "brief", "localhost", 2, 3001), 0);
	SSL_CTX *s = server_ctx(lb.dir, "brief"), *c = client_ctx();
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, 1, 1);
	sleep(3);
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_ERR_CERT_HAS_EXPIRED);
	memtls_vcache_counts(c, 1, 2, 0);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void an_entry_lives_its_ttl(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(lb.dir, "server"), *c = client_ctx_ttl(1);
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, 1, 1);
	sleep(2);
	assert_int_equal(handshake(s, c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, 2, 1); /* verified again, and kept again */
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void it_holds_at_most_its_size(void **state)
{
	(void)state;
	enum { N = QPG__TLS_VCACHE_MAX + 3 };
	SSL_CTX *s[N], *c = client_ctx();
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "many%d", i);
		assert_int_equal(certgen_leaf(lb.dir, name, "localhost", 3600, 4000 + i), 0);
		s[i] = server_ctx(lb.dir, name);
		assert_int_equal(handshake(s[i], c, "localhost", NULL), X509_V_OK);
	}
	memtls_vcache_counts(c, 0, N, QPG__TLS_VCACHE_MAX);
	/* The newest is still there; the oldest was replaced, and comes back
	 * in place of the next oldest. */
	assert_int_equal(handshake(s[N - 1], c, "localhost", NULL), X509_V_OK);
	assert_int_equal(handshake(s[0], c, "localhost", NULL), X509_V_OK);
	memtls_vcache_counts(c, 1, N + 1, QPG__TLS_VCACHE_MAX);
	for (int i = 0; i < N; i++)
		SSL_CTX_free(s[i]);
	SSL_CTX_free(c);
}

static int setup(void **state)
{
	(void)state;
	return qpg_loopback_init(&lb) || qpg_loopback_init(&other) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	qpg_loopback_fini(&lb);
	qpg_loopback_fini(&other);
	return 0;
}

QPG_UNIT_MAIN(setup, teardown, cmocka_unit_test(a_chain_verified_once_is_found_again),
	      cmocka_unit_test(another_name_is_checked_again),
	      cmocka_unit_test(a_failure_is_not_kept), cmocka_unit_test(another_chain_is_verified),
	      cmocka_unit_test(a_chain_past_its_validity_is_refused),
	      cmocka_unit_test(an_entry_lives_its_ttl), cmocka_unit_test(it_holds_at_most_its_size))

/* SPDX-License-Identifier: BSD-2-Clause */
#include "memtls.h"

#include "unit.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls.h"
#include "tls_tickets.h"

void memtls_pair(SSL_CTX *sctx, SSL_CTX *cctx, SSL **s, SSL **c)
{
	*s = SSL_new(sctx);
	*c = SSL_new(cctx);
	BIO *sb, *cb;
	assert_int_equal(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
	SSL_set_bio(*s, sb, sb);
	SSL_set_bio(*c, cb, cb);
	SSL_set_accept_state(*s);
	SSL_set_connect_state(*c);
}

SSL_SESSION *memtls_handshake(SSL_CTX *sctx, SSL_CTX *cctx, SSL_SESSION *offer, bool *resumed,
			      bool *peer)
{
	SSL *s, *c;
	memtls_pair(sctx, cctx, &s, &c);
	SSL_set_tlsext_host_name(c, "localhost");
	if (offer)
		assert_int_equal(SSL_set_session(c, offer), 1);
	int rc = 0, rs = 0;
	for (int i = 0; i < 50 && (rc != 1 || rs != 1); i++) {
		rc = rc == 1 ? 1 : SSL_do_handshake(c);
		rs = rs == 1 ? 1 : SSL_do_handshake(s);
	}
	assert_int_equal(rc, 1);
	assert_int_equal(rs, 1);
	if (peer)
		*peer = SSL_get0_peer_certificate(s) != NULL;
	/* As the bootstrap does for a HELLO that asks (QPG_WIRE_FLAG_TICKET):
	 * a ticket from a server that resumes, ahead of its answer. */
	if (qpg__tls_ticket_offer(s) == 1)
		assert_int_equal(SSL_do_handshake(s), 1);
	char buf[1];
	SSL_read(c, buf, 1); /* takes the NewSessionTicket (then wants more) */
	*resumed = SSL_session_reused(c);
	SSL_SESSION *got = SSL_get1_session(c);
	SSL_set_shutdown(c, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	SSL_set_shutdown(s, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	SSL_free(c);
	SSL_free(s);
	return got;
}

long memtls_verify(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, bool server_side, int *chain)
{
	SSL *s, *c;
	memtls_pair(sctx, cctx, &s, &c);
	if (host) {
		assert_int_equal(SSL_set1_host(c, host), 1);
		SSL_set_hostflags(c, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		SSL_set_tlsext_host_name(c, host);
	}
	int rc = 0, rs = 0;
	for (int i = 0; i < 50 && (rc != 1 || rs != 1); i++) {
		rc = rc == 1 ? 1 : SSL_do_handshake(c);
		if (rc != 1 && SSL_get_error(c, rc) != SSL_ERROR_WANT_READ)
			break;
		rs = rs == 1 ? 1 : SSL_do_handshake(s);
		if (rs != 1 && SSL_get_error(s, rs) != SSL_ERROR_WANT_READ)
			break;
	}
	SSL *checker = server_side ? s : c;
	long v = rc == 1 && rs == 1 ? X509_V_OK : SSL_get_verify_result(checker);
	if (v == X509_V_OK && (rc != 1 || rs != 1))
		v = -1;
	STACK_OF(X509) *vc = SSL_get0_verified_chain(checker);
	if (chain)
		*chain = vc ? sk_X509_num(vc) : 0;
	ERR_clear_error();
	SSL_free(c);
	SSL_free(s);
	return v;
}

void memtls_vcache_counts(SSL_CTX *ctx, uint64_t hits, uint64_t misses, unsigned entries)
{
	uint64_t h = 0, m = 0;
	unsigned n = 0;
	assert_int_equal(qpg__tls_vcache_counts(ctx, &h, &m, &n), 0);
	assert_int_equal(h, hits);
	assert_int_equal(m, misses);
	assert_int_equal(n, entries);
}

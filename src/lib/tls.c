/* SPDX-License-Identifier: BSD-2-Clause */
#include "tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void last_error(char *err, size_t len, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";
	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, len, "%s%s%s", what, e ? ": " : "", buf);
	ERR_clear_error();
}

static SSL_CTX *base_ctx(const SSL_METHOD *m, char *err, size_t err_len)
{
	SSL_CTX *ctx = SSL_CTX_new(m);
	if (!ctx) {
		last_error(err, err_len, "SSL_CTX_new");
		return NULL;
	}
	/* TLS 1.3 only, no 0-RTT (early data could be replayed). */
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_max_early_data(ctx, 0);
	SSL_CTX_set_recv_max_early_data(ctx, 0);
	/* Thousands of idle control channels: give buffers back between reads. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	/* Read what the socket has in one recv, not a record's header and its
	 * body in two: one syscall per message on the tcp transport. What is
	 * read ahead stays in SSL's buffer, where epoll cannot see it
	 * (qpg__tls_pending). */
	SSL_CTX_set_read_ahead(ctx, 1);
	/* No resumption unless asked for (tls_tickets.c on a server,
	 * qpg__tls_slot_resume on a client). In TLS 1.3, SSL_OP_NO_TICKET alone
	 * switches to *stateful* tickets kept in the server's session cache (up
	 * to 20,480 sessions): the churn soak saw the server's RSS creep with
	 * every connection. So never a server-side cache. */
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	return ctx;
}

static int load_pair(SSL_CTX *ctx, const struct qpg__tls_files *f, char *err, size_t err_len)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1) {
		last_error(err, err_len, "cannot load certificate");
		return -1;
	}
	/* Send the chain the file holds (the certificate, then its
	 * intermediates), as it is. Without this OpenSSL tries to build a
	 * chain from the verify store on every handshake (X509_verify_cert,
	 * 0.35% of a server's CPU in full handshakes on the host). */
	SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
	if (SSL_CTX_use_PrivateKey_file(ctx, f->key ? f->key : f->cert, SSL_FILETYPE_PEM) != 1) {
		last_error(err, err_len, "cannot load private key");
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		last_error(err, err_len, "private key does not match certificate");
		return -1;
	}
	return 0;
}

/* Every CRL in F's files into CTX's store, and the leaf's checked against
 * its issuer's: a client whose CA has no CRL here is refused, which is
 * what asking for revocation means. */
static int load_crls(SSL_CTX *ctx, const struct qpg__tls_files *f, char *err, size_t err_len)
{
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	X509_LOOKUP *lk = X509_STORE_add_lookup(st, X509_LOOKUP_file());
	for (unsigned i = 0; i < f->ncrls; i++) {
		if (!lk || X509_load_crl_file(lk, f->crls[i], X509_FILETYPE_PEM) <= 0) {
			char what[320];
			snprintf(what, sizeof(what), "cannot load CRL %s", f->crls[i]);
			last_error(err, err_len, what);
			return -1;
		}
	}
	X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK);
	return 0;
}

SSL_CTX *qpg__tls_server_ctx(const struct qpg__tls_files *f, struct qpg__tls_tickets *tickets,
			     char *err, size_t err_len)
{
	if (!f->cert) {
		snprintf(err, err_len, "the server needs --cert and --key (try 'make certs')");
		return NULL;
	}
	SSL_CTX *ctx = base_ctx(TLS_server_method(), err, err_len);
	if (!ctx)
		return NULL;
	if (load_pair(ctx, f, err, err_len))
		goto fail;
	if (f->ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca);
		if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1 || !names) {
			last_error(err, err_len, "cannot load client CA");
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		if (f->ncrls && load_crls(ctx, f, err, err_len))
			goto fail;
	} else if (f->ncrls) {
		snprintf(err, err_len, "--crl checks client certificates: give --client-ca too");
		goto fail;
	}
	if (tickets && qpg__tls_tickets_attach(ctx, tickets)) {
		snprintf(err, err_len, "cannot set up TLS session tickets");
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *qpg__tls_client_ctx(const struct qpg__tls_files *f, char *err, size_t err_len)
{
	SSL_CTX *ctx = base_ctx(TLS_client_method(), err, err_len);
	if (!ctx)
		return NULL;
	int ok = f->ca ? SSL_CTX_load_verify_locations(ctx, f->ca, NULL)
		       : SSL_CTX_set_default_verify_paths(ctx);
	if (ok != 1) {
		last_error(err, err_len, "cannot load CA");
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (f->cert && load_pair(ctx, f, err, err_len))
		goto fail;
	if (f->spki_pin && qpg__tls_pin_spki(ctx, f->spki_pin)) {
		snprintf(err, err_len, "cannot pin the server's public key");
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL *qpg__tls_session(SSL_CTX *ctx, int fd, int is_server, const char *servername)
{
	SSL *ssl = SSL_new(ctx);
	if (!ssl)
		return NULL;
	if (SSL_set_fd(ssl, fd) != 1)
		goto fail;
	if (is_server) {
		SSL_set_accept_state(ssl);
	} else {
		SSL_set_connect_state(ssl);
		if (servername) {
			/* SSL_set1_host makes the chain check include the name. */
			if (SSL_set1_host(ssl, servername) != 1)
				goto fail;
			SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			SSL_set_tlsext_host_name(ssl, servername);
		}
	}
	return ssl;
fail:
	SSL_free(ssl);
	return NULL;
}

int qpg__tls_verify_failed(SSL *ssl)
{
	return SSL_get_verify_result(ssl) != X509_V_OK;
}

static enum qpg__tls_io classify(SSL *ssl, int ret, char *why, size_t why_len)
{
	int e = SSL_get_error(ssl, ret);
	switch (e) {
	case SSL_ERROR_WANT_READ:
		return QPG_TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return QPG_TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		ERR_clear_error();
		return QPG_TLS_CLOSED;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			/* A reset is the peer closing too (with our input unread). */
			bool gone = !errno || ret >= 0 || errno == ECONNRESET || errno == EPIPE;
			snprintf(why, why_len, "%s",
				 errno && ret < 0 ? strerror(errno) : "connection closed by peer");
			return gone ? QPG_TLS_CLOSED : QPG_TLS_FAILED;
		}
		/* fall through */
	default: {
		long v = SSL_get_verify_result(ssl);
		if (v != X509_V_OK) {
			const char *what =
			    v == X509_V_ERR_HOSTNAME_MISMATCH ? "host name mismatch"
			    : v == X509_V_ERR_APPLICATION_VERIFICATION
				? "the certificate's public key is not the one the cluster names "
				  "(SPKI pin)"
				: "certificate verification failed";
			snprintf(why, why_len, "%s: %s", what, X509_verify_cert_error_string(v));
			ERR_clear_error();
		} else {
			unsigned long err = ERR_peek_last_error();
			bool forged =
			    ERR_GET_LIB(err) == ERR_LIB_SSL &&
			    ERR_GET_REASON(err) == SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC;
			last_error(why, why_len, "TLS error");
			if (forged)
				return QPG_TLS_FORGED;
		}
		return QPG_TLS_FAILED;
	}
	}
}

enum qpg__tls_io qpg__tls_handshake(SSL *ssl, char *why, size_t why_len)
{
	ERR_clear_error();
	errno = 0;
	int ret = SSL_do_handshake(ssl);
	if (ret == 1)
		return QPG_TLS_DONE;
	enum qpg__tls_io r = classify(ssl, ret, why, why_len);
	if (r == QPG_TLS_CLOSED)
		snprintf(why, why_len,
			 "peer closed the connection during the TLS handshake (a server does "
			 "this past its handshake deadline, or at a limit)");
	return r;
}

/* One read or write with a clean error queue, classified as the rest. */
static enum qpg__tls_io io(SSL *ssl, int ok_or_not, char *why, size_t why_len)
{
	return ok_or_not == 1 ? QPG_TLS_DONE : classify(ssl, 0, why, why_len);
}

/* SSL_get_error needs the thread's error queue empty before the call. It
 * almost always is already, and clearing an empty queue costs as much as a
 * full one (every slot is reset: 2,500 instructions of an echo's 20,000 on
 * the tcp transport, in 3 calls), so it is cleared only when it holds some. */
static void io_start(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
	errno = 0;
}

enum qpg__tls_io qpg__tls_read(SSL *ssl, void *buf, size_t len, size_t *n, char *why,
			       size_t why_len)
{
	io_start();
	return io(ssl, SSL_read_ex(ssl, buf, len, n), why, why_len);
}

enum qpg__tls_io qpg__tls_write(SSL *ssl, const void *buf, size_t len, size_t *n, char *why,
				size_t why_len)
{
	io_start();
	return io(ssl, SSL_write_ex(ssl, buf, len, n), why, why_len);
}

bool qpg__tls_peer_sent_nothing(const SSL *ssl)
{
	BIO *rb = SSL_get_rbio(ssl);
	return rb && BIO_number_read(rb) == 0;
}

bool qpg__tls_pending(const SSL *ssl)
{
	return SSL_has_pending(ssl) == 1; /* decrypted, or read ahead and not yet */
}

void qpg__tls_close_notify(SSL *ssl)
{
	SSL_shutdown(ssl);
}

void qpg__tls_release(SSL *ssl)
{
	/* Shut down as far as OpenSSL is concerned, without a close_notify on
	 * the wire: a session freed mid-connection is "bad", and its ticket
	 * (the client keeps it to resume with) would be marked not resumable. */
	SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	SSL_free(ssl);
}

void qpg__tls_free(SSL *ssl)
{
	SSL_free(ssl);
}

void qpg__tls_ctx_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

void qpg__tls_slot_init(struct qpg__tls_slot *s, SSL_CTX *ctx)
{
	pthread_mutex_init(&s->lock, NULL);
	s->ctx = ctx;
	s->ticket = NULL;
	s->resume = false;
}

SSL *qpg__tls_slot_session(struct qpg__tls_slot *s, int fd, int is_server, const char *servername)
{
	/* The lock covers the two pointers only, each referenced under it:
	 * SSL_new and the ticket's copy run outside it, so a process's loop
	 * threads opening connections do not wait on each other's. */
	pthread_mutex_lock(&s->lock);
	SSL_CTX *ctx = s->ctx;
	SSL_CTX_up_ref(ctx);
	SSL_SESSION *ticket = s->ticket;
	if (ticket)
		SSL_SESSION_up_ref(ticket);
	pthread_mutex_unlock(&s->lock);
	SSL *ssl = qpg__tls_session(ctx, fd, is_server, servername); /* SSL_new refs ctx */
	SSL_CTX_free(ctx);
	/* OpenSSL marks a TLS 1.3 session used once as not resumable: offer a
	 * copy, so that connections opened together can all resume from the
	 * newest ticket (the server's keys are stateless: it accepts a ticket
	 * more than once, and each resumption brings a fresh one). */
	SSL_SESSION *copy = ssl && ticket ? SSL_SESSION_dup(ticket) : NULL;
	SSL_SESSION_free(ticket);
	if (copy) {
		if (SSL_set_session(ssl, copy) != 1) {
			SSL_free(ssl);
			ssl = NULL;
		}
		SSL_SESSION_free(copy); /* SSL_set_session took its own reference */
	}
	return ssl;
}

void qpg__tls_slot_replace(struct qpg__tls_slot *s, SSL_CTX *ctx)
{
	pthread_mutex_lock(&s->lock);
	SSL_CTX *old = s->ctx;
	s->ctx = ctx;
	pthread_mutex_unlock(&s->lock);
	SSL_CTX_free(old);
}

static pthread_once_t ex_once = PTHREAD_ONCE_INIT;
static int ex_idx = -1;

static void ex_init(void)
{
	ex_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static int ctx_index(void)
{
	pthread_once(&ex_once, ex_init);
	return ex_idx;
}

/* A new ticket arrived (after the handshake, in TLS 1.3): it replaces the
 * one kept. Returning 1 keeps our reference to SESS. */
static int new_ticket(SSL *ssl, SSL_SESSION *sess)
{
	struct qpg__tls_slot *s = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index());
	if (!s || !SSL_SESSION_is_resumable(sess))
		return 0;
	pthread_mutex_lock(&s->lock);
	SSL_SESSION *old = s->ticket;
	s->ticket = sess;
	pthread_mutex_unlock(&s->lock);
	SSL_SESSION_free(old);
	return 1;
}

int qpg__tls_slot_resume(struct qpg__tls_slot *s)
{
	if (ctx_index() < 0 || SSL_CTX_set_ex_data(s->ctx, ctx_index(), s) != 1)
		return -EIO;
	/* No internal store: the slot keeps the one ticket it offers. */
	SSL_CTX_set_session_cache_mode(s->ctx,
				       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(s->ctx, new_ticket);
	s->resume = true;
	return 0;
}

bool qpg__tls_resumed(const SSL *ssl)
{
	return SSL_session_reused(ssl) == 1;
}

bool qpg__tls_slot_wants_ticket(struct qpg__tls_slot *s, const SSL *ssl)
{
	if (!s->resume)
		return false;
	if (!qpg__tls_resumed(ssl))
		return true;
	pthread_mutex_lock(&s->lock);
	bool stale = true;
	if (s->ticket) {
		uint64_t hint = SSL_SESSION_get_ticket_lifetime_hint(s->ticket);
		time_t age = time(NULL) - (time_t)SSL_SESSION_get_time(s->ticket);
		stale = hint == 0 || age < 0 || (uint64_t)age * 4 >= hint;
	}
	pthread_mutex_unlock(&s->lock);
	return stale;
}

void qpg__tls_slot_fini(struct qpg__tls_slot *s)
{
	SSL_SESSION_free(s->ticket);
	s->ticket = NULL;
	SSL_CTX_free(s->ctx);
	s->ctx = NULL;
	pthread_mutex_destroy(&s->lock);
}

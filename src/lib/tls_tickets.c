/* SPDX-License-Identifier: BSD-2-Clause */
/* TLS 1.3 session resumption: stateless tickets under rotating keys.
 *
 * The server keeps no per-session state. A ticket is the session sealed
 * (AES-256-CBC + HMAC-SHA256, OpenSSL's ticket format) under a key that
 * lives in memory only: drawn from the CSPRNG, used to seal for one period,
 * accepted for one more, then forgotten. Resumption is psk_dhe_ke only
 * (OpenSSL's default; SSL_OP_ALLOW_NO_DHE_KEX stays off), so every
 * resumed connection still runs a fresh X25519 exchange: forward secrecy
 * holds, and the exporter (auth.c) still gives each connection fresh keys.
 * No 0-RTT (tls.c). A reload of the certificate files forgets every key,
 * so no session verified under the old files outlives them.
 *
 * Resumption stays bounded by the full handshake it came from:
 * - a ticket carries the time of that handshake (its app data), and is not
 *   used past resume_max_s of it, however often it was renewed;
 * - a key opens nothing once it is two periods old (sealing for one,
 *   accepted for one more), however quiet the server was;
 * - a resumed client certificate (mTLS) is verified again against the
 *   context's current store: its validity period, its CA, the CRLs;
 * - every context carries the generation it was made in: one replaced by
 *   a reload (its handshakes were verified under the old files) has its
 *   tickets sealed under a key nobody keeps, so they never open.
 *
 * mTLS resumes from a bounded stateful cache instead (tls_cache.c), under
 * the same bounds: a stateless ticket carries the client's certificate,
 * and OpenSSL 3.0 decodes it again on every resumption, which made an mTLS
 * resumption cost the server 2.5 times a plain one. From the cache the
 * session comes back decoded. What the full handshake verified is not
 * verified again: it was verified under the files of the cache's own
 * generation (a reload empties the cache), and what can change without a
 * reload is only the time, so every session keeps the window in which the
 * certificates its full handshake verified, and the CRLs it was checked
 * against, are all valid, and resumes only inside it. */
#include "tls_tickets.h"
#include "tls_cache.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ticket_key {
	uint8_t name[16];
	uint8_t aes[32];
	uint8_t hmac[32];
	time_t born; /* 0: empty */
};

struct qpg__tls_tickets {
	pthread_mutex_t lock;
	unsigned period_s;
	unsigned resume_max_s; /* since the full handshake (0: two periods only) */
	unsigned gen;	       /* bumped by every qpg__tls_tickets_forget_all */
	struct ticket_key cur, prev;
	struct qpg__tls_cache *cache; /* mTLS sessions (NULL: mTLS uses tickets too) */
};

/* What a context knows of the tickets: whose, and its generation. */
struct ctx_tickets {
	struct qpg__tls_tickets *t;
	unsigned gen;
};

/* The app data a ticket carries: a version byte, then the time of the full
 * handshake (seconds since the epoch, big-endian). */
#define APPDATA_V1  1
#define APPDATA_LEN 9

static int ctx_idx = -1, ssl_idx = -1, window_idx = -1;
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;

static void ctx_data_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
			  void *argp)
{
	free(ptr);
}

static void make_indexes(void)
{
	ctx_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, ctx_data_free);
	/* A connection's: the full handshake's time carried by the ticket it
	 * resumed from, for the ticket it is given next (0: none). */
	ssl_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	/* A connection resumed from the cache: the validity window its
	 * session carried, for the session it is given next. */
	window_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, ctx_data_free);
}

static struct ctx_tickets *of_ssl(SSL *ssl)
{
	return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_idx);
}

static int key_fresh(struct ticket_key *k, time_t now)
{
	if (RAND_bytes(k->name, sizeof(k->name)) != 1 || RAND_bytes(k->aes, sizeof(k->aes)) != 1 ||
	    RAND_bytes(k->hmac, sizeof(k->hmac)) != 1)
		return -1;
	k->born = now;
	return 0;
}

static void key_forget(struct ticket_key *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

int qpg__tls_tickets_new(struct qpg__tls_tickets **out, unsigned period_s, unsigned resume_max_s)
{
	pthread_once(&idx_once, make_indexes);
	if (ctx_idx < 0 || ssl_idx < 0 || window_idx < 0)
		return -ENOMEM;
	struct qpg__tls_tickets *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->period_s = period_s;
	t->resume_max_s = resume_max_s;
	if (key_fresh(&t->cur, time(NULL))) {
		qpg__tls_tickets_free(t);
		return -EIO;
	}
	*out = t;
	return 0;
}

void qpg__tls_tickets_free(struct qpg__tls_tickets *t)
{
	if (!t)
		return;
	key_forget(&t->cur);
	key_forget(&t->prev);
	qpg__tls_cache_free(t->cache);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int qpg__tls_tickets_forget_all(struct qpg__tls_tickets *t, SSL_CTX *next)
{
	struct ctx_tickets *ct = next ? SSL_CTX_get_ex_data(next, ctx_idx) : NULL;
	pthread_mutex_lock(&t->lock);
	key_forget(&t->prev);
	int rc = key_fresh(&t->cur, time(NULL));
	t->gen++; /* every context made before is stale from now on */
	if (ct)
		ct->gen = t->gen;
	pthread_mutex_unlock(&t->lock);
	if (t->cache)
		qpg__tls_cache_clear(t->cache); /* what a late handshake adds has the old gen */
	return rc ? -EIO : 0;
}

/* Under the lock: the current key has served its period, so it moves to
 * "previous" (accepted, never used to seal) and a fresh one takes over. */
static int rotate_if_due(struct qpg__tls_tickets *t, time_t now)
{
	if (now - t->cur.born < (time_t)t->period_s)
		return 0;
	t->prev = t->cur;
	if (now - t->prev.born >= 2 * (time_t)t->period_s)
		key_forget(&t->prev); /* idle for two periods: nothing it sealed is valid */
	return key_fresh(&t->cur, now);
}

static int key_init(const struct ticket_key *k, uint8_t *iv, EVP_CIPHER_CTX *cctx,
		    EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, sizeof(k->hmac)),
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
	    OSSL_PARAM_construct_end()};
	if (EVP_MAC_CTX_set_params(hctx, params) != 1)
		return -1;
	int ok = enc ? EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv)
		     : EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv);
	return ok == 1 ? 0 : -1;
}

/* OpenSSL's ticket key callback: 1 sealed, 2 opened and please issue a
 * fresh ticket, 0 unknown key (a full handshake follows), -1 error. Opening
 * always asks for a fresh ticket: in TLS 1.3 OpenSSL sends none on a
 * resumed connection otherwise, and the client's next connection would be
 * a full handshake. */
static int ticket_cb(SSL *ssl, unsigned char key_name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
		     EVP_MAC_CTX *hctx, int enc)
{
	struct ctx_tickets *ct = of_ssl(ssl);
	struct qpg__tls_tickets *t = ct->t;
	int ret = -1;
	pthread_mutex_lock(&t->lock);
	time_t now = time(NULL);
	if (rotate_if_due(t, now))
		goto out;
	if (enc) {
		if (RAND_bytes(iv, EVP_CIPHER_iv_length(EVP_aes_256_cbc())) != 1)
			goto out;
		if (ct->gen != t->gen) {
			/* A context a reload replaced: seal under a key nobody
			 * keeps (OpenSSL 3.0 cannot skip a TLS 1.3 ticket). */
			struct ticket_key gone;
			ret = key_fresh(&gone, now) || key_init(&gone, iv, cctx, hctx, 1) ? -1 : 1;
			memcpy(key_name, gone.name, 16);
			key_forget(&gone);
			goto out;
		}
		memcpy(key_name, t->cur.name, 16);
		ret = key_init(&t->cur, iv, cctx, hctx, 1) ? -1 : 1;
	} else {
		const struct ticket_key *k = NULL;
		if (t->cur.born && memcmp(key_name, t->cur.name, 16) == 0)
			k = &t->cur;
		else if (t->prev.born && memcmp(key_name, t->prev.name, 16) == 0)
			k = &t->prev;
		/* Two periods from its birth at most, rotated lazily or not. */
		if (k && now - k->born >= 2 * (time_t)t->period_s)
			k = NULL;
		if (!k) {
			ret = 0;
			goto out;
		}
		ret = key_init(k, iv, cctx, hctx, 0) ? -1 : 2;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* The carried client certificate (mTLS) verified again now, against the
 * context's store as it is: validity period, CA, CRLs. Its intermediates
 * are not in the ticket: one that needs them gets a full handshake. */
static bool peer_still_valid(SSL *ssl, SSL_SESSION *ss)
{
	X509 *peer = SSL_SESSION_get0_peer(ss);
	if (!peer)
		return !(SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER); /* none asked for */
	X509_STORE_CTX *v = X509_STORE_CTX_new();
	bool ok = v && X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(SSL_get_SSL_CTX(ssl)), peer,
					   NULL) == 1 &&
		  X509_STORE_CTX_set_default(v, "ssl_client") == 1 && X509_verify_cert(v) == 1;
	X509_STORE_CTX_free(v);
	return ok;
}

/* The full handshake's time a session carries (its app data): 0, or -1
 * when it carries none of ours. */
static int full_time_of(SSL_SESSION *ss, uint64_t *full)
{
	const unsigned char *d;
	size_t len;
	if (SSL_SESSION_get0_ticket_appdata(ss, (void **)&d, &len) != 1 || len != APPDATA_LEN ||
	    d[0] != APPDATA_V1)
		return -1;
	*full = 0;
	for (int i = 1; i < APPDATA_LEN; i++)
		*full = *full << 8 | d[i];
	return 0;
}

/* Within --tls-resume-max of the full handshake FULL, at NOW. */
static bool within_max(const struct qpg__tls_tickets *t, uint64_t full, uint64_t now)
{
	return !t->resume_max_s || (now >= full && now - full <= t->resume_max_s);
}

/* A ticket opened (or not): resume only within the bounds above. */
static SSL_TICKET_RETURN ticket_dec_cb(SSL *ssl, SSL_SESSION *ss, const unsigned char *name,
				       size_t name_len, SSL_TICKET_STATUS status, void *arg)
{
	if (status == SSL_TICKET_FATAL_ERR_MALLOC || status == SSL_TICKET_FATAL_ERR_OTHER)
		return SSL_TICKET_RETURN_ABORT;
	if (status != SSL_TICKET_SUCCESS && status != SSL_TICKET_SUCCESS_RENEW)
		return SSL_TICKET_RETURN_IGNORE_RENEW; /* none, or not ours: a full handshake */
	struct qpg__tls_tickets *t = of_ssl(ssl)->t;
	uint64_t full;
	if (full_time_of(ss, &full) || !within_max(t, full, (uint64_t)time(NULL)))
		return SSL_TICKET_RETURN_IGNORE_RENEW;
	if (!peer_still_valid(ssl, ss))
		return SSL_TICKET_RETURN_IGNORE_RENEW;
	SSL_set_ex_data(ssl, ssl_idx, (void *)(uintptr_t)full);
	return SSL_TICKET_RETURN_USE_RENEW;
}

/* A ticket about to be sealed: it carries the full handshake's time, this
 * connection's own or the one its ticket carried. */
static int ticket_gen_cb(SSL *ssl, void *arg)
{
	uint64_t full = (uint64_t)(uintptr_t)SSL_get_ex_data(ssl, ssl_idx);
	if (!full)
		full = (uint64_t)time(NULL);
	unsigned char d[APPDATA_LEN] = {APPDATA_V1};
	for (int i = APPDATA_LEN - 1; i >= 1; i--, full >>= 8)
		d[i] = (unsigned char)full;
	return SSL_SESSION_set1_ticket_appdata(SSL_get0_session(ssl), d, sizeof(d));
}

/* ---- mTLS: the stateful cache ---------------------------------------- */

#define TIME_END ((time_t)(sizeof(time_t) == 8 ? INT64_MAX : INT32_MAX))

/* T as seconds since the epoch (0 when unreadable). */
static time_t epoch_of(const ASN1_TIME *t)
{
	int days, secs;
	if (!t || ASN1_TIME_diff(&days, &secs, NULL, t) != 1)
		return 0;
	return time(NULL) + (time_t)days * 86400 + secs;
}

static void narrow(struct qpg__tls_cached *e, const ASN1_TIME *from, const ASN1_TIME *until)
{
	time_t f = epoch_of(from), u = epoch_of(until);
	if (f > e->valid_from)
		e->valid_from = f;
	if (until && u < e->valid_until)
		e->valid_until = u;
}

/* The window of a full handshake: every certificate of the chain it
 * verified, and every CRL of the store when CRLs are checked (one past its
 * next update fails a verification). No chain: an empty window. */
static void window_of_handshake(SSL *ssl, struct qpg__tls_cached *e)
{
	STACK_OF(X509) *chain = SSL_get0_verified_chain(ssl);
	e->valid_from = 0;
	e->valid_until = chain && sk_X509_num(chain) > 0 ? TIME_END : 0;
	for (int i = 0; chain && i < sk_X509_num(chain); i++) {
		X509 *x = sk_X509_value(chain, i);
		narrow(e, X509_get0_notBefore(x), X509_get0_notAfter(x));
	}
	X509_STORE *st = SSL_CTX_get_cert_store(SSL_get_SSL_CTX(ssl));
	if (!(X509_VERIFY_PARAM_get_flags(X509_STORE_get0_param(st)) & X509_V_FLAG_CRL_CHECK))
		return;
	X509_STORE_lock(st);
	STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(st);
	for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
		X509_CRL *crl = X509_OBJECT_get0_X509_CRL(sk_X509_OBJECT_value(objs, i));
		if (crl)
			narrow(e, X509_CRL_get0_lastUpdate(crl), X509_CRL_get0_nextUpdate(crl));
	}
	X509_STORE_unlock(st);
}

/* A session OpenSSL is about to send a ticket for (its ID is the ticket):
 * kept, with its generation and window. Returns 1: the reference is ours. */
static int cache_new_cb(SSL *ssl, SSL_SESSION *sess)
{
	struct ctx_tickets *ct = of_ssl(ssl);
	struct qpg__tls_cached e = {.sess = sess, .born = time(NULL)};
	pthread_mutex_lock(&ct->t->lock);
	e.gen = ct->gen; /* a replaced context's is old: it never resumes */
	pthread_mutex_unlock(&ct->t->lock);
	/* Resumed: no chain verified now, the window goes on. (A session
	 * looked up but then not resumed leaves its window behind: a full
	 * handshake has a window of its own.) */
	const struct qpg__tls_cached *carried =
	    SSL_session_reused(ssl) ? SSL_get_ex_data(ssl, window_idx) : NULL;
	if (carried) {
		e.valid_from = carried->valid_from;
		e.valid_until = carried->valid_until;
	} else {
		window_of_handshake(ssl, &e);
	}
	(void)qpg__tls_cache_put(ct->t->cache, &e); /* releases SESS when it fails */
	return 1;
}

/* A client's ticket (a session ID): its session, if it may still be
 * resumed; NULL for a full handshake (and one that may not is forgotten:
 * its bounds only close). The resumed connection gets a ticket of its
 * own, and the client may offer this one again, on other connections. */
static SSL_SESSION *cache_get_cb(SSL *ssl, const unsigned char *id, int len, int *copy)
{
	struct ctx_tickets *ct = of_ssl(ssl);
	struct qpg__tls_tickets *t = ct->t;
	struct qpg__tls_cached e;
	*copy = 0;
	if (len <= 0 || qpg__tls_cache_get(t->cache, id, (unsigned)len, &e))
		return NULL;
	time_t now = time(NULL);
	uint64_t full = 0;
	pthread_mutex_lock(&t->lock);
	bool ok = e.gen == t->gen && ct->gen == t->gen &&
		  now - e.born < 2 * (time_t)t->period_s && now >= e.born;
	pthread_mutex_unlock(&t->lock);
	ok = ok && full_time_of(e.sess, &full) == 0 && within_max(t, full, (uint64_t)now) &&
	     now >= e.valid_from && now < e.valid_until && SSL_SESSION_get0_peer(e.sess);
	/* A ClientHello may offer several tickets: a lookup before this one
	 * may have left its window. */
	free(SSL_get_ex_data(ssl, window_idx));
	SSL_set_ex_data(ssl, window_idx, NULL);
	struct qpg__tls_cached *carry = ok ? malloc(sizeof(*carry)) : NULL;
	if (!carry || SSL_set_ex_data(ssl, window_idx, carry) != 1) {
		if (!ok)
			qpg__tls_cache_remove(t->cache, id, (unsigned)len);
		free(carry);
		SSL_SESSION_free(e.sess);
		return NULL;
	}
	*carry = e;
	carry->sess = NULL;
	SSL_set_ex_data(ssl, ssl_idx, (void *)(uintptr_t)full);
	return e.sess;
}

int qpg__tls_tickets_cache(struct qpg__tls_tickets *t, unsigned max)
{
	if (max == 0)
		return 0;
	t->cache = qpg__tls_cache_new(max);
	return t->cache ? 0 : -ENOMEM;
}

unsigned qpg__tls_tickets_cached(struct qpg__tls_tickets *t)
{
	return t->cache ? qpg__tls_cache_len(t->cache) : 0;
}

/* An mTLS context resumes from the cache: stateful TLS 1.3 tickets (in
 * OpenSSL, SSL_OP_NO_TICKET), none of OpenSSL's own cache. */
static int attach_cache(SSL_CTX *ctx)
{
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
	SSL_CTX_sess_set_new_cb(ctx, cache_new_cb);
	SSL_CTX_sess_set_get_cb(ctx, cache_get_cb);
	return 0;
}

int qpg__tls_tickets_attach(SSL_CTX *ctx, struct qpg__tls_tickets *t)
{
	static const unsigned char sid_ctx[] = "qpgate";
	struct ctx_tickets *ct = calloc(1, sizeof(*ct));
	if (!ct)
		return -ENOMEM;
	ct->t = t;
	pthread_mutex_lock(&t->lock);
	ct->gen = t->gen;
	pthread_mutex_unlock(&t->lock);
	if (SSL_CTX_set_ex_data(ctx, ctx_idx, ct) != 1) {
		free(ct);
		return -EIO;
	}
	/* No ticket when the handshake ends: one when the client's HELLO asks
	 * (qpg__tls_ticket_offer), sent ahead of the answer. A session is good
	 * for at most the two periods its key is accepted. */
	if (SSL_CTX_set_num_tickets(ctx, 0) != 1 ||
	    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb) != 1 ||
	    SSL_CTX_set_session_ticket_cb(ctx, ticket_gen_cb, ticket_dec_cb, NULL) != 1 ||
	    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1) != 1)
		return -EIO; /* CT goes with the context */
	SSL_CTX_set_timeout(ctx, 2 * (long)t->period_s);
	SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
	if (t->cache && (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER))
		return attach_cache(ctx);
	return 0;
}

int qpg__tls_ticket_offer(SSL *ssl)
{
	pthread_once(&idx_once, make_indexes);
	if (!of_ssl(ssl))
		return 0; /* this server does not resume */
	return SSL_new_session_ticket(ssl) == 1 ? 1 : -EIO;
}

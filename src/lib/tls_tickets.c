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
 * so no session verified under the old files outlives them. */
#include "tls_tickets.h"

#include <errno.h>
#include <openssl/core_names.h>
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
	struct ticket_key cur, prev;
};

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

int qpg__tls_tickets_new(struct qpg__tls_tickets **out, unsigned period_s)
{
	struct qpg__tls_tickets *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->period_s = period_s;
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
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int qpg__tls_tickets_forget_all(struct qpg__tls_tickets *t)
{
	pthread_mutex_lock(&t->lock);
	key_forget(&t->prev);
	int rc = key_fresh(&t->cur, time(NULL));
	pthread_mutex_unlock(&t->lock);
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
	struct qpg__tls_tickets *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	int ret = -1;
	pthread_mutex_lock(&t->lock);
	time_t now = time(NULL);
	if (rotate_if_due(t, now))
		goto out;
	if (enc) {
		if (RAND_bytes(iv, EVP_CIPHER_iv_length(EVP_aes_256_cbc())) != 1)
			goto out;
		memcpy(key_name, t->cur.name, 16);
		ret = key_init(&t->cur, iv, cctx, hctx, 1) ? -1 : 1;
	} else {
		const struct ticket_key *k = NULL;
		if (t->cur.born && memcmp(key_name, t->cur.name, 16) == 0)
			k = &t->cur;
		else if (t->prev.born && memcmp(key_name, t->prev.name, 16) == 0)
			k = &t->prev;
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

int qpg__tls_tickets_attach(SSL_CTX *ctx, struct qpg__tls_tickets *t)
{
	static const unsigned char sid_ctx[] = "qpgate";
	/* One ticket per connection; a session is good for at most the two
	 * periods its key is accepted. */
	/* The context's app data (a server context has no other). */
	if (SSL_CTX_set_app_data(ctx, t) != 1 || SSL_CTX_set_num_tickets(ctx, 1) != 1 ||
	    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb) != 1 ||
	    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1) != 1)
		return -EIO;
	SSL_CTX_set_timeout(ctx, 2 * (long)t->period_s);
	SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
	return 0;
}

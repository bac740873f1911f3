/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's pin of the server's public key: the SHA-256 of its
 * certificate's DER SubjectPublicKeyInfo, as a cluster's member entry
 * names it. Checked on top of the chain and the host name, never instead:
 * the callback only ever turns a pass into a failure. */
#include "tls.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int idx = -1;

static void free_pin(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int i, long argl, void *argp)
{
	(void)parent, (void)ad, (void)i, (void)argl, (void)argp;
	free(ptr);
}

static void init(void)
{
	idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_pin);
}

static int verify(int ok, X509_STORE_CTX *x)
{
	if (!ok || X509_STORE_CTX_get_error_depth(x) != 0)
		return ok;
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	const uint8_t *pin = ssl ? SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), idx) : NULL;
	if (!pin)
		return ok;
	unsigned char *der = NULL, md[EVP_MAX_MD_SIZE];
	unsigned int mdl = 0;
	X509 *cert = X509_STORE_CTX_get_current_cert(x);
	int n = cert ? i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der) : -1;
	bool match = n > 0 && EVP_Digest(der, (size_t)n, md, &mdl, EVP_sha256(), NULL) == 1 &&
		     mdl == 32 && memcmp(md, pin, 32) == 0;
	OPENSSL_free(der);
	if (match)
		return 1;
	X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
	return 0;
}

int qpg__tls_pin_spki(SSL_CTX *ctx, const uint8_t sha256[32])
{
	pthread_once(&once, init);
	uint8_t *pin = malloc(32);
	if (idx < 0 || !pin) {
		free(pin);
		return -1;
	}
	memcpy(pin, sha256, 32);
	if (SSL_CTX_set_ex_data(ctx, idx, pin) != 1) {
		free(pin);
		return -1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify);
	return 0;
}

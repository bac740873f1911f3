/* SPDX-License-Identifier: BSD-2-Clause */
/* A cache of the peer certificate chains a TLS context has verified, so
 * that a full handshake with a peer verified moments ago does not build and
 * check the same chain again (as Chromium's CachingCertVerifier does): a
 * client's of server chains, a server's of client chains (mTLS: a fleet of
 * worker processes that share one certificate, each process a full
 * handshake).
 *
 * What it skips is X509_verify_cert: building the chain to a trusted CA,
 * the CA's signature over each certificate, their purposes, the host name
 * and the CRL lookup. What it never skips is the handshake's own proof:
 * OpenSSL checks the peer's CertificateVerify (a signature over this
 * handshake) with the presented leaf's key every time, so a peer that
 * presents a cached chain without its private key still fails.
 *
 * An entry is found only by the SHA-256 of everything the result depends
 * on: the expected host names and IP address and their check flags, the
 * verification flags and depth, and every certificate the peer presented,
 * in order. The trust store, its CRLs, the pin and the purpose belong to
 * the context, which is never changed (a server's reload makes a new one),
 * and each context has its own cache. Only a success is kept. A hit checks
 * again that every certificate of the verified chain is still inside its
 * validity period and, where CRLs are checked, that every CRL of the store
 * is current (one past its next update fails a verification), and an entry
 * lives at most the cache's TTL (qpg_client_opts.verify_cache_s,
 * qpg_server_opts.verify_cache_s). The cache holds at most the entries
 * it was made with (a client's QPG__TLS_VCACHE_MAX, a server's
 * QPG__TLS_VCACHE_SERVER_MAX), the oldest replaced. */
#include "tls.h"

#include "common.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint8_t key[32];
	uint64_t born_ns;	/* CLOCK_MONOTONIC; 0: empty */
	STACK_OF(X509) * chain; /* the verified chain, leaf first */
};

struct vcache {
	pthread_mutex_t lock;
	uint64_t ttl_ns; /* an entry's life */
	unsigned next;	 /* the slot to fill next (the oldest) */
	unsigned max;	 /* entries */
	uint64_t hits, misses;
	struct entry e[];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int idx = -1;

static void chain_free(STACK_OF(X509) * chain)
{
	sk_X509_pop_free(chain, X509_free);
}

static void free_cache(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int i, long argl, void *argp)
{
	(void)parent, (void)ad, (void)i, (void)argl, (void)argp;
	struct vcache *vc = ptr;
	if (!vc)
		return;
	for (unsigned k = 0; k < vc->max; k++)
		chain_free(vc->e[k].chain);
	pthread_mutex_destroy(&vc->lock);
	free(vc);
}

static void init(void)
{
	idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_cache);
}

static int put_str(EVP_MD_CTX *md, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) + 1 : 0; /* NULL and "" differ */
	return EVP_DigestUpdate(md, &n, sizeof(n)) && (!s || EVP_DigestUpdate(md, s, n));
}

/* KEY: the SHA-256 of what X509_verify_cert's answer depends on, beyond the
 * context. 0, or -1 when a part could not be read (then nothing is cached). */
static int chain_key(X509_STORE_CTX *x, uint8_t key[32])
{
	X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(x);
	X509 *leaf = X509_STORE_CTX_get0_cert(x);
	STACK_OF(X509) *sent = X509_STORE_CTX_get0_untrusted(x);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *ip = X509_VERIFY_PARAM_get1_ip_asc(p);
	unsigned long flags = X509_VERIFY_PARAM_get_flags(p);
	unsigned hostflags = X509_VERIFY_PARAM_get_hostflags(p);
	int depth = X509_VERIFY_PARAM_get_depth(p),
	    ok = md && leaf && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	ok = ok && EVP_DigestUpdate(md, &flags, sizeof(flags)) &&
	     EVP_DigestUpdate(md, &hostflags, sizeof(hostflags)) &&
	     EVP_DigestUpdate(md, &depth, sizeof(depth)) && put_str(md, ip);
	/* Each list counted first, so no two inputs hash the same bytes. */
	int hosts = 0, certs = 1 + (sent ? sk_X509_num(sent) : 0);
	while (X509_VERIFY_PARAM_get0_host(p, hosts) != NULL)
		hosts++;
	ok = ok && EVP_DigestUpdate(md, &hosts, sizeof(hosts));
	for (int i = 0; ok && i < hosts; i++)
		ok = put_str(md, X509_VERIFY_PARAM_get0_host(p, i));
	ok = ok && put_str(md, X509_VERIFY_PARAM_get0_email(p)) &&
	     EVP_DigestUpdate(md, &certs, sizeof(certs));
	/* The leaf, then what the server sent (its chain, the leaf again first). */
	for (int i = -1; ok && i < certs - 1; i++) {
		uint8_t d[EVP_MAX_MD_SIZE];
		unsigned dl = 0;
		ok = X509_digest(i < 0 ? leaf : sk_X509_value(sent, i), EVP_sha256(), d, &dl) &&
		     EVP_DigestUpdate(md, d, dl);
	}
	unsigned kl = 0;
	ok = ok && EVP_DigestFinal_ex(md, key, &kl) && kl == 32;
	OPENSSL_free(ip);
	EVP_MD_CTX_free(md);
	return ok ? 0 : -1;
}

/* True when every certificate of CHAIN is inside its validity period now. */
static bool still_valid(STACK_OF(X509) * chain)
{
	for (int i = 0; i < sk_X509_num(chain); i++) {
		X509 *c = sk_X509_value(chain, i);
		if (X509_cmp_time(X509_get0_notBefore(c), NULL) >= 0 ||
		    X509_cmp_time(X509_get0_notAfter(c), NULL) <= 0)
			return false;
	}
	return true;
}

/* True unless the store checks CRLs and one of them is not current now
 * (before its last update, or past its next one), which a verification
 * would refuse. */
static bool crls_current(X509_STORE *st)
{
	if (!(X509_VERIFY_PARAM_get_flags(X509_STORE_get0_param(st)) & X509_V_FLAG_CRL_CHECK))
		return true;
	if (X509_STORE_lock(st) != 1)
		return false;
	bool ok = true;
	STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(st);
	for (int i = 0; ok && i < sk_X509_OBJECT_num(objs); i++) {
		X509_CRL *crl = X509_OBJECT_get0_X509_CRL(sk_X509_OBJECT_value(objs, i));
		const ASN1_TIME *next = crl ? X509_CRL_get0_nextUpdate(crl) : NULL;
		ok = !crl || (X509_cmp_time(X509_CRL_get0_lastUpdate(crl), NULL) < 0 &&
			      (!next || X509_cmp_time(next, NULL) > 0));
	}
	X509_STORE_unlock(st);
	return ok;
}

/* The entry held under KEY, or NULL. Under the lock. */
static struct entry *find(struct vcache *vc, const uint8_t key[32])
{
	for (unsigned k = 0; k < vc->max; k++)
		if (vc->e[k].born_ns && memcmp(vc->e[k].key, key, 32) == 0)
			return &vc->e[k];
	return NULL;
}

/* A hit: a copy of the verified chain (its certificates referenced), or
 * NULL. An entry past its age, its certificates' validity or its store's
 * CRLs' is dropped. */
static STACK_OF(X509) * lookup(struct vcache *vc, const uint8_t key[32], X509_STORE *st)
{
	STACK_OF(X509) *got = NULL;
	uint64_t now = qpg__now_ns();
	pthread_mutex_lock(&vc->lock);
	struct entry *e = find(vc, key);
	if (e && now - e->born_ns < vc->ttl_ns && still_valid(e->chain) && crls_current(st)) {
		got = X509_chain_up_ref(e->chain);
	} else if (e) {
		chain_free(e->chain);
		*e = (struct entry){0};
	}
	vc->hits += got != NULL;
	vc->misses += got == NULL;
	pthread_mutex_unlock(&vc->lock);
	return got;
}

static void store(struct vcache *vc, const uint8_t key[32], STACK_OF(X509) * chain)
{
	pthread_mutex_lock(&vc->lock);
	struct entry *e = find(vc, key); /* two threads verified it at once */
	if (!e) {
		e = &vc->e[vc->next];
		vc->next = (vc->next + 1) % vc->max;
	}
	chain_free(e->chain);
	*e = (struct entry){.born_ns = qpg__now_ns(), .chain = chain};
	memcpy(e->key, key, 32);
	pthread_mutex_unlock(&vc->lock);
}

static int verify_cached(X509_STORE_CTX *x, void *arg)
{
	struct vcache *vc = arg;
	uint8_t key[32];
	bool keyed = chain_key(x, key) == 0;
	STACK_OF(X509) *chain = keyed ? lookup(vc, key, X509_STORE_CTX_get0_store(x)) : NULL;
	if (chain) {
		/* As X509_verify_cert leaves it on success: the chain that
		 * SSL_get0_verified_chain returns, and no error. */
		X509_STORE_CTX_set0_verified_chain(x, chain);
		X509_STORE_CTX_set_error(x, X509_V_OK);
		return 1;
	}
	int ok = X509_verify_cert(x);
	if (ok == 1 && keyed && X509_STORE_CTX_get_error(x) == X509_V_OK) {
		STACK_OF(X509) *verified = X509_STORE_CTX_get1_chain(x);
		if (verified)
			store(vc, key, verified);
	}
	return ok;
}

int qpg__tls_vcache_attach(SSL_CTX *ctx, unsigned ttl_s, unsigned max)
{
	pthread_once(&once, init);
	struct vcache *vc =
	    idx < 0 || !max ? NULL : calloc(1, sizeof(*vc) + (size_t)max * sizeof(vc->e[0]));
	if (!vc)
		return -1;
	vc->max = max;
	if (pthread_mutex_init(&vc->lock, NULL)) {
		free(vc);
		return -1;
	}
	vc->ttl_ns = (uint64_t)ttl_s * 1000000000ull;
	if (SSL_CTX_set_ex_data(ctx, idx, vc) != 1) {
		free_cache(NULL, vc, NULL, 0, 0, NULL);
		return -1;
	}
	SSL_CTX_set_cert_verify_callback(ctx, verify_cached, vc);
	return 0;
}

int qpg__tls_vcache_counts(SSL_CTX *ctx, uint64_t *hits, uint64_t *misses, unsigned *entries)
{
	struct vcache *vc = idx < 0 ? NULL : SSL_CTX_get_ex_data(ctx, idx);
	if (!vc)
		return -1;
	pthread_mutex_lock(&vc->lock);
	*hits = vc->hits;
	*misses = vc->misses;
	*entries = 0;
	for (unsigned k = 0; k < vc->max; k++)
		*entries += vc->e[k].born_ns != 0;
	pthread_mutex_unlock(&vc->lock);
	return 0;
}

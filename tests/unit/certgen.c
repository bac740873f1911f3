/* SPDX-License-Identifier: BSD-2-Clause */
#include "certgen.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>

static int load_ca(const char *dir, X509 **crt, EVP_PKEY **key)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/ca.crt", dir);
	FILE *f = fopen(p, "r");
	*crt = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "%s/ca.key", dir);
	f = fopen(p, "r");
	*key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	return *crt && *key ? 0 : -1;
}

int certgen_client(const char *dir, const char *name, long seconds, long serial)
{
	return certgen_leaf(dir, name, "qpgate-client", seconds, serial);
}

int certgen_leaf(const char *dir, const char *name, const char *cn, long seconds, long serial)
{
	X509 *ca = NULL, *x = X509_new();
	EVP_PKEY *ca_key = NULL, *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	int rc = -1;
	if (!x || !key || load_ca(dir, &ca, &ca_key))
		goto out;
	X509_NAME *subj = X509_NAME_new();
	X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	int ok = X509_set_version(x, 2) && ASN1_INTEGER_set(X509_get_serialNumber(x), serial) &&
		 X509_set_issuer_name(x, X509_get_subject_name(ca)) &&
		 X509_set_subject_name(x, subj) && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
		 X509_gmtime_adj(X509_getm_notAfter(x), seconds) && X509_set_pubkey(x, key) &&
		 X509_sign(x, ca_key, EVP_sha256()) > 0;
	X509_NAME_free(subj);
	if (!ok)
		goto out;
	char p[512];
	snprintf(p, sizeof(p), "%s/%s.crt", dir, name);
	FILE *f = fopen(p, "w");
	ok = f && PEM_write_X509(f, x);
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "%s/%s.key", dir, name);
	f = ok ? fopen(p, "w") : NULL;
	ok = f && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	if (f)
		fclose(f);
	rc = ok ? 0 : -1;
out:
	X509_free(x);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	return rc;
}

int certgen_crl(const char *dir, const long *serials, int n, const char *path)
{
	return certgen_crl_until(dir, serials, n, 86400, path);
}

int certgen_crl_until(const char *dir, const long *serials, int n, long next_s, const char *path)
{
	X509 *ca = NULL;
	EVP_PKEY *ca_key = NULL;
	X509_CRL *crl = X509_CRL_new();
	ASN1_TIME *now = X509_gmtime_adj(NULL, -60), *next = X509_gmtime_adj(NULL, next_s);
	int rc = -1;
	if (!crl || !now || !next || load_ca(dir, &ca, &ca_key))
		goto out;
	int ok = X509_CRL_set_version(crl, 1) &&
		 X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca)) &&
		 X509_CRL_set1_lastUpdate(crl, now) && X509_CRL_set1_nextUpdate(crl, next);
	for (int i = 0; ok && i < n; i++) {
		X509_REVOKED *r = X509_REVOKED_new();
		ASN1_INTEGER *sn = ASN1_INTEGER_new();
		ok = r && sn && ASN1_INTEGER_set(sn, serials[i]) &&
		     X509_REVOKED_set_serialNumber(r, sn) &&
		     X509_REVOKED_set_revocationDate(r, now) && X509_CRL_add0_revoked(crl, r);
		ASN1_INTEGER_free(sn);
		if (!ok)
			X509_REVOKED_free(r);
	}
	ok = ok && X509_CRL_sort(crl) && X509_CRL_sign(crl, ca_key, EVP_sha256()) > 0;
	FILE *f = ok ? fopen(path, "w") : NULL;
	ok = f && PEM_write_X509_CRL(f, crl);
	if (f)
		fclose(f);
	rc = ok ? 0 : -1;
out:
	ASN1_TIME_free(now);
	ASN1_TIME_free(next);
	X509_CRL_free(crl);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return rc;
}

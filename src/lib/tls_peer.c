/* SPDX-License-Identifier: BSD-2-Clause */
/* The peer's identity, from the certificate the TLS handshake verified
 * (a resumed session carries the one its ticket was issued for). A name is
 * handed out only as printable text: a service keys its tenants or ACLs by
 * it, and logs it. */
#include <errno.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "qpgate/service.h"
#include "tls.h"

/* Copy N bytes of a certificate string to OUT as a C string: -EILSEQ for
 * anything but printable ASCII (a NUL inside would truncate a name into
 * another's), -ENAMETOOLONG past CAP - 1. */
static int copy_name(const unsigned char *p, int n, char *out, size_t cap)
{
	if (n <= 0)
		return -ENOENT;
	if ((size_t)n >= cap)
		return -ENAMETOOLONG;
	for (int i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return -EILSEQ;
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	return n;
}

static int san_name(X509 *x, int type, char *out, size_t cap)
{
	GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	int rc = -ENOENT;
	for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		if (g->type != type)
			continue;
		/* URI, DNS and email names are all IA5Strings. */
		const ASN1_IA5STRING *s = g->d.ia5;
		rc = copy_name(ASN1_STRING_get0_data(s), ASN1_STRING_length(s), out, cap);
		break; /* the first of its kind: the certificate's order decides */
	}
	GENERAL_NAMES_free(names);
	return rc;
}

static int common_name(X509 *x, char *out, size_t cap)
{
	const X509_NAME *subj = X509_get_subject_name(x);
	int at = subj ? X509_NAME_get_index_by_NID(subj, NID_commonName, -1) : -1;
	if (at < 0)
		return -ENOENT;
	/* Two CNs would make "the" CN ambiguous: refuse rather than pick. */
	if (X509_NAME_get_index_by_NID(subj, NID_commonName, at) >= 0)
		return -EILSEQ;
	unsigned char *utf8 = NULL;
	int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, at)));
	if (n < 0)
		return -EILSEQ;
	int rc = copy_name(utf8, n, out, cap);
	OPENSSL_free(utf8);
	return rc;
}

int qpg__tls_peer_name(const SSL *ssl, int which, char *out, size_t cap)
{
	if (!ssl || cap == 0)
		return -EINVAL;
	out[0] = '\0';
	X509 *x = SSL_get0_peer_certificate(ssl);
	if (!x || SSL_get_verify_result(ssl) != X509_V_OK)
		return -ENOTCONN; /* no certificate, or none verified */
	switch (which) {
	case QPG_PEER_SAN_URI:
		return san_name(x, GEN_URI, out, cap);
	case QPG_PEER_SAN_DNS:
		return san_name(x, GEN_DNS, out, cap);
	case QPG_PEER_SAN_EMAIL:
		return san_name(x, GEN_EMAIL, out, cap);
	case QPG_PEER_CN:
		return common_name(x, out, cap);
	default:
		return -EINVAL;
	}
}

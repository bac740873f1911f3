/* SPDX-License-Identifier: BSD-2-Clause */
/* Revocation (--crl) with mutual TLS: a client certificate a CRL revokes
 * is refused; one revoked later (a new CRL, read again by a reload, as
 * SIGHUP does) is refused from then on, its ticket included, fresh or
 * resumed; and a CRL that does not load keeps the server on what it had.
 * Real connections over the tcp transport on loopback. */
#include <stdio.h>
#include <string.h>

#include "unit.h"

#include "certgen.h"
#include "loopback.h"
#include "qpgate/wire.h"

static struct qpg_client *client(const struct qpg_loopback *lb, const char *name)
{
	static char crt[160], key[160];
	snprintf(crt, sizeof(crt), "%s/%s.crt", lb->dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", lb->dir, name);
	struct qpg_client *cl = qpg_loopback_client(lb, crt, key);
	assert_non_null(cl);
	return cl;
}

static int one(struct qpg_client *cl, char *why, size_t why_len)
{
	int rc = qpg_loopback_echo_once(cl, why, why_len);
	assert_int_not_equal(rc, -2);
	return rc;
}

static void revoked_clients_are_refused_fresh_and_resumed(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	char ca[128], crl[128], why[256] = "";
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb.dir);
	snprintf(crl, sizeof(crl), "%s/revoked.crl", lb.dir);
	assert_int_equal(certgen_client(lb.dir, "good", 3600, 3001), 0);
	assert_int_equal(certgen_client(lb.dir, "bad", 3600, 3002), 0);
	const long first[] = {3002};
	assert_int_equal(certgen_crl(lb.dir, first, 1, crl), 0);
	const char *crls[] = {crl};
	lb.o.client_ca = ca;
	lb.o.crls = crls;
	lb.o.ncrls = 1;
	assert_int_equal(qpg_loopback_start(&lb), 0);

	struct qpg_client *good = client(&lb, "good"), *bad = client(&lb, "bad");
	assert_int_equal(one(bad, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "TLS"));
	assert_int_equal(one(good, why, sizeof(why)), 0);
	assert_int_equal(one(good, why, sizeof(why)), 1); /* it holds a ticket now */

	/* GOOD is revoked too, and the server reads its files again. */
	const long both[] = {3001, 3002};
	assert_int_equal(certgen_crl(lb.dir, both, 2, crl), 0);
	char err[256];
	assert_int_equal(qpg_server_reload_tls(lb.srv, err, sizeof(err)), 0);
	assert_int_equal(one(good, why, sizeof(why)), -1); /* its ticket offered, and refused */
	assert_int_equal(one(bad, why, sizeof(why)), -1);

	/* A CRL that does not load: the reload fails, the server keeps the
	 * files it had (GOOD stays refused). */
	FILE *f = fopen(crl, "w");
	fputs("not a CRL\n", f);
	fclose(f);
	assert_int_not_equal(qpg_server_reload_tls(lb.srv, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "CRL"));
	assert_int_equal(one(good, why, sizeof(why)), -1);
	qpg_client_destroy(good);
	qpg_client_destroy(bad);
	qpg_loopback_fini(&lb);
}

static void a_crl_needs_a_client_ca(void **state)
{
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	char crl[128];
	snprintf(crl, sizeof(crl), "%s/empty.crl", lb.dir);
	assert_int_equal(certgen_crl(lb.dir, NULL, 0, crl), 0);
	const char *crls[] = {crl};
	lb.o.crls = crls;
	lb.o.ncrls = 1;
	char err[256];
	struct qpg_server *s;
	assert_int_not_equal(qpg_server_create(&s, &lb.o, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "--client-ca"));
	qpg_loopback_fini(&lb);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(revoked_clients_are_refused_fresh_and_resumed),
	      cmocka_unit_test(a_crl_needs_a_client_ca))

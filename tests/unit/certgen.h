/* SPDX-License-Identifier: BSD-2-Clause */
/* Certificates a test needs that the make-certs script cannot make: one
 * that expires in seconds, and a CRL, both from the CA in a directory of
 * scripts/make-certs (ca.crt, ca.key). */
#ifndef QPG_TESTS_CERTGEN_H
#define QPG_TESTS_CERTGEN_H

/* DIR/NAME.crt and DIR/NAME.key: a client certificate with SERIAL, valid
 * from an hour ago until SECONDS from now. 0 or -1. */
int certgen_client(const char *dir, const char *name, long seconds, long serial);
/* The same with the subject's common name CN (a server's host name: the
 * certificate has no subjectAltName, so a host check reads the CN). */
int certgen_leaf(const char *dir, const char *name, const char *cn, long seconds, long serial);
/* PATH: a CRL from DIR's CA revoking the N SERIALS (none: N = 0). */
int certgen_crl(const char *dir, const long *serials, int n, const char *path);
/* The same, its next update NEXT_S seconds from now (certgen_crl: a day). */
int certgen_crl_until(const char *dir, const long *serials, int n, long next_s, const char *path);

#endif

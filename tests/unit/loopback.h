/* SPDX-License-Identifier: BSD-2-Clause */
/* A real echo server over the tcp transport on loopback, in a thread of
 * the test's own process, with fresh certificates; and clients for it. */
#ifndef QPG_TESTS_LOOPBACK_H
#define QPG_TESTS_LOOPBACK_H

#include <pthread.h>
#include <stdint.h>

#include "qpgate/client.h"
#include "qpgate/server.h"

struct qpg_loopback {
	char dir[64]; /* the certificates: ca.crt, server.crt, server.key */
	struct qpg_server_opts o;
	struct qpg_server *srv;
	pthread_t thread;
	uint16_t port;
};

/* Options for a one-thread tcp server on any port (change them before
 * start). Also ignores SIGPIPE, as every qpgate program does. */
int qpg_loopback_init(struct qpg_loopback *lb);
int qpg_loopback_start(struct qpg_loopback *lb);
int qpg_loopback_stop(struct qpg_loopback *lb);
void qpg_loopback_fini(struct qpg_loopback *lb);
/* One loopback server for a whole group of tests: pass these as
 * QPG_UNIT_MAIN's group setup and teardown, and use qpg_lb. */
extern struct qpg_loopback qpg_lb;
int qpg_loopback_group_start(void **state);
int qpg_loopback_group_stop(void **state);
/* Options for a tcp client of LB (host 127.0.0.1, servername localhost). */
void qpg_loopback_client_opts(const struct qpg_loopback *lb, struct qpg_client_opts *o);

/* A client connection that counts what happens to it (the user pointer of
 * qpg_loopback_cbs), with the reason of its close. */
struct qpg_loopback_conn {
	struct qpg_client_conn *c;
	int up, closed, replies;
	char why[256];
};
extern const struct qpg_client_cbs qpg_loopback_cbs;
/* A client of LB with qpg_loopback_cbs, presenting CERT and KEY (or none),
 * that never tries a connect again (what a test counts is one attempt);
 * NULL if it cannot be made. */
struct qpg_client *qpg_loopback_client(const struct qpg_loopback *lb, const char *cert,
				       const char *key);
/* One connection of CL (made with qpg_loopback_cbs): up, one echo, closed.
 * 1: it resumed a TLS session; 0: a full handshake; -1: it never came up
 * (WHY says why); -2: it came up and then failed. */
int qpg_loopback_echo_once(struct qpg_client *cl, char *why, size_t why_len);

/* Run CL until COND or 5 s. */
#define RUN_UNTIL(cl, cond)                                                                        \
	for (int _i = 0; _i < 500 && !(cond); _i++)                                                \
	qpg_client_run(cl, 10)

#endif

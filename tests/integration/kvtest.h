/* SPDX-License-Identifier: BSD-2-Clause */
/* What the raw KV test clients (slow_reader, stall_put) share: their
 * client options, a clock, and bringing N connections up. Each keeps its
 * per-connection state in an array of structs whose first member is the
 * struct qpg_client_conn pointer, and counts ups and closes in its
 * callbacks. */
#ifndef QPG_KVTEST_H
#define QPG_KVTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qpgate/client.h"
#include "qpgate/kv.h"
#include "qpgate/wire.h"

static inline uint64_t kvtest_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A KV client of TRANSPORT ("tcp" or "rdma") to 127.0.0.1:PORT, server
 * name localhost, checked against CA; 8 KiB messages. */
static inline void kvtest_opts(struct qpg_client_opts *o, const char *transport, const char *port,
			       const char *ca)
{
	qpg_client_opts_default(o);
	o->transport = strcmp(transport, "tcp") == 0 ? QPG_KIND_TCP : QPG_KIND_RDMA;
	o->port = (uint16_t)atoi(port);
	o->ca = ca;
	o->host = "127.0.0.1";
	o->servername = "localhost";
	o->service = QPG_SERVICE_KV;
	o->max_msg = 8192;
}

/* A client for O with CBS, or exit(1) with the reason, as NAME. */
static inline struct qpg_client *kvtest_client(const struct qpg_client_opts *o,
					       const struct qpg_client_cbs *cbs, const char *name)
{
	struct qpg_client *cl;
	char err[256];
	if (qpg_client_create(&cl, o, cbs, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", name, err);
		exit(1);
	}
	return cl;
}

/* Connect N: the user pointer of connection I is USERS + I * STRIDE, where
 * its struct qpg_client_conn * is stored. At most WINDOW handshakes at a
 * time (under emulation 100 at once can outlast the server's handshake
 * deadline). Returns 0 once *UP + *CLOSED reach N within 60 s. */
static inline int kvtest_connect_all(struct qpg_client *cl, int n, int window, void *users,
				     size_t stride, const int *up, const int *closed)
{
	int started = 0;
	uint64_t t0 = kvtest_now_ms();
	while (*up + *closed < n && kvtest_now_ms() - t0 < 60000) {
		while (started < n && started - (*up + *closed) < window) {
			void *u = (char *)users + (size_t)started * stride;
			if (qpg_client_connect(cl, u, (struct qpg_client_conn **)u)) {
				fprintf(stderr, "cannot start connection %d\n", started);
				return -1;
			}
			started++;
		}
		qpg_client_run(cl, 50);
	}
	return *up + *closed < n ? -1 : 0;
}

/* Let every close finish (bounded), then free the client. */
static inline void kvtest_client_done(struct qpg_client *cl)
{
	for (int k = 0; k < 200 && qpg_client_conn_count(cl); k++)
		qpg_client_run(cl, 10);
	qpg_client_destroy(cl);
}

#endif

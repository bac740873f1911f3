/* SPDX-License-Identifier: BSD-2-Clause */
/* The server's insides, shared by server.c (its life: create, run, reload,
 * stats, and the connections' callbacks) and server_admit.c (who gets in:
 * the listeners, the limits before TLS, and admission after HELLO). */
#ifndef QPG_SERVER_INT_H
#define QPG_SERVER_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core.h"
#include "peers.h"
#include "qpgate/server.h"
#include "tls.h"

struct worker {
	struct qpg__endpoint ep; /* first: loop callbacks get back here */
	struct qpg_server *srv;
	struct qpg__io listen_io;
	uint64_t listen_paused_until; /* out of fds: accepting again from then (coarse) */
	pthread_t thread;
	int index;
	bool started;
};

struct qpg_server {
	struct qpg_server_opts o;
	const struct qpg_service *service;
	const struct qpg__transport_ops *t; /* set up (its setup done) */
	struct qpg_rdma_dev dev;
	struct qpg__tls_slot tls;
	bool tls_ready;
	struct qpg__tls_tickets *tickets; /* NULL: no resumption */
	struct qpg__peers peers;
	struct worker *workers;
	unsigned nworkers;
	uint16_t port;
	atomic_int stop;
	atomic_int clients; /* admitted */
	atomic_int pending; /* unfinished handshakes */
	atomic_ullong next_conn_id;
	atomic_ullong refused_pending, refused_per_peer, refused_rate, refused_qps_per_peer;
	atomic_ullong refused_prefix; /* over --max-pending-per-prefix */
	atomic_ullong pending_evicted; /* closed to make room for a lighter address */
	uint64_t peers_swept_ns;       /* thread 0: when the peer table was last swept (coarse) */
	atomic_ullong accept_backoffs; /* accept failed for want of fds */
	bool service_started;	       /* start() succeeded: stop() is owed */
};

static inline void qpg__srv_log(const struct qpg_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void qpg__srv_log(const struct qpg_server *s, const char *fmt, ...)
{
	(void)s;
	va_list ap;
	char line[512];
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "qpgate-server: %s\n", line);
}

/* Admission after HELLO: the server-wide --max-clients, per QP. */
int qpg__srv_admit(struct qpg__conn *c, char *text, size_t text_len);
/* A worker's listener is readable: accept, and refuse before TLS what is
 * over the pending, per-address and rate limits. */
void qpg__srv_listen_cb(struct qpg__io *io, uint32_t events);
/* A listening socket on --bind and PORT (SO_REUSEPORT: one per worker). */
/* A listener on PORT (0: any) for one thread; FIRST: the server's first,
 * which refuses a port another process listens on. */
int qpg__srv_open_listener(const struct qpg_server *s, uint16_t port, bool first, char *err,
			   size_t err_len);
uint16_t qpg__srv_bound_port(int fd);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate public API: shared enums and helpers. Errors are negative errno. */
#ifndef QPGATE_H
#define QPGATE_H

#include <stdint.h>

#include "qpgate/version.h"
#include "qpgate/wire.h"

/* How long an event loop polls before it sleeps (--busy-poll), in us: its
 * completion queue (rdma) or its sockets (tcp); adaptive (docs/performance.md, "Busy
 * polling"). The options' default is each transport's own window. Today
 * both are 200: under a slow emulated CPU one way over rdma also takes
 * longer than 50 us, and a wait that outlasts the window ends in a sleep
 * and a wake-up that costs more than the round trip. */
#define QPG_BUSY_POLL_US_DEFAULT UINT32_MAX /* the transport's own: */
#define QPG_BUSY_POLL_US_RDMA	 200
#define QPG_BUSY_POLL_US_TCP	 200

/* Setup phases, timed per connection (cmtime-style: an enum and a name table). */
enum qpg_phase {
	QPG_PHASE_TCP_CONNECT,
	QPG_PHASE_TLS_HANDSHAKE,
	QPG_PHASE_PSN_GEN,
	QPG_PHASE_QP_CREATE,
	QPG_PHASE_QP_INIT,
	QPG_PHASE_EXCHANGE, /* HELLO out, ACCEPT back */
	QPG_PHASE_QP_RTR,
	QPG_PHASE_QP_RTS,
	QPG_PHASE_FIRST_MSG, /* first request echoed */
	QPG_PHASE_COUNT
};
const char *qpg_phase_name(enum qpg_phase p);

/* Why a connection ended badly, for people and for per-type failure counts. */
enum qpg_err_class {
	QPG_ERR_NONE,
	QPG_ERR_REFUSED,     /* TCP connect refused or unreachable */
	QPG_ERR_TLS,	     /* TLS failed for another reason */
	QPG_ERR_CERT,	     /* certificate verification failed */
	QPG_ERR_HOSTNAME,    /* host name mismatch */
	QPG_ERR_REJECTED,    /* server sent REJECT (see reject code) */
	QPG_ERR_SERVER_FULL, /* REJECT: server full */
	QPG_ERR_VERSION,     /* REJECT or local: version mismatch */
	QPG_ERR_TIMEOUT,     /* handshake or request deadline */
	QPG_ERR_PROTOCOL,    /* malformed message from the peer */
	QPG_ERR_AUTH,	     /* bad tag or out-of-order sequence */
	QPG_ERR_QP,	     /* the QP went into error */
	QPG_ERR_PEER_CLOSED, /* the peer closed the connection */
	QPG_ERR_LOCAL,	     /* a local resource failed */
	QPG_ERR_COUNT
};
const char *qpg_err_class_name(enum qpg_err_class e);
/* One line telling a person what to do next about E. */
const char *qpg_err_class_hint(enum qpg_err_class e);

enum qpg_transport_kind {
	QPG_KIND_RDMA = QPG_TRANSPORT_RDMA,
	QPG_KIND_TCP = QPG_TRANSPORT_TCP,
};
/* "rdma" / "tcp" -> kind; -EINVAL otherwise. */
int qpg_transport_parse(const char *s);

/* Every qpg_ function that can fail returns 0 (or a count) on success and
 * a negative errno on failure; this names one for a person (thread-safe),
 * as it does qpgate's own codes below. */
const char *qpg_strerror(int err);
/* -QPG_EMAPCOUNT: a QP could not be made because this process is at
 * vm.max_map_count memory mappings (the provider maps QP queues; the
 * kernel's bare ENOMEM, told apart). Past the errno range. */
#define QPG_EMAPCOUNT 4001

/* vm.max_map_count, and this process's mappings now (/proc/self/maps: not
 * for a fast path); -1 when unknown. */
long qpg_map_count_limit(void);
long qpg_map_count(void);

#endif

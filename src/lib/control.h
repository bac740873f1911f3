/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection (control.c): TCP + TLS 1.3 and the bootstrap
 * exchange, and the byte stream that follows it. */
#ifndef QPG_CONTROL_H
#define QPG_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sockets.h"

struct qpg__endpoint;
struct qpg__conn;

/* Server side: take over an accepted socket. -ENOMEM: nothing was created
 * and FD is closed. Otherwise the connection exists, with USER set, and any
 * later failure reaches the closed callback like every other close. */
int qpg__conn_accept(struct qpg__endpoint *ep, int fd, const struct sockaddr_storage *peer,
		     void *user);
/* Client side: start a connection to ADDR. */
struct qpg__client_params {
	const struct sockaddr *addr;
	socklen_t addr_len;
	const struct sockaddr *src; /* bind to this first (NULL: the kernel picks) */
	socklen_t src_len;
	struct qpg__port_cursor *ports; /* SRC's ports (NULL: the kernel picks) */
	const struct qpg__src_gid *gid; /* rdma: the GID SRC carries (NULL: the device's) */
	const char *servername;
	uint8_t service;
	bool auth;
	uint16_t credits;
	uint32_t max_msg;
	uint8_t test_mutation; /* enum qpg__hello_mutation */
};

/* Ways a test client breaks its own HELLO, to prove the server copes. */
enum qpg__hello_mutation {
	QPG_MUTATE_NONE,
	QPG_MUTATE_VERSION,
	QPG_MUTATE_PSN,
	QPG_MUTATE_QPN,
	QPG_MUTATE_TRUNCATED, /* half a HELLO, then silence */
	QPG_MUTATE_LENGTH,    /* header claims the wrong body length */
	QPG_MUTATE_STALL,     /* TLS, then nothing: the deadline must fire */
	QPG_MUTATE_GID,	      /* a GID of another host (192.0.2.1, TEST-NET-1) */
};
int qpg__conn_connect(struct qpg__endpoint *ep, const struct qpg__client_params *p,
		      struct qpg__conn **out);

/* The handshake deadline of C has passed while its peer's next bytes are
 * here, unread: the wait is ours (a thread busy with other handshakes, or
 * starved of CPU), not the peer's, and closing would throw away the work
 * already done for it. Once per connection the deadline moves on by its
 * length (so a handshake is held at most twice the deadline; a slow
 * peer's bytes are read as they come, and find nothing waiting): true
 * then. False, with nothing changed, when C is to close. */
bool qpg__control_deadline_extend(struct qpg__conn *c, uint64_t now);
/* C's handshake deadline passed at NOW: extend it (above), close it, or (a
 * server whose TLS is up) tell the client why with a REJECT first. */
void qpg__control_deadline(struct qpg__conn *c, uint64_t now);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection's socket (sockets.c). */
#ifndef QPG_SOCKETS_H
#define QPG_SOCKETS_H

#include <stdint.h>
#include <sys/socket.h>

/* TCP_NODELAY, and keepalive probes that find a vanished peer. */
void qpg__sock_tune(int fd);

/* The local ports a client hands out itself for one source address, in
 * turn from a random start: see qpg__bind_source. */
struct qpg__port_cursor {
	uint16_t lo, hi, next;
};
/* CUR covers part K of N equal parts of the kernel's ephemeral range
 * (ip_local_port_range; N 0 or 1: all of it), starting at a random port in
 * it. */
void qpg__port_cursor_init(struct qpg__port_cursor *cur, unsigned k, unsigned n);
/* Bind FD to SRC's address and CUR's next free port (a port held
 * elsewhere is skipped; the cursor wraps from hi to lo). After 64 ports in
 * use in a row, or with CUR NULL, the port is left to connect(). 0, or -1
 * with errno. */
int qpg__bind_source(int fd, const struct sockaddr *src, socklen_t len,
		     struct qpg__port_cursor *cur);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* Test hooks of the client library, for qpgate's own tests and the
 * --test-* flags of its tools; not installed. */
#ifndef QPG_CLIENT_TESTING_H
#define QPG_CLIENT_TESTING_H

#include <stdint.h>

#include "qpgate/client.h"

/* Break our own HELLOs from now on (enum qpg__hello_mutation, control.h). */
void qpg__client_test_mutation(struct qpg_client *cl, uint8_t mutation);
/* RDMA WRITE DATA to the server (every window is read-only, so this must
 * fail and close the connection). One that lands anyway is reported to
 * read_done with COOKIE, so a test can count it. */
int qpg__client_test_write(struct qpg_client_conn *c, uint64_t raddr, uint32_t rkey,
			   const void *data, uint32_t len, uint64_t cookie);
/* Flip a bit in the tag of the next message sent. */
void qpg__client_conn_corrupt_next_tag(struct qpg_client_conn *c);
/* Let the next message exceed the agreed size (the peer's receive
 * buffers), to prove a QP forced into error is contained and reaped. */
void qpg__client_conn_oversize_next(struct qpg_client_conn *c);

/* Send no keepalive frames, not even the one as each QP comes up: a client
 * that completes the handshake and then never says anything. */
void qpg__client_test_silent(struct qpg_client *cl);
/* The attempt under a handle (NULL between two attempts). */
struct qpg__conn *qpg__client_test_conn(struct qpg_client_conn *c);
/* One more QP for LEAD's session, below the public API: a handle with
 * USER, following LEAD's attempts (NULL: LEAD has no attempt, or no memory). */
struct qpg_client_conn *qpg__client_test_member(struct qpg_client_conn *lead, void *user);

#endif

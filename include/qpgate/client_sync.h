/* SPDX-License-Identifier: BSD-2-Clause */
/* One connection, used synchronously: open it, ask and wait for the reply,
 * close it. For small programs and scripts; a program with many
 * connections uses the event loop of qpgate/client.h, on which this is
 * built. Errors are negative errno, with a reason for a person in ERR. */
#ifndef QPGATE_CLIENT_SYNC_H
#define QPGATE_CLIENT_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "qpgate/client.h"

struct qpg_sync;

/* Connect (TCP, TLS 1.3, bootstrap, QP to RTS) and wait until the
 * connection is up or fails, at most O->handshake_timeout_ms. */
int qpg_sync_open(struct qpg_sync **out, const struct qpg_client_opts *o, char *err,
		  size_t err_len);
/* Send LEN bytes of TYPE and wait at most TIMEOUT_MS for the reply: up to
 * CAP bytes of it into REPLY, its length in *REPLY_LEN (-EMSGSIZE if it was
 * longer than CAP). A connection that fails is closed: -ENOTCONN after. */
int qpg_sync_request(struct qpg_sync *s, uint8_t type, const void *msg, uint32_t len, void *reply,
		     uint32_t cap, uint32_t *reply_len, int timeout_ms);
/* The reason of the last failure. */
const char *qpg_sync_error(const struct qpg_sync *s);
void qpg_sync_close(struct qpg_sync *s);

#endif

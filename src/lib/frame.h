/* SPDX-License-Identifier: BSD-2-Clause */
/* Authenticated frames (frame.c): the send path down to the transport, and
 * what the transport hands back up (frames, completions). */
#ifndef QPG_FRAME_H
#define QPG_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qpgate/verbs.h"
#include "qpgate/wire.h"

struct qpg__conn;

/* Frame B (payload already at qpg__frame_payload(B)) and send it. */
int qpg__conn_send(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint32_t payload_len);
/* The same with frame FLAGS (QPG_FRAME_FLAG_MORE: more replies follow). */
/* As qpg__conn_send_flags, with the payload's HEAD bytes in B followed by
 * V's V->io_len bytes, which lie in REGION (a region's transport handle;
 * NULL: copy them). Where the transport gathers (rdma), V's bytes are not
 * copied and V goes back through its release when the SEND completes;
 * elsewhere they are copied into B and V goes back at once. Either way V
 * has gone back by the time of an error. */
int qpg__conn_send_ref(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
		       uint32_t head, struct qpg_buf *v, void *region);
int qpg__conn_send_flags(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
			 uint32_t payload_len);
/* The send queue depth a connection's data path is created with, and the
 * sends C may still post before it is full. */
uint32_t qpg__conn_send_depth(const struct qpg__conn *c);
uint32_t qpg__conn_send_room(const struct qpg__conn *c);
static inline uint8_t *qpg__frame_payload(struct qpg_buf *b)
{
	return (uint8_t *)b->addr + QPG_FRAME_HDR_LEN;
}
/* One-sided access through the transport (-EOPNOTSUPP where it has none);
 * each posts a work request that counts as in flight until it completes. */
int qpg__conn_grant_read(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			 void *user, void **window, uint32_t *rkey);
int qpg__conn_revoke(struct qpg__conn *c, void *window);
/* B comes back through read_done, or to the pool if the read fails. */
int qpg__conn_read(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
int qpg__conn_test_write(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
/* Completions of the above (transport -> core). */
void qpg__conn_on_revoked(struct qpg__conn *c, void *user);
void qpg__conn_on_read(struct qpg__conn *c, struct qpg_buf *b, bool ok, const char *why);
/* Deliver a received frame (transport -> core). Takes ownership of B. */
void qpg__conn_on_frame(struct qpg__conn *c, struct qpg_buf *b, size_t len);
/* The same for a message of one or more frames (rdma: a SEND). */
void qpg__conn_on_message(struct qpg__conn *c, struct qpg_buf *b, size_t len);
/* A send completion (transport -> core). */
void qpg__conn_on_sent(struct qpg__conn *c, bool ok, const char *why);
/* Test hook: flip a bit of the next tag sent. */
void qpg__conn_corrupt_next_tag(struct qpg__conn *c);
void qpg__conn_oversize_next(struct qpg__conn *c);

#endif

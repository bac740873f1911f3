/* SPDX-License-Identifier: BSD-2-Clause */
/* A value's bytes lent to a send: a reply's chunk that the connection sends
 * from the store where it lies (qpg_conn_send_ref: on rdma the SEND gathers
 * it, without a copy). The loan holds a reference to the value until the
 * connection gives it back, when the SEND has completed or failed, so a
 * PUT, DEL or eviction meanwhile cannot free the bytes or let another value
 * reuse them under a frame already tagged. */
#ifndef QPG_KV_REF_H
#define QPG_KV_REF_H

#include <stdint.h>

#include "kv_store.h"
#include "qpgate/verbs.h"

/* Chunks shorter than this are copied. On Soft-RoCE a scatter entry costs
 * the device a lookup of its memory region for each packet it touches: 4
 * KiB values lent cost as much as their copies saved (4 KiB GETs, 9
 * alternating rounds in one lab VM: 0.715 of ib_send_bw lent, 0.749
 * copied), where 64 KiB values in 16 KiB frames lent gained 7% in GETs/s
 * and 9% in server CPU (docs/performance.md). So a value's chunks of a
 * default 8 KiB frame (8,176 bytes) are lent, and 4 KiB values copied. */
#define QPG__KV_REF_MIN 6144

/* LEN bytes of V from OFF, lent: a buffer (addr, io_len) whose release
 * drops the loan's reference. NULL when V has no region (no registered
 * memory to send from), LEN is under QPG__KV_REF_MIN, or out of memory:
 * then copy the bytes. */
struct qpg_buf *qpg__kv_ref_new(struct qpg__kv_store *st, struct qpg__kv_value *v, uint32_t off,
				uint32_t len);

#endif

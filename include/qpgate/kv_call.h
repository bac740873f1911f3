/* SPDX-License-Identifier: BSD-2-Clause */
/* The pooled KV client for callers that cannot keep a struct
 * qpg_kv_request and its callbacks alive themselves (a language binding):
 * the library keeps the request, a GET's value lands in the caller's buffer,
 * and one completion callback, or a wait, reports it. */
#ifndef QPGATE_KV_CALL_H
#define QPGATE_KV_CALL_H

#include <stdint.h>

#include "qpgate/kv_client.h"

/* Called once per qpg_kv_call that returned 0, on a pool thread: STATUS is
 * an enum qpg_kv_status or a negative errno (the connection failed, the
 * pool is closing: -ECANCELED); VALUE_LEN is a GET's whole value length
 * (of which min(VALUE_LEN, CAP) bytes are in BUF). */
typedef void (*qpg_kv_call_done)(void *arg, uint64_t token, int status, uint32_t value_len);

/* OP (QPG_KV_PUT, GET or DEL) on KEY. A PUT sends VALUE; a GET writes the
 * value into BUF (up to CAP bytes). KEY is copied; VALUE and BUF must stay
 * valid until DONE. 0, or a negative errno with no callback to come
 * (-EINVAL: a bad op or key length, -ENOMEM). */
int qpg_kv_call(struct qpg_kv_pool *p, uint8_t op, const void *key, uint16_t key_len,
		const void *value, uint32_t value_len, void *buf, uint32_t cap,
		qpg_kv_call_done done, void *arg, uint64_t token);
/* The same, waiting for it (never from a pool thread): the status, or a
 * negative errno; *VALUE_LEN gets a GET's whole value length. */
int qpg_kv_call_wait(struct qpg_kv_pool *p, uint8_t op, const void *key, uint16_t key_len,
		     const void *value, uint32_t value_len, void *buf, uint32_t cap,
		     uint32_t *value_len_out);

#endif

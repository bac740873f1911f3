/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer harness for the bootstrap parser: whatever arrives on the TLS
 * channel before a QP exists. Properties checked, beyond "no crash":
 *  - qpg_wire_peek never asks for more than the largest bootstrap message;
 *  - anything qpg_wire_decode_params accepts has in-range fields and
 *    re-encodes to the same bytes (no field is silently dropped or changed);
 *  - a decoded REJECT's text is terminated and within its limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qpgate/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t type = 0, version = 0;
	int need = qpg_wire_peek(data, size, &type, &version);
	if (need <= 0)
		return 0;
	if ((size_t)need > QPG_WIRE_MAX_BOOT_LEN)
		abort();
	if ((size_t)need > size)
		return 0;
	if (type == QPG_WIRE_REJECT) {
		struct qpg_wire_reject r;
		if (qpg_wire_decode_reject(data, (size_t)need, &r) == 0 &&
		    strnlen(r.text, sizeof(r.text)) > QPG_WIRE_REJECT_TEXT_MAX)
			abort();
		return 0;
	}
	struct qpg_wire_params p;
	char why[128];
	if (qpg_wire_decode_params(data, (size_t)need, &p, why, sizeof(why)) != 0) {
		if (why[0] == 0) /* every refusal must say why */
			abort();
		return 0;
	}
	if (p.psn > 0xFFFFFF || p.qpn > 0xFFFFFF || p.credits == 0 ||
	    p.credits > QPG_WIRE_MAX_CREDITS || p.max_msg > QPG_WIRE_MAX_MSG)
		abort();
	struct qpg_wire_qp extra[QPG_WIRE_MAX_EXTRA_QPS];
	for (unsigned i = 0; i < p.extra_qps; i++) {
		qpg_wire_decode_qp(data, i, &extra[i]);
		if (extra[i].psn > 0xFFFFFF || extra[i].qpn > 0xFFFFFF)
			abort();
	}
	uint8_t again[QPG_WIRE_MAX_BOOT_LEN];
	int n = qpg_wire_encode_params(again, sizeof(again), type, &p, extra);
	if (n != need)
		abort();
	struct qpg_wire_params q;
	if (qpg_wire_decode_params(again, (size_t)n, &q, why, sizeof(why)) != 0 ||
	    memcmp(&p, &q, sizeof(p)) != 0 || memcmp(again, data, (size_t)n) != 0)
		abort();
	return 0;
}

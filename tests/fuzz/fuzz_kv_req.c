/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer harness for the KV request decoder, as the server applies it to
 * every authenticated KV frame.
 *  - Whatever it accepts lies inside the input: the key and the PUT chunk
 *    point into it and stop before its end, key length and op are in range,
 *    a PUT chunk lies inside its value, a RELEASE carries nothing, and an
 *    EXISTS's list is whole entries of 1..250-byte keys, value_len of them.
 *  - Accepted requests re-encode to the very same bytes (one meaning per
 *    request: nothing the decoder ignores can smuggle data past it).
 *  - A refusal is one of the statuses a client can be sent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qpgate/kv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qpg_kv_req r;
	char why[96];
	int st = qpg_kv_decode_req(data, size, &r, why, sizeof(why));
	if (st != 0) {
		if (st < 0 || st > QPG_KV_STATUS_MAX || !why[0])
			abort(); /* not a status a reply can carry, or no reason */
		return 0;
	}
	if (r.op < QPG_KV_PUT || r.op > QPG_KV_OP_MAX)
		abort();
	const uint8_t *end = data + size;
	if (r.op == QPG_KV_EXISTS) {
		if (r.key_len || r.chunk != data + QPG_KV_REQ_HDR_LEN || r.chunk + r.chunk_len != end)
			abort();
		size_t pos = 0;
		const uint8_t *key;
		uint8_t kl;
		uint32_t n = 0;
		while ((kl = qpg_kv_exists_next(r.chunk, r.chunk_len, &pos, &key))) {
			if (kl > QPG_KV_MAX_KEY || key + kl > end)
				abort();
			n++;
		}
		if (pos != r.chunk_len || n != r.value_len || n == 0 || n > QPG_KV_EXISTS_MAX)
			abort();
	} else if (r.op == QPG_KV_RELEASE) {
		if (r.key_len || r.value_len || r.chunk_len || size != QPG_KV_REQ_HDR_LEN)
			abort();
	} else {
		if (r.key_len == 0 || r.key_len > QPG_KV_MAX_KEY ||
		    r.key != data + QPG_KV_REQ_HDR_LEN || r.key + r.key_len > end)
			abort();
	}
	if (r.op == QPG_KV_EXISTS) {
		/* (checked above) */
	} else if (r.op == QPG_KV_PUT) {
		if (r.chunk + r.chunk_len != end || (uint64_t)r.offset + r.chunk_len > r.value_len)
			abort();
	} else if (r.chunk_len) {
		abort();
	}
	/* Re-encode: header and key, then the chunk. */
	static uint8_t out[QPG_KV_REQ_HDR_LEN + QPG_KV_MAX_KEY + 65536];
	int n = qpg_kv_encode_req(out, sizeof(out), &r);
	if (n < 0 || (size_t)n + r.chunk_len != size || memcmp(out, data, (size_t)n) != 0)
		abort();
	return 0;
}

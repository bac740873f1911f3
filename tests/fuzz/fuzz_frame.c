/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer harness for data-frame handling: header decoding and message
 * authentication, as a receiver applies them to each frame.
 *  - Arbitrary bytes: the header decoder must bound len by what arrived,
 *    and a forged tag must never verify (the input never holds the key);
 *    as an rdma message, they pass only as whole frames that end where it
 *    does.
 *  - The same bytes as a payload, framed and tagged by a sender with the
 *    receiver's key: must decode and verify, and must stop verifying when
 *    any one byte of header, payload or tag changes, or when the sequence
 *    number differs (replay).
 *  - The genuine tag on bytes the fuzzer changed or brought (forgery the
 *    fuzzer steers): must never verify. This is the property that a
 *    verifier checking only part of the tag, or of the data, fails. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "qpgate/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether A and B differ, without a comparison of their bytes: libFuzzer
 * hooks memcmp and traces compare instructions, and would learn the
 * genuine frame's tag from them and hand it back as an input (it did). */
static int differ(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (uint8_t)(a[i] ^ b[i]);
	return d != 0;
}

#define MAX_PAYLOAD 4096

/* K || R (auth.h) */
static const uint8_t key_a[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
				  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t key_b[32] = {16, 15, 14, 13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1,
				  32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17};
static const uint8_t salt_a[4] = {0xa1, 0xa2, 0xa3, 0xa4};
static const uint8_t salt_b[4] = {0xb1, 0xb2, 0xb3, 0xb4};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct qpg__auth sender, receiver;
	static int ready;
	if (!ready) {
		if (qpg__auth_init_raw(&sender, key_a, salt_a, key_b, salt_b) ||
		    qpg__auth_init_raw(&receiver, key_b, salt_b, key_a, salt_a))
			abort();
		ready = 1;
	}

	/* 1. Hostile bytes straight off the wire. */
	struct qpg_frame_hdr h;
	if (qpg_frame_hdr_decode(data, size, 1, MAX_PAYLOAD, &h) == 0) {
		size_t body = QPG_FRAME_HDR_LEN + h.len;
		if (h.len > MAX_PAYLOAD || body + QPG_FRAME_TAG_LEN > size)
			abort();
		if (qpg__auth_verify(&receiver.rx, h.seq, data, body, data + body) == 0)
			abort(); /* a tag forged without the key verified */
	}
	/* ...and as an rdma message: accepted only as whole frames that end
	 * exactly where it does, each within the bound. */
	unsigned frames;
	if (qpg_message_check(data, size, 1, MAX_PAYLOAD, &frames) == 0) {
		size_t off = 0;
		for (unsigned i = 0; i < frames; i++) {
			if (qpg_frame_hdr_decode(data + off, size - off, 1, MAX_PAYLOAD, &h))
				abort();
			off += qpg_frame_len(h.len, 1);
		}
		if (frames == 0 || off != size)
			abort();
	}

	/* 2. The bytes as the payload of a genuine frame. */
	size_t plen = size > MAX_PAYLOAD ? MAX_PAYLOAD : size;
	static uint8_t frame[QPG_FRAME_HDR_LEN + MAX_PAYLOAD + QPG_FRAME_TAG_LEN];
	uint64_t seq = size * 2654435761u;
	struct qpg_frame_hdr out = {.version = QPG_WIRE_VERSION,
				    .type = QPG_FRAME_ECHO_REQ,
				    .len = (uint32_t)plen,
				    .seq = seq};
	qpg_frame_hdr_encode(frame, &out);
	memcpy(frame + QPG_FRAME_HDR_LEN, data, plen);
	size_t body = QPG_FRAME_HDR_LEN + plen;
	if (qpg__auth_tag(&sender.tx, seq, frame, body, frame + body))
		abort();
	size_t total = body + QPG_FRAME_TAG_LEN;
	if (qpg_frame_hdr_decode(frame, total, 1, MAX_PAYLOAD, &h) != 0 || h.len != plen ||
	    h.seq != seq)
		abort();
	if (qpg__auth_verify(&receiver.rx, seq, frame, body, frame + body) != 0)
		abort();
	if (qpg__auth_verify(&receiver.rx, seq + 1, frame, body, frame + body) == 0)
		abort(); /* replayed under another sequence number */
	/* 3. Forgery the fuzzer steers: the genuine tag on other bytes. The
	 * input picks where and how a frame changes (any byte, the tag's own
	 * last bytes included, any non-zero xor, several places), or brings a
	 * whole header and payload of its own under the genuine tag. A
	 * verifier that skipped part of the tag or of the data fails here. */
	static uint8_t forged[QPG_FRAME_HDR_LEN + MAX_PAYLOAD + QPG_FRAME_TAG_LEN];
	memcpy(forged, frame, total);
	size_t nmut = size ? 1 + data[size - 1] % 4 : 1;
	for (size_t i = 0; i < nmut; i++) {
		size_t at = size > 2 * i + 1 ? (data[2 * i] * 257u + data[2 * i + 1]) % total
					     : (i * 7919u) % total;
		uint8_t x = size > 2 * i + 2 && data[2 * i + 2] ? data[2 * i + 2] : 0x01;
		forged[at] ^= x;
	}
	if (differ(forged, frame, total) &&
	    qpg__auth_verify(&receiver.rx, seq, forged, body, forged + body) == 0)
		abort(); /* a changed frame verified under the genuine tag */
	if (size >= QPG_FRAME_HDR_LEN && size <= body &&
	    (size < body || differ(data, frame, size))) {
		memcpy(forged, data, size);
		memcpy(forged + size, frame + body, QPG_FRAME_TAG_LEN);
		if (qpg__auth_verify(&receiver.rx, seq, forged, size, forged + size) == 0)
			abort(); /* the genuine tag moved onto the fuzzer's bytes */
	}
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "qpgate/wire.h"
#include "wire_sample.h"

static struct qpg_wire_params good(void)
{
	return qpg_test_wire_sample();
}

static void test_roundtrip(void **state)
{
	uint8_t buf[128];
	struct qpg_wire_params in = good(), out;
	int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &in, NULL);
	assert_int_equal(n, QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN);
	/* network byte order on the wire */
	assert_int_equal(buf[0], 'Q');
	assert_int_equal(buf[QPG_WIRE_HDR_LEN + 5], 0x12);
	uint8_t type, ver;
	assert_int_equal(qpg_wire_peek(buf, (size_t)n, &type, &ver), n);
	assert_int_equal(type, QPG_WIRE_HELLO);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, NULL, 0), 0);
	assert_memory_equal(&in, &out, sizeof(in));
}

/* The flags a HELLO and an ACCEPT may carry: TICKET is a HELLO's request
 * (protocol version 11), never an answer's. */
static void test_ticket_flag_only_in_hello(void **state)
{
	uint8_t buf[128];
	char why[128];
	struct qpg_wire_params in = good(), out;
	in.flags = QPG_WIRE_FLAG_AUTH | QPG_WIRE_FLAG_TICKET;
	int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &in, NULL);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), 0);
	assert_int_equal(out.flags, QPG_WIRE_FLAG_AUTH | QPG_WIRE_FLAG_TICKET);
	n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_ACCEPT, &in, NULL);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown flags"));
	in.flags = QPG_WIRE_FLAG_AUTH | 0x04; /* the next bit is nobody's yet */
	n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &in, NULL);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
}

static int decode_mutated(size_t off, uint8_t val, char *why)
{
	uint8_t buf[128];
	struct qpg_wire_params in = good(), out;
	int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &in, NULL);
	buf[off] = val;
	return qpg_wire_decode_params(buf, (size_t)n, &out, why, 128);
}

static void test_every_field_validated(void **state)
{
	char why[128];
	const size_t b = QPG_WIRE_HDR_LEN;
	assert_int_equal(decode_mutated(b + 8, 0x01, why), -EINVAL); /* PSN > 24 bits */
	assert_non_null(strstr(why, "PSN"));
	assert_int_equal(decode_mutated(4, QPG_WIRE_VERSION - 1, why),
			 -EPROTONOSUPPORT);			     /* version */
	assert_int_equal(decode_mutated(0, 'X', why), -EPROTO);	     /* magic */
	assert_int_equal(decode_mutated(5, 9, why), -EPROTO);	     /* type */
	assert_int_equal(decode_mutated(11, 47, why), -EPROTO);	     /* length */
	assert_int_equal(decode_mutated(7, 1, why), -EPROTO);	     /* header reserved */
	assert_int_equal(decode_mutated(b + 0, 9, why), -EINVAL);    /* transport */
	assert_int_equal(decode_mutated(b + 1, 0x80, why), -EINVAL); /* flags */
	assert_int_equal(decode_mutated(b + 2, 0, why), -EINVAL);    /* service */
	assert_int_equal(decode_mutated(b + 3, 6, why), -EINVAL);    /* MTU */
	assert_int_equal(decode_mutated(b + 3, 0, why), -EINVAL);
	assert_int_equal(decode_mutated(b + 14, 0, why), -EINVAL);    /* port 0 */
	assert_int_equal(decode_mutated(b + 15, 1, why), -EINVAL);    /* reserved */
	assert_int_equal(decode_mutated(b + 16, 0xff, why), -EINVAL); /* multicast GID */
	assert_int_equal(decode_mutated(b + 32, 0xff, why), -EINVAL); /* max_msg */
	assert_int_equal(decode_mutated(b + 36, 0xff, why), -EINVAL); /* credits */

	/* QPN 0 and 1 */
	uint8_t buf[128];
	struct qpg_wire_params p = good(), out;
	for (uint32_t q = 0; q < 2; q++) {
		p.qpn = q;
		int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &p, NULL);
		assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)),
				 -EINVAL);
		assert_non_null(strstr(why, "QPN"));
	}
}

/* A session's extra QPs: entries after the params, each checked, their
 * number bound to the body length. */
static void test_extra_qps(void **state)
{
	uint8_t buf[QPG_WIRE_MAX_BOOT_LEN], type, ver;
	char why[128];
	struct qpg_wire_params p = good(), out;
	struct qpg_wire_qp extra[3] = {{0x000102, 0x0a0b0c, 0}, {0x333, 0x1, 0}, {0xffffff, 0, 0}};
	p.extra_qps = 3;
	int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &p, extra);
	assert_int_equal(n, QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN + 3 * QPG_WIRE_QP_ENTRY_LEN);
	assert_int_equal(qpg_wire_peek(buf, (size_t)n, &type, &ver), n);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), 0);
	assert_memory_equal(&p, &out, sizeof(p));
	const size_t e0 = QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN;
	assert_int_equal(buf[e0 + 2], 0x01); /* big-endian QPN */
	assert_int_equal(buf[e0 + 3], 0x02);
	for (unsigned i = 0; i < 3; i++) {
		struct qpg_wire_qp q;
		qpg_wire_decode_qp(buf, i, &q);
		assert_memory_equal(&q, &extra[i], sizeof(q));
	}
	/* the count says 3, the body holds 2 */
	uint8_t short_body[QPG_WIRE_MAX_BOOT_LEN];
	memcpy(short_body, buf, (size_t)n);
	short_body[11] -= QPG_WIRE_QP_ENTRY_LEN;
	assert_int_equal(qpg_wire_decode_params(short_body, (size_t)n - QPG_WIRE_QP_ENTRY_LEN, &out,
						why, sizeof(why)),
			 -EPROTO);
	/* a partial entry is malformed at the header already */
	short_body[11] += 1;
	assert_int_equal(qpg_wire_peek(short_body, QPG_WIRE_HDR_LEN, &type, &ver), -EPROTO);
	/* each entry is checked like the params */
	buf[e0 + 16 + 3] = 1; /* second entry: QPN 0x000001 */
	buf[e0 + 16 + 2] = 0;
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "extra QP: QPN"));
	buf[e0 + 16 + 2] = 3;
	buf[e0 + 16 + 4] = 1; /* PSN > 24 bits */
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "extra QP: PSN"));
	buf[e0 + 16 + 4] = 0;
	buf[e0 + 16 + 15] = 7; /* a conn_id in a HELLO */
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	buf[e0 + 16 + 15] = 0;
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), 0);
	/* an ACCEPT must name every QP's connection */
	buf[5] = QPG_WIRE_ACCEPT;
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "no conn_id"));
	/* more than the wire allows, and none on tcp */
	p.extra_qps = QPG_WIRE_MAX_EXTRA_QPS + 1;
	assert_int_equal(qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &p, extra),
			 -EINVAL);
	struct qpg_wire_params t = good();
	t.transport = QPG_TRANSPORT_TCP;
	t.qpn = t.psn = t.lid = t.mtu = 0;
	t.extra_qps = 1;
	n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &t, extra);
	assert_int_equal(qpg_wire_decode_params(buf, (size_t)n, &out, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "tcp"));
}

static void test_truncated_and_garbage(void **state)
{
	uint8_t buf[128], type, ver;
	struct qpg_wire_params p = good(), out;
	int n = qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &p, NULL);
	for (int len = 0; len < n; len++)
		assert_int_not_equal(qpg_wire_decode_params(buf, (size_t)len, &out, NULL, 0), 0);
	/* a partial header is "need more", garbage is an error at once */
	assert_int_equal(qpg_wire_peek(buf, 3, &type, &ver), 0);
	const uint8_t http[] = "GET / HTTP/1.1";
	assert_int_equal(qpg_wire_peek(http, 1, &type, &ver), -EPROTO);
}

static void test_reject_roundtrip_and_sanitized(void **state)
{
	uint8_t buf[QPG_WIRE_MAX_BOOT_LEN];
	struct qpg_wire_reject r;
	int n = qpg_wire_encode_reject(buf, sizeof(buf), QPG_REJECT_SERVER_FULL,
				       "server full (100 of 100)");
	assert_true(n > 0);
	assert_int_equal(qpg_wire_decode_reject(buf, (size_t)n, &r), 0);
	assert_int_equal(r.code, QPG_REJECT_SERVER_FULL);
	assert_string_equal(r.text, "server full (100 of 100)");
	buf[QPG_WIRE_HDR_LEN + 4] = 0x1b; /* an escape sequence from a hostile server */
	assert_int_equal(qpg_wire_decode_reject(buf, (size_t)n, &r), 0);
	assert_int_equal(r.text[0], '?');
}

static void test_frame_header(void **state)
{
	uint8_t buf[64] = {0};
	struct qpg_frame_hdr h = {QPG_WIRE_VERSION, QPG_FRAME_ECHO_REQ, 0, 32,
				  0x0102030405060708ull},
			     o;
	qpg_frame_hdr_encode(buf, &h);
	assert_int_equal(buf[8], 0x01);
	assert_int_equal(qpg_frame_hdr_decode(buf, qpg_frame_len(32, 1), 1, 4096, &o), 0);
	assert_memory_equal(&h, &o, sizeof(h));
	assert_int_equal(qpg_frame_hdr_decode(buf, qpg_frame_len(32, 1) - 1, 1, 4096, &o), -EPROTO);
	assert_int_equal(qpg_frame_hdr_decode(buf, 64, 1, 16, &o), -EMSGSIZE);
	buf[0] = QPG_WIRE_VERSION + 1;
	assert_int_equal(qpg_frame_hdr_decode(buf, 64, 1, 4096, &o), -EPROTO);
}

/* An rdma message: whole frames back to back, nothing before, between or
 * after them, each within the agreed size. */
static size_t put_frame(uint8_t *p, uint32_t len, uint64_t seq)
{
	struct qpg_frame_hdr h = {QPG_WIRE_VERSION, QPG_FRAME_ECHO_REQ, 0, len, seq};
	qpg_frame_hdr_encode(p, &h);
	memset(p + QPG_FRAME_HDR_LEN, 0xa5, len + QPG_FRAME_TAG_LEN);
	return qpg_frame_len(len, 1);
}

static void test_message_of_frames(void **state)
{
	uint8_t buf[512];
	unsigned n = 99;
	size_t a = put_frame(buf, 40, 0);
	size_t b = put_frame(buf + a, 0, 1);
	size_t c = put_frame(buf + a + b, 100, 2);
	size_t all = a + b + c;
	assert_int_equal(qpg_message_check(buf, a, 1, 4096, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(qpg_message_check(buf, all, 1, 4096, &n), 0);
	assert_int_equal(n, 3);
	/* The last frame cut short, by a byte or down to part of its header. */
	assert_int_equal(qpg_message_check(buf, all - 1, 1, 4096, &n), -EPROTO);
	assert_int_equal(qpg_message_check(buf, a + b + 5, 1, 4096, &n), -EPROTO);
	/* Bytes after the last frame. */
	assert_int_equal(qpg_message_check(buf, all + 1, 1, 4096, &n), -EPROTO);
	/* Without tags the same bytes are other frames: the first no longer
	 * ends where the second begins. */
	assert_int_not_equal(qpg_message_check(buf, all, 0, 4096, &n), 0);
	/* A frame inside past the agreed size, or of another version. */
	assert_int_equal(qpg_message_check(buf, all, 1, 64, &n), -EMSGSIZE);
	buf[a] = QPG_WIRE_VERSION - 1;
	assert_int_equal(qpg_message_check(buf, all, 1, 4096, &n), -EPROTO);
	assert_int_equal(qpg_message_check(buf, 0, 1, 4096, &n), -EPROTO);
}

/* docs/protocol.md names the version the code sends: in its title, and in
 * the version byte of both headers (the bootstrap's and the frames'), each
 * checked against what the encoders write. */
static void test_documented_version(void **state)
{
	FILE *f = fopen(QPG_SOURCE_DIR "/docs/protocol.md", "r");
	assert_non_null(f);
	char line[512];
	unsigned title = 0, boot = 0, frame = 0;
	int n_boot = 0, n_frame = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned v;
		if (sscanf(line, "# qpgate wire protocol, version %u", &v) == 1)
			title = v;
		if (sscanf(line, "| 4 | 1 | version | `%u`", &v) == 1)
			boot = v, n_boot++;
		if (sscanf(line, "| 0 | 1 | version: `%u`", &v) == 1)
			frame = v, n_frame++;
	}
	fclose(f);
	assert_int_equal(n_boot, 1);
	assert_int_equal(n_frame, 1);
	assert_int_equal(title, QPG_WIRE_VERSION);
	uint8_t buf[128];
	struct qpg_wire_params in = good();
	assert_true(qpg_wire_encode_params(buf, sizeof(buf), QPG_WIRE_HELLO, &in, NULL) > 0);
	assert_int_equal(boot, buf[4]);
	struct qpg_frame_hdr h = {QPG_WIRE_VERSION, 1, 0, 0, 0};
	qpg_frame_hdr_encode(buf, &h);
	assert_int_equal(frame, buf[0]);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_documented_version),
	      cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_ticket_flag_only_in_hello),
	      cmocka_unit_test(test_every_field_validated), cmocka_unit_test(test_extra_qps),
	      cmocka_unit_test(test_truncated_and_garbage),
	      cmocka_unit_test(test_reject_roundtrip_and_sanitized),
	      cmocka_unit_test(test_frame_header), cmocka_unit_test(test_message_of_frames))

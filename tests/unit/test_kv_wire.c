/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV wire format: requests, replies, EXISTS lists, TTLs and one-sided
 * grants round-trip, and every malformed one is refused with its reason. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"

#include "qpgate/kv.h"

static int enc_req(uint8_t *buf, uint8_t op, const char *key, uint32_t vlen, uint32_t off)
{
	struct qpg_kv_req r = {.op = op,
			       .key_len = (uint16_t)strlen(key),
			       .req_id = 77,
			       .value_len = vlen,
			       .offset = off,
			       .key = (const uint8_t *)key};
	return qpg_kv_encode_req(buf, 512, &r);
}

static void test_req_round_trip(void **st)
{
	uint8_t buf[512];
	char why[128];
	int n = enc_req(buf, QPG_KV_PUT, "block/7", 10, 4);
	memcpy(buf + n, "abcdef", 6);
	struct qpg_kv_req r;
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n + 6, &r, why, sizeof(why)), 0);
	assert_int_equal(r.op, QPG_KV_PUT);
	assert_int_equal(r.req_id, 77);
	assert_int_equal(r.key_len, 7);
	assert_memory_equal(r.key, "block/7", 7);
	assert_int_equal(r.value_len, 10);
	assert_int_equal(r.offset, 4);
	assert_int_equal(r.chunk_len, 6);
	assert_memory_equal(r.chunk, "abcdef", 6);
	/* Big-endian on the wire. */
	assert_int_equal(buf[2], 0);
	assert_int_equal(buf[3], 7);
	assert_int_equal(buf[7], 77);
}

static void expect_bad(const uint8_t *buf, size_t len, int status, const char *reason)
{
	struct qpg_kv_req r;
	char why[128] = "";
	assert_int_equal(qpg_kv_decode_req(buf, len, &r, why, sizeof(why)), status);
	assert_non_null(strstr(why, reason));
}

static void test_req_refusals(void **st)
{
	uint8_t buf[600];
	int n = enc_req(buf, QPG_KV_GET, "k", 0, 0);
	expect_bad(buf, 10, QPG_KV_MALFORMED, "shorter than its header");
	buf[0] = 9;
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "unknown operation");
	n = enc_req(buf, QPG_KV_GET, "k", 0, 0);
	buf[1] = 8;
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "reserved flags");
	buf[1] = QPG_KV_F_ONE_SIDED | QPG_KV_F_GRANT_LARGE; /* exclusive */
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "reserved flags");
	n = enc_req(buf, QPG_KV_DEL, "k", 0, 0);
	buf[1] = QPG_KV_F_ONE_SIDED; /* only a GET may ask for a grant */
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "reserved flags");
	buf[1] = QPG_KV_F_RELEASE; /* a grant is released only with a GET */
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "reserved flags");
	n = enc_req(buf, QPG_KV_GET, "k", 0, 0x10003);
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "carry no value, length or offset");
	buf[1] = QPG_KV_F_RELEASE | QPG_KV_F_ONE_SIDED; /* the offset names the grant */
	struct qpg_kv_req rel;
	char why[128];
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n, &rel, why, sizeof(why)), 0);
	assert_int_equal(rel.offset, 0x10003);
	assert_int_equal(rel.flags, QPG_KV_F_RELEASE | QPG_KV_F_ONE_SIDED);
	n = enc_req(buf, QPG_KV_GET, "k", 0, 0);
	expect_bad(buf, (size_t)n - 1, QPG_KV_MALFORMED, "key runs past");
	expect_bad(buf, (size_t)n + 3, QPG_KV_MALFORMED, "carry no value");
	buf[2] = 0;
	buf[3] = 0;
	expect_bad(buf, QPG_KV_REQ_HDR_LEN, QPG_KV_MALFORMED, "empty key");
	buf[2] = 1; /* 256 + ... */
	buf[3] = 0;
	expect_bad(buf, sizeof(buf), QPG_KV_KEY_TOO_LARGE, "longer than 250");
	n = enc_req(buf, QPG_KV_PUT, "k", 10, 8);
	memset(buf + n, 'x', 3);
	expect_bad(buf, (size_t)n + 3, QPG_KV_MALFORMED, "outside its value");
	n = enc_req(buf, QPG_KV_PUT, "k", 10, 11);
	expect_bad(buf, (size_t)n + 1, QPG_KV_MALFORMED, "outside its value");
	n = enc_req(buf, QPG_KV_PUT, "k", 10, 0);
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "empty PUT chunk");
}

/* EXISTS: a list of keys out, a bitmap and the stored prefix back; every
 * field checked both ways. */
static void test_exists_wire(void **st)
{
	uint8_t buf[600];
	char why[128];
	const uint8_t list[] = {1, 'a', 3, 'b', 'c', 'd', 2, 'e', 'f'};
	assert_int_equal(qpg_kv_exists_count(list, sizeof(list)), 3);
	assert_int_equal(qpg_kv_exists_count(list, sizeof(list) - 1), -EINVAL); /* cut short */
	assert_int_equal(qpg_kv_exists_count(list, 0), -EINVAL);		/* no key */
	const uint8_t empty_key[] = {1, 'a', 0};
	assert_int_equal(qpg_kv_exists_count(empty_key, sizeof(empty_key)), -EINVAL);
	uint8_t many[257 * 2];
	for (unsigned i = 0; i < 257; i++)
		many[2 * i] = 1, many[2 * i + 1] = (uint8_t)i;
	assert_int_equal(qpg_kv_exists_count(many, 256 * 2), 256);
	assert_int_equal(qpg_kv_exists_count(many, sizeof(many)), -EINVAL); /* 257 keys */

	struct qpg_kv_req q = {.op = QPG_KV_EXISTS, .req_id = 9, .value_len = 3};
	int n = qpg_kv_encode_req(buf, sizeof(buf), &q);
	memcpy(buf + n, list, sizeof(list));
	struct qpg_kv_req r;
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n + sizeof(list), &r, why, sizeof(why)), 0);
	assert_int_equal(r.op, QPG_KV_EXISTS);
	assert_int_equal(r.value_len, 3);
	assert_int_equal(r.chunk_len, sizeof(list));
	size_t pos = 0;
	const uint8_t *key;
	assert_int_equal(qpg_kv_exists_next(r.chunk, r.chunk_len, &pos, &key), 1);
	assert_int_equal(qpg_kv_exists_next(r.chunk, r.chunk_len, &pos, &key), 3);
	assert_memory_equal(key, "bcd", 3);
	assert_int_equal(qpg_kv_exists_next(r.chunk, r.chunk_len, &pos, &key), 2);
	assert_int_equal(qpg_kv_exists_next(r.chunk, r.chunk_len, &pos, &key), 0);
	/* value_len must count the list's keys, and there is no key field. */
	buf[11] = 2;
	expect_bad(buf, (size_t)n + sizeof(list), QPG_KV_MALFORMED, "EXISTS key list");
	buf[11] = 3;
	expect_bad(buf, (size_t)n + sizeof(list) - 1, QPG_KV_MALFORMED, "EXISTS key list");
	buf[3] = 1;
	expect_bad(buf, (size_t)n + sizeof(list), QPG_KV_MALFORMED, "no key or offset");
	buf[3] = 0;
	buf[1] = QPG_KV_F_ONE_SIDED;
	expect_bad(buf, (size_t)n + sizeof(list), QPG_KV_MALFORMED, "reserved flags");

	/* The reply: 10 keys, the first 2 and the 5th stored: prefix 2. */
	struct qpg_kv_reply a = {
	    .op = QPG_KV_EXISTS, .status = QPG_KV_OK, .req_id = 9, .value_len = 10, .offset = 2};
	n = qpg_kv_encode_reply(buf, sizeof(buf), &a);
	buf[n] = 0x13;
	buf[n + 1] = 0x00;
	struct qpg_kv_reply d;
	assert_int_equal(qpg_kv_decode_reply(buf, (size_t)n + 2, &d), 0);
	assert_int_equal(d.value_len, 10);
	assert_int_equal(d.offset, 2);
	assert_int_equal(d.chunk_len, 2);
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 1, &d), 0); /* bitmap short */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 3, &d), 0); /* and long */
	buf[n + 1] = 0x04; /* bit 10: past the last key */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 2, &d), 0);
	buf[n + 1] = 0x00;
	buf[15] = 3; /* a prefix the bitmap does not have */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 2, &d), 0);
	buf[15] = 2;
	buf[11] = 0; /* no keys */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n, &d), 0);
}

/* A PUT's TTL rides its first chunk, after the key; nowhere else. */
static void test_ttl_wire(void **st)
{
	uint8_t buf[600];
	char why[128];
	struct qpg_kv_req q = {.op = QPG_KV_PUT,
			       .flags = QPG_KV_F_TTL,
			       .key_len = 3,
			       .req_id = 4,
			       .value_len = 10,
			       .key = (const uint8_t *)"abc",
			       .ttl_ms = 90000};
	int n = qpg_kv_encode_req(buf, sizeof(buf), &q);
	assert_int_equal(n, QPG_KV_REQ_HDR_LEN + 3 + QPG_KV_TTL_LEN);
	memcpy(buf + n, "0123456789", 10);
	struct qpg_kv_req r;
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n + 10, &r, why, sizeof(why)), 0);
	assert_int_equal(r.ttl_ms, 90000);
	assert_int_equal(r.chunk_len, 10);
	assert_memory_equal(r.chunk, "0123456789", 10);
	/* 0 ms, or no room for it: refused. */
	memset(buf + QPG_KV_REQ_HDR_LEN + 3, 0, QPG_KV_TTL_LEN);
	expect_bad(buf, (size_t)n + 10, QPG_KV_MALFORMED, "TTL missing or 0");
	expect_bad(buf, QPG_KV_REQ_HDR_LEN + 3 + 2, QPG_KV_MALFORMED, "TTL missing or 0");
	/* Only a PUT's first chunk carries one. */
	q.offset = 4;
	q.value_len = 14;
	n = qpg_kv_encode_req(buf, sizeof(buf), &q);
	expect_bad(buf, (size_t)n + 10, QPG_KV_MALFORMED, "reserved flags");
	q = (struct qpg_kv_req){
	    .op = QPG_KV_GET, .flags = QPG_KV_F_TTL, .key_len = 1, .key = (const uint8_t *)"k"};
	n = qpg_kv_encode_req(buf, sizeof(buf), &q);
	expect_bad(buf, (size_t)n, QPG_KV_MALFORMED, "reserved flags");
}

static void test_reply_round_trip(void **st)
{
	uint8_t buf[64];
	struct qpg_kv_reply r = {
	    .op = QPG_KV_GET, .status = QPG_KV_OK, .req_id = 5, .value_len = 20, .offset = 16};
	int n = qpg_kv_encode_reply(buf, sizeof(buf), &r);
	memcpy(buf + n, "wxyz", 4);
	struct qpg_kv_reply d;
	assert_int_equal(qpg_kv_decode_reply(buf, (size_t)n + 4, &d), 0);
	assert_int_equal(d.req_id, 5);
	assert_int_equal(d.chunk_len, 4);
	/* A chunk past the value's end is refused. */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 5, &d), 0);
	buf[1] = 42;
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + 4, &d), 0);
}

static void test_one_sided_wire(void **st)
{
	uint8_t buf[128];
	char why[128];
	struct qpg_kv_req q;
	/* A one-sided GET is a GET with the flag. */
	int n = enc_req(buf, QPG_KV_GET, "k", 0, 0);
	buf[1] = QPG_KV_F_ONE_SIDED;
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n, &q, why, sizeof(why)), 0);
	assert_int_equal(q.flags, QPG_KV_F_ONE_SIDED);
	/* RELEASE: the grant id in the offset field, and nothing else. */
	struct qpg_kv_req rel = {.op = QPG_KV_RELEASE, .req_id = 3, .offset = 0x00070002};
	n = qpg_kv_encode_req(buf, sizeof(buf), &rel);
	assert_int_equal(n, QPG_KV_REQ_HDR_LEN);
	assert_int_equal(qpg_kv_decode_req(buf, (size_t)n, &q, why, sizeof(why)), 0);
	assert_int_equal(q.offset, 0x00070002);
	expect_bad(buf, (size_t)n + 1, QPG_KV_MALFORMED, "only a grant id");
	buf[3] = 1; /* a key */
	expect_bad(buf, (size_t)n + 1, QPG_KV_MALFORMED, "only a grant id");

	/* The grant: fixed layout, big-endian, exact length. */
	struct qpg_kv_grant g = {.addr = 0x0102030405060708ull,
				 .rkey = 0xa1b2c3d4,
				 .grant_id = 9,
				 .digest_alg = QPG_KV_DIGEST_SHA512_256};
	memset(g.digest, 0x5a, sizeof(g.digest));
	struct qpg_kv_reply r = {.op = QPG_KV_GET,
				 .status = QPG_KV_OK,
				 .flags = QPG_KV_R_GRANT,
				 .req_id = 4,
				 .value_len = 4096};
	n = qpg_kv_encode_reply(buf, sizeof(buf), &r);
	assert_int_equal(qpg_kv_encode_grant(buf + n, sizeof(buf) - (size_t)n, &g),
			 QPG_KV_GRANT_LEN);
	assert_int_equal(buf[n], 0x01);
	assert_int_equal(buf[n + 8], 0xa1);
	assert_int_equal(buf[n + 16], QPG_KV_DIGEST_SHA512_256);
	assert_int_equal(buf[n + 17] | buf[n + 18] | buf[n + 19], 0);
	assert_int_equal(buf[n + 20], 0x5a);
	assert_int_equal(buf[n + QPG_KV_GRANT_LEN - 1], 0x5a);
	struct qpg_kv_reply d;
	assert_int_equal(qpg_kv_decode_reply(buf, (size_t)n + QPG_KV_GRANT_LEN, &d), 0);
	assert_int_equal(d.flags, QPG_KV_R_GRANT);
	struct qpg_kv_grant dg;
	assert_int_equal(qpg_kv_decode_grant(d.chunk, d.chunk_len, &dg), 0);
	assert_true(dg.addr == g.addr);
	assert_int_equal(dg.rkey, g.rkey);
	assert_int_equal(dg.grant_id, 9);
	assert_int_equal(dg.digest_alg, QPG_KV_DIGEST_SHA512_256);
	assert_memory_equal(dg.digest, g.digest, sizeof(g.digest));
	/* A digest the client cannot name, or reserved bytes set: no grant to
	 * READ by. */
	uint8_t *gb = buf + n;
	const uint8_t bad_alg[] = {QPG_KV_DIGEST_AUTO, QPG_KV_DIGEST_MAX + 1, 0xff};
	for (size_t i = 0; i < sizeof(bad_alg); i++) {
		gb[16] = bad_alg[i];
		assert_int_equal(qpg_kv_decode_grant(gb, QPG_KV_GRANT_LEN, &dg), -EPROTO);
	}
	gb[16] = QPG_KV_DIGEST_SHA256;
	assert_int_equal(qpg_kv_decode_grant(gb, QPG_KV_GRANT_LEN, &dg), 0);
	assert_int_equal(dg.digest_alg, QPG_KV_DIGEST_SHA256);
	for (int i = 17; i < 20; i++) {
		gb[i] = 1;
		assert_int_equal(qpg_kv_decode_grant(gb, QPG_KV_GRANT_LEN, &dg), -EPROTO);
		gb[i] = 0;
	}
	assert_string_equal(qpg_kv_digest_name(QPG_KV_DIGEST_SHA256), "sha256");
	assert_string_equal(qpg_kv_digest_name(QPG_KV_DIGEST_SHA512_256), "sha512-256");
	assert_null(qpg_kv_digest_name(QPG_KV_DIGEST_MAX + 1));
	/* A grant of the wrong length, on a failed GET, or on another op is refused. */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + QPG_KV_GRANT_LEN - 1, &d), 0);
	buf[1] = QPG_KV_NOT_FOUND;
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + QPG_KV_GRANT_LEN, &d), 0);
	buf[1] = QPG_KV_OK;
	buf[0] = QPG_KV_DEL;
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + QPG_KV_GRANT_LEN, &d), 0);
	buf[0] = QPG_KV_GET;
	buf[2] = 0x80; /* unknown reply flag */
	assert_int_not_equal(qpg_kv_decode_reply(buf, (size_t)n + QPG_KV_GRANT_LEN, &d), 0);
	assert_int_not_equal(qpg_kv_decode_grant(d.chunk, QPG_KV_GRANT_LEN + 1, &dg), 0);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_req_round_trip),
	      cmocka_unit_test(test_req_refusals), cmocka_unit_test(test_reply_round_trip),
	      cmocka_unit_test(test_exists_wire), cmocka_unit_test(test_ttl_wire),
	      cmocka_unit_test(test_one_sided_wire))

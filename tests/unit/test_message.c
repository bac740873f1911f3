/* SPDX-License-Identifier: BSD-2-Clause */
/* A message of several frames (rdma: one SEND, docs/protocol.md,
 * "Messages") as the receiver takes it: each frame is checked as a frame
 * alone, in order, and a frame that fails its tag closes the connection
 * with none of the frames after it delivered. The receive path is the one
 * the rdma transport calls (qpg__conn_on_message), driven here on a real
 * client connection over tcp to an echo server on loopback, keyed with
 * tags as an rdma connection is (tcp frames carry none). */
#include <errno.h>
#include <string.h>

#include "unit.h"

#include "auth.h"
#include "client_int.h"
#include "client_testing.h"
#include "core.h"
#include "frame.h"
#include "loopback.h"
#include "qpgate/wire.h"

static const uint8_t key_c[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
				  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t key_s[32] = {32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
				  16, 15, 14, 13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1};
static const uint8_t salt_c[4] = {0xc1, 0xc2, 0xc3, 0xc4}, salt_s[4] = {0x51, 0x52, 0x53, 0x54};

/* N echo replies of 8 bytes back to back in B, tagged by SENDER with
 * sequence numbers 0.., frame BAD's tag flipped (-1: none). */
static size_t build(struct qpg_buf *b, struct qpg__auth *sender, int n, int bad)
{
	uint8_t *p = b->addr;
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		struct qpg_frame_hdr h = {QPG_WIRE_VERSION, QPG_FRAME_ECHO_REPLY, 0, 8,
					  (uint64_t)i};
		qpg_frame_hdr_encode(p + off, &h);
		memset(p + off + QPG_FRAME_HDR_LEN, 'a' + i, 8);
		uint8_t *tag = p + off + QPG_FRAME_HDR_LEN + 8;
		assert_int_equal(
		    qpg__auth_tag(&sender->tx, (uint64_t)i, p + off, QPG_FRAME_HDR_LEN + 8, tag),
		    0);
		if (i == bad)
			tag[0] ^= 0x80;
		off += qpg_frame_len(8, 1);
	}
	return off;
}

/* A connection up, keyed for tags, expecting N replies; the message of N
 * frames (BAD forged) handed to its receive path. */
static void deliver(int n, int bad, struct qpg_loopback_conn *k, struct qpg_client **out)
{
	struct qpg_client *cl = qpg_loopback_client(&qpg_lb, NULL, NULL);
	assert_non_null(cl);
	assert_int_equal(qpg_client_connect(cl, k, &k->c), 0);
	RUN_UNTIL(cl, k->up);
	assert_int_equal(k->up, 1);
	struct qpg__conn *c = qpg__client_test_conn(k->c);
	assert_non_null(c);
	struct qpg__auth sender;
	assert_int_equal(qpg__auth_init_raw(&sender, key_s, salt_s, key_c, salt_c), 0);
	qpg__auth_free(&c->auth);
	assert_int_equal(qpg__auth_init_raw(&c->auth, key_c, salt_c, key_s, salt_s), 0);
	c->auth.enabled = 1;
	k->c->outstanding = (uint32_t)n; /* as if N requests were out */
	struct qpg_buf *b = qpg_pool_get(&c->ep->pool);
	assert_non_null(b);
	size_t len = build(b, &sender, n, bad);
	assert_true(len <= b->len);
	qpg__conn_on_message(c, b, len);
	qpg__auth_free(&sender);
	*out = cl;
}

static void all_frames_of_a_message_delivered(void **state)
{
	(void)state;
	struct qpg_loopback_conn k = {0};
	struct qpg_client *cl;
	deliver(4, -1, &k, &cl);
	assert_int_equal(k.replies, 4);
	assert_int_equal(k.closed, 0);
	qpg_client_close(k.c);
	RUN_UNTIL(cl, k.closed);
	qpg_client_destroy(cl);
}

static void forged_frame_stops_the_message(void **state)
{
	(void)state;
	struct qpg_loopback_conn k = {0};
	struct qpg_client *cl;
	deliver(5, 2, &k, &cl); /* the third of five forged */
	assert_int_equal(k.replies, 2);
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	assert_int_equal(k.replies, 2); /* none after it, then or later */
	assert_non_null(strstr(k.why, "message 2 failed authentication"));
	qpg_client_destroy(cl);
}

static uint8_t echoed[256];
static uint32_t echoed_len;
static int releases;

static void on_echo(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		    uint32_t len)
{
	(void)c;
	(void)type;
	((struct qpg_loopback_conn *)user)->replies++;
	echoed_len = len < sizeof(echoed) ? len : (uint32_t)sizeof(echoed);
	memcpy(echoed, p, echoed_len);
}

static void count_release(struct qpg_buf *b)
{
	(void)b;
	releases++;
}

/* A frame whose payload ends in lent bytes (qpg__conn_send_ref) where the
 * transport cannot gather them (tcp, or no region): they are copied into
 * the frame at once and given back through their release, once, before the
 * call returns; the peer gets head and value as one payload (the echo
 * brings back the copy, not the buffer changed afterwards). A payload over
 * max_msg is refused, and the value given back too. */
static void lent_value_copied_where_it_cannot_be_gathered(void **state)
{
	(void)state;
	struct qpg_client_opts o;
	qpg_loopback_client_opts(&qpg_lb, &o);
	o.connect_attempts = 1;
	struct qpg_client_cbs cbs = qpg_loopback_cbs;
	cbs.reply = on_echo;
	struct qpg_client *cl;
	char err[256];
	assert_int_equal(qpg_client_create(&cl, &o, &cbs, err, sizeof(err)), 0);
	struct qpg_loopback_conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.up);
	assert_int_equal(k.up, 1);
	struct qpg__conn *c = qpg__client_test_conn(k.c);
	uint8_t value[100], want[108];
	for (int i = 0; i < 100; i++)
		value[i] = (uint8_t)(i * 7 + 1);
	memcpy(want, "head1234", 8);
	memcpy(want + 8, value, 100);
	struct qpg_buf v = {.addr = value, .len = 100, .io_len = 100, .release = count_release};
	struct qpg_buf *b = qpg_pool_get(&c->ep->pool);
	assert_non_null(b);
	memcpy((uint8_t *)b->addr + QPG_FRAME_HDR_LEN, "head1234", 8);
	releases = 0;
	k.c->outstanding++; /* as a request the client made */
	assert_int_equal(qpg__conn_send_ref(c, b, QPG_FRAME_ECHO_REQ, 0, 8, &v, NULL), 0);
	assert_int_equal(releases, 1);
	memset(value, 0, sizeof(value));
	RUN_UNTIL(cl, k.replies == 1);
	assert_int_equal(k.replies, 1);
	assert_int_equal(echoed_len, 108);
	assert_memory_equal(echoed, want, 108);
	v.io_len = c->max_msg; /* with the 8-byte head, over max_msg */
	b = qpg_pool_get(&c->ep->pool);
	assert_non_null(b);
	assert_int_equal(qpg__conn_send_ref(c, b, QPG_FRAME_ECHO_REQ, 0, 8, &v, NULL), -EMSGSIZE);
	assert_int_equal(releases, 2);
	assert_int_equal(k.closed, 0);
	qpg_client_close(k.c);
	RUN_UNTIL(cl, k.closed);
	qpg_client_destroy(cl);
}

QPG_UNIT_MAIN(qpg_loopback_group_start, qpg_loopback_group_stop,
	      cmocka_unit_test(all_frames_of_a_message_delivered),
	      cmocka_unit_test(forged_frame_stops_the_message),
	      cmocka_unit_test(lent_value_copied_where_it_cannot_be_gathered))

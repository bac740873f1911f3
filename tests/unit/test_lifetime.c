/* SPDX-License-Identifier: BSD-2-Clause */
/* Connection lifetime: a close requested inside a callback is scheduled,
 * never done under the caller (as libuv's uv_close). Real connections over
 * the tcp transport to a real echo server on loopback; run under ASan
 * (make asan) a use after free in any of these is a report and a failure.
 *
 * - a handler closes its own connection and goes on using it;
 * - a handler closes another connection whose reply is already in the
 *   same batch of events;
 * - a connect that fails reaches the closed callback with its user
 *   pointer, and the connection is counted until then;
 * - a session's QPs share one fate (tcp carries no sessions, so the
 *   members here never reach the wire: their lifetime is what is tested);
 * - a handshake deadline moves on once when the peer's bytes wait unread,
 *   and never for a peer that has sent nothing or is being refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

#include "client_testing.h"
#include "control.h"
#include "core.h" /* a session's members, below the public API */
#include "loopback.h"
#include "qpgate/wire.h"

/* Per-connection state a test's callbacks see. */
struct conn {
	struct qpg_client_conn *c;
	struct conn *victim; /* closed from this one's reply callback */
	bool close_self;     /* close from our own reply callback, then use it */
	int up, replies, closed;
	int replies_after_close;
	bool in_close_call; /* set around our own qpg_client_close */
	void *closed_user;
	char why[256];
};

static int anon_closed; /* closed callbacks without a user (session members) */

static int closed_inside_close_call;

static void on_up(struct qpg_client_conn *c, void *user)
{
	((struct conn *)user)->up++;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct conn *k = user;
	if (k->closed)
		k->replies_after_close++;
	k->replies++;
	if (k->close_self) {
		k->in_close_call = true;
		qpg_client_close(c);
		k->in_close_call = false;
		/* Still ours until the batch ends: using it must be safe. */
		struct qpg_conn_info ci;
		qpg_client_conn_info(c, &ci);
		assert_int_equal(qpg_client_send(c, QPG_FRAME_ECHO_REQ, "x", 1) < 0, 1);
	}
	if (k->victim && k->victim->c) {
		struct conn *v = k->victim;
		v->in_close_call = true;
		qpg_client_close(v->c);
		v->in_close_call = false;
		k->victim = NULL;
	}
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct conn *k = user;
	if (!k) {
		anon_closed++;
		return;
	}
	if (k->in_close_call)
		closed_inside_close_call++;
	k->closed++;
	k->closed_user = user;
	snprintf(k->why, sizeof(k->why), "%s", why);
}

static const struct qpg_client_cbs cbs = {
    .established = on_up, .reply = on_reply, .closed = on_closed};

static struct qpg_client *client_at(const char *host, uint16_t port, unsigned attempts);

static struct qpg_client *client(uint16_t port)
{
	return client_at("127.0.0.1", port, 5);
}

static struct qpg_client *client_at(const char *host, uint16_t port, unsigned attempts)
{
	struct qpg_client_opts o;
	qpg_loopback_client_opts(&qpg_lb, &o);
	o.host = host;
	o.port = port;
	o.connect_attempts = attempts;
	struct qpg_client *cl;
	char err[256];
	assert_int_equal(qpg_client_create(&cl, &o, &cbs, err, sizeof(err)), 0);
	return cl;
}

static void close_self_inside_reply(void **state)
{
	struct qpg_client *cl = client(qpg_lb.port);
	struct conn k = {.close_self = true};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.up);
	assert_int_equal(k.up, 1);
	assert_int_equal(qpg_client_send(k.c, QPG_FRAME_ECHO_REQ, "hello", 5), 0);
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.replies, 1);
	assert_int_equal(k.closed, 1);
	assert_int_equal(closed_inside_close_call, 0);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	qpg_client_destroy(cl);
}

/* N pairs: each pair's first reply closes the other, whose reply was sent
 * at the same moment and is usually in the same epoll batch. */
static void close_other_in_same_batch(void **state)
{
	enum { N = 16 };
	struct qpg_client *cl = client(qpg_lb.port);
	struct conn k[2 * N];
	memset(k, 0, sizeof(k));
	for (int i = 0; i < 2 * N; i++) {
		k[i].victim = &k[i ^ 1];
		assert_int_equal(qpg_client_connect(cl, &k[i], &k[i].c), 0);
	}
	int up = 0;
	for (int t = 0; t < 500 && up < 2 * N; t++) {
		qpg_client_run(cl, 10);
		up = 0;
		for (int i = 0; i < 2 * N; i++)
			up += k[i].up;
	}
	assert_int_equal(up, 2 * N);
	for (int i = 0; i < 2 * N; i++)
		assert_int_equal(qpg_client_send(k[i].c, QPG_FRAME_ECHO_REQ, "ping", 4), 0);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == (size_t)N);
	int closed = 0;
	for (int i = 0; i < 2 * N; i++) {
		closed += k[i].closed;
		assert_true(k[i].closed <= 1);
		assert_int_equal(k[i].replies_after_close, 0);
	}
	assert_int_equal(closed, N); /* one of each pair */
	assert_int_equal(closed_inside_close_call, 0);
	for (int i = 0; i < 2 * N; i++)
		if (!k[i].closed)
			qpg_client_close(k[i].c);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	for (int i = 0; i < 2 * N; i++)
		assert_int_equal(k[i].closed, 1);
	qpg_client_destroy(cl);
}

/* Refused later (port 1 on loopback: EINPROGRESS, then RST), or at once
 * inside qpg_client_connect (127.255.255.255, loopback's broadcast address:
 * connect() fails with ENETUNREACH and nothing is sent). Either way the
 * closed callback comes from the loop, with USER. */
static void failed_connect(const char *host)
{
	struct qpg_client *cl = client_at(host, 1, 5);
	struct conn k = {0};
	struct qpg_client_conn *c = NULL;
	assert_int_equal(qpg_client_connect(cl, &k, &c), 0);
	assert_non_null(c);
	assert_int_equal(qpg_client_conn_count(cl), 1);
	assert_int_equal(k.closed, 0); /* never under the caller */
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	assert_ptr_equal(k.closed_user, &k);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	qpg_client_destroy(cl);
}

static void failed_connect_reaches_closed_with_user(void **state)
{
	failed_connect("127.0.0.1");
	failed_connect("127.255.255.255");
}

/* The service takes one request type: a frame of another type closes that
 * connection, before the service sees it, and no other. */
static void wrong_frame_type_closes_only_its_connection(void **state)
{
	struct qpg_client *cl = client(qpg_lb.port);
	struct conn bad = {0}, good = {0};
	assert_int_equal(qpg_client_connect(cl, &bad, &bad.c), 0);
	assert_int_equal(qpg_client_connect(cl, &good, &good.c), 0);
	RUN_UNTIL(cl, bad.up && good.up);
	assert_int_equal(qpg_client_send(bad.c, QPG_FRAME_ECHO_REPLY, "hello", 5), 0);
	RUN_UNTIL(cl, bad.closed);
	assert_int_equal(bad.closed, 1);
	assert_int_equal(bad.replies, 0);
	assert_int_equal(qpg_client_send(good.c, QPG_FRAME_ECHO_REQ, "hello", 5), 0);
	RUN_UNTIL(cl, good.replies);
	assert_int_equal(good.replies, 1);
	assert_int_equal(good.closed, 0);
	qpg_client_close(good.c);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	qpg_client_destroy(cl);
}

/* Closing one QP of a session closes the session, later, never under the
 * caller, and the leader says which QP it was. */
static void session_shares_one_fate(void **state)
{
	struct qpg_client *cl = client(qpg_lb.port);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	struct qpg_client_conn *h1 = qpg__client_test_member(k.c, NULL);
	struct qpg_client_conn *h2 = qpg__client_test_member(k.c, NULL);
	assert_non_null(h1);
	assert_non_null(h2);
	struct qpg__conn *m2 = qpg__client_test_conn(h2);
	assert_int_equal(m2->member_index, 2);
	assert_int_equal(qpg_client_conn_count(cl), 3);
	anon_closed = 0;
	qpg__conn_close(m2, QPG_ERR_LOCAL, "closed by the test");
	assert_int_equal(anon_closed + k.closed, 0); /* never under the caller */
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	assert_int_equal(k.closed, 1);
	assert_int_equal(anon_closed, 2);
	assert_non_null(strstr(k.why, "QP 2 of this session closed: closed by the test"));
	qpg_client_destroy(cl);
}

/* A member made for a leader that has already failed (connect() refused at
 * once) is still closed and reported when its maker closes it. */
static void member_of_a_failed_leader_is_reported(void **state)
{
	struct qpg_client *cl = client_at("127.255.255.255", 1, 1);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	struct qpg__conn *l = qpg__client_test_conn(k.c);
	assert_true(l->state >= QPG_CONN_CLOSING);
	struct qpg_client_conn *h = qpg__client_test_member(k.c, NULL);
	assert_non_null(h);
	struct qpg__conn *m = qpg__client_test_conn(h);
	anon_closed = 0;
	qpg__conn_close(m, l->err, "%s", l->why);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	assert_int_equal(anon_closed, 1);
	assert_int_equal(k.closed, 1);
	qpg_client_destroy(cl);
}

/* --busy-poll left at its default takes the transport's own window; a
 * window chosen, 0 among them, is kept. */
static void busy_poll_default_is_the_transports(void **state)
{
	(void)state;
	struct qpg__endpoint *ep = calloc(1, sizeof(*ep));
	assert_non_null(ep);
	struct qpg__ep_opts o = {.t = qpg__transport_by_kind(QPG_TRANSPORT_TCP),
				 .max_msg = 64,
				 .pool_max = 64,
				 .busy_poll_us = QPG_BUSY_POLL_US_DEFAULT};
	const uint32_t chosen[] = {QPG_BUSY_POLL_US_DEFAULT, 70, 0};
	const uint64_t want_ns[] = {QPG_BUSY_POLL_US_TCP * 1000ull, 70000, 0};
	for (size_t i = 0; i < sizeof(chosen) / sizeof(chosen[0]); i++) {
		o.busy_poll_us = chosen[i];
		assert_int_equal(qpg__endpoint_init(ep, &o), 0);
		assert_int_equal(ep->loop.spin_max_ns, want_ns[i]);
		qpg__endpoint_fini(ep);
	}
	free(ep);
}

/* The tick reads NOW once, then its callbacks may stamp a connection
 * (a reply sets active_ns from the coarse clock, which can already be past
 * NOW): such a connection is not idle, not centuries old. Judged plainly
 * (NOW - active_ns), it was closed "idle for 300000 ms" two seconds into a
 * run (unit.test_kvpark, CI of 2026-11-29). Members: any busy QP keeps its
 * session. */
static void stamp_after_now_is_not_idle(void **state)
{
	(void)state;
	const uint64_t now = 1000000000000ull, idle = 300000000000ull;
	struct qpg__conn lead = {0}, m = {0};
	lead.active_ns = now + 3000000; /* stamped 3 ms after the tick read NOW */
	assert_false(qpg__session_idle(&lead, now, idle));
	lead.active_ns = now - idle - 1;
	assert_true(qpg__session_idle(&lead, now, idle));
	lead.active_ns = now - idle; /* exactly the bound: not yet */
	assert_false(qpg__session_idle(&lead, now, idle));
	lead.active_ns = now - idle - 1;
	lead.members = &m;
	m.member_index = 1;
	m.active_ns = now + 1; /* a member stamped after NOW */
	assert_false(qpg__session_idle(&lead, now, idle));
	assert_false(qpg__session_idle(&m, now, idle)); /* members are not judged alone */
	m.active_ns = now - idle - 1;
	assert_true(qpg__session_idle(&lead, now, idle));
	m.in_flight = 1;
	assert_false(qpg__session_idle(&lead, now, idle));
}

/* The deadline passed with the peer's next bytes unread in the socket (a
 * busy server's delay): extended once by the deadline's length, counted;
 * then no more, bytes or not. Nothing waiting, or a REJECT being sent:
 * never. */
static void deadline_moves_on_once_for_unread_bytes(void **state)
{
	(void)state;
	static struct qpg__endpoint ep; /* only its deadline and counters */
	ep.handshake_timeout_ns = 5000000000ull;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct qpg__conn c = {.ep = &ep, .state = QPG_CONN_TLS, .io = {.fd = sv[0]}};
	const uint64_t now = 1000000000000ull;
	c.deadline_ns = now - 1;
	assert_false(qpg__control_deadline_extend(&c, now)); /* nothing sent: closes */
	assert_int_equal(c.deadline_ns, now - 1);
	assert_int_equal(write(sv[1], "finished", 8), 8);
	c.state = QPG_CONN_REJECTING;
	assert_false(qpg__control_deadline_extend(&c, now)); /* being refused: closes */
	c.state = QPG_CONN_TLS;
	assert_true(qpg__control_deadline_extend(&c, now));
	assert_int_equal(c.deadline_ns, now + ep.handshake_timeout_ns);
	assert_int_equal(atomic_load(&ep.stats.deadlines_extended), 1);
	/* Once: the next deadline closes it, its bytes still unread or not. */
	assert_false(qpg__control_deadline_extend(&c, now + ep.handshake_timeout_ns + 1));
	assert_int_equal(atomic_load(&ep.stats.deadlines_extended), 1);
	close(sv[0]);
	close(sv[1]);
}

QPG_UNIT_MAIN(qpg_loopback_group_start, qpg_loopback_group_stop,
	      cmocka_unit_test(busy_poll_default_is_the_transports),
	      cmocka_unit_test(close_self_inside_reply),
	      cmocka_unit_test(close_other_in_same_batch),
	      cmocka_unit_test(failed_connect_reaches_closed_with_user),
	      cmocka_unit_test(wrong_frame_type_closes_only_its_connection),
	      cmocka_unit_test(session_shares_one_fate),
	      cmocka_unit_test(member_of_a_failed_leader_is_reported),
	      cmocka_unit_test(stamp_after_now_is_not_idle),
	      cmocka_unit_test(deadline_moves_on_once_for_unread_bytes))

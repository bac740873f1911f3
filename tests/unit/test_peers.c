/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-address accounting: IPv4 per address, IPv6 per /64 (one host holds
 * a whole /64), loopback and v4-mapped IPv6 per address. */
#include <arpa/inet.h>
#include <string.h>

#include "unit.h"

#include "peers.h"

static struct sockaddr_storage addr(const char *s)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, s, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, s, &a->sin_addr), 1);
	}
	return ss;
}

/* How many of ADDRS get in with a limit of 2 connections per peer. */
static int admitted(const char *const *addrs, int n)
{
	struct qpg__peers p;
	assert_int_equal(qpg__peers_init(&p, 64), 0);
	int in = 0;
	for (int i = 0; i < n; i++) {
		struct sockaddr_storage ss = addr(addrs[i]);
		const struct qpg__peer_limits l = {.max_conns = 2};
		enum qpg__peer_verdict why;
		if (qpg__peers_enter(&p, &ss, &l, 1, &why))
			in++;
	}
	qpg__peers_fini(&p);
	return in;
}

static void ipv6_counted_per_64(void **state)
{
	/* Four addresses of one /64: one peer, two get in. */
	const char *same64[] = {"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9",
				"2001:db8:1:2:1:2:3:4"};
	assert_int_equal(admitted(same64, 4), 2);
	/* Four /64s: four peers. */
	const char *four64[] = {"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1",
				"2001:db8:1:4::1"};
	assert_int_equal(admitted(four64, 4), 4);
}

static void ipv4_and_mapped_per_address(void **state)
{
	const char *v4[] = {"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.1"};
	assert_int_equal(admitted(v4, 4), 4);
	const char *mapped[] = {"::ffff:192.0.2.1", "::ffff:192.0.2.2", "::ffff:192.0.2.3"};
	assert_int_equal(admitted(mapped, 3), 3);
	/* An IPv4 peer and its v4-mapped form are the same peer. */
	const char *both[] = {"192.0.2.7", "::ffff:192.0.2.7", "192.0.2.7"};
	assert_int_equal(admitted(both, 3), 2);
}

#define MS 1000000ull

/* Handshakes per second per address: a token bucket of BURST that refills
 * at RATE. With rate 0 nothing is limited. */
static void rate_limited_per_address(void **state)
{
	struct qpg__peers p;
	assert_int_equal(qpg__peers_init(&p, 64), 0);
	const struct qpg__peer_limits l = {.rate = 10, .burst = 3}; /* one token per 100 ms */
	struct sockaddr_storage a = addr("192.0.2.1"), b = addr("192.0.2.2");
	enum qpg__peer_verdict why;
	uint64_t t = 1000 * MS;
	struct qpg__peer *e[4];
	for (int i = 0; i < 3; i++)
		assert_non_null(e[i] = qpg__peers_enter(&p, &a, &l, t, &why));
	assert_null(qpg__peers_enter(&p, &a, &l, t, &why));
	assert_int_equal(why, QPG_PEER_RATE);
	/* Another address has its own bucket. */
	assert_non_null(e[3] = qpg__peers_enter(&p, &b, &l, t, &why));
	/* 100 ms later, one more token; not two. */
	assert_non_null(qpg__peers_enter(&p, &a, &l, t + 100 * MS, &why));
	assert_null(qpg__peers_enter(&p, &a, &l, t + 100 * MS, &why));
	assert_int_equal(why, QPG_PEER_RATE);
	qpg__peers_fini(&p);
	/* No rate: no limit. */
	assert_int_equal(qpg__peers_init(&p, 64), 0);
	const struct qpg__peer_limits none = {0};
	for (int i = 0; i < 1000; i++)
		assert_non_null(qpg__peers_enter(&p, &a, &none, t, &why));
	qpg__peers_fini(&p);
}

/* Leaving does not refill the bucket: an address whose tokens are spent
 * is remembered, with no connection, until they are back; then the sweep
 * forgets it. One that leaves with a full bucket is forgotten at once. */
static void spent_tokens_outlive_the_connections(void **state)
{
	struct qpg__peers p;
	assert_int_equal(qpg__peers_init(&p, 64), 0);
	const struct qpg__peer_limits l = {.rate = 10, .burst = 2};
	struct sockaddr_storage a = addr("192.0.2.1");
	enum qpg__peer_verdict why;
	uint64_t t = 1000 * MS;
	struct qpg__peer *e1 = qpg__peers_enter(&p, &a, &l, t, &why);
	struct qpg__peer *e2 = qpg__peers_enter(&p, &a, &l, t, &why);
	assert_non_null(e1);
	assert_non_null(e2);
	qpg__peers_leave(&p, e1, false, t);
	qpg__peers_leave(&p, e2, false, t);
	assert_int_equal(qpg__peers_count(&p), 1);
	assert_null(qpg__peers_enter(&p, &a, &l, t + 10 * MS, &why));
	assert_int_equal(why, QPG_PEER_RATE);
	qpg__peers_sweep(&p, t + 150 * MS); /* one token back of two: kept */
	assert_int_equal(qpg__peers_count(&p), 1);
	qpg__peers_sweep(&p, t + 200 * MS); /* full again: forgotten */
	assert_int_equal(qpg__peers_count(&p), 0);
	struct qpg__peer *e3 = qpg__peers_enter(&p, &a, &l, t + 1000 * MS, &why);
	assert_non_null(e3);
	qpg__peers_leave(&p, e3, false, t + 2000 * MS); /* refilled by then */
	assert_int_equal(qpg__peers_count(&p), 0);
	qpg__peers_fini(&p);
}

/* A network (IPv4 /24, IPv6 /48) shares one count of pending handshakes:
 * its addresses get in up to it, others elsewhere are not touched, and a
 * finished handshake gives its slot back. Nothing stays once all leave. */
static void pending_counted_per_prefix(void **state)
{
	struct qpg__peers p;
	assert_int_equal(qpg__peers_init(&p, 64), 0);
	const struct qpg__peer_limits l = {.max_pending = 100, .max_pending_prefix = 3};
	const char *net[] = {"192.0.2.1", "192.0.2.2", "192.0.2.200", "192.0.2.9",
			     "2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:ffff::1",
			     "2001:db8:1:3::1"};
	const char *other[] = {"198.51.100.1", "2001:db8:2::1"};
	struct qpg__peer *in[8];
	enum qpg__peer_verdict why;
	for (int i = 0; i < 8; i++) {
		struct sockaddr_storage a = addr(net[i]);
		in[i] = qpg__peers_enter(&p, &a, &l, 1, &why);
		if (i % 4 == 3) { /* the fourth of each network */
			assert_null(in[i]);
			assert_int_equal(why, QPG_PEER_PREFIX);
		} else {
			assert_non_null(in[i]);
		}
	}
	for (int i = 0; i < 2; i++) {
		struct sockaddr_storage a = addr(other[i]);
		struct qpg__peer *e = qpg__peers_enter(&p, &a, &l, 1, &why);
		assert_non_null(e);
		qpg__peers_leave(&p, e, false, 1);
	}
	qpg__peers_handshake_done(&p, in[0]); /* 192.0.2.1: done, still connected */
	struct sockaddr_storage a = addr(net[3]);
	struct qpg__peer *late = qpg__peers_enter(&p, &a, &l, 1, &why);
	assert_non_null(late);
	qpg__peers_leave(&p, late, false, 1);
	qpg__peers_leave(&p, in[0], true, 1);
	for (int i = 1; i < 7; i++)
		if (in[i])
			qpg__peers_leave(&p, in[i], false, 1);
	assert_int_equal(qpg__peers_count(&p), 0);
	qpg__peers_sweep(&p, 1); /* nothing to sweep: the prefixes went too */
	for (size_t b = 0; b < p.nbuckets; b++)
		assert_null(p.buckets[b]);
	qpg__peers_fini(&p);
}

QPG_UNIT_MAIN(NULL, NULL,
	      cmocka_unit_test(pending_counted_per_prefix),
	      cmocka_unit_test(ipv6_counted_per_64),
	      cmocka_unit_test(ipv4_and_mapped_per_address),
	      cmocka_unit_test(rate_limited_per_address),
	      cmocka_unit_test(spent_tokens_outlive_the_connections))

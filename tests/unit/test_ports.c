/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's own local ports (--source): the cursor hands out the next free
 * port of its range, skips a port held elsewhere, wraps from hi to lo, and
 * leaves the choice to connect() once a whole run of ports is taken. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

#include "control.h"

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(port);
	return a;
}

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	return fd;
}

static uint16_t local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

/* A socket bound to a port of the kernel's choosing on 127.0.0.1: it holds
 * that port until closed. */
static int holder(uint16_t *port)
{
	int fd = tcp_socket();
	struct sockaddr_in a = loopback(0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	*port = local_port(fd);
	return fd;
}

static int bind_with(struct qpg__port_cursor *cur, uint16_t *port)
{
	int fd = tcp_socket();
	struct sockaddr_in src = loopback(0);
	int rc = qpg__bind_source(fd, (struct sockaddr *)&src, sizeof(src), cur);
	*port = rc == 0 ? local_port(fd) : 0;
	return rc == 0 ? fd : -1;
}

/* The cursor's port is taken: the next one is used, not an error. */
static void test_skips_a_port_in_use(void **state)
{
	(void)state;
	uint16_t busy;
	int h = holder(&busy);
	if (busy == 65535) { /* no port above it to move on to */
		close(h);
		skip();
	}
	uint16_t hi = busy > 65535 - 200 ? 65535 : (uint16_t)(busy + 200);
	struct qpg__port_cursor cur = {.lo = busy, .hi = hi, .next = busy};
	uint16_t got;
	int fd = bind_with(&cur, &got);
	assert_true(fd >= 0);
	assert_true(got > busy && got <= hi);
	assert_int_equal(cur.next, got == hi ? busy : got + 1);
	close(fd);
	close(h);
}

/* Past hi the cursor starts again at lo. */
static void test_wraps_to_lo(void **state)
{
	(void)state;
	uint16_t a, b;
	int ha = holder(&a), hb = holder(&b);
	if (a > b) { /* keep the higher port held and free the lower one */
		uint16_t t = a;
		a = b, b = t;
		int f = ha;
		ha = hb, hb = f;
	}
	close(ha); /* a is free again (nothing else on 127.0.0.1 takes it this fast) */
	struct qpg__port_cursor cur = {.lo = a, .hi = b, .next = b};
	uint16_t got;
	int fd = bind_with(&cur, &got);
	assert_true(fd >= 0);
	assert_int_equal(got, a);
	assert_int_equal(cur.next, a + 1);
	close(fd);
	close(hb);
}

/* Every port of the range taken: bound to the address alone, the port left
 * to connect(), which still finds one. */
static void test_whole_range_taken(void **state)
{
	(void)state;
	uint16_t busy;
	int h = holder(&busy);
	struct qpg__port_cursor cur = {.lo = busy, .hi = busy, .next = busy};
	uint16_t got;
	int fd = bind_with(&cur, &got);
	assert_true(fd >= 0);
	assert_int_equal(got, 0);
	int l = tcp_socket();
	struct sockaddr_in la = loopback(0);
	assert_int_equal(bind(l, (struct sockaddr *)&la, sizeof(la)), 0);
	assert_int_equal(listen(l, 1), 0);
	la = loopback(local_port(l));
	assert_int_equal(connect(fd, (struct sockaddr *)&la, sizeof(la)), 0);
	assert_true(local_port(fd) != 0 && local_port(fd) != busy);
	close(fd);
	close(l);
	close(h);
}

/* The cursor covers the kernel's ephemeral range (or an equal part of it)
 * and starts inside it. */
static void test_init_uses_the_ephemeral_range(void **state)
{
	(void)state;
	unsigned lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		assert_int_equal(fscanf(f, "%u %u", &lo, &hi), 2);
		fclose(f);
	}
	struct qpg__port_cursor cur;
	qpg__port_cursor_init(&cur, 0, 0);
	assert_int_equal(cur.lo, lo);
	assert_int_equal(cur.hi, hi);
	assert_true(cur.next >= cur.lo && cur.next <= cur.hi);
	/* In 3 parts (qpgate-perf's loops): disjoint, in order, together the
	 * whole range, each starting inside its own part. */
	unsigned expect_lo = lo;
	for (unsigned k = 0; k < 3; k++) {
		qpg__port_cursor_init(&cur, k, 3);
		assert_int_equal(cur.lo, expect_lo);
		assert_true(cur.hi >= cur.lo);
		assert_true(cur.next >= cur.lo && cur.next <= cur.hi);
		expect_lo = cur.hi + 1u;
	}
	assert_int_equal(expect_lo, hi + 1u);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_skips_a_port_in_use),
	      cmocka_unit_test(test_wraps_to_lo), cmocka_unit_test(test_whole_range_taken),
	      cmocka_unit_test(test_init_uses_the_ephemeral_range))

/* Per-address accounting: IPv4 per address, IPv6 per /64 (one host holds
 * a whole /64), loopback and v4-mapped IPv6 per address. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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
		bool pending = false;
		if (qpg__peers_enter(&p, &ss, 0, 2, &pending))
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ipv6_counted_per_64),
	    cmocka_unit_test(ipv4_and_mapped_per_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

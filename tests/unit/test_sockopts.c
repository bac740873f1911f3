/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection's TCP options, at both ends of a real connection
 * over the tcp transport on loopback: no Nagle delay, and keepalive (10 s
 * idle, 6 probes 2 s apart) so that a peer gone without FIN or RST is found,
 * and a lossy link does not abort a live one (src/lib/sockets.c).
 * The server sets them once on its listener and every accepted socket
 * inherits them (src/lib/server_admit.c); the client sets them on each. */
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "unit.h"

#include "loopback.h"

static int opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

static uint16_t port_of(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* This process's connected TCP socket whose local (SERVER_END) or remote
 * port is PORT; -1 if none. Both ends live here: the server is a thread. */
static int find_end(uint16_t port, bool server_end)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int found = -1;
	for (struct dirent *e; found < 0 && (e = readdir(d));) {
		int fd = atoi(e->d_name);
		struct stat st;
		if (e->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &st) ||
		    !S_ISSOCK(st.st_mode))
			continue;
		if (port_of(fd, true) == 0) /* a listener, or not connected */
			continue;
		if (port_of(fd, !server_end) == port)
			found = fd;
	}
	closedir(d);
	return found;
}

static void check_tuned(int fd)
{
	assert_true(fd >= 0);
	assert_int_equal(opt(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	assert_int_equal(opt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 10);
	assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 2);
	assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPCNT), 6);
}

static void both_ends_have_nodelay_and_keepalive(void **state)
{
	(void)state;
	struct qpg_loopback lb;
	assert_int_equal(qpg_loopback_init(&lb), 0);
	assert_int_equal(qpg_loopback_start(&lb), 0);
	struct qpg_client *cl = qpg_loopback_client(&lb, NULL, NULL);
	assert_non_null(cl);
	struct qpg_loopback_conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.up || k.closed);
	assert_int_equal(k.up, 1);
	check_tuned(find_end(lb.port, true));  /* accepted: inherited from the listener */
	check_tuned(find_end(lb.port, false)); /* the client's own */
	qpg_client_close(k.c);
	RUN_UNTIL(cl, k.closed);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(both_ends_have_nodelay_and_keepalive))

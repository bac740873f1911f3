/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection's socket: TCP options, and the local ports a
 * client with --source hands out itself. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qpgate/client.h"
#include "sockets.h"

void qpg__sock_tune(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A peer that vanishes without FIN/RST (host gone) is found by keepalive:
	 * 10 s idle + 6 probes 2 s apart, so its QP is reclaimed within ~22 s.
	 * Six, not three: a probe is lost if it or its answer is, so on a link
	 * that loses 5% each way three in a row fail once in ~1,100 idle spells
	 * and a live connection was aborted (lab2.wire, CI of stop 78); six
	 * fail once in ~1.2 million.
	 * (In the lab's 50,000-client runs over loopback, thousands of live
	 * idle connections were aborted with ETIMEDOUT, at 10 s, 30 s and 60 s
	 * alike: the probes of a timer-wheel batch overflowed lo's backlog,
	 * net.core.netdev_max_backlog, and were dropped. bench/sweep-lab.sh
	 * raises it: its 50,000-client sweep then saw no abort.) */
	int idle = 10, intvl = 2, cnt = 6;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The kernel's ephemeral range (ip_local_port_range). */
static void port_range(unsigned *lo, unsigned *hi)
{
	*lo = 32768, *hi = 60999; /* the kernel's default */
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		unsigned a, b;
		if (fscanf(f, "%u %u", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535)
			*lo = a, *hi = b;
		fclose(f);
	}
}

unsigned qpg_local_port_count(void)
{
	unsigned lo, hi;
	port_range(&lo, &hi);
	return hi - lo + 1;
}

void qpg__port_cursor_init(struct qpg__port_cursor *cur, unsigned k, unsigned n)
{
	unsigned lo, hi;
	port_range(&lo, &hi);
	unsigned len = hi - lo + 1;
	if (n > 1 && k < n && len >= n) {
		unsigned from = lo + (unsigned)((uint64_t)len * k / n);
		hi = lo + (unsigned)((uint64_t)len * (k + 1) / n) - 1;
		lo = from;
	}
	uint32_t r = 0;
	if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
		r = (uint32_t)getpid();
	cur->lo = (uint16_t)lo;
	cur->hi = (uint16_t)hi;
	cur->next = (uint16_t)(lo + r % (hi - lo + 1));
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET)
		((struct sockaddr_in *)a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

/* Bind FD to SRC's address. With a cursor, to the cursor's next port that
 * is free: a client that opens tens of thousands of connections to one
 * server from one address would otherwise spend its time in connect()'s
 * port search, which tries the even ports of the range first and, once they
 * are all taken, walks every one of them again for each new connection (in
 * the lab, past 33,000 connections, 35% of the VM's CPU was
 * __inet_hash_connect and __inet_check_established). A port somebody else
 * holds is skipped; after QPG__PORT_TRIES in a row, or without a cursor,
 * the kernel picks the port at connect() (IP_BIND_ADDRESS_NO_PORT: per
 * destination, so the address does not use up its ports at bind time). */
#define QPG__PORT_TRIES 64
int qpg__bind_source(int fd, const struct sockaddr *src, socklen_t len,
		     struct qpg__port_cursor *cur)
{
	struct sockaddr_storage a;
	memcpy(&a, src, len);
	for (int i = 0; cur && i < QPG__PORT_TRIES; i++) {
		uint16_t port = cur->next;
		cur->next = port >= cur->hi ? cur->lo : (uint16_t)(port + 1);
		set_port(&a, port);
		if (bind(fd, (struct sockaddr *)&a, len) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	set_port(&a, 0);
	return bind(fd, (struct sockaddr *)&a, len);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Local ports for a tool that opens many connections to one server: how
 * many one local address has, and the address to pick them from. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"

/* Clients from which the tool picks its local ports (--source) instead of
 * leaving them to connect(): past tens of thousands of connections from one
 * address, the kernel's search walks the taken ports again for each new one
 * (in the lab, 50,000 clients fell from 133 to 28 connects/s). */
#define LOAD_PICK_PORTS_FROM 1000

/* The ports one local address has toward one server port. */
static long ports_per_address(void)
{
	long lo = 32768, hi = 60999; /* the kernel's default */
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		long a, b;
		if (fscanf(f, "%ld %ld", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535)
			lo = a, hi = b;
		fclose(f);
	}
	return hi - lo + 1;
}

static unsigned count_sources(const char *list)
{
	unsigned n = 1;
	for (const char *p = list; p && *p; p++)
		n += *p == ',';
	return n;
}

bool load_ports_fit(const struct qpg_client_opts *co, const struct load_opts *o, const char *prog)
{
	long per = ports_per_address();
	unsigned ns = count_sources(co->source);
	if ((long)o->nconns <= per * (long)ns)
		return true;
	if (co->transport == QPG_KIND_RDMA)
		fprintf(stderr,
			"%s: -c %d: more clients than the %ld local ports one address has toward "
			"one server port (net.ipv4.ip_local_port_range). Over rdma a client has one "
			"source address, the one its GID carries: run the rest from another host or "
			"network namespace, or widen the port range\n",
			prog, o->nconns, per);
	else
		fprintf(stderr,
			"%s: -c %d: more clients than %u local address(es) have ports toward one "
			"server port (%ld each, net.ipv4.ip_local_port_range): give more with "
			"--source A,B,... (each address has its own ports)\n",
			prog, o->nconns, ns, per);
	return false;
}

void load_pick_source(struct qpg_client_opts *co, const struct load_opts *o, char *buf,
		      size_t len, const char *prog)
{
	if (co->source || o->nconns < LOAD_PICK_PORTS_FROM || !co->host)
		return;
	/* The address the route toward the server leaves from: a UDP
	 * socket's connect() chooses it, and sends nothing. */
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
	if (getaddrinfo(co->host, "9", &hints, &ai) != 0 || !ai)
		return;
	struct sockaddr_storage local;
	socklen_t ll = sizeof(local);
	int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		  getsockname(fd, (struct sockaddr *)&local, &ll) == 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	const void *a = local.ss_family == AF_INET6
			    ? (const void *)&((struct sockaddr_in6 *)&local)->sin6_addr
			    : (const void *)&((struct sockaddr_in *)&local)->sin_addr;
	if (!ok || !inet_ntop(local.ss_family, a, buf, (socklen_t)len))
		return; /* left to the kernel */
	co->source = buf;
	fprintf(stderr,
		"%s: %d clients: their local ports are picked from %s by the tool (as "
		"--source does), not searched for by connect()\n",
		prog, o->nconns, buf);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Local ports for a tool that opens many connections to one server: how
 * many one local address has, and the address to pick them from; and what
 * many connections over loopback need of the kernel. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "load.h"

/* Clients from which the tool picks its local ports (--source) instead of
 * leaving them to connect(): past tens of thousands of connections from one
 * address, the kernel's search walks the taken ports again for each new one
 * (in the lab, 50,000 clients fell from 133 to 28 connects/s). */
#define LOAD_PICK_PORTS_FROM 1000
/* Clients over loopback from which the backlog note may be due. */
#define LOAD_LOOPBACK_NOTE_FROM 10000

static unsigned count_sources(const char *list)
{
	unsigned n = 1;
	for (const char *p = list; p && *p; p++)
		n += *p == ',';
	return n;
}

bool load_ports_fit(const struct qpg_client_opts *co, const struct load_opts *o, const char *prog)
{
	long per = (long)qpg_local_port_count();
	unsigned ns = count_sources(co->source);
	if ((long)o->nconns <= per * (long)ns)
		return true;
	fprintf(stderr,
		"%s: -c %d: more clients than %u local address(es) have ports toward one "
		"server port (%ld each, net.ipv4.ip_local_port_range): give more with "
		"--source A,B,... (each address has its own ports%s)%s\n",
		prog, o->nconns, ns, per,
		co->transport == QPG_KIND_RDMA
		    ? "; over rdma each must be an address of the RDMA device's netdev, "
		      "which gives it a GID of its own"
		    : "",
		per < 64512 && (long)o->nconns <= 64512L * (long)ns
		    ? ", or widen the range: sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\" "
		      "gives each address 64,512"
		    : "");
	return false;
}

void load_pick_source(struct qpg_client_opts *co, const struct load_opts *o, char *buf, size_t len,
		      const char *prog)
{
	if (co->source || o->nconns < LOAD_PICK_PORTS_FROM || !co->host)
		return;
	if (qpg_local_addr_toward_host(co->host, buf, len))
		return; /* left to the kernel */
	co->source = buf;
	fprintf(stderr,
		"%s: %d clients: their local ports are picked from %s by the tool (as "
		"--source does), not searched for by connect()\n",
		prog, o->nconns, buf);
}

/* HOST names this host's loopback: localhost, 127/8, ::1 or ::ffff:127/8. */
static bool is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) != 1)
		return false;
	return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
}

/* Loopback carries both ends' packets through one per-CPU backlog of
 * net.core.netdev_max_backlog packets (1,000 by default), and keepalive
 * probes come in batches: in the lab, 50,000 clients over lo with the
 * default lost 69 live connections to "Connection timed out" (their
 * probes dropped there). Say so before the run, with what to do. */
void load_note_loopback(const struct qpg_client_opts *co, const struct load_opts *o,
			const char *prog)
{
	if (!co->host || o->nconns < LOAD_LOOPBACK_NOTE_FROM || !is_loopback(co->host))
		return;
	long backlog = -1;
	FILE *f = fopen("/proc/sys/net/core/netdev_max_backlog", "r");
	if (f) {
		if (fscanf(f, "%ld", &backlog) != 1)
			backlog = -1;
		fclose(f);
	}
	if (backlog < 0 || backlog >= o->nconns)
		return;
	fprintf(stderr,
		"%s: note: %d connections over loopback: their keepalive probes come in "
		"batches, and lo drops what is past net.core.netdev_max_backlog (%ld), which can "
		"end live connections with 'Connection timed out': raise it "
		"(sysctl -w net.core.netdev_max_backlog=%d)\n",
		prog, o->nconns, backlog, o->nconns < 100000 ? 100000 : o->nconns);
}

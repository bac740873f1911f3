/* SPDX-License-Identifier: BSD-2-Clause */
/* Which RDMA device, port and GID a side uses, found from an IP address the
 * way a real host needs it: the RoCE v2 GID that carries that address
 * (IPv4-mapped for IPv4), from the device's GID table with its type and
 * network device (ibv_query_gid_table), never "the first ::ffff: GID".
 * A server asks with its --bind address, a client with the source address
 * its kernel routes toward the server. */
#include "gid_pick.h"

#include "qpgate/client.h"
#include "qpgate/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ADDR as the GID that carries it; *ANY for a wildcard address, whose
 * family is then all that counts. */
static int addr_gid(const struct sockaddr *addr, uint8_t gid[16], bool *v4, bool *any)
{
	memset(gid, 0, 16);
	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)addr;
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &s4->sin_addr, 4);
		*v4 = true;
		*any = s4->sin_addr.s_addr == htonl(INADDR_ANY);
		return 0;
	}
	if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)addr;
		memcpy(gid, &s6->sin6_addr, 16);
		*v4 = IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr);
		*any = IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
		return 0;
	}
	return -EAFNOSUPPORT;
}

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g->raw, v4mapped, sizeof(v4mapped)) == 0;
}

/* "rxe0 port 1 index 1 ::ffff:10.0.0.1 (eth0)" appended to BUF. */
static void describe(char *buf, size_t len, const char *dev, const struct ibv_gid_entry *e)
{
	char g[INET6_ADDRSTRLEN] = "?", nd[IF_NAMESIZE] = "?";
	inet_ntop(AF_INET6, e->gid.raw, g, sizeof(g));
	if (!e->ndev_ifindex || !if_indextoname(e->ndev_ifindex, nd))
		snprintf(nd, sizeof(nd), "no netdev");
	size_t used = strlen(buf);
	if (used + 1 < len)
		snprintf(buf + used, len - used, "%s%s port %u index %u %s (%s)", used ? "; " : "",
			 dev, e->port_num, e->gid_index, g, nd);
}

/* The RoCE v2 entries of one open device into *OUT (malloc'd). */
static ssize_t roce_v2_entries(struct ibv_context *ctx, struct ibv_gid_entry **out)
{
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da))
		return -errno;
	size_t total = 0;
	for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		if (ibv_query_port(ctx, p, &pa) == 0)
			total += (size_t)pa.gid_tbl_len;
	}
	struct ibv_gid_entry *e = calloc(total ? total : 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	ssize_t n = total ? ibv_query_gid_table(ctx, e, total, 0) : 0;
	if (n < 0) {
		free(e);
		return n;
	}
	ssize_t k = 0;
	for (ssize_t i = 0; i < n; i++)
		if (e[i].gid_type == IBV_GID_TYPE_ROCE_V2)
			e[k++] = e[i];
	*out = e;
	return k;
}

int qpg__gid_pick(const struct sockaddr *addr, const char *what, const char *dev_name, int port,
		  struct qpg__gid_pick *out, char *err, size_t err_len)
{
	uint8_t want[16];
	bool v4 = false, any = false;
	char a[INET6_ADDRSTRLEN + 2] = "?";
	if (addr_gid(addr, want, &v4, &any)) {
		snprintf(err, err_len, "%s is not an IP address", what);
		return -EAFNOSUPPORT;
	}
	inet_ntop(addr->sa_family, addr->sa_family == AF_INET
				       ? (const void *)&((const struct sockaddr_in *)addr)->sin_addr
				       : (const void *)&((const struct sockaddr_in6 *)addr)->sin6_addr,
		  a, sizeof(a));
	int n = 0, found = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		snprintf(err, err_len, "no RDMA device (%s)", strerror(errno));
		return -ENODEV;
	}
	char matches[1024] = "", others[1024] = "";
	int nmatch = 0;
	for (int d = 0; d < n; d++) {
		const char *name = ibv_get_device_name(list[d]);
		if (dev_name && strcmp(name, dev_name))
			continue;
		found++;
		struct ibv_context *ctx = ibv_open_device(list[d]);
		if (!ctx)
			continue;
		struct ibv_gid_entry *e = NULL;
		ssize_t k = roce_v2_entries(ctx, &e);
		for (ssize_t i = 0; i < k; i++) {
			if (port > 0 && e[i].port_num != (uint32_t)port)
				continue;
			bool hit = any ? gid_is_v4(&e[i].gid) == v4 : !memcmp(e[i].gid.raw, want, 16);
			if (!hit) {
				describe(others, sizeof(others), name, &e[i]);
				continue;
			}
			if (nmatch++ == 0) {
				snprintf(out->dev, sizeof(out->dev), "%s", name);
				out->port = (uint8_t)e[i].port_num;
				out->index = (int)e[i].gid_index;
			}
			describe(matches, sizeof(matches), name, &e[i]);
		}
		free(e);
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (!found) {
		snprintf(err, err_len, "no RDMA device%s%s", dev_name ? " named " : "",
			 dev_name ? dev_name : "");
		return -ENODEV;
	}
	if (nmatch == 1)
		return 0;
	if (nmatch == 0) {
		snprintf(err, err_len,
			 "no RoCE v2 GID carries %s%s (%s); RoCE v2 GIDs here: %s. Use one of "
			 "their addresses, or choose with -d, -i and -x",
			 any ? "an address of that family for " : "", a, what,
			 others[0] ? others : "none");
		return -EADDRNOTAVAIL;
	}
	snprintf(err, err_len,
		 "%s (%s) is on %d RDMA GIDs: %s. Choose one with -d and -i (and -x)", a, what,
		 nmatch, matches);
	return -ENOTUNIQ;
}

int qpg__local_addr_toward(const struct sockaddr *peer, socklen_t peer_len,
			   struct sockaddr_storage *out)
{
	int fd = socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	socklen_t len = sizeof(*out);
	int rc = connect(fd, peer, peer_len) || getsockname(fd, (struct sockaddr *)out, &len)
		     ? -errno
		     : 0;
	close(fd);
	return rc;
}

int qpg_local_addr_toward_host(const char *host, char *buf, size_t len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
	int rc = getaddrinfo(host, "9", &hints, &ai);
	if (rc != 0 || !ai)
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	struct sockaddr_storage local;
	rc = qpg__local_addr_toward(ai->ai_addr, ai->ai_addrlen, &local);
	freeaddrinfo(ai);
	if (rc)
		return rc;
	const void *a = local.ss_family == AF_INET6
			    ? (const void *)&((struct sockaddr_in6 *)&local)->sin6_addr
			    : (const void *)&((struct sockaddr_in *)&local)->sin_addr;
	return inet_ntop(local.ss_family, a, buf, (socklen_t)len) ? 0 : -errno;
}

int qpg__rdma_dev_open_for(struct qpg_rdma_dev *dev, const struct sockaddr *local,
			   const char *what, const char *name, int port, int gid_index, char *err,
			   size_t err_len)
{
	struct qpg__gid_pick pick = {.port = (uint8_t)(port > 0 ? port : 1), .index = gid_index};
	if (gid_index < 0 && local) {
		int rc = qpg__gid_pick(local, what, name, port, &pick, err, err_len);
		if (rc == -EADDRNOTAVAIL || rc == -ENOTUNIQ)
			return rc;
		if (rc == 0)
			name = pick.dev;
	}
	int rc = qpg_rdma_dev_open(dev, name, pick.port, pick.index);
	if (rc)
		snprintf(err, err_len,
			 "no usable RDMA device%s%s (%s): run inside the lab "
			 "(scripts/rxe-vm -- ...) or use --transport tcp",
			 name ? " " : "", name ? name : "", strerror(-rc));
	return rc;
}

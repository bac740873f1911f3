/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma transport's process setup (qpg__transport_ops.setup): the
 * device that owns the address the process speaks from, the GID each of a
 * client's source addresses carries (the server checks a HELLO's GID
 * against the address its control connection came from), and the
 * memlock limit against what the message pools will pin. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "gid_pick.h"
#include "memlock.h"
#include "rdma.h"

/* Several source addresses: the GID each one carries, all on one device
 * and port (one PD, one CQ); their bytes once the device is open. */
static int pick_source_gids(const struct qpg__transport_setup *su, char *err, size_t err_len)
{
	if (su->gid_index >= 0) {
		snprintf(err, err_len,
			 "--gid-index names one GID, but %u source addresses need one each: drop "
			 "--gid-index (each source's GID is found from its address)",
			 su->nsrc);
		return -EINVAL;
	}
	struct qpg__gid_pick first = {0};
	for (unsigned i = 0; i < su->nsrc; i++) {
		struct qpg__gid_pick p;
		char what[64];
		snprintf(what, sizeof(what), "source address %u", i + 1);
		int rc = qpg__gid_pick((const struct sockaddr *)&su->src[i], what, su->ib_dev,
				       su->ib_port, &p, err, err_len);
		if (rc)
			return rc == -ENODEV ? -ENODEV : -EINVAL;
		if (i == 0)
			first = p;
		else if (strcmp(p.dev, first.dev) != 0 || p.port != first.port) {
			snprintf(err, err_len,
				 "source address %u's GID is on %s port %u, the first's on %s port "
				 "%u: give sources of one device and port",
				 i + 1, p.dev, p.port, first.dev, first.port);
			return -EINVAL;
		}
		su->src_gid[i].index = (uint8_t)p.index;
		su->src_gid[i].own = true;
	}
	return 0;
}

static int fill_source_gids(const struct qpg__transport_setup *su, const struct qpg_rdma_dev *dev,
			    char *err, size_t err_len)
{
	for (unsigned i = 0; i < su->nsrc && su->src_gid[i].own; i++) {
		union ibv_gid g;
		if (ibv_query_gid(dev->ctx, dev->port, su->src_gid[i].index, &g)) {
			snprintf(err, err_len, "cannot read GID %u of %s: %s", su->src_gid[i].index,
				 dev->name, strerror(errno));
			return -EIO;
		}
		memcpy(su->src_gid[i].gid, g.raw, 16);
	}
	return 0;
}

/* The device for the setup's local address: a server's --bind address, or
 * a client's address toward the server. */
static int open_device(const struct qpg__transport_setup *su, struct qpg_rdma_dev *dev, char *err,
		       size_t err_len)
{
	if (!su->passive)
		return qpg__rdma_dev_open_for(dev, su->toward, su->toward_what, su->ib_dev,
					      su->ib_port, su->gid_index, err, err_len);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICHOST},
			*ai = NULL;
	if (getaddrinfo(su->bind_addr, NULL, &hints, &ai)) {
		snprintf(err, err_len, "bad --bind address '%s' (a numeric address)", su->bind_addr);
		return -EINVAL;
	}
	int rc = qpg__rdma_dev_open_for(dev, ai->ai_addr, "the --bind address", su->ib_dev,
					su->ib_port, su->gid_index, err, err_len);
	freeaddrinfo(ai);
	return rc;
}

int qpg__rdma_setup(const struct qpg__transport_setup *su, struct qpg_rdma_dev *dev, char *err,
		    size_t err_len)
{
	int rc = su->nsrc > 1 ? pick_source_gids(su, err, err_len) : 0;
	if (rc)
		return rc;
	if ((rc = open_device(su, dev, err, err_len)))
		return rc;
	if ((rc = fill_source_gids(su, dev, err, err_len)) ||
	    (rc = qpg__memlock_check(su->pinned_bytes + QPG__MEMLOCK_MARGIN, su->pinned_what, err,
				     err_len)))
		qpg_rdma_dev_close(dev);
	return rc;
}

void qpg__rdma_teardown(struct qpg_rdma_dev *dev)
{
	qpg_rdma_dev_close(dev);
}

void qpg__rdma_describe(const struct qpg_rdma_dev *dev, char *buf, size_t len)
{
	char g[INET6_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET6, dev->gid.raw, g, sizeof(g));
	snprintf(buf, len, " on %s port %u GID %d %s", dev->name, dev->port, dev->gid_index, g);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's source addresses (--source): parsed, and over rdma the GID
 * each one carries, since the server checks a HELLO's GID against the
 * address its control connection came from. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"
#include "gid_pick.h"

/* Parse LIST (comma-separated numeric addresses of FAMILY) into CL->src. */
int qpg__client_parse_sources(struct qpg_client *cl, const char *list, int family, char *err,
			      size_t err_len)
{
	const char *p = list;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char a[INET6_ADDRSTRLEN + 1];
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST},
				*ai = NULL;
		if (n == 0 || n >= sizeof(a)) {
			snprintf(err, err_len, "source addresses '%s': an empty or overlong entry",
				 list);
			return -EINVAL;
		}
		memcpy(a, p, n);
		a[n] = 0;
		if (getaddrinfo(a, NULL, &hints, &ai) != 0) {
			snprintf(err, err_len, "source address '%s' is not a numeric IP address",
				 a);
			return -EINVAL;
		}
		int fam = ai->ai_family;
		if (fam == family && cl->nsrc < QPG__MAX_SOURCES) {
			qpg__port_cursor_init(&cl->ports[cl->nsrc], cl->o.port_slice,
					      cl->o.port_slices);
			memcpy(&cl->src[cl->nsrc++], ai->ai_addr, ai->ai_addrlen);
		}
		freeaddrinfo(ai);
		if (fam != family) {
			snprintf(err, err_len,
				 "source address '%s' is IPv%c, but the server is IPv%c", a,
				 fam == AF_INET ? '4' : '6', family == AF_INET ? '4' : '6');
			return -EINVAL;
		}
		if (cl->nsrc == QPG__MAX_SOURCES && end) {
			snprintf(err, err_len, "more than %d source addresses", QPG__MAX_SOURCES);
			return -EINVAL;
		}
		p = end ? end + 1 : p + n;
	}
	if (cl->nsrc == 0) {
		snprintf(err, err_len, "source addresses: none given");
		return -EINVAL;
	}
	return 0;
}

/* Over rdma with several source addresses: the GID each one carries, all
 * on one device and port (one PD, one CQ); their GIDs' bytes once the
 * device is open (qpg__client_fill_source_gids). */
int qpg__client_pick_source_gids(struct qpg_client *cl, const struct qpg_client_opts *o, char *err,
				 size_t err_len)
{
	if (o->gid_index >= 0) {
		snprintf(err, err_len,
			 "--gid-index names one GID, but %u source addresses need one each: drop "
			 "--gid-index (each source's GID is found from its address)",
			 cl->nsrc);
		return -EINVAL;
	}
	struct qpg__gid_pick first = {0};
	for (unsigned i = 0; i < cl->nsrc; i++) {
		struct qpg__gid_pick p;
		char what[64];
		snprintf(what, sizeof(what), "source address %u", i + 1);
		int rc = qpg__gid_pick((struct sockaddr *)&cl->src[i], what, o->ib_dev, o->ib_port,
				       &p, err, err_len);
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
		cl->src_gid[i].index = (uint8_t)p.index;
		cl->src_gid[i].own = true;
	}
	return 0;
}

int qpg__client_fill_source_gids(struct qpg_client *cl, char *err, size_t err_len)
{
	for (unsigned i = 0; i < cl->nsrc && cl->src_gid[i].own; i++) {
		union ibv_gid g;
		if (ibv_query_gid(cl->dev.ctx, cl->dev.port, cl->src_gid[i].index, &g)) {
			snprintf(err, err_len, "cannot read GID %u of %s: %s", cl->src_gid[i].index,
				 cl->dev.name, strerror(errno));
			return -EIO;
		}
		memcpy(cl->src_gid[i].gid, g.raw, 16);
	}
	return 0;
}

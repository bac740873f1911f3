/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's source addresses (--source), parsed (the GID each carries
 * over rdma: rdma_setup.c). */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

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

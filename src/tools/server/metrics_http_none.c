/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server built without libmicrohttpd: --metrics says so. */
#include "metrics_http.h"

#include <stdio.h>

struct metrics_http *metrics_http_start(struct qpg_server *s, const char *addr, char *err,
					size_t err_len)
{
	snprintf(err, err_len,
		 "--metrics %s: this qpgate-server was built without libmicrohttpd "
		 "(install libmicrohttpd-dev and rebuild)",
		 addr);
	return NULL;
}

uint16_t metrics_http_port(const struct metrics_http *m)
{
	return 0;
}

void metrics_http_stop(struct metrics_http *m)
{
}

void metrics_http_extra(struct metrics_http *m, void (*fn)(void *user, FILE *f), void *user)
{
	(void)m, (void)fn, (void)user;
}

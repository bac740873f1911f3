/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server's command line. */
#ifndef QPG_SERVER_ARGS_H
#define QPG_SERVER_ARGS_H

#include <stdbool.h>

#include "opts.h"
#include "qpgate/kv_server.h"
#include "qpgate/server.h"

/* The server's options, the KV service's, and the tool's own. */
struct server_args {
	struct qpg_server_opts o;
	struct qpg_kv_server_opts kvo;
	bool kv;
	const char *port_file, *metrics_addr;
};

/* Parses the command line into A, with the defaults first; MORE is a
 * table of the caller's (the cluster's options), listed last. Exits 2 on
 * a bad option or value; returns 0, or 2 for options that do not go
 * together. */
int srv_parse_args(struct server_args *a, const struct qpg_opt *more, int argc, char **argv);

#endif

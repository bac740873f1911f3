/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-client --cluster and qpgate-perf --cluster (cluster_pick.c): the
 * server from a cluster's members, by the power of two choices over the
 * load they publish, and another one when a member refuses the connect. */
#ifndef QPG_TOOLS_CLUSTER_PICK_H
#define QPG_TOOLS_CLUSTER_PICK_H

#include "etcd_opts.h"
#include "opts.h"
#include "qpgate/client.h"
#include "qpgate/cluster.h"

struct cluster_pick {
	struct qpg_cluster_opts etcd;
	struct qpg_cluster_member chosen; /* its entry; CO points into it */
};

#define QPG_OPTS_CLUSTER_PICK(p)                                                                   \
	QPG_OPTS_ETCD(                                                                             \
	    &(p)->etcd,                                                                            \
	    "pick the server from a cluster's members in etcd (then no HOST SERVERNAME)")

/* True when --cluster was given (then the tool takes no HOST SERVERNAME). */
bool cluster_pick_wanted(int argc, char **argv);
/* Parse ARGV with the tool's CLIENT and OWN option tables and the
 * cluster's: SYNOPSIS is how the tool starts ("qpgate-perf -c N"), followed
 * by "HOST SERVERNAME" or the cluster's flags. *CLUSTERED says which. The
 * first argument after the options. */
int cluster_pick_parse(struct cluster_pick *p, int argc, char **argv, const struct qpg_opt *client,
		       const struct qpg_opt *own, const char *synopsis, bool *clustered);
/* Choose an active member of CO's transport: two at random, the less
 * loaded wins; a member that refuses a TCP connect is left out and another
 * chosen. Sets CO's host, port, servername and SPKI pin. 0, or 1 with the
 * error printed (etcd unreachable, no member left). */
int cluster_pick(struct cluster_pick *p, struct qpg_client_opts *co, const char *tool);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server in a cluster (server_cluster.c): its flags, and the
 * library's join and leave (qpgate/cluster_join.h) called with them. */
#ifndef QPG_TOOLS_SERVER_CLUSTER_H
#define QPG_TOOLS_SERVER_CLUSTER_H

#include <stdbool.h>
#include <stdio.h>

#include "etcd_opts.h"
#include "opts.h"
#include "qpgate/cluster_join.h"
#include "qpgate/server.h"

struct srv_cluster {
	struct qpg_cluster_opts etcd;
	const char *id, *advertise, *advertise_name;
	unsigned ttl_s, weight, drain_ms, staleness_ms;
	struct qpg_cluster_join *join;
};

/* clang-format off */
#define QPG_OPTS_SERVER_CLUSTER(c) \
	QPG_OPTS_ETCD(&(c)->etcd, \
		      "join a cluster: etcd's endpoints (https://, or http:// on a lab's loopback)"), \
	{"cluster-id", 0, OPT_STR, &(c)->id, 0, 0, "ID", \
	 "this member's ID (default: the --advertise address, e.g. 10.0.0.1-7471)"}, \
	{"advertise", 0, OPT_STR, &(c)->advertise, 0, 0, "HOST:PORT", \
	 "where clients reach this server (default: --bind and the listening port)"}, \
	{"advertise-name", 0, OPT_STR, &(c)->advertise_name, 0, 0, "NAME", \
	 "the name this server's certificate carries (default: the --advertise host)"}, \
	{"cluster-ttl", 0, OPT_UINT, &(c)->ttl_s, 2, 60, "S", \
	 "lease TTL: a dead member leaves the view after S seconds (default 3)"}, \
	{"cluster-staleness", 0, OPT_UINT, &(c)->staleness_ms, 200, 60000, "MS", \
	 "serve only while the view is known current within MS, and a key gained only MS " \
	 "after the change (default 1000; the same on every member)"}, \
	{"cluster-weight", 0, OPT_UINT, &(c)->weight, 1, QPG_CLUSTER_WEIGHT_MAX, "N", \
	 "this member's share of the keys, relative to the others (default 1)"}, \
	{"drain-ms", 0, OPT_UINT, &(c)->drain_ms, 0, 600000, "MS", \
	 "on SIGTERM, stay up MS as draining before leaving (default 500)"}
/* clang-format on */

/* Register S (listening on PORT, its certificate in CERT_FILE) and mark it
 * active. 0, or 1 with a clear error printed (etcd unreachable, a
 * duplicate ID, bad flags). */
int srv_cluster_start(struct srv_cluster *c, struct qpg_server *s, const struct qpg_server_opts *o,
		      const char *cert_file, struct qpg_kv_service *kv);
/* SIGTERM in a cluster: draining first, then stop S after drain_ms. Safe
 * from a signal handler. */
void srv_cluster_signal(struct srv_cluster *c);
/* The cluster's metrics (etcd reachable, the lease, drops), for
 * metrics_http_extra. */
void srv_cluster_metrics(void *user, FILE *f);
/* After the server stopped: revoke the lease (the entry goes with it),
 * stop gating the KV service. */
void srv_cluster_stop(struct srv_cluster *c);

#endif

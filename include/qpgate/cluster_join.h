/* SPDX-License-Identifier: BSD-2-Clause */
/* A server joins a cluster, and leaves it, in two calls
 * (libqpgate-cluster): what qpgate-server does with --cluster, for any
 * program that embeds a server.
 *
 * qpg_cluster_kv_join, once the server listens: the KV service's gate
 * first (no key is served before this member knows its view and its
 * lease), then the registration in etcd (its address, the SHA-256 of its
 * certificate's public key, its load), then ACTIVE.
 * qpg_cluster_kv_drain, from anywhere (a SIGTERM handler too): DRAINING,
 * so clients route elsewhere, and drain_ms later qpg_server_stop.
 * qpg_cluster_kv_leave, once the server's loops have stopped: the lease
 * revoked (the entry goes with it), the gate detached, all freed. */
#ifndef QPGATE_CLUSTER_JOIN_H
#define QPGATE_CLUSTER_JOIN_H

#include <stdint.h>
#include <stdio.h>

#include "qpgate/cluster.h"
#include "qpgate/server.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qpg_kv_service;

struct qpg_cluster_join_opts {
	struct qpg_cluster_opts etcd; /* etcd, the cluster's name, staleness_ms */
	const char *cert_file;	      /* the server's certificate: its key is pinned */
	const char *id;		      /* NULL: the advertised HOST-PORT */
	const char *advertise;	      /* HOST:PORT clients reach (NULL: bind, port) */
	const char *advertise_name;   /* the name its certificate carries (NULL: host) */
	unsigned ttl_s;		      /* the lease (default 3) */
	unsigned weight;	      /* share of the keys (default 1) */
	unsigned drain_ms;	      /* qpg_cluster_kv_drain's wait (0: none) */
};

struct qpg_cluster_join;

/* Join S (listening, made with SO) to the cluster, serving KV (NULL: a
 * service that owns no keys, as echo). 0, or a negative errno with the
 * reason in ERR (etcd unreachable, a duplicate ID, a bad address) and
 * nothing left behind. */
int qpg_cluster_kv_join(struct qpg_cluster_join **out, struct qpg_server *s,
			const struct qpg_server_opts *so, struct qpg_kv_service *kv,
			const struct qpg_cluster_join_opts *o, char *err, size_t err_len);
/* Begin the graceful leave: async-signal-safe, and only the first call
 * counts. */
void qpg_cluster_kv_drain(struct qpg_cluster_join *j);
/* Once the server's loops have stopped: revoke, detach, free. NULL:
 * nothing. */
void qpg_cluster_kv_leave(struct qpg_cluster_join *j);

/* The member's entry as registered (its ID, address, incarnation...). */
const struct qpg_cluster_member *qpg_cluster_join_self(const struct qpg_cluster_join *j);
uint64_t qpg_cluster_join_incarnation(const struct qpg_cluster_join *j);
/* Its KV gate's counts (zero without a KV service). */
void qpg_cluster_join_kv_stats(struct qpg_cluster_join *j, struct qpg_cluster_kv_stats *out);
/* Prometheus text: etcd reachable, the lease, registrations, keepalives,
 * and the KV gate's drops, waits and refusals. */
void qpg_cluster_join_metrics(struct qpg_cluster_join *j, FILE *f);

#ifdef __cplusplus
}
#endif
#endif

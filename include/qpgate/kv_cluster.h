/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV cache over a cluster of servers (libqpgate-cluster): keys spread
 * over the active members by weighted rendezvous hashing, one
 * qpg_kv_pool per member, the view from etcd (qpgate/cluster.h).
 *
 * No stale reads:
 *   - every request carries the revision of the view it was routed by; a
 *     server answers only from a view at least as new, and only for keys
 *     it owns, while its lease is known alive;
 *   - WRONG_OWNER: the client waits for its view to reach the server's,
 *     and routes the request again (at most twice);
 *   - a member the client sees fail (reset, QP error, timeout) becomes
 *     suspect: its keys fail fast with QPG_KV_UNAVAILABLE and are NOT
 *     sent to another member until etcd's view changes (or its pool comes
 *     back: tried again every 2 s).
 * A member is used once it is active in the view and its pool is up: a
 * request for a key of a member that joined waits for its pool (up to
 * QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS, 16,384 requests at most), and is
 * UNAVAILABLE past that or when the pool fails. The pools of members that
 * left are closed. With etcd down, the last view
 * stays and is used. */
#ifndef QPGATE_KV_CLUSTER_H
#define QPGATE_KV_CLUSTER_H

#include "qpgate/cluster.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_target.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A member that holds a request this long without an answer is taken for
 * gone (its connection closed, the member suspect), so a member whose host
 * drops packets fails over as a crashed one does: shorter than the lease,
 * longer than a server holds a request that waits for its view (1.5 s). */
#define QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS 2500

struct qpg_kv_cluster_opts {
	struct qpg_cluster_opts etcd;
	/* Each member's pool: client.host, .port, .servername, .transport and
	 * .spki_sha256 come from its entry; the rest (CA, client certificate,
	 * credits, threads, conns, get_mode...) from here. */
	struct qpg_kv_pool_opts pool;
	/* Called on the watch's thread once each new view is in use. */
	void (*on_view)(void *user, const struct qpg_cluster_view *v);
	void *user;
};
void qpg_kv_cluster_opts_default(struct qpg_kv_cluster_opts *o);

struct qpg_kv_cluster;
/* Reads the view and brings up a pool per active member. Fails only when
 * etcd cannot be read; members whose pools fail are suspect (their keys
 * UNAVAILABLE) and tried again. */
int qpg_kv_cluster_create(struct qpg_kv_cluster **out, const struct qpg_kv_cluster_opts *o,
			  char *err, size_t err_len);
/* As qpg_kv_submit. A key with no usable owner completes with
 * QPG_KV_UNAVAILABLE (from another thread, never inside this call). */
int qpg_kv_cluster_submit(struct qpg_kv_cluster *c, struct qpg_kv_request *op);
/* Fails what is queued or in flight, closes every pool. */
void qpg_kv_cluster_destroy(struct qpg_kv_cluster *c);

/* A cluster as a target from plain arguments (a binding's, as
 * qpgate/kv_call.h's qpg_kv_pool_open): etcd's ENDPOINTS and the cluster's
 * NAME; etcd's TLS files and user (a password file, never a password), or
 * NULL; CA, CERT and KEY for the members (each pinned to the key its entry
 * names); CONNS and THREADS per member, 0: the defaults; BUSY_POLL_US as
 * qpg_kv_pool_open's. Fails only when etcd cannot be read. */
int qpg_kv_cluster_open(struct qpg_kv_target **out, const char *endpoints, const char *name,
			const char *etcd_ca, const char *etcd_cert, const char *etcd_key,
			const char *etcd_user, const char *etcd_password_file, const char *ca,
			const char *cert, const char *key, unsigned conns, unsigned threads,
			uint32_t busy_poll_us, char *err, size_t err_len);

/* The cluster as a KV target (qpgate/kv_target.h), the same object: its
 * info sums the members' pools, and its stats name each member ever seen
 * with what it served. */
struct qpg_kv_target *qpg_kv_cluster_target(struct qpg_kv_cluster *c);

#ifdef __cplusplus
}
#endif
#endif

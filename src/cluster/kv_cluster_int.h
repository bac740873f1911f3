/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV cluster client's structures, shared by kv_cluster.c (routes,
 * pools), kv_cluster_req.c (requests) and kv_cluster_target.c (the cluster
 * as a target: its info and statistics). */
#ifndef QPG_KV_CLUSTER_INT_H
#define QPG_KV_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv_target_int.h"
#include "qpgate/kv_cluster.h"

struct mstats {
	char id[QPG_CLUSTER_ID_MAX + 1];
	atomic_ullong ops, misses, unavailable, wrong_owner, errors;
	atomic_ullong pool_waits; /* requests that waited for its pool, once each */
};

struct member {
	struct qpg_cluster_member e; /* its entry, as the pool was made for */
	struct qpg_kv_pool *pool;    /* NULL: being made (a member that joined),
				      * or, when suspect, could not be */
	atomic_bool suspect;
	uint64_t retry_ns; /* suspect: when its pool is tried again */
	struct mstats *st;
	struct qpg_kv_cluster *c;
	struct member *next_dead; /* on the cluster's list of members to close */
};

struct route {
	const struct qpg_cluster_view *v;
	struct member **m; /* v->n entries; NULL where the member is not active */
};

/* A caller's request while the cluster holds it (as hiredis-cluster's
 * per-command state): the copy that goes to a member's pool, and where
 * it has been. */
struct clreq {
	struct qpg_kv_request in;  /* to the member's pool */
	struct qpg_kv_request *op; /* the caller's */
	struct member *m;	   /* the member IN went to */
	struct clreq *next;	   /* on the worker's queues */
	uint64_t wait_until_ns;	   /* waits for its owner's pool until then */
	uint8_t redirects;
};

struct qpg_kv_cluster {
	struct qpg_kv_target base; /* first: a cluster is a target */
	struct qpg_kv_cluster_opts o; /* its strings are the cluster's own copies */
	char *owned[12];
	unsigned nowned;
	struct qpg_cluster_watch *w;
	_Atomic(struct route *) cur;
	atomic_long readers;
	pthread_mutex_t build; /* one route builder at a time (watch, worker) */
	/* per-member statistics, by ID, kept across incarnations */
	pthread_mutex_t st_lock;
	struct mstats **st;
	unsigned nst;
	/* the builder (no lock while it connects) */
	pthread_t builder;
	atomic_bool first_built; /* the first route's pools were made in create */
	/* Members no route holds any more: their pools are closed by the
	 * builder, never under the build lock or on the watch's thread (a
	 * close waits for its connections, seconds for a host that drops
	 * packets). Under build. */
	struct member *dead;
	/* the worker */
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct clreq *fail_head, *fail_tail; /* complete UNAVAILABLE */
	struct clreq *redo_head, *redo_tail; /* route again */
	/* Requests whose owner joined and has no pool yet: routed again when
	 * a route is published or a build fails (routes_gen), UNAVAILABLE
	 * past their deadline; at most QPG__KV_CLUSTER_POOL_WAITS. */
	struct clreq *pool_head, *pool_tail;
	unsigned pool_waiting;
	uint64_t routes_gen;
	bool stop;
	atomic_bool closing; /* destroy has begun: no pool is made again */
	atomic_ullong views, redirects, unroutable;
	/* The caller's registered buffers (qpg_kv_register), registered with
	 * every member's pool as it enters a route. Under build. */
	struct cluster_region {
		void *addr;
		size_t len;
	} *regions;
	unsigned nregions;
};

extern const struct qpg_kv_target_ops qpg__kv_cluster_target_ops;
/* kv_cluster_regions.c: the registered buffers onto R's pools (under
 * build), and the target's reg and unreg ops. */
void qpg__kv_cluster_regions_apply(struct qpg_kv_cluster *c, const struct route *r);
int qpg__kv_cluster_reg(struct qpg_kv_target *t, void *addr, size_t len);
int qpg__kv_cluster_unreg(struct qpg_kv_target *t, void *addr);
/* A suspect member's pool is tried again this long after. */
#define QPG__KV_CLUSTER_SUSPECT_RETRY_NS 2000000000ull
/* A request for a member that joined waits for its pool this long at most
 * (as long as a member may hold it: QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS), and
 * this many wait at most; past either, UNAVAILABLE. */
#define QPG__KV_CLUSTER_POOL_WAIT_NS ((uint64_t)QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS * 1000000ull)
#define QPG__KV_CLUSTER_POOL_WAITS   16384u

static inline void qpg__kv_cluster_count(atomic_ullong *a)
{
	atomic_fetch_add_explicit(a, 1, memory_order_relaxed);
}

/* kv_cluster_req.c: the cluster's submit (qpg_kv_cluster_submit), and its
 * worker thread's body. */
int qpg__kv_cluster_submit(struct qpg_kv_target *t, struct qpg_kv_request *op);
void *qpg__kv_cluster_worker_main(void *arg);
/* The routes changed (one published, or a member's pool failed): the
 * requests that wait for a pool are routed again. Takes c->lock. */
void qpg__kv_cluster_routes_changed(struct qpg_kv_cluster *c);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* What a KV target is made of (qpgate/kv_target.h): a const ops table at
 * the front of the object that implements it, as Valkey's connection
 * types are. The pool (kv_pool_target.c) and the cluster
 * (src/cluster/kv_cluster_target.c) each fill one. */
#ifndef QPG_KV_TARGET_INT_H
#define QPG_KV_TARGET_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "qpgate/kv_target.h"

struct qpg_kv_target_ops {
	const char *kind;
	int (*submit)(struct qpg_kv_target *t, struct qpg_kv_request *op);
	void (*destroy)(struct qpg_kv_target *t);
	void (*info)(struct qpg_kv_target *t, struct qpg_kv_target_info *out);
	int (*stats)(struct qpg_kv_target *t, struct qpg_kv_target_stats *out);
	/* NULL: the target has threads of its own, and no loop to run. */
	int (*fd)(struct qpg_kv_target *t);
	int (*run)(struct qpg_kv_target *t);
	/* Which of its members owns KEY now (a cluster's owner index), for
	 * grouping a batch; NULL: one member, group 0. */
	int (*group)(struct qpg_kv_target *t, const void *key, uint16_t len);
	/* The largest request message, as agreed (the least over members; 0:
	 * none up yet), taking no lock a target's own destroy holds: it is
	 * asked from completion callbacks (qpg_kv_target_exists). */
	uint32_t (*max_msg)(struct qpg_kv_target *t);
	/* qpg_kv_register and qpg_kv_unregister, over every member. */
	int (*reg)(struct qpg_kv_target *t, void *addr, size_t len);
	int (*unreg)(struct qpg_kv_target *t, void *addr);
};

/* Whether OP is a request any target can take: PUT, GET or DEL of a key of
 * 1 to QPG_KV_MAX_KEY bytes, or EXISTS of a well-formed key list
 * (kv_target.c). */
bool qpg__kv_request_ok(const struct qpg_kv_request *op);

/* The first member of struct qpg_kv_pool and struct qpg_kv_cluster. */
struct qpg_kv_target {
	const struct qpg_kv_target_ops *ops;
};

#endif

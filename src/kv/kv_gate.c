/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service in a cluster: a gate asked before every PUT, GET and DEL,
 * and for each key of an EXISTS (does this server own the key in a view at least as new as the
 * client's, and is its lease known alive?), and drops of the keys it no
 * longer owns. The gate itself lives with the cluster (qpgate/cluster.h);
 * the service knows only its verdict, so nothing of etcd, and no key or
 * secret of the store, ever crosses.
 *
 * A PUT that was let in under one view may complete after a view change
 * has dropped its key: a drop first moves the epoch on, then scans; a
 * commit that sees the epoch moved asks the gate again, and takes the
 * value back if it now says no. So a key this server stopped owning is
 * never left behind to be served stale once it owns the key again. */
#include <string.h>

#include "kv_service.h"

void qpg_kv_service_set_gate(struct qpg_kv_service *k, qpg_kv_gate_fn gate, void *user)
{
	k->gate = gate;
	k->gate_user = user;
}

int qpg__kv_gate(struct qpg_kv_service *k, const struct qpg_kv_req *r, uint64_t *rev)
{
	*rev = 0;
	if (!k->gate)
		return QPG_KV_OK;
	if (r->op != QPG_KV_EXISTS)
		return k->gate(k->gate_user, r->key, r->key_len, r->view_rev, rev);
	/* Every key of the list, or none: a key to wait for waits the whole
	 * request; else the first refusal is its answer. */
	size_t pos = 0;
	const uint8_t *key;
	uint8_t n;
	int verdict = QPG_KV_OK;
	while ((n = qpg_kv_exists_next(r->chunk, r->chunk_len, &pos, &key))) {
		uint64_t krev = 0;
		int st = k->gate(k->gate_user, key, n, r->view_rev, &krev);
		if (st == QPG_KV_GATE_WAIT)
			return st;
		if (st != QPG_KV_OK && verdict == QPG_KV_OK) {
			verdict = st;
			*rev = krev;
		}
	}
	return verdict;
}

int qpg__kv_gated_commit(struct qpg_kv_service *k, struct qpg__kv_value *v, uint64_t view_rev,
			 uint64_t *rev)
{
	*rev = 0;
	if (!k->gate) {
		qpg__kv_commit(&k->store, v);
		return QPG_KV_OK;
	}
	uint64_t epoch = atomic_load(&k->drops);
	/* A commit never waits: a gate that says wait now refuses. */
	int st = k->gate(k->gate_user, v->key, v->key_len, view_rev, rev);
	if (st == QPG_KV_GATE_WAIT)
		st = QPG_KV_UNAVAILABLE;
	if (st != QPG_KV_OK) {
		qpg__kv_release(&k->store, v);
		return st;
	}
	/* The key, kept for the check after the commit (V may be replaced
	 * and freed by then). */
	uint8_t key[QPG_KV_MAX_KEY];
	uint16_t key_len = v->key_len;
	memcpy(key, v->key, key_len);
	struct qpg__kv_tenant *t = k->store.tenants[v->tenant]; /* tenants never go */
	qpg__kv_commit(&k->store, v);
	if (atomic_load(&k->drops) != epoch &&
	    (st = k->gate(k->gate_user, key, key_len, view_rev, rev)) != QPG_KV_OK) {
		qpg__kv_del(&k->store, t, key, key_len);
		return st == QPG_KV_GATE_WAIT ? QPG_KV_UNAVAILABLE : st;
	}
	return QPG_KV_OK;
}

size_t qpg_kv_service_drop(struct qpg_kv_service *k,
			   bool (*keep)(void *user, const uint8_t *key, uint16_t key_len),
			   void *user)
{
	atomic_fetch_add(&k->drops, 1);
	size_t n = qpg__kv_store_drop(&k->store, keep, user);
	atomic_fetch_add(&k->dropped, n);
	return n;
}

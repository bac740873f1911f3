/* SPDX-License-Identifier: BSD-2-Clause */
/* The caller's registered buffers across a cluster (qpg_kv_register): the
 * cluster keeps the list; each member's pool registers every buffer as the
 * member enters a route, and register/unregister reach the pools of the
 * route in use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cluster_int.h"

/* Registered buffers: the cluster keeps the list, and every member's pool
 * registers each one as the member enters a route (publish, under build),
 * so a member that joins later reads into them as the first ones do. */
void qpg__kv_cluster_regions_apply(struct qpg_kv_cluster *c, const struct route *r)
{
	for (unsigned i = 0; i < r->v->n; i++) {
		struct member *m = r->m[i];
		for (unsigned j = 0; m && m->pool && j < c->nregions; j++) {
			int rc = qpg_kv_register(qpg_kv_pool_target(m->pool), c->regions[j].addr,
						 c->regions[j].len);
			if (rc) /* its GETs into that buffer copy, as over tcp */
				fprintf(stderr,
					"qpgate: cluster: member %s cannot register a buffer of "
					"%zu bytes: %s\n",
					m->e.id, c->regions[j].len, strerror(-rc));
		}
	}
}

static int cluster_unreg_locked(struct qpg_kv_cluster *c, void *addr)
{
	unsigned at = 0;
	while (at < c->nregions && c->regions[at].addr != addr)
		at++;
	if (at == c->nregions)
		return -ENOENT;
	const struct route *r = atomic_load(&c->cur);
	int rc = 0;
	for (unsigned i = 0; r && i < r->v->n; i++)
		if (r->m[i] && r->m[i]->pool) {
			int e = qpg_kv_unregister(qpg_kv_pool_target(r->m[i]->pool), addr);
			if (e && e != -ENOENT && !rc)
				rc = e;
		}
	if (rc == 0)
		c->regions[at] = c->regions[--c->nregions];
	return rc;
}

int qpg__kv_cluster_reg(struct qpg_kv_target *t, void *addr, size_t len)
{
	struct qpg_kv_cluster *c = (struct qpg_kv_cluster *)t;
	pthread_mutex_lock(&c->build);
	int rc = 0;
	for (unsigned j = 0; j < c->nregions && !rc; j++)
		if (c->regions[j].addr == addr && c->regions[j].len == len)
			rc = -EALREADY;
		else if ((uint8_t *)addr < (uint8_t *)c->regions[j].addr + c->regions[j].len &&
			 (uint8_t *)c->regions[j].addr < (uint8_t *)addr + len)
			rc = -EEXIST;
	if (rc) {
		pthread_mutex_unlock(&c->build);
		return rc == -EALREADY ? 0 : rc;
	}
	struct cluster_region *a = realloc(c->regions, (c->nregions + 1) * sizeof(*a));
	if (!a) {
		pthread_mutex_unlock(&c->build);
		return -ENOMEM;
	}
	c->regions = a;
	c->regions[c->nregions++] = (struct cluster_region){addr, len};
	const struct route *r = atomic_load(&c->cur);
	for (unsigned i = 0; r && i < r->v->n && !rc; i++)
		if (r->m[i] && r->m[i]->pool)
			rc = qpg_kv_register(qpg_kv_pool_target(r->m[i]->pool), addr, len);
	if (rc)
		cluster_unreg_locked(c, addr);
	pthread_mutex_unlock(&c->build);
	return rc;
}

int qpg__kv_cluster_unreg(struct qpg_kv_target *t, void *addr)
{
	struct qpg_kv_cluster *c = (struct qpg_kv_cluster *)t;
	pthread_mutex_lock(&c->build);
	int rc = cluster_unreg_locked(c, addr);
	pthread_mutex_unlock(&c->build);
	return rc;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Memory the caller registered with a pool (qpg_kv_register), so that a
 * one-sided GET READs a value straight into it. Each pool thread's client
 * has a device context and PD of its own, so a region holds one
 * registration per thread. A GET whose destination lies inside a region
 * takes it (busy) until its READs have landed or failed; a region is
 * dropped only when no GET holds it. Over tcp a region has no
 * registration: GETs into it take the one copy they always take. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_client_int.h"

struct kv_region {
	struct kv_region *next;
	uint8_t *addr;
	size_t len;
	atomic_uint busy; /* GETs READing into it now */
	void **mr;	  /* per pool thread; NULL over tcp */
	uint32_t *lkey;
};

/* Regions one pool holds at most: each pins memory and costs a
 * registration per thread. */
#define KV_REGIONS_MAX 4096

static void region_free(struct qpg_kv_pool *p, struct kv_region *r)
{
	for (unsigned t = 0; r->mr && t < p->nthreads; t++)
		qpg_client_dereg_mr(r->mr[t]);
	free(r->mr);
	free(r->lkey);
	free(r);
}

static bool overlaps(const struct kv_region *r, const uint8_t *a, size_t len)
{
	return a < r->addr + r->len && r->addr < a + len;
}

int qpg__kv_pool_register(struct qpg_kv_pool *p, void *addr, size_t len, char *err, size_t err_len)
{
	if (!addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr) {
		snprintf(err, err_len, "a registered buffer needs an address and a length");
		return -EINVAL;
	}
	pthread_rwlock_rdlock(&p->regions_lock);
	bool again = false;
	for (struct kv_region *o = p->regions; o && !again; o = o->next)
		again = o->addr == (uint8_t *)addr && o->len == len;
	pthread_rwlock_unlock(&p->regions_lock);
	if (again)
		return 0; /* (without registering it with the device first) */
	struct kv_region *r = calloc(1, sizeof(*r));
	if (!r || !(r->mr = calloc(p->nthreads, sizeof(*r->mr))) ||
	    !(r->lkey = calloc(p->nthreads, sizeof(*r->lkey)))) {
		if (r)
			free(r->mr);
		free(r);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	r->addr = addr;
	r->len = len;
	int rc = 0;
	for (unsigned t = 0; t < p->nthreads && rc == 0; t++) {
		rc = qpg_client_reg_mr(p->th[t].cl, addr, len, &r->mr[t], &r->lkey[t]);
		if (rc == -EOPNOTSUPP) { /* tcp: nothing to register */
			r->mr[t] = NULL;
			rc = 0;
		} else if (rc) {
			snprintf(err, err_len, "cannot register %zu bytes with the device: %s%s",
				 len, strerror(-rc),
				 rc == -ENOMEM || rc == -EPERM
				     ? " (raise the locked-memory limit: ulimit -l, LimitMEMLOCK=)"
				     : "");
		}
	}
	if (rc) {
		region_free(p, r);
		return rc;
	}
	pthread_rwlock_wrlock(&p->regions_lock);
	unsigned n = 0;
	for (struct kv_region *o = p->regions; o; o = o->next, n++) {
		if (o->addr == r->addr && o->len == r->len) {
			rc = -EALREADY; /* registered already: nothing to do */
			break;
		}
		if (overlaps(o, r->addr, r->len)) {
			snprintf(err, err_len, "that buffer overlaps one registered already");
			rc = -EEXIST;
			break;
		}
	}
	if (rc == 0 && n >= KV_REGIONS_MAX) {
		snprintf(err, err_len, "%u buffers are registered already (the most a pool takes)",
			 KV_REGIONS_MAX);
		rc = -ENOSPC;
	}
	if (rc == 0) {
		r->next = p->regions;
		p->regions = r;
	}
	pthread_rwlock_unlock(&p->regions_lock);
	if (rc) {
		region_free(p, r);
		return rc == -EALREADY ? 0 : rc;
	}
	return 0;
}

int qpg__kv_pool_unregister(struct qpg_kv_pool *p, void *addr)
{
	pthread_rwlock_wrlock(&p->regions_lock);
	struct kv_region **at = &p->regions;
	while (*at && (*at)->addr != addr)
		at = &(*at)->next;
	struct kv_region *r = *at;
	int rc = !r ? -ENOENT : atomic_load(&r->busy) ? -EBUSY : 0;
	if (rc == 0)
		*at = r->next;
	pthread_rwlock_unlock(&p->regions_lock);
	if (rc == 0)
		region_free(p, r);
	return rc;
}

struct kv_region *qpg__kv_region_take(struct qpg_kv_pool *p, unsigned thread, const void *addr,
				      size_t len)
{
	const uint8_t *a = addr;
	struct kv_region *found = NULL;
	pthread_rwlock_rdlock(&p->regions_lock);
	for (struct kv_region *r = p->regions; r; r = r->next) {
		if (a >= r->addr && len <= r->len && (size_t)(a - r->addr) <= r->len - len) {
			if (r->mr[thread]) {
				atomic_fetch_add(&r->busy, 1);
				found = r;
			}
			break;
		}
	}
	pthread_rwlock_unlock(&p->regions_lock);
	return found;
}

uint32_t qpg__kv_region_lkey(const struct kv_region *r, unsigned thread)
{
	return r->lkey[thread];
}

void qpg__kv_region_put(struct kv_region *r)
{
	if (r)
		atomic_fetch_sub(&r->busy, 1);
}

void qpg__kv_regions_free(struct qpg_kv_pool *p)
{
	while (p->regions) {
		struct kv_region *r = p->regions;
		p->regions = r->next;
		region_free(p, r);
	}
}

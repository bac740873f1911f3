/* SPDX-License-Identifier: BSD-2-Clause */
/* Who a KV client is, and whose keys it names: the tenant list the
 * operator wrote (--kv-tenants, JSON, read again on SIGHUP) over the
 * store's tenants, and the admission of each session by its verified
 * client certificate. docs/kv.md has the file's format. */
#ifndef QPG_KV_TENANTS_H
#define QPG_KV_TENANTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "qpgate/service.h"

struct qpg__kv_store;
struct qpg__kv_tenant;

/* One identity's tenant, as the file says. */
struct qpg__kv_ident {
	char *identity;
	struct qpg__kv_tenant *tenant;
	size_t def; /* while a file is read: its tenant's place in the file */
};

struct qpg__kv_tenancy {
	pthread_mutex_t lock;	   /* admissions (loop threads) against a reload */
	char *path;		   /* the file, or NULL: one tenant per identity */
	uint8_t from;		   /* enum qpg_kv_tenant_from */
	struct qpg__kv_ident *ids; /* sorted by identity */
	size_t nids;
	struct qpg__kv_tenant *fallback; /* the file's "default", or NULL: refuse */
};

/* Read PATH (NULL: none) and set the store's tenants from it. 0, or a
 * negative errno with a reason in ERR (nothing changed). */
int qpg__kv_tenancy_init(struct qpg__kv_tenancy *tn, struct qpg__kv_store *s, const char *path,
			 uint8_t from, char *err, size_t err_len);
/* Read the file again: the new limits and identities apply at once, to
 * connections already up too; a tenant the file no longer names keeps its
 * values (evicted first when room is short: it has no quota left). */
int qpg__kv_tenancy_reload(struct qpg__kv_tenancy *tn, struct qpg__kv_store *s, char *err,
			   size_t err_len);
void qpg__kv_tenancy_fini(struct qpg__kv_tenancy *tn);
/* T's STAT record (qpgate/kv.h) into OUT: its length, or a negative errno. */
int qpg__kv_tenant_stat(struct qpg__kv_store *s, struct qpg__kv_tenant *t, uint8_t *out,
			size_t cap);
/* Per-tenant metrics (Prometheus text) to F. */
void qpg__kv_tenant_metrics(struct qpg__kv_store *s, FILE *f);
/* The service's admit(): C's tenant as its principal, or -EACCES. */
int qpg__kv_admit(struct qpg_conn *c, char *why, size_t why_len);

#endif

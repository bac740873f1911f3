/* SPDX-License-Identifier: BSD-2-Clause */
/* The store's tenants: made by name on first use, never freed before the
 * store (connections hold pointers to them), their limits set by the
 * service's tenant list. The accounting itself is kv_store.c's. */
#include <stdlib.h>
#include <string.h>

#include "kv_store.h"

/* Under the lock. */
static struct qpg__kv_tenant *find_name(struct qpg__kv_store *s, const char *name)
{
	for (unsigned i = 0; i < s->ntenants; i++)
		if (!strcmp(s->tenants[i]->name, name))
			return s->tenants[i];
	return NULL;
}

struct qpg__kv_tenant *qpg__kv_tenant_get(struct qpg__kv_store *s, const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= QPG__KV_TENANT_NAME)
		return NULL;
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_tenant *t = find_name(s, name);
	if (!t && s->ntenants < QPG__KV_TENANTS_MAX && (t = calloc(1, sizeof(*t))) != NULL) {
		memcpy(t->name, name, n + 1);
		t->id = (uint16_t)s->ntenants;
		atomic_init(&t->hits, 0);
		atomic_init(&t->misses, 0);
		atomic_init(&t->refused, 0);
		s->tenants[s->ntenants++] = t;
	}
	pthread_mutex_unlock(&s->lock);
	return t;
}

struct qpg__kv_tenant *qpg__kv_tenant_at(struct qpg__kv_store *s, unsigned i)
{
	pthread_mutex_lock(&s->lock);
	struct qpg__kv_tenant *t = i < s->ntenants ? s->tenants[i] : NULL;
	pthread_mutex_unlock(&s->lock);
	return t;
}

void qpg__kv_tenant_limits(struct qpg__kv_store *s, struct qpg__kv_tenant *t, size_t quota,
			   size_t max_keys, uint32_t max_value, bool listed)
{
	pthread_mutex_lock(&s->lock);
	t->quota = quota;
	t->max_keys = max_keys;
	t->max_value = max_value;
	t->listed = listed;
	pthread_mutex_unlock(&s->lock);
}

void qpg__kv_tenant_read(struct qpg__kv_store *s, const struct qpg__kv_tenant *t,
			 struct qpg__kv_tenant_figures *out)
{
	pthread_mutex_lock(&s->lock);
	*out = (struct qpg__kv_tenant_figures){
	    .quota = t->quota,
	    .max_keys = t->max_keys,
	    .used = t->used,
	    .nkeys = t->nkeys,
	    .evictions = t->evictions,
	    .evicted_bytes = t->evicted_bytes,
	    .max_value = t->max_value,
	    .listed = t->listed,
	};
	pthread_mutex_unlock(&s->lock);
}

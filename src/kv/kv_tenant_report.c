/* SPDX-License-Identifier: BSD-2-Clause */
/* What the tenants hold and did, told: a tenant's STAT record (its own
 * client asks) and the per-tenant metrics (the operator scrapes), labelled
 * only for the tenants the operator named. */
#include <stdatomic.h>
#include <stdio.h>

#include "kv_store.h"
#include "kv_tenants.h"
#include "qpgate/kv.h"

int qpg__kv_tenant_stat(struct qpg__kv_store *s, struct qpg__kv_tenant *t, uint8_t *out, size_t cap)
{
	struct qpg__kv_tenant_figures f;
	qpg__kv_tenant_read(s, t, &f);
	struct qpg_kv_tenant_stat st = {
	    .quota = f.quota,
	    .used = f.used,
	    .keys = f.nkeys,
	    .max_keys = f.max_keys,
	    .hits = atomic_load_explicit(&t->hits, memory_order_relaxed),
	    .misses = atomic_load_explicit(&t->misses, memory_order_relaxed),
	    .evictions = f.evictions,
	    .refused = atomic_load_explicit(&t->refused, memory_order_relaxed),
	    .max_value = f.max_value,
	    .listed = f.listed,
	};
	snprintf(st.name, sizeof(st.name), "%s", t->name);
	return qpg_kv_encode_stat(out, cap, &st);
}

/* A tenant's figures, or the sum of the unlisted ones. */
struct row {
	struct qpg__kv_tenant_figures f;
	unsigned long long hits, misses, refused;
};

static void row_add(struct row *r, struct qpg__kv_tenant *t,
		    const struct qpg__kv_tenant_figures *fig)
{
	struct qpg__kv_tenant_figures f = *fig;
	r->f.quota += f.quota;
	r->f.used += f.used;
	r->f.nkeys += f.nkeys;
	r->f.evictions += f.evictions;
	r->f.evicted_bytes += f.evicted_bytes;
	r->hits += atomic_load_explicit(&t->hits, memory_order_relaxed);
	r->misses += atomic_load_explicit(&t->misses, memory_order_relaxed);
	r->refused += atomic_load_explicit(&t->refused, memory_order_relaxed);
}

static void row_print(FILE *f, const char *name, const struct row *r)
{
	fprintf(f,
		"qpgate_kv_tenant_bytes{tenant=\"%s\"} %zu\n"
		"qpgate_kv_tenant_quota_bytes{tenant=\"%s\"} %zu\n"
		"qpgate_kv_tenant_keys{tenant=\"%s\"} %zu\n"
		"qpgate_kv_tenant_gets_total{tenant=\"%s\",result=\"hit\"} %llu\n"
		"qpgate_kv_tenant_gets_total{tenant=\"%s\",result=\"miss\"} %llu\n"
		"qpgate_kv_tenant_evictions_total{tenant=\"%s\"} %llu\n"
		"qpgate_kv_tenant_evicted_bytes_total{tenant=\"%s\"} %llu\n"
		"qpgate_kv_tenant_refused_total{tenant=\"%s\"} %llu\n",
		name, r->f.used, name, r->f.quota, name, r->f.nkeys, name, r->hits, name, r->misses,
		name, (unsigned long long)r->f.evictions, name,
		(unsigned long long)r->f.evicted_bytes, name, r->refused);
}

void qpg__kv_tenant_metrics(struct qpg__kv_store *s, FILE *f)
{
	fprintf(f,
		"# HELP qpgate_kv_tenant_bytes Bytes of store blocks each tenant holds; "
		"tenant=\"(unlisted)\" sums the tenants no tenants file names (one per client "
		"identity without a file).\n"
		"# TYPE qpgate_kv_tenant_bytes gauge\n"
		"# HELP qpgate_kv_tenant_quota_bytes Each tenant's quota (0: none).\n"
		"# TYPE qpgate_kv_tenant_quota_bytes gauge\n"
		"# HELP qpgate_kv_tenant_keys Keys each tenant stores.\n"
		"# TYPE qpgate_kv_tenant_keys gauge\n"
		"# HELP qpgate_kv_tenant_gets_total GETs by tenant and whether its key was "
		"stored.\n"
		"# TYPE qpgate_kv_tenant_gets_total counter\n"
		"# HELP qpgate_kv_tenant_evictions_total Each tenant's keys evicted.\n"
		"# TYPE qpgate_kv_tenant_evictions_total counter\n"
		"# HELP qpgate_kv_tenant_evicted_bytes_total Value bytes of each tenant's keys "
		"evicted.\n"
		"# TYPE qpgate_kv_tenant_evicted_bytes_total counter\n"
		"# HELP qpgate_kv_tenant_refused_total PUTs refused over the tenant's own limits "
		"(over_quota).\n"
		"# TYPE qpgate_kv_tenant_refused_total counter\n");
	/* Labels only for the tenants the operator named: the set is bounded
	 * by the file, never by what clients present. */
	struct row unlisted = {0};
	bool any_unlisted = false;
	struct qpg__kv_tenant *t;
	for (unsigned i = 0; (t = qpg__kv_tenant_at(s, i)) != NULL; i++) {
		struct qpg__kv_tenant_figures fig;
		qpg__kv_tenant_read(s, t, &fig);
		if (!fig.listed) {
			row_add(&unlisted, t, &fig);
			any_unlisted = true;
			continue;
		}
		struct row r = {0};
		row_add(&r, t, &fig);
		row_print(f, t->name, &r);
	}
	if (any_unlisted)
		row_print(f, "(unlisted)", &unlisted);
}

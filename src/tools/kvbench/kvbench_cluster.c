/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kvbench --cluster: the keys spread over the members etcd names
 * (qpgate/kv_cluster.h) instead of one server; per member what it served
 * and refused, and each view change the run saw, with its time. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvbench.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_view(void *user, const struct qpg_cluster_view *v)
{
	struct bench *b = user;
	int i = atomic_fetch_add(&b->nviews, 1);
	if (i >= (int)(sizeof(b->views) / sizeof(b->views[0])))
		return;
	unsigned active = 0;
	for (unsigned k = 0; k < v->n; k++)
		active += v->m[k].state == QPG_MEMBER_ACTIVE;
	b->views[i] =
	    (struct kvb_view){.t = b->run_t0 ? (double)((int64_t)(mono_ns() - b->run_t0)) / 1e9 : 0,
			      .rev = v->revision,
			      .members = v->n,
			      .active = active};
}

int kvb_target_open(struct bench *b, const struct qpg_kv_pool_opts *po, char *err, size_t len)
{
	if (!b->etcd.endpoints) {
		struct qpg_kv_pool *p = NULL;
		int rc = qpg_kv_pool_create(&p, po, err, len);
		b->target = qpg_kv_pool_target(p);
		return rc;
	}
	struct qpg_kv_cluster_opts o;
	qpg_kv_cluster_opts_default(&o);
	o.etcd = b->etcd;
	o.pool = *po;
	o.pool.connect_attempts = 2;
	o.pool.request_timeout_ms = QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS;
	o.on_view = on_view;
	o.user = b;
	atomic_store(&b->nviews, 0);
	b->run_t0 = 0;
	struct qpg_kv_cluster *c = NULL;
	int rc = qpg_kv_cluster_create(&c, &o, err, len);
	b->target = qpg_kv_cluster_target(c);
	return rc;
}

json_t *kvb_target_close(struct bench *b)
{
	struct qpg_kv_target_stats st;
	json_t *members = NULL, *views = NULL;
	if (qpg_kv_target_stats(b->target, &st) == 0 && st.revision > 0) {
		members = json_array();
		views = json_array();
		printf(
		    " cluster: view revision %lld, %llu view(s) taken into use, %llu redirect(s), "
		    "%llu unroutable, etcd %s\n",
		    (long long)st.revision, (unsigned long long)st.views,
		    (unsigned long long)st.redirects, (unsigned long long)st.unroutable,
		    st.etcd_ok ? "reachable" : "UNREACHABLE (last view kept)");
		printf(" %-24s %-8s %12s %10s %12s %12s %8s %10s\n", "MEMBER", "STATE", "OPS",
		       "MISSES", "UNAVAILABLE", "WRONG_OWNER", "ERRORS", "POOL_WAITS");
		for (unsigned i = 0; i < st.n; i++) {
			const struct qpg_kv_member_stats *m = &st.m[i];
			const char *state = m->suspect	? "suspect"
					    : m->active ? (m->up ? "up" : "down")
							: "gone";
			printf(" %-24s %-8s %12llu %10llu %12llu %12llu %8llu %10llu\n", m->id,
			       state, (unsigned long long)m->ops, (unsigned long long)m->misses,
			       (unsigned long long)m->unavailable,
			       (unsigned long long)m->wrong_owner, (unsigned long long)m->errors,
			       (unsigned long long)m->pool_waits);
			json_array_append_new(
			    members,
			    json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "id", m->id,
				      "state", state, "ops", (json_int_t)m->ops, "misses",
				      (json_int_t)m->misses, "unavailable",
				      (json_int_t)m->unavailable, "wrong_owner",
				      (json_int_t)m->wrong_owner, "errors", (json_int_t)m->errors,
				      "pool_waits", (json_int_t)m->pool_waits));
		}
	}
	qpg_kv_target_stats_free(&st);
	int n = views ? atomic_load(&b->nviews) : 0;
	int cap = (int)(sizeof(b->views) / sizeof(b->views[0]));
	for (int i = 0; i < n && i < cap; i++) {
		const struct kvb_view *v = &b->views[i];
		printf(" view change at %8.3f s: revision %lld, %u members, %u active\n", v->t,
		       (long long)v->rev, v->members, v->active);
		json_array_append_new(views, json_pack("{s:f, s:I, s:i, s:i}", "t", v->t,
						       "revision", (json_int_t)v->rev, "members",
						       (int)v->members, "active", (int)v->active));
	}
	qpg_kv_target_destroy(b->target);
	b->target = NULL;
	return members ? json_pack("{s:o, s:o}", "members", members, "views", views) : NULL;
}

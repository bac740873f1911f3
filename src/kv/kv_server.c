/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service as a whole: its options, its store, the ops table a
 * server runs it by, and whether one-sided GETs are served. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_service.h"
#include "qpgate/kv.h"

/* The store keeps a value's region as an opaque pointer. */
static void close_region(void *region)
{
	qpg_region_close(region);
}

/* Serve one-sided GETs where the transport and device can scope windows
 * to one client's QP; values are then registered as they commit. */
static int kv_start(struct qpg_server *srv, void *ctx, char *why, size_t why_len)
{
	struct qpg_kv_service *k = ctx;
	int rc = qpg_server_enable_grants(srv);
	if (rc) {
		snprintf(k->one_sided_why, sizeof(k->one_sided_why), "off (%s)",
			 rc == -EOPNOTSUPP ? "the transport or device has no type-2 memory windows"
					   : strerror(-rc));
		return 0; /* every GET is still served, two-sided */
	}
	k->store.region_close = close_region;
	k->one_sided = true;
	snprintf(k->one_sided_why, sizeof(k->one_sided_why),
		 "on, by default for values of %u bytes or more (read-only type-2 memory "
		 "windows bound to the client's QP, each over exactly one value)",
		 k->grant_min);
	return 0;
}

/* The server is going: no connection is left, so no window over a value;
 * the values' regions go before the device does. */
static void kv_stop(struct qpg_server *srv, void *ctx)
{
	(void)srv;
	struct qpg_kv_service *k = ctx;
	qpg__kv_store_close_regions(&k->store);
	k->one_sided = false;
	snprintf(k->one_sided_why, sizeof(k->one_sided_why), "off (the server has stopped)");
}

static unsigned long long ld(atomic_ullong *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

/* The KV service's metrics, appended to the server's at each scrape. */
static void kv_metrics(void *ctx, FILE *f)
{
	static const char *const ops[] = {"unknown", "put",	"get",	"del",
					  "release", "exists", "stat"};
	_Static_assert(sizeof(ops) / sizeof(ops[0]) == QPG_KV_OP_MAX + 1, "a label for every op");
	static const char *const statuses[] = {
	    "ok",	 "not_found", "key_too_large", "value_too_large", "store_full",
	    "malformed", "busy",      "unsupported",   "wrong_owner",	  "unavailable",
	    "over_quota"};
	_Static_assert(sizeof(statuses) / sizeof(statuses[0]) == QPG_KV_STATUS_MAX + 1,
		       "a label for every status");
	struct qpg_kv_service *k = ctx;
	fprintf(f, "# HELP qpgate_kv_ops_total KV requests answered, by operation and status.\n"
		   "# TYPE qpgate_kv_ops_total counter\n");
	for (int op = 0; op <= QPG_KV_OP_MAX; op++)
		for (int st = 0; st <= QPG_KV_STATUS_MAX; st++)
			fprintf(f, "qpgate_kv_ops_total{op=\"%s\",status=\"%s\"} %llu\n", ops[op],
				statuses[st], ld(&k->m.ops[op][st]));
	pthread_mutex_lock(&k->store.lock);
	size_t used = k->store.allocated, cap = k->store.capacity, keys = k->store.nkeys;
	unsigned long long evictions = k->store.evictions, evicted = k->store.evicted_bytes;
	unsigned long long expired = k->store.expired, ahead = k->store.evictions_ahead;
	size_t wm_high = k->store.wm_high, wm_low = k->store.wm_low;
	pthread_mutex_unlock(&k->store.lock);
	fprintf(f,
		"# HELP qpgate_kv_evictions_ahead_total Of the keys evicted or expired, those "
		"taken ahead of need (above the high watermark).\n"
		"# TYPE qpgate_kv_evictions_ahead_total counter\nqpgate_kv_evictions_ahead_total "
		"%llu\n"
		"# HELP qpgate_kv_watermark_bytes Bytes in use past which eviction ahead of need "
		"starts (high), and where it stops (low); 0: off.\n"
		"# TYPE qpgate_kv_watermark_bytes gauge\n"
		"qpgate_kv_watermark_bytes{mark=\"high\"} %zu\n"
		"qpgate_kv_watermark_bytes{mark=\"low\"} %zu\n",
		ahead, wm_high, wm_low);
	fprintf(f,
		"# HELP qpgate_kv_expired_total Values found past their TTL (PUT --ttl), and "
		"dropped.\n"
		"# TYPE qpgate_kv_expired_total counter\nqpgate_kv_expired_total %llu\n",
		expired);
	fprintf(f,
		"# HELP qpgate_kv_evictions_total Keys evicted to make room for a PUT (SIEVE).\n"
		"# TYPE qpgate_kv_evictions_total counter\nqpgate_kv_evictions_total %llu\n"
		"# HELP qpgate_kv_evicted_bytes_total Value bytes of the keys evicted.\n"
		"# TYPE qpgate_kv_evicted_bytes_total counter\nqpgate_kv_evicted_bytes_total %llu\n",
		evictions, evicted);
	fprintf(f,
		"# HELP qpgate_kv_exists_keys_total Keys EXISTS asked about, by whether stored.\n"
		"# TYPE qpgate_kv_exists_keys_total counter\n"
		"qpgate_kv_exists_keys_total{result=\"stored\"} %llu\n"
		"qpgate_kv_exists_keys_total{result=\"absent\"} %llu\n",
		ld(&k->m.exists_keys[1]), ld(&k->m.exists_keys[0]));
	fprintf(
	    f,
	    "# HELP qpgate_kv_gets_total GETs by whether the key was stored.\n"
	    "# TYPE qpgate_kv_gets_total counter\n"
	    "qpgate_kv_gets_total{result=\"hit\"} %llu\nqpgate_kv_gets_total{result=\"miss\"} "
	    "%llu\n"
	    "# HELP qpgate_kv_value_bytes_total Value bytes stored (in) and served, sent or "
	    "granted (out).\n"
	    "# TYPE qpgate_kv_value_bytes_total counter\n"
	    "qpgate_kv_value_bytes_total{direction=\"in\"} %llu\n"
	    "qpgate_kv_value_bytes_total{direction=\"out\"} %llu\n"
	    "# HELP qpgate_kv_store_bytes The store's value space, by state.\n"
	    "# TYPE qpgate_kv_store_bytes gauge\n"
	    "qpgate_kv_store_bytes{state=\"used\"} %zu\nqpgate_kv_store_bytes{state=\"free\"} "
	    "%zu\n"
	    "# HELP qpgate_kv_keys Keys stored.\n# TYPE qpgate_kv_keys gauge\nqpgate_kv_keys %zu\n"
	    "# HELP qpgate_kv_grants_total Memory windows granted for one-sided GETs.\n"
	    "# TYPE qpgate_kv_grants_total counter\nqpgate_kv_grants_total %llu\n"
	    "# HELP qpgate_kv_grants_expired_total Grants revoked at their deadline, not "
	    "released.\n"
	    "# TYPE qpgate_kv_grants_expired_total counter\nqpgate_kv_grants_expired_total %llu\n"
	    "# HELP qpgate_kv_grants_live Memory windows bound now.\n"
	    "# TYPE qpgate_kv_grants_live gauge\nqpgate_kv_grants_live %lld\n",
	    ld(&k->m.hits), ld(&k->m.misses), ld(&k->m.bytes_in), ld(&k->m.bytes_out), used,
	    cap - used, keys, ld(&k->m.grants), ld(&k->m.grants_expired),
	    (long long)atomic_load_explicit(&k->m.grants_live, memory_order_relaxed));
	fprintf(f,
		"# HELP qpgate_kv_releases_total Grants released by their client: by a RELEASE, "
		"or with the client's next GET.\n"
		"# TYPE qpgate_kv_releases_total counter\n"
		"qpgate_kv_releases_total{by=\"release\"} %llu\n"
		"qpgate_kv_releases_total{by=\"get\"} %llu\n",
		ld(&k->m.releases[0]), ld(&k->m.releases[1]));
	fprintf(f,
		"# HELP qpgate_kv_parked_total Requests held until the cluster's gate let them "
		"by (a newer view, a key gained too recently).\n"
		"# TYPE qpgate_kv_parked_total counter\nqpgate_kv_parked_total %llu\n"
		"# HELP qpgate_kv_parked_bytes Bytes of requests held now.\n"
		"# TYPE qpgate_kv_parked_bytes gauge\nqpgate_kv_parked_bytes %llu\n",
		ld(&k->m.parked), ld(&k->parked_bytes));
	fprintf(f,
		"# HELP qpgate_kv_puts_abandoned_total PUTs whose next chunk did not come within "
		"--kv-put-timeout: their reserved space given back, their connection kept.\n"
		"# TYPE qpgate_kv_puts_abandoned_total counter\nqpgate_kv_puts_abandoned_total %llu\n",
		ld(&k->m.puts_abandoned));
	fprintf(f,
		"# HELP qpgate_kv_digest_info The digest each value carries for one-sided "
		"readers.\n"
		"# TYPE qpgate_kv_digest_info gauge\n"
		"qpgate_kv_digest_info{digest=\"%s\"} 1\n",
		qpg_kv_digest_name(k->digest_alg));
	qpg__kv_tenant_metrics(&k->store, f);
}

static const struct qpg_service kv_ops = {
    .id = QPG_SERVICE_KV,
    .name = "kv",
    .min_msg = QPG_KV_MIN_MSG, /* a reply header, a key and a useful piece of value */
    .request_type = QPG_FRAME_KV_REQ,
    .start = kv_start,
    .stop = kv_stop,
    .on_message = qpg__kv_message,
    .on_sent = qpg__kv_sent,
    .on_close = qpg__kv_closed,
    .on_revoked = qpg__kv_revoked,
    .on_tick = qpg__kv_tick,
    .metrics = kv_metrics,
    .admit = qpg__kv_admit,
};

void qpg_kv_server_opts_default(struct qpg_kv_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->capacity = 256u << 20;
	o->max_value = 1u << 20;
	o->grant_min = 32u << 10; /* docs/performance.md: READs win from about here */
	o->grant_ttl_ms = 10000;
	o->put_timeout_ms = 10000;
	o->wm_high_pct = 95;
	o->wm_low_pct = 90;
}

int qpg_kv_service_create(struct qpg_kv_service **out, const struct qpg_kv_server_opts *o,
			  char *err, size_t err_len)
{
	struct qpg_kv_service *k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	int rc = o->max_value > QPG_KV_MAX_VALUE
		     ? -EINVAL
		     : qpg__kv_store_init(&k->store, o->capacity, o->max_value);
	if (rc) {
		snprintf(err, err_len,
			 "cannot create the KV store (%zu bytes, values up to %u): %s", o->capacity,
			 o->max_value,
			 rc == -EINVAL ? "the largest value must fit the store, which is at most "
					 "1 TiB, and the protocol's 256 MiB"
				       : strerror(-rc));
		free(k);
		return rc;
	}
	k->store.evict = o->eviction == QPG_KV_EVICT_SIEVE;
	rc = o->digest > QPG_KV_DIGEST_MAX ? -EINVAL : qpg__kv_digests_fetch(&k->digests);
	if (rc) {
		snprintf(err, err_len, "cannot use the digest %u for values: %s", o->digest,
			 rc == -EINVAL ? "unknown" : "this OpenSSL lacks SHA-256 or SHA-512/256");
		qpg__kv_store_fini(&k->store);
		free(k);
		return rc;
	}
	rc = qpg__kv_tenancy_init(&k->tenancy, &k->store, o->tenants_file, o->tenant_from, err,
				  err_len);
	if (rc) {
		qpg__kv_tenancy_fini(&k->tenancy);
		qpg__kv_store_fini(&k->store);
		qpg__kv_digests_free(&k->digests);
		free(k);
		return rc;
	}
	k->digest_alg = o->digest ? o->digest : qpg__kv_digest_pick(&k->digests);
	k->store.digest = qpg__kv_digest_md(&k->digests, k->digest_alg);
	k->grant_min = o->grant_min;
	k->grant_ttl_ns = (uint64_t)o->grant_ttl_ms * 1000000ull;
	k->put_timeout_ns = (uint64_t)o->put_timeout_ms * 1000000ull;
	snprintf(k->one_sided_why, sizeof(k->one_sided_why), "off (the server has not started)");
	rc = qpg__kv_trimmer_start(k, o->wm_high_pct, o->wm_low_pct);
	if (rc) {
		snprintf(err, err_len, "cannot evict ahead of need (watermarks %u%%, %u%%): %s",
			 o->wm_high_pct, o->wm_low_pct,
			 rc == -EINVAL ? "the low one must be below the high one, at most 100"
				       : strerror(-rc));
		qpg__kv_tenancy_fini(&k->tenancy);
		qpg__kv_store_fini(&k->store);
		qpg__kv_digests_free(&k->digests);
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

int qpg_kv_service_reload_tenants(struct qpg_kv_service *k, char *err, size_t err_len)
{
	return qpg__kv_tenancy_reload(&k->tenancy, &k->store, err, err_len);
}

const struct qpg_service *qpg_kv_service_ops(void)
{
	return &kv_ops;
}

uint8_t qpg_kv_service_digest(const struct qpg_kv_service *k)
{
	return k->digest_alg;
}

const char *qpg_kv_service_one_sided(const struct qpg_kv_service *k)
{
	return k->one_sided_why;
}

void qpg_kv_service_destroy(struct qpg_kv_service *k)
{
	if (!k)
		return;
	qpg__kv_trimmer_stop(k);
	qpg__kv_tenancy_fini(&k->tenancy);
	qpg__kv_store_fini(&k->store);
	qpg__kv_digests_free(&k->digests);
	free(k);
}

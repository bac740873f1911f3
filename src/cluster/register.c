/* SPDX-License-Identifier: BSD-2-Clause */
/* A server's registration: its entry under a lease, kept alive by one
 * keepalive a second. The lease is the server's right to serve: it counts
 * as alive until the send time of the last acknowledged keepalive plus the
 * TTL (lease fencing; a server frozen past that must not answer from its
 * store when it wakes). A lost lease (etcd says so, or no keepalive was
 * acknowledged for a whole TTL) is reported at once through `lost`, and the
 * server registers again under a new incarnation. */
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"
#include "fresh.h"
#include "pace.h"

struct qpg_cluster_reg {
	struct qpg_cluster_reg_opts o;
	struct qpg__etcd e;   /* the thread's; the caller's before it starts */
	pthread_mutex_t lock; /* e, self and lease between thread and callers */
	struct qpg_cluster_member self;
	char key[160];
	_Atomic int64_t lease;	/* 0: none; read by fresh.c */
	atomic_ullong until_ns; /* lease fencing */
	atomic_ullong incarnation;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	atomic_ullong registrations, lost, ka_fails, takeovers;
	int64_t holder_lease; /* create found our own address under this lease */
	atomic_bool etcd_ok;
	uint64_t load_at_ns;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "qpgate-server: cluster: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static json_t *entry_b64(struct qpg_cluster_reg *r)
{
	char json[QPG_CLUSTER_ENTRY_MAX + 1];
	int n = qpg_cluster_member_to_json(&r->self, json, sizeof(json));
	return n > 0 ? qpg__etcd_b64(json, (size_t)n) : NULL;
}

static int grant(struct qpg_cluster_reg *r, char *err, size_t len)
{
	json_t *resp;
	int rc = qpg__etcd_call(&r->e, "/v3/lease/grant",
				json_pack("{s:I}", "TTL", (json_int_t)r->o.ttl_s), &resp, err, len);
	if (rc)
		return rc;
	r->lease = qpg__etcd_i64(resp, "ID", 0);
	json_decref(resp);
	if (!r->lease) {
		snprintf(err, len, "etcd granted no lease");
		return -EPROTO;
	}
	return 0;
}

static void revoke(struct qpg_cluster_reg *r)
{
	json_t *resp;
	char err[256];
	if (qpg__etcd_call(&r->e, "/v3/lease/revoke",
			   json_pack("{s:I}", "ID", (json_int_t)r->lease), &resp, err,
			   sizeof(err)) == 0)
		json_decref(resp);
}

/* Create the entry if absent, under the lease. -EEXIST names the holder. */
static int create(struct qpg_cluster_reg *r, char *err, size_t len)
{
	json_t *k = qpg__etcd_b64(r->key, strlen(r->key));
	json_t *req =
	    json_pack("{s:[{s:O, s:s, s:s, s:s}], s:[{s:{s:O, s:o*, s:I}}], s:[{s:{s:O}}]}",
		      "compare", "key", k, "target", "CREATE", "create_revision", "0", "result",
		      "EQUAL", "success", "request_put", "key", k, "value", entry_b64(r), "lease",
		      (json_int_t)r->lease, "failure", "request_range", "key", k);
	json_decref(k);
	json_t *resp;
	int rc = qpg__etcd_call(&r->e, "/v3/kv/txn", req, &resp, err, len);
	if (rc)
		return rc;
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		json_decref(resp);
		return 0;
	}
	/* Who holds the ID: the failure branch read it. */
	char holder[QPG_CLUSTER_ENTRY_MAX + 1] = "";
	json_t *rr = json_object_get(json_array_get(json_object_get(resp, "responses"), 0),
				     "response_range");
	json_t *kv = json_array_get(json_object_get(rr, "kvs"), 0);
	long n = kv ? qpg__etcd_unb64(kv, "value", holder, sizeof(holder) - 1) : -1;
	struct qpg_cluster_member m;
	char why[64];
	bool parsed =
	    n > 0 && qpg_cluster_member_from_json(&m, holder, (size_t)n, why, sizeof(why)) == 0;
	r->holder_lease = 0;
	if (parsed && strcmp(m.host, r->self.host) == 0 && m.port == r->self.port && m.port != 0)
		r->holder_lease = qpg__etcd_i64(kv, "lease", 0); /* our own address */
	if (parsed)
		snprintf(err, len,
			 "member ID '%s' is already registered in this cluster (by %s:%u, "
			 "incarnation %016llx): give this server another --cluster-id, or stop "
			 "the other one",
			 r->self.id, m.host, m.port, (unsigned long long)m.incarnation);
	else
		snprintf(err, len,
			 "member ID '%s' is already registered in this cluster: give this "
			 "server another --cluster-id, or stop the other one",
			 r->self.id);
	json_decref(resp);
	return -EEXIST;
}

/* The entry names our own address and port, and we listen on that port:
 * its holder is a predecessor that died (kill -9, a crash) and whose lease
 * still runs. Put our entry in its place, in one transaction that holds
 * only while the entry is still under that lease; then let the old lease
 * go (with it whatever else the dead process left). */
static int take_over(struct qpg_cluster_reg *r, char *err, size_t len)
{
	int64_t old = r->holder_lease;
	json_t *k = qpg__etcd_b64(r->key, strlen(r->key));
	json_t *req = json_pack("{s:[{s:O, s:s, s:I, s:s}], s:[{s:{s:O, s:o*, s:I}}]}", "compare",
				"key", k, "target", "LEASE", "lease", (json_int_t)old, "result",
				"EQUAL", "success", "request_put", "key", k, "value", entry_b64(r),
				"lease", (json_int_t)r->lease);
	json_decref(k);
	json_t *resp;
	int rc = qpg__etcd_call(&r->e, "/v3/kv/txn", req, &resp, err, len);
	if (rc)
		return rc;
	bool ok = json_is_true(json_object_get(resp, "succeeded"));
	json_decref(resp);
	if (!ok)
		return -EEXIST; /* it changed hands meanwhile: refuse as before */
	if (qpg__etcd_call(&r->e, "/v3/lease/revoke", json_pack("{s:I}", "ID", (json_int_t)old),
			   &resp, err, len) == 0)
		json_decref(resp);
	say("member ID '%s' was held at this server's own address and port by a process that is "
	    "gone (this one holds the port): taken over",
	    r->self.id);
	atomic_fetch_add(&r->takeovers, 1);
	return 0;
}

/* Overwrite our entry, only while it is ours (same lease). */
static int update(struct qpg_cluster_reg *r, char *err, size_t len)
{
	json_t *k = qpg__etcd_b64(r->key, strlen(r->key));
	json_t *req = json_pack("{s:[{s:O, s:s, s:I, s:s}], s:[{s:{s:O, s:o*, s:I}}]}", "compare",
				"key", k, "target", "LEASE", "lease", (json_int_t)r->lease,
				"result", "EQUAL", "success", "request_put", "key", k, "value",
				entry_b64(r), "lease", (json_int_t)r->lease);
	json_decref(k);
	json_t *resp;
	int rc = qpg__etcd_call(&r->e, "/v3/kv/txn", req, &resp, err, len);
	if (rc)
		return rc;
	rc = json_is_true(json_object_get(resp, "succeeded")) ? 0 : -ENOENT;
	json_decref(resp);
	return rc;
}

static void new_incarnation(struct qpg_cluster_reg *r)
{
	uint64_t inc = 0;
	while (!inc)
		RAND_bytes((unsigned char *)&inc, sizeof(inc));
	r->self.incarnation = inc;
	atomic_store(&r->incarnation, inc);
}

/* Lease, then entry. On -EEXIST the lease is let go again. */
static int enroll(struct qpg_cluster_reg *r, char *err, size_t len)
{
	new_incarnation(r);
	r->self.state = QPG_MEMBER_WARMING;
	uint64_t t0 = qpg_cluster_now_ns();
	int rc = grant(r, err, len);
	if (rc)
		return rc;
	rc = create(r, err, len);
	if (rc == -EEXIST && r->o.holds_port && r->holder_lease && !r->started) {
		char why[256];
		if (take_over(r, why, sizeof(why)) == 0)
			rc = 0;
	}
	if (rc) {
		revoke(r);
		return rc;
	}
	atomic_store(&r->until_ns, t0 + (uint64_t)r->o.ttl_s * 1000000000ull);
	atomic_fetch_add(&r->registrations, 1);
	return 0;
}

/* One keepalive: 1 alive (fencing moved on), 0 lost, <0 etcd unreachable. */
static int keepalive(struct qpg_cluster_reg *r, char *err, size_t len)
{
	uint64_t sent = qpg_cluster_now_ns();
	json_t *resp;
	int rc = qpg__etcd_call(&r->e, "/v3/lease/keepalive",
				json_pack("{s:I}", "ID", (json_int_t)r->lease), &resp, err, len);
	if (rc)
		return rc;
	/* An expired lease answers without a TTL. */
	int64_t ttl = qpg__etcd_i64(json_object_get(resp, "result"), "TTL", 0);
	json_decref(resp);
	if (ttl <= 0)
		return 0;
	atomic_store(&r->until_ns, sent + (uint64_t)r->o.ttl_s * 1000000000ull);
	return 1;
}

static void lose(struct qpg_cluster_reg *r, const char *why)
{
	atomic_store(&r->until_ns, 0);
	atomic_fetch_add(&r->lost, 1);
	say("lease lost (%s): no KV request is served until this server has registered "
	    "again, with an empty store",
	    why);
	if (r->o.lost)
		r->o.lost(r->o.user);
}

static void *reg_main(void *arg)
{
	struct qpg_cluster_reg *r = arg;
	unsigned backoff = 200;
	while (!atomic_load(&r->stop)) {
		qpg__nap(&r->stop, r->o.keepalive_ms);
		if (atomic_load(&r->stop))
			break;
		pthread_mutex_lock(&r->lock);
		bool registered = atomic_load(&r->until_ns) != 0;
		int rc;
		char err[512] = "";
		if (!registered) {
			/* After an outage the old lease may still be alive (a
			 * restarted etcd gives every lease its TTL again): take it
			 * back, so the member never leaves the view, but under a new
			 * incarnation, since the store was dropped. */
			rc = r->lease ? keepalive(r, err, sizeof(err)) : 0;
			if (rc > 0) {
				new_incarnation(r);
				atomic_fetch_add(&r->registrations, 1);
			} else if (rc == 0) {
				rc = enroll(r, err, sizeof(err));
			}
			if (rc >= 0) {
				r->self.state = QPG_MEMBER_ACTIVE;
				update(r, err, sizeof(err));
				say("registered again, incarnation %016llx, with an empty store",
				    (unsigned long long)r->self.incarnation);
				rc = 1;
			}
		} else {
			rc = keepalive(r, err, sizeof(err));
			if (rc == 0) {
				lose(r, "etcd says it expired");
				r->lease = 0;
			}
		}
		if (rc < 0) {
			atomic_fetch_add(&r->ka_fails, 1);
			if (atomic_exchange(&r->etcd_ok, false))
				say("etcd unreachable: %s; still serving until the lease ends, "
				    "retrying",
				    err);
			if (registered && qpg_cluster_now_ns() >= atomic_load(&r->until_ns))
				lose(r, "no keepalive acknowledged for a whole TTL");
		} else if (!atomic_exchange(&r->etcd_ok, true)) {
			say("etcd reachable again");
		}
		/* The load, at most every load_every_ms, and only when it moved. */
		uint64_t now = qpg_cluster_now_ns();
		if (rc > 0 && r->o.load &&
		    now - r->load_at_ns >= (uint64_t)r->o.load_every_ms * 1000000ull) {
			uint32_t cl = 0, mx = 0;
			r->o.load(r->o.user, &cl, &mx);
			if (cl != r->self.clients || mx != r->self.max_clients) {
				r->self.clients = cl;
				r->self.max_clients = mx;
				update(r, err, sizeof(err));
			}
			r->load_at_ns = now;
		}
		pthread_mutex_unlock(&r->lock);
		if (rc < 0) {
			/* Jittered backoff, within the keepalive period's rhythm. */
			qpg__nap(&r->stop, qpg__jitter(backoff));
			backoff = qpg__backoff_next(backoff, 1000);
		} else {
			backoff = 200;
		}
	}
	return NULL;
}

int qpg_cluster_register(struct qpg_cluster_reg **out, const struct qpg_cluster_reg_opts *o,
			 char *err, size_t err_len)
{
	struct qpg_cluster_reg *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->o = *o;
	if (!r->o.ttl_s)
		r->o.ttl_s = 3;
	if (r->o.ttl_s < 2)
		r->o.ttl_s = 2; /* etcd's least */
	if (!r->o.keepalive_ms)
		r->o.keepalive_ms = 1000;
	if (!r->o.load_every_ms)
		r->o.load_every_ms = 3000;
	r->self = o->self;
	if (!r->self.weight)
		r->self.weight = 1;
	pthread_mutex_init(&r->lock, NULL);
	int rc = qpg__etcd_init(&r->e, &o->etcd, err, err_len);
	if (rc)
		goto fail;
	if (!qpg_cluster_name_ok(r->self.id)) {
		snprintf(err, err_len, "the member ID '%s' is not 1 to %d of A-Z a-z 0-9 . _ -",
			 r->self.id, QPG_CLUSTER_ID_MAX);
		rc = -EINVAL;
		goto fail_etcd;
	}
	snprintf(r->key, sizeof(r->key), "%s%s", r->e.prefix, r->self.id);
	char why[512];
	rc = enroll(r, why, sizeof(why));
	if (rc) {
		if (rc == -EEXIST)
			snprintf(err, err_len, "%s", why);
		else
			snprintf(err, err_len, "cannot register with etcd: %s", why);
		if (rc != -EEXIST && rc != -EPROTO)
			rc = -EHOSTUNREACH;
		goto fail_etcd;
	}
	atomic_store(&r->etcd_ok, true);
	if ((rc = -pthread_create(&r->thread, NULL, reg_main, r)) != 0) {
		revoke(r);
		snprintf(err, err_len, "cannot start the registration thread");
		goto fail_etcd;
	}
	r->started = true;
	*out = r;
	return 0;
fail_etcd:
	qpg__etcd_fini(&r->e);
fail:
	pthread_mutex_destroy(&r->lock);
	free(r);
	return rc;
}

int qpg_cluster_set_state(struct qpg_cluster_reg *r, enum qpg_member_state s)
{
	char err[256];
	pthread_mutex_lock(&r->lock);
	r->self.state = s;
	int rc = atomic_load(&r->until_ns) ? update(r, err, sizeof(err)) : -ENOENT;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

uint64_t qpg_cluster_lease_until(const struct qpg_cluster_reg *r)
{
	return atomic_load(&r->until_ns);
}

int64_t qpg__cluster_reg_lease(const struct qpg_cluster_reg *r)
{
	return atomic_load(&r->until_ns) ? atomic_load(&r->lease) : 0;
}

uint64_t qpg_cluster_incarnation(const struct qpg_cluster_reg *r)
{
	return atomic_load(&r->incarnation);
}

void qpg_cluster_leave(struct qpg_cluster_reg *r)
{
	if (!r || !r->started)
		return;
	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	r->started = false;
	char err[256];
	if (atomic_load(&r->until_ns)) {
		r->self.state = QPG_MEMBER_DRAINING;
		update(r, err, sizeof(err));
		revoke(r);
	}
	atomic_store(&r->until_ns, 0);
}

void qpg_cluster_reg_destroy(struct qpg_cluster_reg *r)
{
	if (!r)
		return;
	qpg_cluster_leave(r);
	qpg__etcd_fini(&r->e);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void qpg_cluster_reg_stats(const struct qpg_cluster_reg *r, struct qpg_cluster_reg_stats *out)
{
	struct qpg_cluster_reg *w = (struct qpg_cluster_reg *)(uintptr_t)r;
	out->registrations = atomic_load(&w->registrations);
	out->leases_lost = atomic_load(&w->lost);
	out->keepalive_fails = atomic_load(&w->ka_fails);
	out->etcd_ok = atomic_load(&w->etcd_ok);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The load behind qpgate-kvbench: preload the keys, then workers that each
 * keep one GET in flight, pick keys (uniform or zipf), check every value
 * against the checksum of what was stored, and time each GET. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvbench.h"
#include "kvdata.h"
#include "resources.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int key_name(char *buf, size_t len, uint32_t k)
{
	return snprintf(buf, len, "kv-%08u", k);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

uint32_t kvb_pick_key(struct worker *w)
{
	struct bench *b = w->b;
	double u = (double)(xorshift(&w->rng) >> 11) / (double)(1ull << 53);
	if (!b->zipf)
		return (uint32_t)(u * b->nkeys) % b->nkeys;
	uint32_t lo = 0, hi = b->nkeys - 1; /* first CDF entry >= u */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (b->zipf_cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- preload ------------------------------------------------------------ */

struct put_slot {
	struct qpg_kv_request req;
	struct bench *b;
	char key[24];
	uint8_t *value;
	int status;
	bool busy;
};

static void put_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct put_slot *s = r->user;
	pthread_mutex_lock(&s->b->lock);
	s->busy = false;
	if (status != QPG_KV_OK && s->status == QPG_KV_OK)
		s->status = status ? status : -EIO;
	pthread_cond_broadcast(&s->b->cv);
	pthread_mutex_unlock(&s->b->lock);
}

int kvb_submit(struct bench *b, struct qpg_kv_request *r)
{
	return qpg_kv_target_submit(b->target, r);
}

/* A finished PUT's status: 0 to go on, or why the preload stops. With
 * --cluster, a member found failing answers UNAVAILABLE: that key is left
 * out (a worker's first GET of it misses and fills it again), counted in
 * *UNAV. Under b->lock. */
static int preload_verdict(const struct bench *b, int status, long *unav)
{
	if (status == QPG_KV_OK)
		return 0;
	if (status == QPG_KV_UNAVAILABLE) {
		(*unav)++;
		return 0;
	}
	return status > 0 ? -EIO : status;
}

static int preload(struct bench *b, long *unav)
{
	enum { INFLIGHT = 64 };
	struct put_slot *slots = calloc(INFLIGHT, sizeof(*slots));
	int rc = slots ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < INFLIGHT; i++) {
		slots[i].b = b;
		if (!(slots[i].value = malloc(b->value_size ? b->value_size : 1)))
			rc = -ENOMEM;
	}
	for (uint32_t k = 0; rc == 0 && k < b->nkeys; k++) {
		struct put_slot *s = NULL;
		pthread_mutex_lock(&b->lock);
		while (!s) {
			for (int i = 0; i < INFLIGHT && !s; i++)
				if (!slots[i].busy)
					s = &slots[i];
			if (!s)
				pthread_cond_wait(&b->cv, &b->lock);
		}
		rc = preload_verdict(b, s->status, unav);
		s->status = QPG_KV_OK;
		s->busy = rc == 0; /* (left free when the preload stops here) */
		pthread_mutex_unlock(&b->lock);
		if (rc)
			break;
		if (b->values)
			memcpy(s->value, b->values + (size_t)k * b->value_size, b->value_size);
		else
			kv_value_fill(s->value, k, b->value_size);
		int n = key_name(s->key, sizeof(s->key), k);
		s->req = (struct qpg_kv_request){.op = QPG_KV_PUT,
						 .key = s->key,
						 .key_len = (uint16_t)n,
						 .value = s->value,
						 .value_len = b->value_size,
						 .done = put_done,
						 .user = s};
		if ((rc = kvb_submit(b, &s->req)) != 0)
			s->busy = false;
	}
	pthread_mutex_lock(&b->lock); /* wait for the last ones */
	for (int i = 0; slots && i < INFLIGHT; i++) {
		while (slots[i].busy)
			pthread_cond_wait(&b->cv, &b->lock);
		int v = preload_verdict(b, slots[i].status, unav);
		if (rc == 0)
			rc = v;
	}
	pthread_mutex_unlock(&b->lock);
	for (int i = 0; slots && i < INFLIGHT; i++)
		free(slots[i].value);
	free(slots);
	return rc;
}

/* ---- the workers --------------------------------------------------------- */

static void get_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		      uint32_t total)
{
	struct worker *w = r->user;
	/* Straight from where it landed (two-sided: the receive buffer). */
	XXH64_update(w->xxh, data, len);
}

void kvb_worker_stop(struct bench *b)
{
	pthread_mutex_lock(&b->lock);
	atomic_fetch_sub(&b->active, 1);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->lock);
}

/* This thread's histogram (a slot taken on its first GET of the run). */
struct qpg_hist *kvb_thread_lat(struct bench *b)
{
	static _Thread_local struct bench *owner;
	static _Thread_local int generation = -1, slot;
	if (owner != b || generation != b->lat_generation) {
		owner = b;
		generation = b->lat_generation;
		slot = atomic_fetch_add(&b->lat_slots, 1);
	}
	return slot < KVB_LAT_SLOTS ? &b->lat[slot] : NULL;
}

/* --cluster: the refill of a miss is in (or refused). */
static void refill_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	(void)len;
	struct worker *w = r->user;
	if (status == QPG_KV_OK)
		w->refills++;
	else if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else
		w->errors++;
	kvb_issue(w);
}

static void get_done(struct qpg_kv_request *r, int status, uint32_t len)
{
	struct worker *w = r->user;
	struct bench *b = w->b;
	struct qpg_hist *h = kvb_thread_lat(b);
	if (h)
		qpg_hist_add(h, now_ns() - w->t0);
	if (status == QPG_KV_NOT_FOUND && w->refill) {
		/* A member that took the key over has it not (yet): fill it. */
		w->misses++;
		kv_value_fill(w->refill, w->key, b->value_size);
		int n = key_name(w->keybuf, sizeof(w->keybuf), w->key);
		w->req = (struct qpg_kv_request){.op = QPG_KV_PUT,
						 .key = w->keybuf,
						 .key_len = (uint16_t)n,
						 .value = w->refill,
						 .value_len = b->value_size,
						 .done = refill_done,
						 .user = w};
		if (kvb_submit(b, &w->req) != 0)
			kvb_worker_stop(b);
		return;
	}
	if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else if (status != QPG_KV_OK)
		w->errors++;
	else if (len != b->value_size || XXH64_digest(w->xxh) != b->expect[w->key])
		w->mismatches++;
	else
		w->ops++;
	if (status < 0) { /* the connection is gone: this worker stops */
		kvb_worker_stop(b);
		return;
	}
	kvb_issue(w);
}

/* --put-ratio: a worker's PUT is in. */
static void put_done_w(struct qpg_kv_request *r, int status, uint32_t len)
{
	(void)len;
	struct worker *w = r->user;
	struct qpg_hist *h = kvb_thread_lat(w->b);
	if (h)
		qpg_hist_add(h, now_ns() - w->t0);
	if (status == QPG_KV_UNAVAILABLE)
		w->unavailable++;
	else if (status != QPG_KV_OK)
		w->errors++;
	else
		w->ops++, w->puts++;
	if (status < 0) {
		kvb_worker_stop(w->b);
		return;
	}
	kvb_issue(w);
}

void kvb_issue(struct worker *w)
{
	struct bench *b = w->b;
	if (atomic_load(&b->stop) ||
	    (b->max_ops > 0 && atomic_fetch_add(&b->issued, 1) >= b->max_ops)) {
		kvb_worker_stop(b);
		return;
	}
	if (b->workload) { /* a turn of it (an op of --ops) */
		b->workload->issue(w);
		return;
	}
	w->key = kvb_pick_key(w);
	int n = key_name(w->keybuf, sizeof(w->keybuf), w->key);
	if (b->put_pct && xorshift(&w->rng) % 100 < b->put_pct) {
		w->req =
		    (struct qpg_kv_request){.op = QPG_KV_PUT,
					    .key = w->keybuf,
					    .key_len = (uint16_t)n,
					    .value = b->values + (size_t)w->key * b->value_size,
					    .value_len = b->value_size,
					    .done = put_done_w,
					    .user = w};
		w->t0 = now_ns();
		if (kvb_submit(b, &w->req) != 0)
			kvb_worker_stop(b);
		return;
	}
	w->req = (struct qpg_kv_request){.op = QPG_KV_GET,
					 .key = w->keybuf,
					 .key_len = (uint16_t)n,
					 .chunk = get_chunk,
					 .done = get_done,
					 .user = w,
					 .into = w->into,
					 .into_cap = w->into ? b->value_size : 0};
	XXH64_reset(w->xxh, 0);
	w->t0 = now_ns();
	if (kvb_submit(b, &w->req) != 0)
		kvb_worker_stop(b);
}

/* CPU microseconds per GET between two samples of one process; -1 when a
 * sample failed or no GET was done. */
static double per_get_us(const struct proc_sample *a, const struct proc_sample *b, long gets)
{
	if (!a->ok || !b->ok || gets <= 0)
		return -1;
	return (b->cpu_s - a->cpu_s) * 1e6 / (double)gets;
}

/* The target (a cluster's report kept for the tool). */
static void kvb_close(struct bench *b)
{
	json_decref(b->cluster_report);
	b->cluster_report = kvb_target_close(b);
}

/* The pool's options for a run: the credits given (--credits), else enough
 * for every worker of a connection to be in flight. */
static struct qpg_kv_pool_opts run_opts(const struct bench *b, unsigned threads, unsigned clients,
					unsigned workers, bool do_preload)
{
	struct qpg_kv_pool_opts po = b->po;
	po.threads = threads;
	po.conns = clients;
	if (!po.client.credits) {
		unsigned per = (workers + clients - 1) / clients;
		po.client.credits = (uint16_t)(per < 1 ? 1 : per > 1024 ? 1024 : per);
		if (do_preload && po.client.credits < 16)
			po.client.credits = 16;
	}
	return po;
}

/* Open the target and preload the keys; 0, or the target is closed and
 * RES says why. */
static int open_and_preload(struct bench *b, const struct qpg_kv_pool_opts *po, bool do_preload,
			    struct run_result *res)
{
	struct dev_counts d0, d1;
	dev_counts(po->client.ib_dev, &d0);
	char err[256] = "";
	int rc = kvb_target_open(b, po, err, sizeof(err));
	if (rc) {
		res->connect_error = rc;
		snprintf(res->why, sizeof(res->why), "%s", err);
		return rc;
	}
	dev_counts(po->client.ib_dev, &d1);
	res->dev_qps = d0.ok && d1.ok ? d1.qp - d0.qp : -1;
	struct qpg_kv_target_info pi;
	qpg_kv_target_info(b->target, &pi);
	res->credits = pi.credits;
	if (pi.retries)
		fprintf(stderr, "kvbench: %u connections up, %u of them after a retry (%s)\n",
			pi.connected, pi.retries, pi.last_error);
	if (!do_preload)
		return 0;
	uint64_t t = now_ns();
	long unav = 0;
	rc = preload(b, &unav);
	fprintf(stderr, "kvbench: preloaded %u keys of %u bytes in %.1f s%s\n", b->nkeys,
		b->value_size, (double)(now_ns() - t) / 1e9, rc ? " (FAILED)" : "");
	if (unav)
		fprintf(stderr,
			"kvbench: %ld preload PUT(s) answered unavailable (a member failing): "
			"those keys miss once and are filled again\n",
			unav);
	res->unavailable += unav;
	if (rc) {
		res->connect_error = rc;
		snprintf(res->why, sizeof(res->why), "preload failed: %s",
			 rc == -EIO ? "the server refused a PUT" : strerror(-rc));
		kvb_close(b);
	}
	return rc;
}

/* --register: one arena of BYTES, a value's room per worker, registered
 * once; NULL (RES saying why) when it cannot be. */
static uint8_t *register_arena(struct bench *b, size_t bytes, struct run_result *res)
{
	uint8_t *arena = aligned_alloc(4096, bytes);
	int rc = arena ? qpg_kv_register(b->target, arena, bytes) : -ENOMEM;
	if (rc) {
		res->connect_error = rc;
		snprintf(res->why, sizeof(res->why), "--register of %zu bytes: %s%s", bytes,
			 strerror(-rc), rc == -ENOMEM || rc == -EPERM ? " (ulimit -l)" : "");
		free(arena);
		return NULL;
	}
	return arena;
}

static void workers_free(struct bench *b, struct worker *w, unsigned workers)
{
	for (unsigned i = 0; w && i < workers; i++) {
		XXH64_freeState(w[i].xxh); /* no callback of theirs can run now */
		free(w[i].refill);
		if (b->workload)
			b->workload->turn_free(w[i].turn);
	}
	free(w);
}

/* WORKERS workers with their checksum states (and refill buffers, turns),
 * and the run's latency slots; NULL when any cannot be had. */
static struct worker *workers_new(struct bench *b, unsigned workers)
{
	struct worker *w = calloc(workers, sizeof(*w));
	b->lat = calloc(KVB_LAT_SLOTS, sizeof(*b->lat));
	bool states = w != NULL;
	for (unsigned i = 0; w && i < workers; i++) {
		states &= (w[i].xxh = XXH64_createState()) != NULL;
		if (b->refill_misses)
			states &= (w[i].refill = malloc(b->value_size ? b->value_size : 1)) != NULL;
		if (b->workload)
			states &= (w[i].turn = b->workload->turn_new(b)) != NULL;
	}
	if (!w || !b->lat || !states) {
		workers_free(b, w, workers);
		free(b->lat);
		b->lat = NULL;
		return NULL;
	}
	for (unsigned i = 0; i < KVB_LAT_SLOTS; i++)
		qpg_hist_init(&b->lat[i]);
	atomic_store(&b->lat_slots, 0);
	b->lat_generation++;
	atomic_store(&b->stop, false);
	atomic_store(&b->issued, 0);
	atomic_store(&b->trace_n, 0);
	atomic_store(&b->active, (int)workers);
	return w;
}

/* Until every worker has stopped: at the end of the duration they are told
 * to (with an op count, they stop by themselves). */
static void wait_workers(struct bench *b, uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)(b->duration_s * 1e9);
	pthread_mutex_lock(&b->lock);
	while (atomic_load(&b->active) > 0) {
		if (b->max_ops <= 0 && now_ns() >= end)
			atomic_store(&b->stop, true);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&b->cv, &b->lock, &ts);
	}
	pthread_mutex_unlock(&b->lock);
}

/* The workers' counts and latencies into RES. */
static void sum_workers(struct bench *b, const struct worker *w, unsigned workers,
			struct run_result *res)
{
	for (unsigned i = 0; i < workers; i++) {
		res->ops += w[i].ops;
		res->puts += w[i].puts;
		res->mismatches += w[i].mismatches;
		res->errors += w[i].errors;
		res->misses += w[i].misses;
		res->unavailable += w[i].unavailable;
		res->refills += w[i].refills;
		res->turns += w[i].turns;
		res->lookups += w[i].lookups;
		res->blocks += w[i].blocks;
		res->blocks_hit += w[i].blocks_hit;
	}
	for (int i = 0; i < KVB_LAT_SLOTS; i++)
		qpg_hist_merge(&res->lat, &b->lat[i]);
}

/* One measured run: a fresh pool of CLIENTS connections on THREADS threads,
 * WORKERS workers, for the duration or op count. */
void kvbench_run_once(struct bench *b, unsigned threads, unsigned clients, unsigned workers,
		      bool do_preload, struct run_result *res)
{
	memset(res, 0, sizeof(*res));
	res->client_cpu_us = res->server_cpu_us = -1; /* until a run measures them */
	res->workers = workers;
	res->clients = clients;
	res->threads = threads;
	res->get_mode = b->po.get_mode;
	qpg_hist_init(&res->lat);
	struct qpg_kv_pool_opts po = run_opts(b, threads, clients, workers, do_preload);
	if (open_and_preload(b, &po, do_preload, res))
		return;
	uint8_t *arena = NULL;
	size_t room = ((size_t)b->value_size + 63) & ~(size_t)63;
	if (b->reg && !(arena = register_arena(b, (room * workers + 4095) & ~(size_t)4095, res))) {
		kvb_close(b);
		return;
	}
	struct worker *w = workers_new(b, workers);
	if (!w) {
		res->connect_error = -ENOMEM;
		kvb_close(b);
		free(arena);
		return;
	}
	struct proc_sample c0, c1, s0 = {0}, s1 = {0};
	proc_sample(0, &c0);
	if (b->server_pid)
		proc_sample(b->server_pid, &s0);
	uint64_t t0 = now_ns();
	b->run_t0 = t0;
	/* The moment the load begins (after the connects and the preload, which
	 * under emulation can take seconds): what a fault injector waits for. */
	fprintf(stderr, "kvbench: load running: %u workers over %u connections\n", workers,
		clients);
	for (unsigned i = 0; i < workers; i++) {
		w[i].b = b;
		w[i].into = arena ? arena + room * i : NULL;
		w[i].rng = 0x9e3779b97f4a7c15ull * (i + 1) ^ t0;
		kvb_issue(&w[i]);
	}
	wait_workers(b, t0);
	res->secs = (double)(now_ns() - t0) / 1e9;
	proc_sample(0, &c1);
	if (b->server_pid)
		proc_sample(b->server_pid, &s1);
	res->rss_kb = c1.rss_kb;
	struct qpg_kv_target_info pi;
	qpg_kv_target_info(b->target, &pi); /* why connections failed, if any did */
	struct qpg_kv_target_stats ts;
	if (qpg_kv_target_stats(b->target, &ts) == 0) {
		for (unsigned i = 0; i < ts.n; i++)
			res->zero_copy += (long)ts.m[i].zero_copy;
		qpg_kv_target_stats_free(&ts);
	}
	kvb_close(b); /* (and its registration) */
	free(arena);
	sum_workers(b, w, workers, res);
	workers_free(b, w, workers);
	free(b->lat);
	b->lat = NULL;
	if (b->reg)
		fprintf(stderr,
			"kvbench: %ld of %ld GETs read straight into the registered arena\n",
			res->zero_copy, res->ops - res->puts + res->mismatches);
	/* GETs that failed: say why, as the pool last heard it. */
	if (res->errors && pi.last_error[0]) {
		snprintf(res->why, sizeof(res->why), "%s", pi.last_error);
		fprintf(stderr, "kvbench: %ld GETs failed; the last connection to fail: %s\n",
			res->errors, pi.last_error);
	}
	res->ops_per_s = res->secs > 0 ? res->ops / res->secs : 0;
	res->client_cpu_us = per_get_us(&c0, &c1, res->ops);
	res->server_cpu_us = per_get_us(&s0, &s1, res->ops);
	res->gib_per_s = res->ops_per_s * b->value_size / (1024.0 * 1024 * 1024);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The load engine over several threads: one client (its own event loop,
 * TLS context and device context) per thread, each with a share of the
 * connections. A single loop does every client-side TLS handshake on one
 * core, and a client's side of a handshake costs more than the server's
 * (it verifies the certificate chain): in the lab a one-thread qpgate-perf
 * was the bound of every connect figure, at half the TLS library's rate,
 * while the server's two loops had room. The engines share a start time,
 * meet when their connects are over (so the ready file and the connected
 * samples see every connection up), and their results are summed. */
#include "load.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct load_sync {
	int n;
	uint64_t t0;
	const struct load_opts *o; /* the caller's: what is announced and reported */
	struct load_result **results;
	atomic_int arrived;
	pthread_barrier_t bar;
	struct {
		atomic_int established, failed;
		atomic_long verified;
	} * slots;
	struct load_result *snap; /* counts only: for the ready file and progress */
	/* The engines start once every thread exists (1), or end at once (-1). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int go;
};

struct engine_arg {
	struct qpg_client *cl;
	struct load_opts o;
	struct load_result *r;
	struct load_sync *s;
	int rc;
};

int load_default_threads(int nconns)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long t = nconns / 64;
	if (cpus > 0 && t > cpus)
		t = cpus;
	return t < 1 ? 1 : t > 64 ? 64 : (int)t;
}

/* At the start of an engine's connect phase: the engines' common start. */
static uint64_t sync_t0(void *arg)
{
	struct load_sync *s = arg;
	return s->t0;
}

static int slot_of(const struct load_sync *s, const struct load_result *r)
{
	for (int i = 0; i < s->n; i++)
		if (s->results[i] == r)
			return i;
	return 0;
}

/* R's counts into its engine's slot, for whoever sums them. */
static int publish(struct load_sync *s, const struct load_result *r)
{
	int i = slot_of(s, r);
	atomic_store_explicit(&s->slots[i].established, r->established, memory_order_relaxed);
	atomic_store_explicit(&s->slots[i].failed, r->failed, memory_order_relaxed);
	atomic_store_explicit(&s->slots[i].verified, r->verified, memory_order_relaxed);
	return i;
}

/* Every engine's published counts, summed in S->snap. */
static struct load_result *sum_slots(struct load_sync *s)
{
	struct load_result *sum = s->snap;
	sum->established = sum->failed = 0;
	sum->verified = 0;
	for (int k = 0; k < s->n; k++) {
		sum->established +=
		    atomic_load_explicit(&s->slots[k].established, memory_order_relaxed);
		sum->failed += atomic_load_explicit(&s->slots[k].failed, memory_order_relaxed);
		sum->verified += atomic_load_explicit(&s->slots[k].verified, memory_order_relaxed);
	}
	return sum;
}

/* Every 250 ms: R is one engine's; the first engine reports the sum. */
static void sync_progress(void *arg, const struct load_result *r, const char *phase)
{
	struct load_sync *s = arg;
	if (publish(s, r) == 0 && s->o->progress)
		s->o->progress(sum_slots(s), phase, s->o->progress_arg);
}

/* At the end of an engine's connect phase: serves CL until every engine is
 * there, then the first announces the sum, then all go on. */
static void sync_connected(void *arg, struct qpg_client *cl, const struct load_result *r)
{
	struct load_sync *s = arg;
	atomic_fetch_add(&s->arrived, 1);
	while (atomic_load(&s->arrived) < s->n)
		qpg_client_run(cl, 5); /* its connections stay served meanwhile */
	/* Every engine stops here, its counts published, while one of them
	 * announces the sum. */
	publish(s, r);
	if (pthread_barrier_wait(&s->bar) == PTHREAD_BARRIER_SERIAL_THREAD)
		load_announce_connected(s->o, sum_slots(s));
	pthread_barrier_wait(&s->bar);
}

/* DST += SRC. */
static void merge(struct load_result *dst, const struct load_result *src)
{
	dst->started += src->started;
	dst->established += src->established;
	dst->failed += src->failed;
	dst->settled += src->settled;
	dst->resumed += src->resumed;
	dst->attempts += src->attempts;
	dst->retried += src->retried;
	dst->sent += src->sent;
	dst->verified += src->verified;
	dst->mismatches += src->mismatches;
	dst->timed_out |= src->timed_out;
	if (src->connect_s > dst->connect_s)
		dst->connect_s = src->connect_s; /* from the same start */
	/* The earliest: once one engine has primed, its resumes run. */
	if (src->prime_s > 0 && (dst->prime_s == 0 || src->prime_s < dst->prime_s))
		dst->prime_s = src->prime_s;
	if (src->traffic_s > dst->traffic_s)
		dst->traffic_s = src->traffic_s;
	if (src->clock_drift * src->clock_drift > dst->clock_drift * dst->clock_drift)
		dst->clock_drift = src->clock_drift;
	qpg_hist_merge(&dst->lat, &src->lat);
	qpg_hist_merge(&dst->setup, &src->setup);
	for (int p = 0; p < QPG_PHASE_COUNT; p++)
		qpg_hist_merge(&dst->phase[p], &src->phase[p]);
	for (int e = 0; e < QPG_ERR_COUNT; e++) {
		if (src->fail_by_class[e] && !dst->fail_by_class[e])
			memcpy(dst->fail_example[e], src->fail_example[e],
			       sizeof(dst->fail_example[e]));
		dst->fail_by_class[e] += src->fail_by_class[e];
	}
	if (src->have_first && !dst->have_first) {
		dst->first = src->first;
		dst->have_first = true;
	}
}

static void *engine_main(void *p)
{
	struct engine_arg *a = p;
	pthread_mutex_lock(&a->s->lock);
	while (!a->s->go)
		pthread_cond_wait(&a->s->cond, &a->s->lock);
	int go = a->s->go;
	pthread_mutex_unlock(&a->s->lock);
	if (go > 0)
		a->rc = load_run(a->cl, &a->o, a->r);
	return NULL;
}

/* A client for O, made from CO, with part SLICE of SLICES of its sources'
 * ports: 0, or -EIO with the reason in ERR. */
static int make_client(const struct qpg_client_opts *co, const struct load_opts *o, unsigned slice,
		       unsigned slices, struct qpg_client **out, char *err, size_t err_len)
{
	struct qpg_client_opts one = *co;
	load_size_client(&one, o);
	one.port_slice = slice;
	one.port_slices = slices;
	return qpg_client_create(out, &one, &load_callbacks, err, err_len) ? -EIO : 0;
}

/* A share of TOTAL (at least 1 when TOTAL is), for engine I of N. */
static long share(long total, int i, int n)
{
	long v = total / n + (i < total % n);
	return v < 1 && total > 0 ? 1 : v;
}

int load_run_spread(const struct qpg_client_opts *co, const struct load_opts *o, int threads,
		    struct load_result *r, char *err, size_t err_len)
{
	if (threads > o->nconns)
		threads = o->nconns > 0 ? o->nconns : 1;
	if (threads <= 1) {
		struct qpg_client *cl;
		if (make_client(co, o, 0, 0, &cl, err, err_len))
			return -EIO;
		int rc = load_run(cl, o, r);
		qpg_client_destroy(cl);
		return rc;
	}
	int rc = -ENOMEM;
	struct load_sync s = {.n = threads, .o = o};
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	bool bar_ready = false;
	struct engine_arg *a = calloc((size_t)threads, sizeof(*a));
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	s.results = calloc((size_t)threads, sizeof(*s.results));
	s.slots = calloc((size_t)threads, sizeof(*s.slots));
	s.snap = calloc(1, sizeof(*s.snap));
	int made = 0, started = 0;
	if (!a || !tid || !s.results || !s.slots || !s.snap)
		goto out;
	s.snap->nconns = o->nconns;
	pthread_barrier_init(&s.bar, NULL, (unsigned)threads);
	bar_ready = true;
	for (int i = 0, base = 0; i < threads; i++) {
		struct engine_arg *e = &a[i];
		e->o = *o;
		e->o.nconns = (int)share(o->nconns, i, threads);
		e->o.base = base;
		base += e->o.nconns;
		e->o.window = share(o->window, i, threads);
		if (o->inflight > 0)
			e->o.inflight = share(o->inflight, i, threads);
		e->o.ramp = o->ramp / threads;
		e->o.sync = &s;
		e->o.sync_t0 = sync_t0;
		e->o.sync_connected = sync_connected;
		e->o.sync_progress = sync_progress;
		e->s = &s;
		e->r = s.results[i] = malloc(sizeof(*e->r));
		if (!e->r)
			goto out;
		/* Each loop its own part of the ports. */
		if (make_client(co, &e->o, (unsigned)i, (unsigned)threads, &e->cl, err, err_len)) {
			rc = -EIO;
			goto out;
		}
		made++;
	}
	for (; started < threads; started++)
		if (pthread_create(&tid[started], NULL, engine_main, &a[started]))
			break;
	pthread_mutex_lock(&s.lock);
	s.t0 = stamp_mono_ns();
	s.go = started == threads ? 1 : -1;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (started < threads) {
		snprintf(err, err_len, "cannot start %d engine threads", threads);
		rc = -EIO;
		goto out;
	}
	load_result_init(r, o->nconns);
	rc = 0;
	for (int i = 0; i < threads; i++) {
		if (a[i].rc)
			rc = a[i].rc;
		merge(r, a[i].r);
	}
out:
	for (int i = 0; i < made; i++)
		qpg_client_destroy(a[i].cl);
	for (int i = 0; s.results && i < threads; i++)
		free(s.results[i]);
	if (bar_ready)
		pthread_barrier_destroy(&s.bar);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	free(a);
	free(tid);
	free(s.results);
	free(s.slots);
	free(s.snap);
	return rc;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include "load.h"
#include "client_testing.h"
#include "pattern.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct conn_state {
	struct engine *e;
	struct qpg_client_conn *c;
	int index;
	long sent, verified;
	uint64_t sent_ns; /* a stamp (stamp.h), in its clock's units */
	bool timed;	  /* the echo on the wire is timed (--lat-every) */
	bool established, closed, done;
	bool outstanding; /* a request is on the wire */
	bool blocked;	  /* the send queue was full: retry on a send completion */
	bool queued;	  /* waiting for an --inflight slot */
};

struct engine {
	const struct load_opts *o;
	struct load_result *r;
	const struct stamp *clock;
	struct conn_state *conns;
	uint8_t *payload;
	int done_traffic;
	bool stop_sending; /* duration reached */
	long inflight;
	/* Connections ready to send while the aggregate limit is reached, FIFO
	 * so every connection gets its turn. Each is in it at most once. */
	int *waiting;
	int wait_head, wait_len;
	bool paused; /* conn 0, by the pause test hook */
};

static uint64_t now_ns(void)
{
	return stamp_mono_ns();
}

static void finish(struct engine *e, struct conn_state *s)
{
	if (!s->done) {
		s->done = true;
		e->done_traffic++;
	}
}

static void send_next(struct engine *e, struct conn_state *s)
{
	const struct load_opts *o = e->o;
	if (o->inflight > 0 && e->inflight >= o->inflight) {
		if (!s->queued) {
			s->queued = true;
			e->waiting[(e->wait_head + e->wait_len++) % o->nconns] = (int)(s - e->conns);
		}
		return;
	}
	if (s->index == 0 && s->sent == o->pause_at && o->resume_file && !e->paused &&
	    access(o->resume_file, F_OK) != 0) {
		e->paused = true;
		char marker[4096];
		snprintf(marker, sizeof(marker), "%s.paused", o->resume_file);
		FILE *f = fopen(marker, "w");
		if (f)
			fclose(f);
		return;
	}
	pattern_fill(e->payload, o->size, pattern_base(s->index, s->sent));
	if (s->index == 0 && s->sent == o->corrupt_at)
		qpg__client_conn_corrupt_next_tag(s->c);
	uint32_t len = o->size;
	if (s->index == 0 && s->sent == o->oversize_at) {
		struct qpg_conn_info ci;
		qpg_client_conn_info(s->c, &ci);
		qpg__client_conn_oversize_next(s->c);
		len = ci.max_msg * 2; /* the tool sized its own buffers for this */
		memset(e->payload, 0x5a, len);
	}
	s->timed = o->lat_every <= 1 || s->sent % o->lat_every == 0;
	if (s->timed)
		s->sent_ns = stamp_read(e->clock);
	s->blocked = false; /* the tcp transport completes sends inside the call */
	int rc = qpg_client_send(s->c, QPG_FRAME_ECHO_REQ, e->payload, len);
	s->blocked = rc == -EAGAIN;
	if (rc == -EAGAIN)
		return;
	if (rc == 0) {
		s->sent++;
		e->r->sent++;
		s->outstanding = true;
		e->inflight++;
	} else {
		fprintf(stderr, "qpgate: conn %d: send failed: %s\n", s->index, strerror(-rc));
		finish(e, s);
	}
}

static bool more_to_send(const struct engine *e, const struct conn_state *s)
{
	return e->o->duration_s > 0 ? !e->stop_sending : s->sent < e->o->msgs;
}

static void request_done(struct engine *e, struct conn_state *s)
{
	if (s->outstanding) {
		s->outstanding = false;
		e->inflight--;
	}
}

/* Hand freed --inflight slots to the connections that waited longest. */
static void pump_waiting(struct engine *e)
{
	while (e->wait_len > 0 && e->inflight < e->o->inflight) {
		struct conn_state *s = &e->conns[e->waiting[e->wait_head]];
		e->wait_head = (e->wait_head + 1) % e->o->nconns;
		e->wait_len--;
		s->queued = false;
		if (s->closed || s->done)
			continue;
		if (more_to_send(e, s))
			send_next(e, s);
		else
			finish(e, s);
	}
}

static void on_established(struct qpg_client_conn *c, void *user)
{
	struct conn_state *s = user;
	s->established = true;
	s->e->r->established++;
	s->e->r->settled++;
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	s->e->r->resumed += ci.resumed;
	s->e->r->attempts += ci.attempts;
	s->e->r->retried += ci.attempts > 1;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct conn_state *s = user;
	struct engine *e = s->e;
	struct load_result *r = e->r;
	if (s->timed)
		qpg_hist_add(&r->lat, stamp_ns(e->clock, s->sent_ns, stamp_read(e->clock)));
	if (s->verified == 0)
		qpg_client_conn_mark_first_msg(c);
	bool ok = type == QPG_FRAME_ECHO_REPLY && len == e->o->size &&
		  pattern_ok(p, len, pattern_base(s->index, s->verified));
	if (!ok)
		r->mismatches++;
	s->verified++;
	r->verified++;
	request_done(e, s);
	if (more_to_send(e, s))
		send_next(e, s);
	else
		finish(e, s);
	pump_waiting(e);
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct conn_state *s = user;
	if (!s)
		return;
	struct engine *e = s->e;
	struct load_result *r = e->r;
	/* The handle is valid only until this callback returns. */
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	if (s->established) {
		for (int p = 0; p < QPG_PHASE_COUNT; p++)
			qpg_hist_add(&r->phase[p], ci.phase_ns[p]);
		qpg_hist_add(&r->setup, ci.setup_ns);
		if (e->o->conn_done)
			e->o->conn_done(&ci, e->o->progress_arg);
		if (s->index == 0) {
			r->first = ci;
			r->have_first = true;
		}
	}
	if (!s->established) {
		r->settled++;
		r->attempts += ci.attempts;
		r->retried += ci.attempts > 1;
	}
	s->closed = true;
	request_done(e, s);
	if (err != QPG_ERR_NONE) {
		r->failed++;
		if (r->fail_by_class[err]++ == 0)
			snprintf(r->fail_example[err], sizeof(r->fail_example[err]), "%s", why);
		if (e->o->verbose || r->nconns == 1)
			fprintf(stderr, "qpgate: conn %d: %s\n", s->index, why);
	}
	finish(e, s);
	pump_waiting(e);
}

static void on_sent(struct qpg_client_conn *c, void *user)
{
	(void)c;
	struct conn_state *s = user;
	if (s->blocked && !s->closed && !s->done)
		send_next(s->e, s);
}

const struct qpg_client_cbs load_callbacks = {
    .sent = on_sent,
    .established = on_established,
    .reply = on_reply,
    .closed = on_closed,
};

bool load_opts_fit(const struct qpg_client_opts *co, const struct load_opts *o, const char *prog)
{
	if (o->qps_per_session > 1 && co->transport != QPG_KIND_RDMA) {
		fprintf(stderr,
			"%s: -q %u: sessions of several QPs need the rdma transport (over tcp "
			"the data rides on each session's own TLS)\n",
			prog, o->qps_per_session);
		return false;
	}
	return true;
}

void load_size_client(struct qpg_client_opts *co, const struct load_opts *o)
{
	if (o->size > co->max_msg)
		co->max_msg = o->size;
	/* The oversize hook sends what the server cannot hold: ours must. */
	if (o->oversize_at >= 0 && co->max_msg < 65536)
		co->max_msg = 65536;
	/* The library clamps this to what the device's CQ can hold. */
	uint64_t want = 2ull * (uint64_t)o->nconns * co->credits + 1024;
	if (want > co->pool_max)
		co->pool_max = want > UINT32_MAX ? UINT32_MAX : (uint32_t)want;
}

void load_opts_default(struct load_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->nconns = 1;
	o->msgs = 100;
	o->size = 64;
	o->window = 64;
	o->qps_per_session = 1;
	o->lat_every = 1;
	o->timeout_ms = 120000;
	/* A cap on echoes in flight over all connections. One per connection
	 * with no cap means 10,000 clients burst 10,000 requests at once; on
	 * Soft-RoCE under TCG that burst kept both guest CPUs in rxe's softirq
	 * processing for minutes (soft lockup), while 1,000 in flight ran all
	 * 50,000 echoes in 21 s. Deep enough for any NIC's throughput. */
	o->inflight = 1024;
	o->corrupt_at = -1;
	o->oversize_at = -1;
	o->pause_at = -1;
}

static void tick(struct engine *e, const char *phase, uint64_t *next)
{
	uint64_t now = stamp_coarse_ns();
	if (now < *next)
		return;
	*next = now + 250000000ull;
	if (e->o->sync)
		e->o->sync_progress(e->o->sync, e->r, phase); /* the sum, from one engine */
	else if (e->o->progress)
		e->o->progress(e->r, phase, e->o->progress_arg);
}

void load_announce_connected(const struct load_opts *o, const struct load_result *r)
{
	if (o->ready_file) {
		/* Whole or not at all: a watcher may read it the moment it exists. */
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", o->ready_file);
		FILE *f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%d %d\n", r->established, r->failed);
			if (fclose(f) != 0 || rename(tmp, o->ready_file) != 0)
				fprintf(stderr, "qpgate: cannot write %s: %s\n", o->ready_file,
					strerror(errno));
		} else {
			fprintf(stderr, "qpgate: cannot write %s: %s\n", tmp, strerror(errno));
		}
	}
	if (o->connected)
		o->connected(r, o->progress_arg);
}

void load_result_init(struct load_result *r, int nconns)
{
	memset(r, 0, sizeof(*r));
	r->nconns = nconns;
	qpg_hist_init(&r->lat);
	qpg_hist_init(&r->setup);
	for (int p = 0; p < QPG_PHASE_COUNT; p++)
		qpg_hist_init(&r->phase[p]);
}

/* Open sessions while the ramp (ALLOWED so far) and the window let us: QPS
 * connections each, and a connection that cannot be started is failed. */
static void start_sessions(struct engine *e, struct qpg_client *cl, long allowed)
{
	const struct load_opts *o = e->o;
	struct load_result *r = e->r;
	/* Priming: a window of one until the first session is up. The window
	 * counts sessions: each brings up QPS connections. */
	long qps = o->qps_per_session ? o->qps_per_session : 1;
	long window = (o->prime && r->settled == 0 ? 1 : o->window) * qps;
	while (r->started < o->nconns && r->started < allowed && r->started - r->settled < window) {
		long left = o->nconns - r->started;
		unsigned k = (unsigned)(qps < left ? qps : left);
		void *users[QPG_WIRE_MAX_EXTRA_QPS + 1];
		struct qpg_client_conn *cc[QPG_WIRE_MAX_EXTRA_QPS + 1];
		for (unsigned j = 0; j < k; j++) {
			struct conn_state *s = &e->conns[r->started + (int)j];
			s->e = e;
			s->index = o->base + r->started + (int)j;
			users[j] = s;
		}
		int crc = qpg_client_connect_session(cl, k, users, cc);
		for (unsigned j = 0; j < k; j++) {
			struct conn_state *s = &e->conns[r->started + (int)j];
			if ((int)j < crc) {
				s->c = cc[j];
				continue;
			}
			s->closed = true; /* finished when the traffic starts */
			r->failed++;
			r->settled++;
			if (r->fail_by_class[QPG_ERR_LOCAL]++ == 0)
				snprintf(r->fail_example[QPG_ERR_LOCAL],
					 sizeof(r->fail_example[QPG_ERR_LOCAL]), "connect: %s",
					 qpg_strerror(crc < 0 ? crc : -ENOMEM));
		}
		r->started += (int)k;
	}
}

/* Open connections keeping at most WINDOW handshakes in flight (and at most
 * RAMP per second), as a fleet of real clients arrives: the server's
 * handshake deadline then measures the server, not a queue we made
 * ourselves. Until every one has settled or DEADLINE. */
static void connect_phase(struct engine *e, struct qpg_client *cl, uint64_t t0, uint64_t deadline,
			  uint64_t *next)
{
	const struct load_opts *o = e->o;
	struct load_result *r = e->r;
	/* A connection that fails after it was established counts in both
	 * established and failed: SETTLED counts each handshake once. */
	while (r->settled < o->nconns) {
		uint64_t now = stamp_coarse_ns();
		if (now >= deadline)
			break;
		/* The coarse clock can be up to a tick behind T0. */
		uint64_t since = now > t0 ? now - t0 : 0;
		start_sessions(e, cl,
			       o->ramp > 0 ? (long)((double)since / 1e9 * o->ramp) + 1 : o->nconns);
		qpg_client_run(cl, o->ramp > 0 ? 5 : 100);
		if (o->prime && r->settled > 0 && r->prime_s == 0)
			r->prime_s = (double)(now_ns() - t0) / 1e9;
		tick(e, "connect", next);
	}
	for (int i = r->started; i < o->nconns; i++) { /* never started */
		e->conns[i].closed = true;
		r->failed++;
		if (r->fail_by_class[QPG_ERR_TIMEOUT]++ == 0)
			snprintf(r->fail_example[QPG_ERR_TIMEOUT], sizeof(r->fail_example[0]),
				 "not started before the run's timeout (--timeout MS raises it)");
	}
}

/* Every established connection sends until the duration, the count or the
 * stop file ends it (or DEADLINE), and its replies come back. */
static void traffic_phase(struct engine *e, struct qpg_client *cl, uint64_t deadline,
			  uint64_t *next)
{
	const struct load_opts *o = e->o;
	struct load_result *r = e->r;
	uint64_t t_traffic = now_ns();
	uint64_t stop_at = o->duration_s > 0 ? t_traffic + (uint64_t)(o->duration_s * 1e9) : 0;
	for (int i = 0; i < o->nconns; i++) {
		struct conn_state *s = &e->conns[i];
		if (s->established && !s->closed && more_to_send(e, s))
			send_next(e, s);
		else
			finish(e, s);
	}
	/* The files are looked for every 10 ms, not on every turn: each look
	 * is a system call. */
	uint64_t files_due = 0;
	while (e->done_traffic < o->nconns) {
		uint64_t now = stamp_coarse_ns();
		bool look = now >= files_due;
		if (now >= deadline)
			break;
		if (look)
			files_due = now + 10000000ull;
		if ((stop_at && now >= stop_at) ||
		    (look && o->stop_file && access(o->stop_file, F_OK) == 0))
			e->stop_sending = true; /* outstanding replies still come back */
		qpg_client_run(cl, 50);
		tick(e, "traffic", next);
		if (look && e->paused && access(o->resume_file, F_OK) == 0) {
			e->paused = false;
			if (!e->conns[0].closed && !e->conns[0].done)
				send_next(e, &e->conns[0]);
		}
	}
	r->traffic_s = (double)(now_ns() - t_traffic) / 1e9;
	r->clock_drift = stamp_check(e->clock);
	r->timed_out = e->done_traffic < o->nconns;
}

int load_run(struct qpg_client *cl, const struct load_opts *o, struct load_result *r)
{
	static const struct stamp mono = {.source = STAMP_MONO};
	struct engine e = {.o = o, .r = r, .clock = o->clock ? o->clock : &mono};
	load_result_init(r, o->nconns);
	/* The oversize hook sends up to twice the agreed size. */
	e.payload = malloc(o->oversize_at >= 0 ? QPG_WIRE_MAX_MSG : (o->size ? o->size : 1));
	e.conns = calloc((size_t)o->nconns, sizeof(*e.conns));
	e.waiting = calloc((size_t)o->nconns, sizeof(*e.waiting));
	if (!e.payload || !e.conns || !e.waiting) {
		free(e.payload);
		free(e.conns);
		free(e.waiting);
		return -ENOMEM;
	}
	uint64_t t0 = o->sync ? o->sync_t0(o->sync) : now_ns();
	uint64_t deadline = t0 + (uint64_t)o->timeout_ms * 1000000ull, next = 0;
	connect_phase(&e, cl, t0, deadline, &next);
	r->connect_s = (double)(now_ns() - t0) / 1e9;
	if (o->sync)
		o->sync_connected(o->sync, cl, r); /* every engine's connects are over */
	else
		load_announce_connected(o, r);
	/* Every connection stays up through the hold: concurrency is real. */
	uint64_t hold_until = now_ns() + (uint64_t)o->hold_ms * 1000000ull;
	while (now_ns() < hold_until && !(o->release_file && access(o->release_file, F_OK) == 0)) {
		qpg_client_run(cl, 100);
		tick(&e, "hold", &next);
	}
	traffic_phase(&e, cl, deadline, &next);
	for (int i = 0; i < o->nconns; i++)
		if (!e.conns[i].closed && i < r->started)
			qpg_client_close(e.conns[i].c);
	for (int k = 0; k < 200 && qpg_client_conn_count(cl); k++)
		qpg_client_run(cl, 10);
	free(e.payload);
	free(e.conns);
	free(e.waiting);
	return 0;
}

void load_print(const struct load_result *r, const struct load_opts *o)
{
	uint32_t size = o->size;
	double rate = r->traffic_s > 0 ? (double)r->verified / r->traffic_s : 0.0;
	/* Payload bytes each way (a request and its echo carry the same). */
	double bw = o->report_gbits ? rate * size * 8 / 1e9 : rate * size / (1024.0 * 1024.0);
	if (r->have_first) {
		const struct qpg_conn_info *ci = &r->first;
		if (ci->transport == QPG_TRANSPORT_RDMA)
			printf(
			    " conn 0  local QPN 0x%06x PSN 0x%06x | remote QPN 0x%06x PSN 0x%06x | "
			    "auth %s | conn id %llu\n",
			    ci->local_qpn, ci->local_psn, ci->peer_qpn, ci->peer_psn,
			    ci->auth ? "on" : "off", (unsigned long long)ci->conn_id);
		else
			printf(" conn 0  tcp transport | auth %s | conn id %llu\n",
			       ci->auth ? "on" : "off", (unsigned long long)ci->conn_id);
	}
	if (r->phase[0].count) {
		printf("\n %-16s %12s %12s %12s %12s\n", "setup phase", "mean [us]", "p50 [us]",
		       "p99 [us]", "max [us]");
		for (int p = 0; p < QPG_PHASE_COUNT; p++) {
			const struct qpg_hist *h = &r->phase[p];
			printf(" %-16s %12.1f %12.1f %12.1f %12.1f\n",
			       qpg_phase_name((enum qpg_phase)p), qpg_hist_mean(h) / 1e3,
			       (double)qpg_hist_quantile(h, 0.5) / 1e3,
			       (double)qpg_hist_quantile(h, 0.99) / 1e3, (double)h->max / 1e3);
		}
	}
	printf("\n %-8s %-10s %-7s %-10s %-7s %-10s %-11s %-9s %-9s %-9s %-10s %-10s\n", "#conns",
	       "connected", "failed", "#msgs", "size", "verified", "mismatches", "p50[us]",
	       "p99[us]", "p99.9[us]", "msg/s", o->report_gbits ? "BW[Gb/s]" : "BW[MiB/s]");
	printf(" %-8d %-10d %-7d %-10ld %-7u %-10ld %-11ld %-9.1f %-9.1f %-9.1f %-10.0f %-10.3f\n",
	       r->nconns, r->established, r->failed, r->sent, size, r->verified, r->mismatches,
	       (double)qpg_hist_quantile(&r->lat, 0.5) / 1e3,
	       (double)qpg_hist_quantile(&r->lat, 0.99) / 1e3,
	       (double)qpg_hist_quantile(&r->lat, 0.999) / 1e3, rate, bw);
	printf(" connect phase %.3f s, traffic phase %.3f s, TLS resumed %d of %d\n", r->connect_s,
	       r->traffic_s, r->resumed, r->established);
	printf(" connect attempts %ld for %d connections (%d needed more than one)\n",
	       r->attempts, r->nconns, r->retried);
	if (o->lat_every > 1)
		printf(" latency from 1 echo in %ld on each connection (%llu timed); every echo "
		       "verified\n",
		       o->lat_every, (unsigned long long)r->lat.count);
	if (o->clock && o->clock->source == STAMP_TSC)
		printf(" latency clock: TSC at %.4f GHz, calibrated against CLOCK_MONOTONIC; "
		       "the run's rate was %+.3f%% off it\n",
		       1.0 / o->clock->ns_per_tick, 100.0 * r->clock_drift);
	for (int e = 1; e < QPG_ERR_COUNT; e++)
		if (r->fail_by_class[e])
			printf(" failed: %d x %s, e.g. \"%s\"\n   -> %s\n", r->fail_by_class[e],
			       qpg_err_class_name((enum qpg_err_class)e), r->fail_example[e],
			       qpg_err_class_hint((enum qpg_err_class)e));
	if (r->timed_out)
		printf(" run timed out with %d of %d connections unfinished\n",
		       r->nconns - r->established, r->nconns);
}

bool load_ok(const struct load_result *r, const struct load_opts *o)
{
	if (r->timed_out || r->failed || r->mismatches || r->established != o->nconns)
		return false;
	return o->duration_s > 0 ? r->verified == r->sent
				 : r->verified == (long)o->nconns * o->msgs;
}

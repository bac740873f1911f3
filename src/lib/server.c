/* SPDX-License-Identifier: BSD-2-Clause */
#include "qpgate/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"
#include "control.h"
#include "core.h"
#include "gid_pick.h"
#include "memlock.h"
#include "peers.h"
#include "qpgate/service.h"
#include "server_int.h"
#include "tls.h"

/* A connection as its service sees it (qpgate/service.h). */
static struct qpg_conn *pub(struct qpg__conn *c)
{
	return (struct qpg_conn *)c;
}

void qpg_server_opts_default(struct qpg_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->bind_addr = "127.0.0.1";
	o->port = 7471;
	o->max_clients = 100000;
	o->transport = QPG_KIND_RDMA;
	o->ib_port = 0; /* the port whose GID carries the --bind address */
	o->gid_index = -1;
	o->busy_poll_us = QPG_BUSY_POLL_US_DEFAULT;
	o->handshake_timeout_ms = 5000;
	o->spare_qps = 0; /* opt-in: spares show in the device's QP count */
	o->spare_idle_ms = 10000;
	o->verify_cache_s = QPG__TLS_VCACHE_TTL_S;
	/* Longer than a dead peer takes to fail a QP (7 ACK timeouts of
	 * 1.07 s), so this catches the peer that is alive but does not read. */
	o->progress_timeout_ms = 15000;
	o->max_pending = 4096;
	/* Finite by default: one address gets a quarter of the handshake
	 * slots and at most 16,384 connections (lift it for load tests from
	 * one host, or give them several source addresses). */
	o->max_pending_per_peer = 1024;
	/* ...and a network (IPv4 /24, IPv6 /48: what one party easily holds)
	 * half of them. When all are taken, the heaviest address gives one up
	 * to a newcomer. */
	o->max_pending_per_prefix = 2048;
	o->max_conns_per_peer = 16384;
	/* A session brings up its QPs in one go on one loop thread, so the
	 * bound also bounds that stall. */
	o->max_session_qps = 64;
	/* ...and each QP of a session counts against its address: with the
	 * default, one address holds at most a quarter of the server. */
	o->max_qps_per_peer = QPG_QPS_PER_PEER_AUTO;
	/* Every qpgate client proves its keys with a keepalive frame as each
	 * QP comes up: one that has sent nothing in 10 s is not a client. */
	o->bringup_timeout_ms = 10000;
	/* Every qpgate client sends a keepalive after 60 s of quiet, so a QP
	 * quiet for 5 minutes belongs to a client that is gone or stuck (a
	 * vanished host leaves an RC QP that only a send would notice). */
	o->idle_timeout_ms = 300000;
	/* New handshakes per address: 500 a second, 1,000 at once. Each costs
	 * the server a TLS handshake's public-key work (about 1 ms of a core),
	 * so one address cannot make it do more than this; refused at accept,
	 * before any TLS work. */
	o->handshake_rate = 500;
	o->handshake_burst = 1000;
	o->max_msg = 4096;
	o->srq_depth = 4096;
	o->tls_ticket_period_s = 3600;
	/* A day after its full handshake, a client does one again. */
	o->tls_resume_max_s = 86400;
	o->tls_cache_max = 8192;
}

static const char *peer_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
	getnameinfo((const struct sockaddr *)ss, sizeof(*ss), host, sizeof(host), port,
		    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(buf, len, "%s:%s", host, port);
	return buf;
}

static void srv_established(struct qpg__conn *c)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	if (!c->member_index) { /* a session's extra QP is no handshake of its own */
		atomic_fetch_sub(&s->pending, 1);
		qpg__peers_handshake_done(&s->peers, c->user);
	}
	if (s->service->on_connect)
		s->service->on_connect(pub(c));
	if (s->o.verbose) {
		char p[64];
		qpg__srv_log(
		    s, "conn %llu from %s: QPN 0x%06x PSN 0x%06x <-> peer QPN 0x%06x PSN 0x%06x%s",
		    (unsigned long long)c->conn_id, peer_str(&c->peer_addr, p, sizeof(p)),
		    c->local.qpn, c->local.psn, c->peer.qpn, c->peer.psn,
		    c->auth.enabled	  ? ""
		    : c->t->frames_in_tls ? " (frames authenticated by TLS)"
					  : " (no message auth)");
	}
}

static void srv_message(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	uint8_t want = s->service->request_type;
	if (want && h->type != want) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unexpected frame type %u for %s", h->type,
				s->service->name);
		return;
	}
	s->service->on_message(pub(c), h->type, h->flags, b, h->len);
}

static void srv_sent(struct qpg__conn *c)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	if (s->service->on_sent)
		s->service->on_sent(pub(c));
}

static void srv_revoked(struct qpg__conn *c, void *user)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	if (s->service->on_revoked)
		s->service->on_revoked(pub(c), user);
}

static void srv_tick(struct qpg__conn *c, uint64_t now_ns)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	if (s->service->on_tick)
		s->service->on_tick(pub(c), now_ns);
}

static void srv_closed(struct qpg__conn *c)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	if (s->service->on_close)
		s->service->on_close(pub(c));
	if (!c->handshake_done && !c->member_index)
		atomic_fetch_sub(&s->pending, 1);
	if (c->admitted)
		atomic_fetch_sub(&s->clients, 1);
	if (c->admit_ref)
		qpg__peers_put_qp(&s->peers, c->admit_ref, qpg__now_ns());
	c->admit_ref = NULL;
	if (c->user)
		qpg__peers_leave(&s->peers, c->user, c->handshake_done, qpg__now_ns());
	c->user = NULL;
	bool normal = c->err == QPG_ERR_PEER_CLOSED || c->err == QPG_ERR_NONE;
	if (!normal || s->o.verbose) {
		char p[64];
		qpg__srv_log(s, "conn %llu from %s closed (%s): %s", (unsigned long long)c->conn_id,
			     peer_str(&c->peer_addr, p, sizeof(p)), qpg_err_class_name(c->err),
			     c->why);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load(&w->srv->stop)) {
		qpg__loop_run_once(&w->ep.loop, w->listen_paused_until ? 100 : -1);
		/* Addresses remembered only for their spent tokens are
		 * forgotten once the tokens are back (thread 0, once a second).
		 * Checked after every turn, so with the coarse clock: a precise
		 * read is a system call where the clocksource is a VM's HPET (in
		 * the lab, 0.3 of one per echo at 1,000 clients). */
		uint64_t now = qpg__coarse_ns();
		if (w->index == 0 && now - w->srv->peers_swept_ns > 1000000000ull) {
			w->srv->peers_swept_ns = now;
			qpg__peers_sweep(&w->srv->peers, qpg__now_ns());
		}
		if (w->listen_paused_until && now >= w->listen_paused_until) {
			w->listen_paused_until = 0;
			qpg__loop_mod(&w->ep.loop, &w->listen_io, EPOLLIN);
		}
	}
	qpg__endpoint_stopping(&w->ep);
	return NULL;
}

int qpg_server_enable_grants(struct qpg_server *s)
{
	struct qpg__endpoint *ep = &s->workers[0].ep;
	if (!ep->t->windows_probe)
		return -EOPNOTSUPP;
	int rc = ep->t->windows_probe(ep);
	if (rc)
		return rc;
	for (unsigned i = 0; i < s->nworkers; i++) {
		s->workers[i].ep.grants_reads = true;
		s->workers[i].ep.rd_atomic = 16; /* READs a client may pipeline */
	}
	return 0;
}

/* Thread I's endpoint and its listener on *PORT (0: any, then the one the
 * first thread bound, for the others). */
static int worker_init(struct qpg_server *s, unsigned i, const struct qpg__transport_ops *t,
		       uint16_t *port, char *err, size_t err_len)
{
	struct worker *w = &s->workers[i];
	w->srv = s;
	w->index = (int)i;
	w->listen_io.fd = -1;
	struct qpg__ep_opts eo = {
	    .t = t,
	    .dev = t->setup ? &s->dev : NULL,
	    .max_msg = s->o.max_msg,
	    .srq_depth = s->o.srq_depth,
	    .pool_max = QPG__SERVER_POOL_SLOTS,
	    /* 3, not 4: rxe rounds a send queue up to a power of two of
	     * slots (WRs + 1) of 512 bytes each (a WQE with 128 bytes of
	     * inline data), plus a header, so 4 WRs took 8 slots and two
	     * pages per client, 3 take 4 slots and one page: 4 kB less of
	     * every client's server memory (in the lab at 3,000 clients,
	     * every server QP mapped 8,192 bytes). A one-credit client has
	     * one reply in flight; a late ACK leaves a send for the next
	     * completion (frame.c), as a full queue always could. */
	    .qp_max_send_wr = 3,
	    .qp_timeout = s->o.qp_timeout,
	    .tclass = s->o.tclass,
	    .busy_poll_us = s->o.busy_poll_us,
	    .sl = s->o.sl,
	    .spare_qps = s->o.spare_qps,
	    .spare_idle_ms = s->o.spare_idle_ms,
	};
	int rc = qpg__endpoint_init(&w->ep, &eo);
	if (rc) {
		snprintf(err, err_len, "cannot set up thread %u's %s resources: %s", i, t->name,
			 strerror(-rc));
		return rc;
	}
	s->nworkers++;
	w->ep.is_server = true;
	w->ep.tls = &s->tls;
	w->ep.service = s->service->id;
	w->ep.service_ctx = s->o.service_ctx;
	w->ep.min_msg = s->service->min_msg ? s->service->min_msg : 1;
	w->ep.credits_max = 64; /* pipelining services use them; echo clients ask few */
	w->ep.auth_required = !s->o.allow_no_auth;
	w->ep.allow_any_gid = s->o.allow_any_gid;
	w->ep.session_qps_max = s->o.max_session_qps;
	w->ep.handshake_timeout_ns = (uint64_t)s->o.handshake_timeout_ms * 1000000ull;
	w->ep.progress_ns_max = (uint64_t)s->o.progress_timeout_ms * 1000000ull;
	w->ep.idle_ns_max = (uint64_t)s->o.idle_timeout_ms * 1000000ull;
	w->ep.bringup_ns_max = (uint64_t)s->o.bringup_timeout_ms * 1000000ull;
	w->ep.cbs = (struct qpg__endpoint_cbs){
	    .admit = qpg__srv_admit,
	    .established = srv_established,
	    .message = srv_message,
	    .sent = srv_sent,
	    .closed = srv_closed,
	    .revoked = srv_revoked,
	    .tick = srv_tick,
	};
	int fd = qpg__srv_open_listener(s, *port, i == 0, err, err_len);
	if (fd < 0)
		return fd;
	*port = qpg__srv_bound_port(fd);
	if ((rc = qpg__loop_add(&w->ep.loop, &w->listen_io, fd, EPOLLIN, qpg__srv_listen_cb)) < 0) {
		close(fd);
		snprintf(err, err_len, "epoll: %s", strerror(errno));
		return rc;
	}
	return 0;
}

/* The TLS context of S's files, with its cache of verified client chains
 * (mTLS): one per context, so a reload starts an empty one. NULL: ERR. */
static SSL_CTX *server_tls_ctx(struct qpg_server *s, char *err, size_t err_len)
{
	struct qpg__tls_files tf = {s->o.cert, s->o.key,  s->o.client_ca,
				    NULL,      s->o.crls, s->o.ncrls};
	SSL_CTX *ctx = qpg__tls_server_ctx(&tf, s->tickets, err, err_len);
	if (ctx && s->o.client_ca && s->o.verify_cache_s &&
	    qpg__tls_vcache_attach(ctx, s->o.verify_cache_s, QPG__TLS_VCACHE_SERVER_MAX)) {
		snprintf(err, err_len, "out of memory for the cache of verified chains");
		qpg__tls_ctx_free(ctx);
		return NULL;
	}
	return ctx;
}

int qpg_server_create(struct qpg_server **out, const struct qpg_server_opts *o, char *err,
		      size_t err_len)
{
	int rc = -EINVAL;
	struct qpg_server *s = calloc(1, sizeof(*s));
	*out = NULL;
	if (!s) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	s->o = *o;
	if (s->o.max_qps_per_peer == QPG_QPS_PER_PEER_AUTO)
		s->o.max_qps_per_peer = s->o.max_clients / 4 ? s->o.max_clients / 4 : 1;
	if (!s->o.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		s->o.threads = n > 0 ? (unsigned)n : 1;
	}
	s->service = s->o.service ? s->o.service : &qpg_service_echo;
	if (!s->service->on_message || !s->service->id) {
		snprintf(err, err_len, "service '%s' has no id or no on_message",
			 s->service->name ? s->service->name : "?");
		goto fail;
	}
	if (s->o.max_msg < s->service->min_msg) {
		snprintf(err, err_len, "the %s service needs --max-msg of at least %u",
			 s->service->name, s->service->min_msg);
		goto fail;
	}
	const struct qpg__transport_ops *t = qpg__transport_by_kind(s->o.transport);
	if (!t) {
		snprintf(err, err_len, "unknown transport");
		goto fail;
	}
	/* Each thread's pool registers up to QPG__SERVER_POOL_SLOTS slots. */
	char what[96];
	snprintf(what, sizeof(what), "%u threads' message pools (%u slots of %u bytes each)",
		 s->o.threads, QPG__SERVER_POOL_SLOTS, (unsigned)qpg__pool_slot_size(s->o.max_msg));
	struct qpg__transport_setup su = {
	    .passive = true,
	    .bind_addr = s->o.bind_addr,
	    .ib_dev = s->o.ib_dev,
	    .ib_port = s->o.ib_port,
	    .gid_index = s->o.gid_index,
	    .pinned_bytes =
		(uint64_t)s->o.threads * QPG__SERVER_POOL_SLOTS * qpg__pool_slot_size(s->o.max_msg),
	    .pinned_what = what,
	};
	if (t->setup && (rc = t->setup(&su, &s->dev, err, err_len)))
		goto fail;
	s->t = t;
	if (s->o.tls_ticket_period_s &&
	    (rc = qpg__tls_tickets_new(&s->tickets, s->o.tls_ticket_period_s,
				       s->o.tls_resume_max_s)) != 0) {
		snprintf(err, err_len, "cannot draw TLS ticket keys");
		goto fail;
	}
	if (s->tickets && s->o.client_ca &&
	    (rc = qpg__tls_tickets_cache(s->tickets, s->o.tls_cache_max)) != 0) {
		snprintf(err, err_len, "out of memory for the mTLS session cache (--tls-cache)");
		goto fail;
	}
	SSL_CTX *ctx = server_tls_ctx(s, err, err_len);
	if (!ctx)
		goto fail; /* a certificate or key that does not load: -EINVAL */
	qpg__tls_slot_init(&s->tls, ctx);
	s->tls_ready = true;
	rc = -ENOMEM;
	if (qpg__peers_init(&s->peers, 4099)) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	s->workers = calloc(s->o.threads, sizeof(*s->workers));
	if (!s->workers) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	uint16_t port = s->o.port;
	for (unsigned i = 0; i < s->o.threads; i++)
		if ((rc = worker_init(s, i, t, &port, err, err_len)) != 0)
			goto fail;
	s->port = port;
	if (s->service->start && (rc = s->service->start(s, s->o.service_ctx, err, err_len)) < 0)
		goto fail;
	s->service_started = true;
	*out = s;
	return 0;
fail:
	qpg_server_destroy(s);
	return rc < 0 ? rc : -EINVAL;
}

uint16_t qpg_server_port(const struct qpg_server *s)
{
	return s->port;
}

int qpg_server_run(struct qpg_server *s)
{
	char where[160] = "";
	if (s->t && s->t->describe)
		s->t->describe(&s->dev, where, sizeof(where));
	qpg__srv_log(s,
		     "listening on %s:%u, transport %s%s, %u threads, max %u clients, "
		     "handshake timeout %u ms, message auth %s, mTLS %s",
		     s->o.bind_addr, s->port, s->o.transport == QPG_KIND_RDMA ? "rdma" : "tcp",
		     where, s->nworkers, s->o.max_clients, s->o.handshake_timeout_ms,
		     s->o.allow_no_auth ? "optional" : "required", s->o.client_ca ? "on" : "off");
	for (unsigned i = 1; i < s->nworkers; i++) {
		if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) == 0)
			s->workers[i].started = true;
	}
	worker_main(&s->workers[0]);
	for (unsigned i = 1; i < s->nworkers; i++) {
		if (s->workers[i].started) {
			pthread_join(s->workers[i].thread, NULL);
			s->workers[i].started = false;
		}
	}
	return 0;
}

void qpg__server_metrics(struct qpg_server *s, FILE *f)
{
	struct qpg_server_stats st;
	qpg_server_stats(s, &st);
	const char *t = s->o.transport == QPG_KIND_RDMA ? "rdma" : "tcp";
	fprintf(f, "# HELP qpgate_connections Connections now, by transport and state.\n"
		   "# TYPE qpgate_connections gauge\n");
	fprintf(f, "qpgate_connections{transport=\"%s\",state=\"handshaking\"} %lld\n", t,
		st.handshaking);
	fprintf(f, "qpgate_connections{transport=\"%s\",state=\"established\"} %lld\n", t,
		st.connected);
	if (s->service->metrics)
		s->service->metrics(s->o.service_ctx, f);
}

int qpg_server_reload_tls(struct qpg_server *s, char *err, size_t err_len)
{
	SSL_CTX *ctx = server_tls_ctx(s, err, err_len);
	if (!ctx)
		return -EINVAL;
	/* A ticket carries a session verified under the old files: forget
	 * them all, so every session from now on is checked against the new
	 * ones (a client CA taken out of --client-ca stops resuming too).
	 * Before the swap: a handshake still running on the old context gets
	 * a ticket that never opens, not one under the new keys. */
	if (s->tickets && qpg__tls_tickets_forget_all(s->tickets, ctx)) {
		qpg__tls_ctx_free(ctx);
		snprintf(err, err_len, "cannot draw new ticket keys");
		return -EIO;
	}
	qpg__tls_slot_replace(&s->tls, ctx);
	return 0;
}

void qpg_server_stop(struct qpg_server *s)
{
	atomic_store(&s->stop, 1);
	for (unsigned i = 0; i < s->nworkers; i++)
		qpg__loop_wake(&s->workers[i].ep.loop);
}

void qpg_server_destroy(struct qpg_server *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];
		if (w->listen_io.fd >= 0) {
			qpg__loop_del(&w->ep.loop, &w->listen_io);
			close(w->listen_io.fd);
		}
		qpg__endpoint_fini(&w->ep);
	}
	/* No connection is left, so no window: the service's regions go now,
	 * while the device they were registered with is still open. */
	if (s->service_started && s->service->stop)
		s->service->stop(s, s->o.service_ctx);
	long long regions = 0;
	for (unsigned i = 0; i < s->nworkers; i++)
		regions += atomic_load(&s->workers[i].ep.stats.regions_open);
	if (regions)
		qpg__srv_log(s, "destroy: %lld memory region(s) of the %s service still open",
			     regions, s->service->name);
	free(s->workers);
	qpg__peers_fini(&s->peers);
	if (s->tls_ready)
		qpg__tls_slot_fini(&s->tls);
	qpg__tls_tickets_free(s->tickets);
	if (s->t && s->t->teardown)
		s->t->teardown(&s->dev);
	free(s);
}

static unsigned long long ld(atomic_ullong *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

void qpg_server_stats(struct qpg_server *s, struct qpg_server_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < s->nworkers; i++) {
		struct qpg__ep_stats *st = &s->workers[i].ep.stats;
		out->connected += atomic_load_explicit(&st->connected, memory_order_relaxed);
		out->handshaking += atomic_load_explicit(&st->handshaking, memory_order_relaxed);
		out->handshakes_ok += ld(&st->handshakes_ok);
		out->handshakes_resumed += ld(&st->handshakes_resumed);
		out->handshakes_failed += ld(&st->handshakes_failed);
		out->deadlines_extended += ld(&st->deadlines_extended);
		for (int k = 0; k < 16; k++)
			out->rejected[k] += ld(&st->rejected[k]);
		for (int k = 0; k < QPG_ERR_COUNT; k++)
			out->closed_by_reason[k] += ld(&st->closed_by_reason[k]);
		out->auth_failures += ld(&st->auth_failures);
		out->seq_failures += ld(&st->seq_failures);
		out->msgs_in += ld(&st->msgs_in);
		out->msgs_out += ld(&st->msgs_out);
		out->bytes_in += ld(&st->bytes_in);
		out->bytes_out += ld(&st->bytes_out);
		out->qps_created += ld(&st->qps_created);
		out->qps_destroyed += ld(&st->qps_destroyed);
		out->qps_reused += ld(&st->qps_reused);
		out->qps_spare += atomic_load_explicit(&st->qps_spare, memory_order_relaxed);
		long long d = atomic_load_explicit(&st->cq_depth_max, memory_order_relaxed);
		if (d > out->cq_depth_max)
			out->cq_depth_max = d;
		for (int k = 0; k < 24; k++)
			out->handshake_ns_bucket[k] += ld(&st->handshake_ns_bucket[k]);
		out->handshake_ns_sum += ld(&st->handshake_ns_sum);
		out->pool_in_use += atomic_load_explicit(&st->pool_in_use, memory_order_relaxed);
		out->pool_slots += atomic_load_explicit(&st->pool_slots, memory_order_relaxed);
		out->slots_abandoned += ld(&st->slots_abandoned);
		out->reads_paused += ld(&st->reads_paused);
		out->bringup_timeouts += ld(&st->bringup_timeouts);
		out->srq_receives_posted +=
		    atomic_load_explicit(&st->srq_posted, memory_order_relaxed);
		out->receives_flushed += ld(&st->recv_flushed);
		out->rdma_sends_in += ld(&st->rdma_msgs_in);
		out->rdma_sends_out += ld(&st->rdma_msgs_out);
		out->tls_tickets += ld(&st->tls_tickets);
		out->msgs_by_ref += ld(&st->frames_by_ref);
	}
	out->refused_pending = ld(&s->refused_pending);
	out->refused_per_peer = ld(&s->refused_per_peer);
	out->refused_qps_per_peer = ld(&s->refused_qps_per_peer);
	out->refused_prefix = ld(&s->refused_prefix);
	out->pending_evicted = ld(&s->pending_evicted);
	out->refused_rate = ld(&s->refused_rate);
	out->peers_tracked = qpg__peers_count(&s->peers);
	out->accept_backoffs = ld(&s->accept_backoffs);
	out->tls_cache_sessions = s->tickets ? qpg__tls_tickets_cached(s->tickets) : 0;
	if (!s->tls_ready)
		return;
	uint64_t hits, misses;
	unsigned chains;
	pthread_mutex_lock(&s->tls.lock);
	if (qpg__tls_vcache_counts(s->tls.ctx, &hits, &misses, &chains) == 0) {
		out->tls_chains_cached = chains;
		out->tls_chain_hits = hits;
	}
	pthread_mutex_unlock(&s->tls.lock);
}

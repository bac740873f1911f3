/* SPDX-License-Identifier: BSD-2-Clause */
#include "qpgate/client.h"

#include "client_testing.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_int.h"
#include "common.h"
#include "control.h"
#include "core.h"
#include "frame.h"
#include "gid_pick.h"
#include "memlock.h"
#include "tls.h"

void qpg_client_opts_default(struct qpg_client_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->host = "127.0.0.1";
	o->port = 7471;
	o->transport = QPG_KIND_RDMA;
	o->ib_port = 0; /* the port whose GID carries our address */
	o->gid_index = -1;
	o->busy_poll_us = QPG_BUSY_POLL_US_DEFAULT;
	o->auth = true;
	o->max_msg = 4096;
	o->credits = 1;
	o->service = QPG_SERVICE_ECHO;
	o->handshake_timeout_ms = 10000;
	o->srq_depth = 4096;
	o->spare_qps = 0; /* see qpg_server_opts.spare_qps */
	o->tls_resume = true;
	o->connect_attempts = 10;
	o->connect_deadline_ms = 60000;
	o->keepalive_ms = 60000;
	o->verify_cache_s = QPG__TLS_VCACHE_TTL_S;
}

static void transport_teardown(struct qpg_client *cl)
{
	if (cl->t && cl->t->teardown)
		cl->t->teardown(&cl->dev);
}

static struct qpg_client *of(struct qpg__conn *c)
{
	return (struct qpg_client *)c->ep;
}

/* "Still here": an empty authenticated frame, when the send queue has room
 * (it is not counted as a request, and has no reply). */
static void keepalive(struct qpg__conn *c)
{
	if (of(c)->silent || qpg__conn_send_room(c) == 0)
		return;
	struct qpg_buf *b = qpg_pool_get(&c->ep->pool);
	if (b)
		qpg__conn_send_flags(c, b, 0, QPG_FRAME_FLAG_KEEPALIVE, 0);
}

static void cl_tick(struct qpg__conn *c, uint64_t now)
{
	struct qpg_client *cl = of(c);
	struct qpg_client_conn *u = c->user;
	uint64_t quiet = (uint64_t)cl->o.keepalive_ms * 1000000ull;
	if (quiet && u && !u->outstanding && !c->in_flight &&
	    qpg__age_ns(now, c->active_ns) > quiet)
		keepalive(c);
}

static void cl_established(struct qpg__conn *c)
{
	struct qpg_client *cl = of(c);
	struct qpg_client_conn *u = c->user;
	keepalive(c); /* a server's bring-up deadline waits for a first frame */
	u->rts_ns = c->up_ns;
	(u->lead ? u->lead : u)->up = true; /* no more attempts for the session */
	if (cl->cbs.established)
		cl->cbs.established(u, u->user);
}

static void cl_message(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b)
{
	struct qpg_client *cl = of(c);
	struct qpg_client_conn *u = c->user;
	if (u->outstanding == 0) {
		qpg_pool_put(&c->ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "reply without a request");
		return;
	}
	/* A streamed reply holds its request's credit until its last frame. */
	if (!(h->flags & QPG_FRAME_FLAG_MORE))
		u->outstanding--;
	if (cl->cbs.reply)
		cl->cbs.reply(u, u->user, h->type, qpg__frame_payload(b), h->len);
	qpg_pool_put(&c->ep->pool, b);
}

static void cl_sent(struct qpg__conn *c)
{
	struct qpg_client *cl = of(c);
	struct qpg_client_conn *u = c->user;
	if (cl->cbs.sent && u)
		cl->cbs.sent(u, u->user);
}

static void cl_read_done(struct qpg__conn *c, struct qpg_buf *b)
{
	struct qpg_client *cl = of(c);
	struct qpg_client_conn *u = c->user;
	if (cl->cbs.read_done) {
		struct iovec iov[QPG_CLIENT_READ_SLOTS]; /* a chain is at most read_slots */
		unsigned n = 0;
		for (struct qpg_buf *p = b; p && n < QPG_CLIENT_READ_SLOTS; p = p->chain)
			iov[n++] = (struct iovec){p->addr, p->io_len};
		cl->cbs.read_done(u, u->user, b->cookie, iov, n);
	}
	qpg_pool_put(&c->ep->pool, b); /* and the slots chained to it */
}

/* The server's address (cl->o.host, port), and the --source addresses. */
static int client_resolve(struct qpg_client *cl, char *err, size_t err_len)
{
	const struct qpg_client_opts *o = &cl->o;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", o->port);
	int rc = getaddrinfo(o->host, ps, &hints, &ai);
	if (rc != 0) {
		snprintf(err, err_len, "cannot resolve '%s': %s", o->host, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(&cl->addr, ai->ai_addr, ai->ai_addrlen);
	cl->addr_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (o->source)
		return qpg__client_parse_sources(cl, o->source, cl->addr.ss_family, err, err_len);
	return 0;
}

/* The transport's device, for a pool of POOL_SLOTS message slots. The
 * server checks HELLO's GID against the control connection's address
 * (reflection), so over rdma that is the address the GID carries: each
 * source address's own GID (one device and port for all), or the one
 * routed toward the server. */
static int client_transport(struct qpg_client *cl, uint32_t pool_slots, char *err, size_t err_len)
{
	const struct qpg_client_opts *o = &cl->o;
	const struct qpg__transport_ops *t = qpg__transport_by_kind(o->transport);
	if (!t) {
		snprintf(err, err_len, "unknown transport");
		return -EINVAL;
	}
	struct sockaddr_storage local = cl->src[0];
	bool routed = cl->nsrc == 1 || qpg__local_addr_toward((struct sockaddr *)&cl->addr,
							      cl->addr_len, &local) == 0;
	struct qpg__transport_setup su = {
	    .toward = routed ? (struct sockaddr *)&local : NULL,
	    .toward_what = cl->nsrc ? "the source address" : "the source address toward the server",
	    .src = cl->src,
	    .nsrc = cl->nsrc,
	    .src_gid = cl->src_gid,
	    .ib_dev = o->ib_dev,
	    .ib_port = o->ib_port,
	    .gid_index = o->gid_index,
	    .pinned_bytes = (uint64_t)pool_slots * qpg__pool_slot_size(o->max_msg),
	    .pinned_what = "the client's message pool",
	};
	int rc = t->setup ? t->setup(&su, &cl->dev, err, err_len) : 0;
	if (rc == 0)
		cl->t = t;
	return rc;
}

static int client_endpoint(struct qpg_client *cl, uint32_t pool_slots, char *err, size_t err_len)
{
	const struct qpg_client_opts *o = &cl->o;
	struct qpg__ep_opts eo = {
	    .t = cl->t,
	    .dev = cl->t->setup ? &cl->dev : NULL,
	    .max_msg = o->max_msg,
	    .srq_depth = o->srq_depth,
	    .pool_max = pool_slots, /* as the transport's setup checked */
	    /* Twice the credits: a reply may come before our request's ACK. */
	    /* (and one for a keepalive). */
	    .qp_max_send_wr = o->sq_depth ? o->sq_depth : 2u * o->credits + 1,
	    .qp_timeout = o->qp_timeout,
	    .tclass = o->tclass,
	    .busy_poll_us = o->busy_poll_us,
	    .sl = o->sl,
	    .rd_atomic = o->rd_atomic,
	    .spare_qps = o->spare_qps,
	};
	int rc = qpg__endpoint_init(&cl->ep, &eo);
	if (rc)
		snprintf(err, err_len, "cannot set up %s resources: %s", cl->t->name,
			 strerror(-rc));
	return rc;
}

/* The TLS context, its ticket slot, and the endpoint's hooks. */
static int client_tls(struct qpg_client *cl, char *err, size_t err_len)
{
	const struct qpg_client_opts *o = &cl->o;
	struct qpg__tls_files tf = {
	    .cert = o->cert, .key = o->key, .ca = o->ca, .spki_pin = o->spki_sha256};
	SSL_CTX *ctx = qpg__tls_client_ctx(&tf, err, err_len);
	if (!ctx)
		return -EINVAL;
	if (o->verify_cache_s && qpg__tls_vcache_attach(ctx, o->verify_cache_s, QPG__TLS_VCACHE_MAX)) {
		snprintf(err, err_len, "cannot set up the cache of verified certificates");
		qpg__tls_ctx_free(ctx);
		return -ENOMEM;
	}
	qpg__tls_slot_init(&cl->tls, ctx);
	if (o->tls_resume && qpg__tls_slot_resume(&cl->tls)) {
		snprintf(err, err_len, "cannot set up TLS resumption");
		qpg__tls_slot_fini(&cl->tls);
		return -EIO;
	}
	cl->ep.tls = &cl->tls;
	cl->ep.service = o->service;
	cl->ep.handshake_timeout_ns = (uint64_t)o->handshake_timeout_ms * 1000000ull;
	cl->ep.cbs = (struct qpg__endpoint_cbs){
	    .established = cl_established,
	    .message = cl_message,
	    .closed = qpg__client_conn_closed,
	    .sent = cl_sent,
	    .read_done = cl_read_done,
	    .tick = cl_tick,
	};
	return 0;
}

int qpg_client_create(struct qpg_client **out, const struct qpg_client_opts *o,
		      const struct qpg_client_cbs *cbs, char *err, size_t err_len)
{
	struct qpg_client *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	cl->o = *o;
	if (!cl->o.connect_attempts)
		cl->o.connect_attempts = 1;
	cl->cbs = *cbs;
	cl->seed = (unsigned)qpg__now_ns() ^ (unsigned)getpid();
	snprintf(cl->host, sizeof(cl->host), "%s", o->host);
	snprintf(cl->servername, sizeof(cl->servername), "%s",
		 o->servername ? o->servername : o->host);
	/* Message slots the client's pool may register (and, over rdma, pin). */
	uint32_t pool_slots = o->pool_max ? o->pool_max : 16384;
	int rc = client_resolve(cl, err, err_len);
	if (rc || (rc = client_transport(cl, pool_slots, err, err_len)))
		goto fail_free;
	if ((rc = client_endpoint(cl, pool_slots, err, err_len)))
		goto fail_transport;
	if ((rc = client_tls(cl, err, err_len)))
		goto fail_endpoint;
	*out = cl;
	return 0;
fail_endpoint:
	qpg__endpoint_fini(&cl->ep);
fail_transport:
	transport_teardown(cl);
fail_free:
	free(cl);
	return rc;
}

static void client_on_wake(struct qpg__loop *l)
{
	struct qpg_client *cl = (struct qpg_client *)l->owner;
	if (cl->wake_cb)
		cl->wake_cb(cl->wake_arg);
}

void qpg_client_set_wake(struct qpg_client *cl, void (*cb)(void *arg), void *arg)
{
	cl->wake_cb = cb;
	cl->wake_arg = arg;
	cl->ep.loop.on_wake = client_on_wake;
}

void qpg_client_wake(struct qpg_client *cl)
{
	qpg__loop_wake_soon(&cl->ep.loop);
}

void qpg_client_destroy(struct qpg_client *cl)
{
	if (!cl)
		return;
	qpg__endpoint_fini(&cl->ep);
	qpg__client_retry_drop(cl);
	qpg__tls_slot_fini(&cl->tls);
	transport_teardown(cl);
	free(cl);
}

int qpg_client_connect(struct qpg_client *cl, void *user, struct qpg_client_conn **out)
{
	struct qpg_client_conn *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->cl = cl;
	h->user = user;
	h->started_ns = qpg__now_ns();
	int rc = qpg__client_attempt(cl, h);
	if (rc) {
		free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int qpg_client_connect_session(struct qpg_client *cl, unsigned n, void *const *users,
			       struct qpg_client_conn **out)
{
	if (n == 0 || n > QPG_WIRE_MAX_EXTRA_QPS + 1u)
		return -EINVAL;
	if (n > 1 && cl->ep.t->data_on_tls)
		return -EOPNOTSUPP;
	struct qpg_client_conn *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cl = cl;
	l->user = users[0];
	l->started_ns = qpg__now_ns();
	/* The members' handles first: each attempt makes their QPs. */
	struct qpg_client_conn **tail = &l->members;
	for (unsigned i = 1; i < n; i++) {
		struct qpg_client_conn *m = calloc(1, sizeof(*m));
		if (!m) {
			while ((m = l->members)) {
				l->members = m->member_next;
				free(m);
			}
			free(l);
			return -ENOMEM;
		}
		m->cl = cl;
		m->user = users[i];
		m->lead = l;
		*tail = m;
		tail = &m->member_next;
	}
	int rc = qpg__client_attempt(cl, l);
	if (rc) {
		struct qpg_client_conn *m;
		while ((m = l->members)) {
			l->members = m->member_next;
			free(m);
		}
		free(l);
		return rc;
	}
	out[0] = l;
	unsigned i = 1;
	for (struct qpg_client_conn *m = l->members; m; m = m->member_next)
		out[i++] = m;
	return (int)n;
}

/* Whether U may send LEN bytes now: 0, or why not. */
static int send_check(struct qpg_client_conn *u, uint32_t len)
{
	struct qpg__conn *c = u->c;
	if (!c || c->state != QPG_CONN_ESTABLISHED)
		return -ENOTCONN;
	if (len > c->max_msg && !c->oversize_next)
		return -EMSGSIZE;
	if (len > c->ep->max_msg) /* must still fit our own buffer */
		return -EMSGSIZE;
	if (u->outstanding >= c->credits)
		return -EAGAIN;
	return 0;
}

/* Send B (its payload built, LEN bytes) on U, checked. */
static int send_built(struct qpg_client_conn *u, struct qpg_buf *b, uint8_t type, uint32_t len)
{
	struct qpg__conn *c = u->c;
	uint64_t t = u->first_send_ns ? 0 : qpg__now_ns(); /* only the first send is timed */
	int rc = qpg__conn_send(c, b, type, len);
	if (rc == 0) {
		u->outstanding++;
		if (!u->first_send_ns)
			u->first_send_ns = t;
	}
	return rc;
}

int qpg_client_send(struct qpg_client_conn *u, uint8_t type, const void *payload, uint32_t len)
{
	int rc = send_check(u, len);
	if (rc)
		return rc;
	struct qpg_buf *b = qpg_pool_get(&u->c->ep->pool);
	if (!b)
		return -ENOBUFS;
	memcpy(qpg__frame_payload(b), payload, len);
	return send_built(u, b, type, len);
}

struct qpg_buf *qpg_client_buf_get(struct qpg_client_conn *u)
{
	struct qpg__conn *c = u->c;
	if (!c || c->state != QPG_CONN_ESTABLISHED)
		return NULL;
	return qpg_pool_get(&c->ep->pool);
}

void qpg_client_buf_put(struct qpg_client_conn *u, struct qpg_buf *b)
{
	if (b && u->c)
		qpg_pool_put(&u->c->ep->pool, b);
}

int qpg_client_send_buf(struct qpg_client_conn *u, struct qpg_buf *b, uint8_t type, uint32_t len)
{
	int rc = send_check(u, len);
	if (rc) {
		qpg_client_buf_put(u, b);
		return rc;
	}
	return send_built(u, b, type, len);
}

void qpg_client_close(struct qpg_client_conn *cc)
{
	if (cc->c)
		qpg__conn_close(cc->c, QPG_ERR_NONE, "closed by client");
	else
		qpg__client_retry_cancel(cc); /* between two attempts */
}

int qpg_client_fd(const struct qpg_client *cl)
{
	return cl->ep.loop.epfd;
}

int qpg_client_run(struct qpg_client *cl, int timeout_ms)
{
	qpg__client_retry_pump(cl);
	int rc =
	    qpg__loop_run_once(&cl->ep.loop, cl->waiting && timeout_ms > 100 ? 100 : timeout_ms);
	qpg__client_retry_pump(cl);
	return rc;
}

size_t qpg_client_conn_count(const struct qpg_client *cl)
{
	/* Closed ones count until their closed callback has run, and those
	 * between two attempts too. */
	return cl->ep.nconns + cl->ep.nclosing + cl->nwaiting;
}

void qpg_client_conn_info(const struct qpg_client_conn *u, struct qpg_conn_info *out)
{
	const struct qpg__conn *c = u->c;
	memset(out, 0, sizeof(*out));
	out->attempts = u->lead ? u->lead->attempts : u->attempts;
	if (!c)
		return; /* between two attempts */
	out->conn_id = c->conn_id;
	out->transport = c->t->wire_id;
	out->auth = c->auth.enabled || c->t->frames_in_tls; /* by tags, or by TLS */
	out->local_qpn = c->local.qpn;
	out->local_psn = c->local.psn;
	out->peer_qpn = c->peer.qpn;
	out->peer_psn = c->peer.psn;
	out->max_msg = c->max_msg;
	out->read_piece = c->t->read ? (uint32_t)c->ep->pool.slot_size : 0;
	out->read_max = out->read_piece * c->read_slots;
	out->credits = c->credits;
	out->in_flight = u->outstanding;
	memcpy(out->phase_ns, c->phase_ns, sizeof(out->phase_ns));
	out->setup_ns = u->rts_ns ? u->rts_ns - c->started_ns : 0;
	out->resumed = c->resumed;
}

void qpg_client_conn_mark_first_msg(struct qpg_client_conn *u)
{
	struct qpg__conn *c = u->c;
	/* From the first send, not from RTS: a load tool may hold connections
	 * open for a while before traffic starts. */
	if (c && !u->first_done && u->first_send_ns) {
		c->phase_ns[QPG_PHASE_FIRST_MSG] = qpg__now_ns() - u->first_send_ns;
		u->first_done = true;
	}
}

void qpg__client_conn_oversize_next(struct qpg_client_conn *cc)
{
	if (cc->c)
		qpg__conn_oversize_next(cc->c);
}

void qpg__client_conn_corrupt_next_tag(struct qpg_client_conn *cc)
{
	if (cc->c)
		qpg__conn_corrupt_next_tag(cc->c);
}

void qpg__client_test_mutation(struct qpg_client *cl, uint8_t mutation)
{
	cl->test_mutation = mutation;
}

void qpg__client_test_silent(struct qpg_client *cl)
{
	cl->silent = true;
}

struct qpg__conn *qpg__client_test_conn(struct qpg_client_conn *c)
{
	return c->c;
}

struct qpg_client_conn *qpg__client_test_member(struct qpg_client_conn *lead, void *user)
{
	struct qpg_client_conn *m = calloc(1, sizeof(*m));
	if (!m || !lead->c || !(m->c = qpg__conn_new_member(lead->c))) {
		free(m);
		return NULL;
	}
	m->cl = lead->cl;
	m->user = user;
	m->lead = lead;
	m->attempts = lead->attempts;
	m->c->user = m;
	struct qpg_client_conn **pp = &lead->members;
	while (*pp)
		pp = &(*pp)->member_next;
	*pp = m;
	return m;
}

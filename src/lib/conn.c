/* The control connection: TCP + TLS 1.3, the bootstrap exchange, and framing
 * of authenticated messages. Identical for every transport; the transport
 * only supplies the data path through its ops table. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"
#include "endpoint.h"

static void ctrl_cb(struct qpg__io *io, uint32_t events);

/* A server closes a handshake that outlives its deadline; when that
 * happens after TLS but before our HELLO was read, this is all we see. */
#define BOOT_CLOSED_HINT                                                                           \
	" (the server closed it before answering: past its handshake deadline, it was busy; "      \
	"retry)"

void qpg__phase_begin(struct qpg__conn *c)
{
	c->phase_start_ns = qpg__now_ns();
}

void qpg__phase_end(struct qpg__conn *c, enum qpg_phase p)
{
	uint64_t now = qpg__now_ns();
	c->phase_ns[p] = now - c->phase_start_ns;
	c->phase_start_ns = now;
}

static void stat_add(atomic_ullong *a, unsigned long long v)
{
	atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}

static struct qpg__conn *conn_new(struct qpg__endpoint *ep, int fd, bool is_server)
{
	struct qpg__conn *c = calloc(1, ep->t->conn_size);
	if (!c)
		return NULL;
	c->t = ep->t;
	c->ep = ep;
	c->is_server = is_server;
	c->io.fd = fd;
	c->started_ns = qpg__now_ns();
	c->deadline_ns = c->started_ns + ep->handshake_timeout_ns;
	c->phase_start_ns = c->started_ns;
	c->prev = ep->tail;
	if (ep->tail)
		ep->tail->next = c;
	else
		ep->head = c;
	ep->tail = c;
	ep->nconns++;
	atomic_fetch_add_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	return c;
}

static void conn_unlink(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	if (c->prev)
		c->prev->next = c->next;
	else
		ep->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		ep->tail = c->prev;
	c->prev = c->next = NULL;
	ep->nconns--;
}

static void set_sockopts(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A peer that vanishes without FIN/RST (host gone) is found by keepalive:
	 * 10 s idle + 3 probes 2 s apart, so its QP is reclaimed within ~16 s. */
	int idle = 10, intvl = 2, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int qpg__conn_accept(struct qpg__endpoint *ep, int fd, const struct sockaddr_storage *peer,
		     void *user)
{
	struct qpg__conn *c = conn_new(ep, fd, true);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->user = user;
	c->peer_addr = *peer;
	set_sockopts(fd);
	c->state = QPG_CONN_TLS;
	c->ssl = qpg__tls_session(ep->ssl_ctx, fd, 1, NULL);
	if (!c->ssl || qpg__loop_add(&ep->loop, &c->io, fd, EPOLLIN, ctrl_cb) < 0)
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot set up TLS session");
	return 0;
}

int qpg__conn_connect(struct qpg__endpoint *ep, const struct qpg__client_params *p,
		      struct qpg__conn **out)
{
	int fd = socket(p->addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct qpg__conn *c = conn_new(ep, fd, false);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	memcpy(&c->peer_addr, p->addr, p->addr_len);
	set_sockopts(fd);
	c->credits = p->credits;
	c->max_msg = p->max_msg;
	c->test_mutation = p->test_mutation;
	c->local.service = p->service;
	c->local.flags = p->auth ? QPG_WIRE_FLAG_AUTH : 0;
	c->state = QPG_CONN_CONNECTING;
	c->ssl = qpg__tls_session(ep->ssl_ctx, fd, 0, p->servername);
	if (!c->ssl) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot create TLS session");
		*out = c;
		return 0;
	}
	if (qpg__loop_add(&ep->loop, &c->io, fd, EPOLLIN | EPOLLOUT, ctrl_cb) < 0) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "epoll: %s", strerror(errno));
		*out = c;
		return 0;
	}
	if (connect(fd, p->addr, p->addr_len) < 0 && errno != EINPROGRESS)
		qpg__conn_close(c, QPG_ERR_REFUSED, "connect: %s", strerror(errno));
	*out = c;
	return 0;
}

void qpg__conn_close(struct qpg__conn *c, enum qpg_err_class err, const char *fmt, ...)
{
	if (c->state >= QPG_CONN_CLOSING)
		return;
	struct qpg__endpoint *ep = c->ep;
	/* A refused connection keeps the reason it was refused for. */
	if (c->state != QPG_CONN_REJECTING) {
		/* Format aside first: callers often pass c->why itself. */
		char why[sizeof(c->why)];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		memcpy(c->why, why, sizeof(why));
		c->err = err;
	}
	stat_add(&ep->stats.closed_by_reason[c->err], 1);
	if (!c->handshake_done) {
		atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
		stat_add(&ep->stats.handshakes_failed, 1);
	}
	if (c->counted_connected)
		atomic_fetch_sub_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	/* A polite close_notify when the session is healthy; never block on it. */
	if (c->ssl && c->state == QPG_CONN_ESTABLISHED)
		SSL_shutdown(c->ssl);
	if (c->io.fd >= 0) {
		qpg__loop_del(&ep->loop, &c->io);
		close(c->io.fd);
		c->io.fd = -1;
	}
	c->t->conn_shutdown(c);
	c->state = QPG_CONN_CLOSING;
	c->closing_since_ns = qpg__now_ns();
	conn_unlink(c);
	/* Scheduled, not done: the caller (often a callback of this very
	 * connection, several frames deep) may still touch C and its service
	 * state. The closed callback runs after the batch. */
	c->next_dead = NULL;
	if (ep->closing_tail)
		ep->closing_tail->next_dead = c;
	else
		ep->closing = c;
	ep->closing_tail = c;
	ep->nclosing++;
}

static void conn_free(struct qpg__conn *c)
{
	c->t->conn_release(c);
	SSL_free(c->ssl);
	qpg__auth_free(&c->auth);
	free(c->out);
	free(c);
}

/* Free dead connections once their data path has drained. One whose
 * completions never come back is abandoned after ep->abandon_ns: the
 * transport makes sure nothing in flight can still name it (for RDMA: the QP
 * is destroyed and the CQ drained) before it is freed. */
static void reap(struct qpg__endpoint *ep, bool force)
{
	struct qpg__conn **pp = &ep->dead;
	uint64_t now = qpg__now_ns();
	while (*pp) {
		struct qpg__conn *c = *pp;
		bool stuck = now - c->closing_since_ns > ep->abandon_ns;
		if (force || stuck || !c->t->conn_busy(c)) {
			if (c->t->conn_busy(c) && c->t->conn_abandon) {
				c->t->conn_abandon(c);
				stat_add(&ep->stats.slots_abandoned, c->in_flight);
			}
			*pp = c->next_dead;
			conn_free(c);
		} else {
			pp = &c->next_dead;
		}
	}
}

void qpg__endpoint_settle(struct qpg__endpoint *ep)
{
	/* A closed callback may close others: they join the end of the list. */
	while (ep->closing) {
		struct qpg__conn *c = ep->closing;
		ep->closing = c->next_dead;
		if (!ep->closing)
			ep->closing_tail = NULL;
		ep->nclosing--;
		if (ep->cbs.closed)
			ep->cbs.closed(c);
		c->next_dead = ep->dead;
		ep->dead = c;
	}
	if (ep->dead)
		reap(ep, false);
}

static void update_events(struct qpg__conn *c)
{
	uint32_t ev = (c->read_paused ? 0 : EPOLLIN) |
		      (c->want_write || c->state == QPG_CONN_CONNECTING ? EPOLLOUT : 0);
	qpg__loop_mod(&c->ep->loop, &c->io, ev);
}

void qpg__conn_pause_read(struct qpg__conn *c, bool pause)
{
	if (c->read_paused == pause || c->io.fd < 0)
		return;
	c->read_paused = pause;
	if (pause)
		stat_add(&c->ep->stats.reads_paused, 1);
	update_events(c);
}

static int conn_flush(struct qpg__conn *c)
{
	while (c->out_off < c->out_len) {
		size_t n = c->out_retry ? c->out_retry : c->out_len - c->out_off, done = 0;
		enum qpg__tls_io r =
		    qpg__tls_write(c->ssl, c->out + c->out_off, n, &done, c->why, sizeof(c->why));
		if (r == QPG_TLS_DONE) {
			c->out_off += done;
			c->out_flushed_total += done;
			c->out_retry = 0;
			continue;
		}
		if (r == QPG_TLS_WANT_WRITE || r == QPG_TLS_WANT_READ) {
			/* OpenSSL wants the same bytes again on retry. */
			c->out_retry = n;
			if (!c->want_write) {
				c->want_write = true;
				update_events(c);
			}
			if (c->t->on_flushed && c->state == QPG_CONN_ESTABLISHED)
				c->t->on_flushed(c);
			return 0;
		}
		qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "write failed: %s%s", c->why,
				!c->is_server && c->state == QPG_CONN_BOOTSTRAP ? BOOT_CLOSED_HINT
										: "");
		return -EPIPE;
	}
	c->out_off = c->out_len = 0;
	if (c->out_cap > 65536) { /* a burst's buffer is not kept by an idle connection */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	if (c->want_write) {
		c->want_write = false;
		update_events(c);
	}
	if (c->state == QPG_CONN_REJECTING)
		qpg__conn_close(c, c->err, "%s", c->why);
	else if (c->t->on_flushed && c->state == QPG_CONN_ESTABLISHED)
		c->t->on_flushed(c);
	return 0;
}

int qpg__conn_write(struct qpg__conn *c, const void *data, size_t len)
{
	if (c->state >= QPG_CONN_CLOSING)
		return -ENOTCONN;
	if (c->out_len + len > c->out_cap) {
		/* Compact first: bytes already sent are dead weight. */
		if (c->out_off && !c->out_retry) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		if (c->out_len + len > c->out_cap) {
			size_t cap = QPG_MAX(c->out_cap * 2, c->out_len + len);
			uint8_t *n = realloc(c->out, cap);
			if (!n)
				return -ENOMEM;
			c->out = n;
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	c->out_queued_total += len;
	if (c->want_write)
		return 0; /* EPOLLOUT will flush */
	return conn_flush(c);
}

/* The class a refusal is reported under, on both sides of the wire. */
static enum qpg_err_class err_class_of_reject(uint16_t code)
{
	switch (code) {
	case QPG_REJECT_SERVER_FULL:
		return QPG_ERR_SERVER_FULL;
	case QPG_REJECT_VERSION:
		return QPG_ERR_VERSION;
	default:
		return QPG_ERR_REJECTED;
	}
}

static void reject(struct qpg__conn *c, uint16_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reject(struct qpg__conn *c, uint16_t code, const char *fmt, ...)
{
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1];
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	stat_add(&c->ep->stats.rejected[code < 16 ? code : 0], 1);
	snprintf(c->why, sizeof(c->why), "rejected: %s", text);
	c->err = err_class_of_reject(code);
	c->state = QPG_CONN_REJECTING;
	int n = qpg_wire_encode_reject(msg, sizeof(msg), code, text);
	if (n > 0)
		qpg__conn_write(c, msg, (size_t)n);
}

static void become_established(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	int rc = qpg__auth_init_from_tls(&c->auth, c->ssl, c->is_server,
					 (c->local.flags & QPG_WIRE_FLAG_AUTH) != 0);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot derive message keys");
		return;
	}
	c->state = QPG_CONN_ESTABLISHED;
	c->deadline_ns = 0;
	c->active_ns = c->progress_ns = qpg__now_ns();
	c->handshake_done = true;
	c->counted_connected = true;
	atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	stat_add(&ep->stats.handshakes_ok, 1);
	uint64_t took = qpg__now_ns() - c->started_ns;
	stat_add(&ep->stats.handshake_ns_sum, took);
	unsigned b = 0;
	for (uint64_t us = took / 1000; us > 1 && b < 23; us >>= 1)
		b++;
	stat_add(&ep->stats.handshake_ns_bucket[b], 1);
	if (ep->cbs.established)
		ep->cbs.established(c);
	/* Bytes that arrived with the bootstrap sit in OpenSSL's buffer, where
	 * epoll cannot see them. */
	if (c->state == QPG_CONN_ESTABLISHED && SSL_pending(c->ssl) > 0)
		c->t->on_stream(c);
}

static void server_on_hello(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	struct qpg_wire_params peer;
	char why[128] = "";
	int rc = qpg_wire_decode_params(c->boot_in, c->boot_in_len, &peer, why, sizeof(why));
	if (rc == -EPROTONOSUPPORT) {
		reject(c, QPG_REJECT_VERSION,
		       "version mismatch: server speaks protocol %u, client sent %u",
		       QPG_WIRE_VERSION, c->boot_in[4]);
		return;
	}
	if (rc) {
		reject(c, rc == -EPROTO ? QPG_REJECT_MALFORMED : QPG_REJECT_BAD_PARAMS,
		       "invalid HELLO: %s", why);
		return;
	}
	if (c->boot_in[5] != QPG_WIRE_HELLO) {
		reject(c, QPG_REJECT_MALFORMED, "expected HELLO");
		return;
	}
	if (peer.transport != c->t->wire_id) {
		reject(c, QPG_REJECT_TRANSPORT, "this server runs the %s transport", c->t->name);
		return;
	}
	if (peer.service != ep->service) {
		reject(c, QPG_REJECT_SERVICE, "service %u is not offered here", peer.service);
		return;
	}
	if (ep->auth_required && !(peer.flags & QPG_WIRE_FLAG_AUTH)) {
		reject(c, QPG_REJECT_AUTH_REQUIRED,
		       "this server requires per-message authentication");
		return;
	}
	if (QPG_MIN(peer.max_msg, ep->max_msg) < ep->min_msg) {
		reject(c, QPG_REJECT_BAD_PARAMS, "this service needs messages of at least %u bytes",
		       ep->min_msg);
		return;
	}
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1] = "";
	if (c->t->check_peer && !ep->allow_any_gid &&
	    c->t->check_peer(c, &peer, text, sizeof(text)) != 0) {
		reject(c, QPG_REJECT_BAD_PARAMS, "%s", text);
		return;
	}
	if (ep->cbs.admit) {
		int code = ep->cbs.admit(c, text, sizeof(text));
		if (code) {
			reject(c, (uint16_t)code, "%s", text);
			return;
		}
	}
	c->peer = peer;
	c->max_msg = QPG_MIN(peer.max_msg, ep->max_msg);
	c->credits = QPG_MIN(peer.credits, ep->credits_max);
	c->local.service = ep->service;
	c->local.flags = peer.flags & QPG_WIRE_FLAG_AUTH;
	rc = c->t->conn_prepare(c, &c->local);
	if (rc == 0)
		rc = c->t->conn_establish(c, &peer);
	if (rc) {
		reject(c, QPG_REJECT_RESOURCES, "server could not create the data path: %s",
		       strerror(-rc));
		return;
	}
	c->local.transport = c->t->wire_id;
	c->local.service = ep->service;
	c->local.flags = peer.flags & QPG_WIRE_FLAG_AUTH;
	c->local.max_msg = c->max_msg;
	c->local.credits = c->credits;
	c->local.conn_id = c->conn_id;
	uint8_t msg[QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_ACCEPT, &c->local);
	if (n < 0 || qpg__conn_write(c, msg, (size_t)n) < 0)
		return;
	become_established(c);
}

static void client_send_hello(struct qpg__conn *c)
{
	qpg__phase_begin(c);
	c->local.transport = c->t->wire_id;
	int rc = c->t->conn_prepare(c, &c->local);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot create the data path: %s", strerror(-rc));
		return;
	}
	c->local.max_msg = c->max_msg;
	c->local.credits = c->credits;
	struct qpg_wire_params hello = c->local;
	if (c->test_mutation == QPG_MUTATE_GID) {
		static const uint8_t other[16] = {0, 0, 0,    0,    0,	 0, 0, 0,
						  0, 0, 0xff, 0xff, 192, 0, 2, 1};
		memcpy(hello.gid, other, 16);
	}
	uint8_t msg[QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_HELLO, &hello);
	if (n < 0)
		return;
	switch (c->test_mutation) {
	case QPG_MUTATE_VERSION:
		msg[4] = QPG_WIRE_VERSION + 1;
		break;
	case QPG_MUTATE_PSN:
		msg[QPG_WIRE_HDR_LEN + 8] = 0x01; /* PSN > 0xffffff */
		break;
	case QPG_MUTATE_QPN:
		memset(msg + QPG_WIRE_HDR_LEN + 4, 0, 4);
		msg[QPG_WIRE_HDR_LEN + 7] = 1; /* QPN 1 */
		break;
	case QPG_MUTATE_TRUNCATED:
		n = n / 2;
		break;
	case QPG_MUTATE_LENGTH:
		msg[QPG_WIRE_HDR_LEN - 1] = 0xff;
		break;
	case QPG_MUTATE_STALL:
		n = 0;
		break;
	}
	qpg__phase_begin(c);
	if (n)
		qpg__conn_write(c, msg, (size_t)n);
}

static void client_on_reply(struct qpg__conn *c)
{
	uint8_t type = c->boot_in[5];
	if (type == QPG_WIRE_REJECT) {
		struct qpg_wire_reject r;
		if (qpg_wire_decode_reject(c->boot_in, c->boot_in_len, &r)) {
			qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed REJECT from server");
			return;
		}
		qpg__conn_close(c, err_class_of_reject(r.code), "server refused (%s): %s",
				qpg_reject_code_name(r.code), r.text);
		return;
	}
	struct qpg_wire_params peer;
	char why[128] = "";
	if (type != QPG_WIRE_ACCEPT) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"unexpected bootstrap message type %u from server", type);
		return;
	}
	if (qpg_wire_decode_params(c->boot_in, c->boot_in_len, &peer, why, sizeof(why))) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "invalid ACCEPT from server: %s", why);
		return;
	}
	if (peer.transport != c->t->wire_id || peer.flags != c->local.flags) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"server answered with other transport or flags");
		return;
	}
	qpg__phase_end(c, QPG_PHASE_EXCHANGE);
	c->peer = peer;
	c->conn_id = peer.conn_id;
	c->max_msg = QPG_MIN(c->max_msg, peer.max_msg);
	c->credits = QPG_MIN(c->credits, peer.credits);
	int rc = c->t->conn_establish(c, &peer);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot connect the data path: %s",
				strerror(-rc));
		return;
	}
	become_established(c);
}

/* Read the bootstrap message, never more: bytes after it belong to the data
 * path (tcp transport). */
static void read_bootstrap(struct qpg__conn *c)
{
	while (c->state == QPG_CONN_BOOTSTRAP) {
		uint8_t type = 0, version = 0;
		int need = qpg_wire_peek(c->boot_in, c->boot_in_len, &type, &version);
		if (need == -EPROTONOSUPPORT && c->is_server) {
			c->boot_in_len = QPG_WIRE_HDR_LEN;
			server_on_hello(c); /* rejects with a version message */
			return;
		}
		if (need < 0) {
			if (c->is_server)
				reject(c, QPG_REJECT_MALFORMED, "malformed bootstrap header");
			else
				qpg__conn_close(
				    c,
				    need == -EPROTONOSUPPORT ? QPG_ERR_VERSION : QPG_ERR_PROTOCOL,
				    "%s from server",
				    need == -EPROTONOSUPPORT ? "unsupported protocol version"
							     : "malformed bootstrap message");
			return;
		}
		if (need > 0 && (size_t)need == c->boot_in_len) {
			if (c->is_server)
				server_on_hello(c);
			else
				client_on_reply(c);
			return;
		}
		size_t want =
		    need ? (size_t)need - c->boot_in_len : QPG_WIRE_HDR_LEN - c->boot_in_len;
		size_t got = 0;
		enum qpg__tls_io r = qpg__tls_read(c->ssl, c->boot_in + c->boot_in_len, want, &got,
						   c->why, sizeof(c->why));
		if (r == QPG_TLS_DONE) {
			c->boot_in_len += got;
			continue;
		}
		if (r == QPG_TLS_WANT_READ || r == QPG_TLS_WANT_WRITE)
			return;
		qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "connection closed during bootstrap%s%s%s",
				r == QPG_TLS_FAILED ? ": " : "", r == QPG_TLS_FAILED ? c->why : "",
				c->is_server ? "" : BOOT_CLOSED_HINT);
		return;
	}
}

static void drive_tls(struct qpg__conn *c)
{
	enum qpg__tls_io r = qpg__tls_handshake(c->ssl, c->why, sizeof(c->why));
	if (r == QPG_TLS_WANT_READ || r == QPG_TLS_WANT_WRITE) {
		bool ww = r == QPG_TLS_WANT_WRITE;
		if (ww != c->want_write) {
			c->want_write = ww;
			update_events(c);
		}
		return;
	}
	if (r != QPG_TLS_DONE) {
		enum qpg_err_class e = QPG_ERR_TLS;
		if (qpg__tls_verify_failed(c->ssl))
			e = strstr(c->why, "host name") ? QPG_ERR_HOSTNAME : QPG_ERR_CERT;
		if (!c->ep->is_server && qpg__tls_peer_sent_nothing(c->ssl)) {
			/* The server refuses over its limits before any TLS work. */
			qpg__conn_close(c, QPG_ERR_PEER_CLOSED,
					"the server closed the connection before the TLS handshake "
					"(at its limit of pending handshakes, connections or "
					"handshakes per second per address?)");
			return;
		}
		qpg__conn_close(c, e, "TLS handshake failed: %s", c->why);
		return;
	}
	if (c->want_write) {
		c->want_write = false;
		update_events(c);
	}
	qpg__phase_end(c, QPG_PHASE_TLS_HANDSHAKE);
	c->state = QPG_CONN_BOOTSTRAP;
	if (!c->is_server)
		client_send_hello(c);
	if (c->state == QPG_CONN_BOOTSTRAP)
		read_bootstrap(c);
}

static void ctrl_cb(struct qpg__io *io, uint32_t events)
{
	struct qpg__conn *c = qpg__container_of(io, struct qpg__conn, io);
	if (c->state >= QPG_CONN_CLOSING)
		return;
	if (c->state == QPG_CONN_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			qpg__conn_close(c, QPG_ERR_REFUSED, "connect: %s", strerror(err));
			return;
		}
		if (!(events & (EPOLLOUT | EPOLLIN)))
			return;
		qpg__phase_end(c, QPG_PHASE_TCP_CONNECT);
		c->state = QPG_CONN_TLS;
		update_events(c);
	}
	if (c->state == QPG_CONN_TLS) {
		drive_tls(c);
		return;
	}
	if ((events & EPOLLOUT) && c->want_write && conn_flush(c) < 0)
		return;
	switch (c->state) {
	case QPG_CONN_BOOTSTRAP:
		read_bootstrap(c);
		break;
	case QPG_CONN_ESTABLISHED:
		c->t->on_stream(c);
		break;
	case QPG_CONN_REJECTING: {
		/* Drain and ignore whatever the refused peer still sends. */
		uint8_t sink[512];
		size_t got;
		enum qpg__tls_io r;
		do {
			r = qpg__tls_read(c->ssl, sink, sizeof(sink), &got, c->why, sizeof(c->why));
		} while (r == QPG_TLS_DONE);
		if (r == QPG_TLS_CLOSED || r == QPG_TLS_FAILED)
			qpg__conn_close(c, c->err, "rejected; peer went away");
		break;
	}
	default:
		break;
	}
}

int qpg__conn_send(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint32_t payload_len)
{
	return qpg__conn_send_flags(c, b, type, 0, payload_len);
}

uint32_t qpg__conn_send_depth(const struct qpg__conn *c)
{
	/* A request answered with a grant takes two work requests (bind and
	 * reply), its RELEASE two more (invalidate and reply). */
	uint32_t per_request = c->ep->grants_reads ? 2 : 1;
	return QPG_MAX(per_request * c->credits, c->ep->qp_max_send_wr);
}

uint32_t qpg__conn_send_room(const struct qpg__conn *c)
{
	uint32_t depth = qpg__conn_send_depth(c);
	return c->in_flight < depth ? depth - c->in_flight : 0;
}

int qpg__conn_send_flags(struct qpg__conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
			 uint32_t payload_len)
{
	struct qpg__endpoint *ep = c->ep;
	if (c->state != QPG_CONN_ESTABLISHED) {
		qpg_pool_put(&ep->pool, b);
		return -ENOTCONN;
	}
	if (payload_len > c->max_msg && !c->oversize_next) {
		qpg_pool_put(&ep->pool, b);
		return -EMSGSIZE;
	}
	/* Full: a peer's reply can arrive before the ACK of our request does
	 * (lost ACKs are only repaired by the next one), so a full send queue
	 * is normal under loss. The caller retries on the next completion. */
	if (qpg__conn_send_room(c) == 0) {
		qpg_pool_put(&ep->pool, b);
		return -EAGAIN;
	}
	struct qpg_frame_hdr h = {QPG_WIRE_VERSION, type, flags, payload_len, c->auth.tx.seq++};
	uint8_t *p = b->addr;
	qpg_frame_hdr_encode(p, &h);
	if (c->auth.enabled) {
		uint8_t *tag = p + QPG_FRAME_HDR_LEN + payload_len;
		int rc = qpg__auth_tag(&c->auth.tx, h.seq, p, QPG_FRAME_HDR_LEN + payload_len, tag);
		if (rc) {
			qpg_pool_put(&ep->pool, b);
			return rc;
		}
		if (c->corrupt_next_tag) {
			tag[0] ^= 0x80;
			c->corrupt_next_tag = false;
		}
	}
	if (c->in_flight++ == 0)
		c->progress_ns = qpg__now_ns();
	stat_add(&ep->stats.msgs_out, 1);
	stat_add(&ep->stats.bytes_out, payload_len);
	int rc = c->t->send(c, b, qpg_frame_len(payload_len, c->auth.enabled));
	if (rc) {
		c->in_flight--;
		qpg__conn_close(c, QPG_ERR_QP, "send failed: %s", strerror(-rc));
	}
	return rc;
}

/* One-sided work requests are in flight like sends until they complete. */
static int one_sided_posted(struct qpg__conn *c, int rc)
{
	if (rc == 0 && c->in_flight++ == 0)
		c->progress_ns = qpg__now_ns();
	return rc;
}

static int one_sided_unusable(const struct qpg__conn *c, bool has_op)
{
	if (!has_op)
		return -EOPNOTSUPP;
	return c->state == QPG_CONN_ESTABLISHED ? 0 : -ENOTCONN;
}

int qpg__conn_grant_read(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			 void *user, void **window, uint32_t *rkey)
{
	int rc = one_sided_unusable(c, c->t->grant_read != NULL);
	return rc ? rc
		  : one_sided_posted(c, c->t->grant_read(c, region, addr, len, user, window, rkey));
}

int qpg__conn_revoke(struct qpg__conn *c, void *window)
{
	int rc = one_sided_unusable(c, c->t->revoke != NULL);
	return rc ? rc : one_sided_posted(c, c->t->revoke(c, window));
}

int qpg__conn_read(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	int rc = one_sided_unusable(c, c->t->read != NULL);
	return rc ? rc : one_sided_posted(c, c->t->read(c, b, raddr, rkey));
}

int qpg__conn_test_write(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey)
{
	int rc = one_sided_unusable(c, c->t->test_write != NULL);
	return rc ? rc : one_sided_posted(c, c->t->test_write(c, b, raddr, rkey));
}

void qpg__conn_on_revoked(struct qpg__conn *c, void *user)
{
	/* A closing connection's service state is already gone (and its QP in
	 * error, so nothing can be read through the window any more). */
	if (c->state == QPG_CONN_ESTABLISHED && c->ep->cbs.revoked)
		c->ep->cbs.revoked(c, user);
}

void qpg__conn_on_read(struct qpg__conn *c, struct qpg_buf *b, bool ok, const char *why)
{
	c->in_flight--;
	c->progress_ns = c->active_ns = qpg__now_ns();
	if (c->state != QPG_CONN_ESTABLISHED || !ok || !c->ep->cbs.read_done) {
		qpg_pool_put(&c->ep->pool, b);
		if (!ok && c->state == QPG_CONN_ESTABLISHED)
			qpg__conn_close(c, QPG_ERR_QP, "one-sided read failed: %s", why);
		return;
	}
	c->ep->cbs.read_done(c, b);
}

void qpg__conn_oversize_next(struct qpg__conn *c)
{
	c->oversize_next = true;
}

void qpg__conn_corrupt_next_tag(struct qpg__conn *c)
{
	c->corrupt_next_tag = true;
}

void qpg__conn_on_sent(struct qpg__conn *c, bool ok, const char *why)
{
	c->in_flight--;
	if (c->state != QPG_CONN_ESTABLISHED)
		return;
	c->progress_ns = c->active_ns = qpg__now_ns();
	if (!ok) {
		qpg__conn_close(c, QPG_ERR_QP, "send completion failed: %s", why);
		return;
	}
	if (c->ep->cbs.sent)
		c->ep->cbs.sent(c);
}

void qpg__conn_on_frame(struct qpg__conn *c, struct qpg_buf *b, size_t len)
{
	struct qpg__endpoint *ep = c->ep;
	struct qpg_frame_hdr h;
	if (c->state != QPG_CONN_ESTABLISHED) {
		qpg_pool_put(&ep->pool, b);
		return;
	}
	int rc = qpg_frame_hdr_decode(b->addr, len, c->auth.enabled, ep->max_msg, &h);
	if (rc == 0 && qpg_frame_len(h.len, c->auth.enabled) != len)
		rc = -EPROTO;
	if (rc) {
		qpg_pool_put(&ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "malformed frame (%zu bytes)", len);
		return;
	}
	if (h.seq != c->auth.rx.seq) {
		qpg_pool_put(&ep->pool, b);
		stat_add(&ep->stats.seq_failures, 1);
		qpg__conn_close(c, QPG_ERR_AUTH,
				"out-of-order message: sequence %llu, expected %llu",
				(unsigned long long)h.seq, (unsigned long long)c->auth.rx.seq);
		return;
	}
	if (c->auth.enabled &&
	    qpg__auth_verify(&c->auth.rx, h.seq, b->addr, QPG_FRAME_HDR_LEN + h.len,
			     (uint8_t *)b->addr + QPG_FRAME_HDR_LEN + h.len)) {
		qpg_pool_put(&ep->pool, b);
		stat_add(&ep->stats.auth_failures, 1);
		qpg__conn_close(c, QPG_ERR_AUTH, "message %llu failed authentication (bad tag)",
				(unsigned long long)h.seq);
		return;
	}
	c->auth.rx.seq++;
	c->active_ns = qpg__now_ns();
	if (h.flags & ~QPG_FRAME_FLAGS_KNOWN) {
		qpg_pool_put(&ep->pool, b);
		qpg__conn_close(c, QPG_ERR_PROTOCOL, "unknown frame flags 0x%04x", h.flags);
		return;
	}
	stat_add(&ep->stats.msgs_in, 1);
	stat_add(&ep->stats.bytes_in, h.len);
	ep->cbs.message(c, &h, b);
}

/* ---- endpoint ---- */

int qpg__rdma_dev_open_explained(struct qpg_rdma_dev *dev, const char *name, int port,
				 int gid_index, char *err, size_t err_len)
{
	int rc = qpg_rdma_dev_open(dev, name, (uint8_t)port, gid_index);
	if (rc)
		snprintf(err, err_len,
			 "no usable RDMA device%s%s (%s): run inside the lab "
			 "(scripts/rxe-vm -- ...) or use --transport tcp",
			 name ? " " : "", name ? name : "", strerror(-rc));
	return rc;
}

static void ep_tick(struct qpg__loop *l)
{
	qpg__endpoint_tick(l->owner);
}

static void ep_batch_end(struct qpg__loop *l)
{
	qpg__endpoint_settle(l->owner);
}

static const char *state_name(enum qpg__conn_state st)
{
	return st == QPG_CONN_CONNECTING ? "TCP connect" : st == QPG_CONN_TLS ? "TLS" : "bootstrap";
}

/* Deadlines. Closes are deferred, so the list may be walked while closing. */
void qpg__endpoint_tick(struct qpg__endpoint *ep)
{
	uint64_t now = qpg__now_ns();
	atomic_store_explicit(&ep->stats.pool_in_use, (long long)ep->pool.in_use,
			      memory_order_relaxed);
	atomic_store_explicit(&ep->stats.pool_slots, (long long)ep->pool.nslots,
			      memory_order_relaxed);
	struct qpg__conn *c = ep->head, *next;
	for (; c; c = next) {
		next = c->next;
		if (c->deadline_ns && now > c->deadline_ns && c->is_server &&
		    c->state == QPG_CONN_BOOTSTRAP) {
			/* TLS is up: tell the client why, then close (the REJECT
			 * gets one more tick to flush). */
			reject(c, QPG_REJECT_RESOURCES,
			       "handshake deadline of %llu ms passed before the HELLO (server "
			       "busy: retry)",
			       (unsigned long long)(ep->handshake_timeout_ns / 1000000));
			c->err = QPG_ERR_TIMEOUT;
			snprintf(c->why, sizeof(c->why),
				 "handshake timeout after %llu ms (bootstrap; the client was told)",
				 (unsigned long long)(ep->handshake_timeout_ns / 1000000));
			c->deadline_ns = now + 100000000ull;
		} else if (c->deadline_ns && now > c->deadline_ns &&
			   c->state < QPG_CONN_ESTABLISHED)
			qpg__conn_close(c, QPG_ERR_TIMEOUT, "handshake timeout after %llu ms (%s)",
					(unsigned long long)(ep->handshake_timeout_ns / 1000000),
					state_name(c->state));
		else if (c->deadline_ns && now > c->deadline_ns && c->state == QPG_CONN_REJECTING)
			qpg__conn_close(c, c->err, "%s", c->why);
		else if (c->state != QPG_CONN_ESTABLISHED)
			continue;
		/* A paused reader has a full send queue, so in_flight covers it. */
		else if (ep->progress_ns_max && c->in_flight &&
			 now - c->progress_ns > ep->progress_ns_max)
			qpg__conn_close(c, QPG_ERR_TIMEOUT,
					"no progress: %u sends not completed for %llu ms (peer not "
					"reading?)",
					c->in_flight,
					(unsigned long long)(ep->progress_ns_max / 1000000));
		else if (ep->idle_ns_max && c->in_flight == 0 &&
			 now - c->active_ns > ep->idle_ns_max)
			qpg__conn_close(c, QPG_ERR_TIMEOUT, "idle for %llu ms",
					(unsigned long long)(ep->idle_ns_max / 1000000));
		else if (ep->cbs.tick)
			ep->cbs.tick(c, now);
	}
}

int qpg__endpoint_init(struct qpg__endpoint *ep, const struct qpg__ep_opts *o)
{
	int rc;
	memset(ep, 0, sizeof(*ep));
	ep->t = o->t;
	ep->dev = o->dev;
	ep->max_msg = o->max_msg;
	ep->srq_depth = o->srq_depth;
	ep->qp_max_send_wr = o->qp_max_send_wr;
	ep->qp_timeout = o->qp_timeout;
	ep->rd_atomic = o->rd_atomic;
	ep->credits_max = 16;
	ep->handshake_timeout_ns = 10000000000ull;
	ep->abandon_ns = 10000000000ull;
	rc = qpg__loop_init(&ep->loop, o->tick_ms ? o->tick_ms : 100);
	if (rc)
		return rc;
	ep->loop.owner = ep;
	ep->loop.on_tick = ep_tick;
	ep->loop.on_batch_end = ep_batch_end;
	rc = qpg_pool_init(&ep->pool, o->dev ? o->dev->pd : NULL, qpg_frame_len(o->max_msg, 1), 256,
			   o->pool_max, 0);
	if (rc)
		goto err_loop;
	rc = ep->t->ep_init(ep);
	if (rc)
		goto err_pool;
	return 0;

err_pool:
	qpg_pool_destroy(&ep->pool);
err_loop:
	qpg__loop_fini(&ep->loop);
	return rc;
}

void qpg__endpoint_fini(struct qpg__endpoint *ep)
{
	while (ep->head)
		qpg__conn_close(ep->head, QPG_ERR_LOCAL, "endpoint shutting down");
	qpg__endpoint_settle(ep);
	/* Let flushes arrive so QPs are destroyed idle, then force the rest. */
	for (int i = 0; i < 200 && (ep->dead || ep->closing); i++)
		qpg__loop_run_once(&ep->loop, 10);
	qpg__endpoint_settle(ep);
	reap(ep, true);
	ep->t->ep_fini(ep);
	qpg_pool_destroy(&ep->pool);
	qpg__loop_fini(&ep->loop);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection: TCP + TLS 1.3 and the bootstrap exchange (HELLO,
 * ACCEPT or REJECT), then the stream the tcp transport carries its frames
 * on. Identical for every transport: the transport supplies the data path
 * through its ops table (conn_prepare, conn_establish, on_stream). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"
#include "control.h"
#include "core.h"
#include "frame.h"
#include "stream.h"

static void ctrl_cb(struct qpg__io *io, uint32_t events);

static void set_sockopts(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A peer that vanishes without FIN/RST (host gone) is found by keepalive:
	 * 10 s idle + 3 probes 2 s apart, so its QP is reclaimed within ~16 s.
	 * (In the lab's 50,000-client runs over loopback, thousands of live
	 * idle connections were aborted with ETIMEDOUT, at 10 s, 30 s and 60 s
	 * alike: the probes of a timer-wheel batch overflowed lo's backlog,
	 * net.core.netdev_max_backlog, and were dropped. bench/sweep-lab.sh
	 * raises it: its 50,000-client sweep then saw no abort.) */
	int idle = 10, intvl = 2, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

void qpg__port_cursor_init(struct qpg__port_cursor *cur)
{
	unsigned lo = 32768, hi = 60999; /* the kernel's default */
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		unsigned a, b;
		if (fscanf(f, "%u %u", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535)
			lo = a, hi = b;
		fclose(f);
	}
	uint32_t r = 0;
	if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
		r = (uint32_t)getpid();
	cur->lo = (uint16_t)lo;
	cur->hi = (uint16_t)hi;
	cur->next = (uint16_t)(lo + r % (hi - lo + 1));
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET)
		((struct sockaddr_in *)a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

/* Bind FD to SRC's address. With a cursor, to the cursor's next port that
 * is free: a client that opens tens of thousands of connections to one
 * server from one address would otherwise spend its time in connect()'s
 * port search, which tries the even ports of the range first and, once they
 * are all taken, walks every one of them again for each new connection (in
 * the lab, past 33,000 connections, 35% of the VM's CPU was
 * __inet_hash_connect and __inet_check_established). A port somebody else
 * holds is skipped; after QPG__PORT_TRIES in a row, or without a cursor,
 * the kernel picks the port at connect() (IP_BIND_ADDRESS_NO_PORT: per
 * destination, so the address does not use up its ports at bind time). */
#define QPG__PORT_TRIES 64
int qpg__bind_source(int fd, const struct sockaddr *src, socklen_t len,
		     struct qpg__port_cursor *cur)
{
	struct sockaddr_storage a;
	memcpy(&a, src, len);
	for (int i = 0; cur && i < QPG__PORT_TRIES; i++) {
		uint16_t port = cur->next;
		cur->next = port >= cur->hi ? cur->lo : (uint16_t)(port + 1);
		set_port(&a, port);
		if (bind(fd, (struct sockaddr *)&a, len) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	set_port(&a, 0);
	return bind(fd, (struct sockaddr *)&a, len);
}

int qpg__conn_accept(struct qpg__endpoint *ep, int fd, const struct sockaddr_storage *peer,
		     void *user)
{
	struct qpg__conn *c = qpg__conn_new(ep, fd, true);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->user = user;
	c->peer_addr = *peer;
	set_sockopts(fd);
	c->state = QPG_CONN_TLS;
	c->ssl = qpg__tls_slot_session(ep->tls, fd, 1, NULL);
	if (!c->ssl || qpg__loop_add(&ep->loop, &c->io, fd, EPOLLIN, ctrl_cb) < 0)
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot set up TLS session");
	return 0;
}

/* connect() failed with ERR: the server's answer (refused, unreachable),
 * or ours: every local port towards that address and port is taken. */
static void connect_failed(struct qpg__conn *c, int err)
{
	if (err == EADDRNOTAVAIL || err == EADDRINUSE)
		qpg__conn_close(c, QPG_ERR_LOCAL,
				"connect: %s (no local port left towards this server: bind more "
				"source addresses, or widen net.ipv4.ip_local_port_range)",
				strerror(err));
	else
		qpg__conn_close(c, QPG_ERR_REFUSED, "connect: %s", strerror(err));
}

int qpg__conn_connect(struct qpg__endpoint *ep, const struct qpg__client_params *p,
		      struct qpg__conn **out)
{
	int fd = socket(p->addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct qpg__conn *c = qpg__conn_new(ep, fd, false);
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
	c->ssl = qpg__tls_slot_session(ep->tls, fd, 0, p->servername);
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
	if (p->src && qpg__bind_source(fd, p->src, p->src_len, p->ports) < 0)
		qpg__conn_close(c, QPG_ERR_LOCAL, "bind to the source address: %s",
				strerror(errno));
	else if (connect(fd, p->addr, p->addr_len) < 0 && errno != EINPROGRESS)
		connect_failed(c, errno);
	*out = c;
	return 0;
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

/* Answer REJECT with CODE and TEXT, then close once it is flushed. ERR is
 * the class the close is counted under (with a local reason WHY, or
 * "rejected: TEXT"), set before the write: the REJECT may flush, and close,
 * at once. */
static void reject_as(struct qpg__conn *c, uint16_t code, enum qpg_err_class err, const char *why,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void reject_as(struct qpg__conn *c, uint16_t code, enum qpg_err_class err, const char *why,
		      const char *fmt, ...)
{
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1];
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	qpg__stat_add(&c->ep->stats.rejected[code < 16 ? code : 0], 1);
	if (why)
		snprintf(c->why, sizeof(c->why), "%s", why);
	else
		snprintf(c->why, sizeof(c->why), "rejected: %s", text);
	c->err = err;
	c->state = QPG_CONN_REJECTING;
	int n = qpg_wire_encode_reject(msg, sizeof(msg), code, text);
	if (n > 0)
		qpg__conn_write(c, msg, (size_t)n);
}

#define reject(c, code, ...) reject_as(c, code, err_class_of_reject(code), NULL, __VA_ARGS__)

/* C's keys, and its place on the established list. SSL is the session's
 * (a member has none of its own). */
static bool mark_established(struct qpg__conn *c, SSL *ssl)
{
	struct qpg__endpoint *ep = c->ep;
	int rc = qpg__auth_init_from_tls(&c->auth, ssl, c->is_server,
					 (c->local.flags & QPG_WIRE_FLAG_AUTH) != 0, c->member_index);
	if (rc) {
		qpg__conn_close(c, QPG_ERR_LOCAL, "cannot derive message keys");
		return false;
	}
	c->state = QPG_CONN_ESTABLISHED;
	qpg__conn_list_established(c);
	c->deadline_ns = 0;
	c->active_ns = c->progress_ns = qpg__now_ns();
	c->handshake_done = true;
	c->counted_connected = true;
	atomic_fetch_add_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	return true;
}

/* Member M's peer: the session's params, with M's own entry of the
 * bootstrap message in LEADER's input. */
static void member_peer(const struct qpg__conn *leader, struct qpg__conn *m,
			const struct qpg_wire_params *session)
{
	struct qpg_wire_qp q;
	qpg_wire_decode_qp(leader->boot_in, m->member_index - 1u, &q);
	m->peer = *session;
	m->peer.qpn = q.qpn;
	m->peer.psn = q.psn;
	m->peer.conn_id = q.conn_id;
	m->peer.extra_qps = 0;
}

static void become_established(struct qpg__conn *c)
{
	struct qpg__endpoint *ep = c->ep;
	if (!mark_established(c, c->ssl))
		return;
	atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	qpg__stat_add(&ep->stats.handshakes_ok, 1);
	c->resumed = qpg__tls_resumed(c->ssl);
	if (c->resumed)
		qpg__stat_add(&ep->stats.handshakes_resumed, 1);
	uint64_t took = qpg__now_ns() - c->started_ns;
	qpg__stat_add(&ep->stats.handshake_ns_sum, took);
	unsigned b = 0;
	for (uint64_t us = took / 1000; us > 1 && b < 23; us >>= 1)
		b++;
	qpg__stat_add(&ep->stats.handshake_ns_bucket[b], 1);
	/* The session's other QPs, while its TLS session still exists: each
	 * exports keys of its own. A failure there ends the whole session. */
	for (struct qpg__conn *m = c->members; m && c->state == QPG_CONN_ESTABLISHED;
	     m = m->member_next) {
		memcpy(m->phase_ns, c->phase_ns, sizeof(m->phase_ns));
		m->resumed = c->resumed;
		if (!mark_established(m, c->ssl))
			break;
	}
	free(c->boot_in);
	c->boot_in = NULL;
	if (c->state != QPG_CONN_ESTABLISHED)
		return;
	if (ep->cbs.established) {
		ep->cbs.established(c);
		struct qpg__conn *m = c->members, *next;
		for (; m && c->state == QPG_CONN_ESTABLISHED; m = next) {
			next = m->member_next;
			ep->cbs.established(m);
		}
	}
	/* Bytes that arrived with the bootstrap sit in OpenSSL's buffer, where
	 * epoll cannot see them. */
	if (c->state == QPG_CONN_ESTABLISHED && qpg__tls_pending(c->ssl))
		c->t->on_stream(c);
	qpg__stream_release_tls(c);
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
	unsigned qps_max = ep->session_qps_max ? ep->session_qps_max : 1;
	if (peer.extra_qps >= qps_max) {
		reject(c, QPG_REJECT_BAD_PARAMS, "at most %u QP%s per session here (asked for %u)",
		       qps_max, qps_max == 1 ? "" : "s", peer.extra_qps + 1u);
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
	/* Each of the session's extra QPs is a connection of its own, admitted
	 * like one (the server's --max-clients counts QPs). */
	for (unsigned i = 0; i < peer.extra_qps; i++) {
		struct qpg__conn *m = qpg__conn_new_member(c);
		if (!m) {
			reject(c, QPG_REJECT_RESOURCES, "out of memory for the session's QPs");
			return;
		}
		int code = ep->cbs.admit ? ep->cbs.admit(m, text, sizeof(text)) : 0;
		if (code) {
			reject(c, (uint16_t)code, "QP %u of the session's %u: %s", i + 2,
			       peer.extra_qps + 1u, text);
			return;
		}
	}
	/* Every QP's entry in the ACCEPT (the leader's is in its params). */
	struct qpg_wire_qp extra[QPG_WIRE_MAX_EXTRA_QPS];
	for (struct qpg__conn *m = c; m; m = m == c ? c->members : m->member_next) {
		if (m == c)
			m->peer = peer;
		else
			member_peer(c, m, &peer);
		m->max_msg = QPG_MIN(peer.max_msg, ep->max_msg);
		m->credits = QPG_MIN(peer.credits, ep->credits_max);
		m->local.service = ep->service;
		m->local.flags = peer.flags & QPG_WIRE_FLAG_AUTH;
		rc = m->t->conn_prepare(m, &m->local);
		if (rc == 0)
			rc = m->t->conn_establish(m, &m->peer);
		if (rc) {
			reject(c, QPG_REJECT_RESOURCES,
			       "server could not create the data path%s: %s",
			       m == c ? "" : " of an extra QP", strerror(-rc));
			return;
		}
		m->local.transport = m->t->wire_id;
		m->local.service = ep->service;
		m->local.flags = peer.flags & QPG_WIRE_FLAG_AUTH;
		m->local.max_msg = m->max_msg;
		m->local.credits = m->credits;
		m->local.conn_id = m->conn_id;
		if (m != c)
			extra[m->member_index - 1] = (struct qpg_wire_qp){
			    .qpn = m->local.qpn, .psn = m->local.psn, .conn_id = m->conn_id};
	}
	c->local.extra_qps = c->nmembers;
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_ACCEPT, &c->local, extra);
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
	struct qpg_wire_qp extra[QPG_WIRE_MAX_EXTRA_QPS];
	for (struct qpg__conn *m = c->members; m; m = m->member_next) {
		m->local.transport = m->t->wire_id;
		rc = m->t->conn_prepare(m, &m->local);
		if (rc) {
			qpg__conn_close(m, QPG_ERR_LOCAL, "cannot create the data path: %s",
					strerror(-rc));
			return;
		}
		m->local.max_msg = m->max_msg;
		m->local.credits = m->credits;
		extra[m->member_index - 1] =
		    (struct qpg_wire_qp){.qpn = m->local.qpn, .psn = m->local.psn};
	}
	c->local.extra_qps = c->nmembers;
	struct qpg_wire_params hello = c->local;
	if (c->test_mutation == QPG_MUTATE_GID) {
		static const uint8_t other[16] = {0, 0, 0,    0,    0,	 0, 0, 0,
						  0, 0, 0xff, 0xff, 192, 0, 2, 1};
		memcpy(hello.gid, other, 16);
	}
	uint8_t msg[QPG_WIRE_MAX_BOOT_LEN];
	int n = qpg_wire_encode_params(msg, sizeof(msg), QPG_WIRE_HELLO, &hello, extra);
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
	if (peer.extra_qps != c->nmembers) {
		qpg__conn_close(c, QPG_ERR_PROTOCOL,
				"server answered for %u QPs, the session asked for %u",
				peer.extra_qps + 1u, c->nmembers + 1u);
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
	for (struct qpg__conn *m = c->members; m; m = m->member_next) {
		member_peer(c, m, &peer);
		m->conn_id = m->peer.conn_id;
		m->max_msg = c->max_msg;
		m->credits = c->credits;
		rc = m->t->conn_establish(m, &m->peer);
		if (rc) {
			qpg__conn_close(m, QPG_ERR_LOCAL, "cannot connect the data path: %s",
					strerror(-rc));
			return;
		}
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
			qpg__stream_update_events(c);
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
		qpg__stream_update_events(c);
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
			connect_failed(c, err);
			return;
		}
		if (!(events & (EPOLLOUT | EPOLLIN)))
			return;
		qpg__phase_end(c, QPG_PHASE_TCP_CONNECT);
		c->state = QPG_CONN_TLS;
		qpg__stream_update_events(c);
	}
	if (c->state == QPG_CONN_TLS) {
		drive_tls(c);
		return;
	}
	if ((events & EPOLLOUT) && c->want_write && qpg__stream_flush(c) < 0)
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

static const char *state_name(enum qpg__conn_state st)
{
	return st == QPG_CONN_CONNECTING ? "TCP connect" : st == QPG_CONN_TLS ? "TLS" : "bootstrap";
}

void qpg__control_deadline(struct qpg__conn *c, uint64_t now)
{
	struct qpg__endpoint *ep = c->ep;
	unsigned long long ms = ep->handshake_timeout_ns / 1000000;
	if (c->state == QPG_CONN_REJECTING) {
		qpg__conn_close(c, c->err, "%s", c->why);
	} else if (c->is_server && c->state == QPG_CONN_BOOTSTRAP) {
		/* TLS is up: tell the client why, then close (the REJECT gets
		 * one more tick to flush). */
		char why[128];
		snprintf(why, sizeof(why),
			 "handshake timeout after %llu ms (bootstrap; the client was told)", ms);
		reject_as(c, QPG_REJECT_RESOURCES, QPG_ERR_TIMEOUT, why,
			  "handshake deadline of %llu ms passed before the HELLO (server busy: "
			  "retry)",
			  ms);
		c->deadline_ns = now + 100000000ull;
	} else {
		qpg__conn_close(c, QPG_ERR_TIMEOUT, "handshake timeout after %llu ms (%s)", ms,
				state_name(c->state));
	}
}

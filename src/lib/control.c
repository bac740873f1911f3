/* SPDX-License-Identifier: BSD-2-Clause */
/* The control connection: TCP + TLS 1.3 and the bootstrap exchange (HELLO,
 * ACCEPT or REJECT), then the stream the tcp transport carries its frames
 * on. Identical for every transport: the transport supplies the data path
 * through its ops table (conn_prepare, conn_establish, on_stream). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common.h"
#include "control_int.h"
#include "core.h"
#include "frame.h"
#include "sockets.h"
#include "stream.h"

static void ctrl_cb(struct qpg__io *io, uint32_t events);
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
	/* No qpg__sock_tune here: the socket inherits TCP_NODELAY and the
	 * keepalive settings from the listener (qpg__srv_open_listener), five
	 * system calls fewer per connect. */
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
	qpg__sock_tune(fd);
	c->credits = p->credits;
	c->max_msg = p->max_msg;
	c->test_mutation = p->test_mutation;
	if (p->gid)
		c->src_gid = *p->gid;
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

/* Read the bootstrap message, never more: bytes after it belong to the data
 * path (tcp transport). */
static void read_bootstrap(struct qpg__conn *c)
{
	while (c->state == QPG_CONN_BOOTSTRAP) {
		uint8_t type = 0, version = 0;
		int need = qpg_wire_peek(c->boot_in, c->boot_in_len, &type, &version);
		if (need == -EPROTONOSUPPORT && c->is_server) {
			c->boot_in_len = QPG_WIRE_HDR_LEN;
			qpg__control_on_hello(c); /* rejects with a version message */
			return;
		}
		if (need < 0) {
			if (c->is_server)
				qpg__control_reject(c, QPG_REJECT_MALFORMED, QPG_ERR_REJECTED, NULL,
						    "malformed bootstrap header");
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
				qpg__control_on_hello(c);
			else
				qpg__control_on_reply(c);
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
		/* Closed with no TLS alert: a server's deadline or limit. */
		enum qpg_err_class e = r == QPG_TLS_CLOSED ? QPG_ERR_PEER_CLOSED : QPG_ERR_TLS;
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
		qpg__control_send_hello(c);
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

/* Whether C's peer has sent bytes that we have not read from the socket
 * yet. (Not what TLS holds: a record the peer began and stalled in, as a
 * slowloris does, is read and waits there for the rest.) */
static bool input_waiting(const struct qpg__conn *c)
{
	int n = 0;
	return c->io.fd >= 0 && ioctl(c->io.fd, FIONREAD, &n) == 0 && n > 0;
}

bool qpg__control_deadline_extend(struct qpg__conn *c, uint64_t now)
{
	if (c->state == QPG_CONN_REJECTING || c->deadline_extended || !input_waiting(c))
		return false;
	c->deadline_extended = true;
	c->deadline_ns = now + c->ep->handshake_timeout_ns;
	qpg__stat_add(&c->ep->stats.deadlines_extended, 1);
	return true;
}

void qpg__control_deadline(struct qpg__conn *c, uint64_t now)
{
	struct qpg__endpoint *ep = c->ep;
	unsigned long long ms = ep->handshake_timeout_ns / 1000000;
	if (qpg__control_deadline_extend(c, now))
		return;
	if (c->state == QPG_CONN_REJECTING) {
		qpg__conn_close(c, c->err, "%s", c->why);
	} else if (c->is_server && c->state == QPG_CONN_BOOTSTRAP) {
		/* TLS is up: tell the client why, then close (the REJECT gets
		 * one more tick to flush). */
		char why[128];
		snprintf(why, sizeof(why),
			 "handshake timeout after %llu ms (bootstrap; the client was told)", ms);
		qpg__control_reject(
		    c, QPG_REJECT_RESOURCES, QPG_ERR_TIMEOUT, why,
		    "handshake deadline of %llu ms passed before the HELLO (server busy: "
		    "retry)",
		    ms);
		c->deadline_ns = now + 100000000ull;
	} else {
		qpg__conn_close(c, QPG_ERR_TIMEOUT, "handshake timeout after %llu ms (%s)", ms,
				state_name(c->state));
	}
}

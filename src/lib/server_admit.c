/* SPDX-License-Identifier: BSD-2-Clause */
/* Who gets in: the listeners, the refusals before any TLS work (pending
 * handshakes, per-address limits, the handshake rate), and admission of
 * each QP after HELLO (--max-clients). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"
#include "control.h"
#include "qpgate/service.h"
#include "server_int.h"
#include "sockets.h"

int qpg__srv_admit(struct qpg__conn *c, char *text, size_t text_len)
{
	struct qpg_server *s = ((struct worker *)c->ep)->srv;
	/* The service's word on who the peer is comes first, once per session:
	 * a refused identity holds nothing. Members act for their leader. */
	if (c->leader) {
		c->principal = c->leader->principal;
	} else if (s->service->admit) {
		if (s->service->admit((struct qpg_conn *)c, text, text_len))
			return QPG_REJECT_IDENTITY; /* counted with the REJECTs by code */
	}
	/* Each QP, a session's too, counts against its address first. */
	struct qpg__peer *pe = c->leader ? c->leader->user : c->user;
	unsigned held;
	if (pe && !qpg__peers_take_qp(&s->peers, pe, s->o.max_qps_per_peer, &held)) {
		atomic_fetch_add(&s->refused_qps_per_peer, 1);
		snprintf(text, text_len,
			 "this address holds %u QPs, its limit (--max-qps-per-peer): close some, "
			 "or connect from another address",
			 held);
		return QPG_REJECT_ADDRESS_LIMIT;
	}
	int n = atomic_fetch_add(&s->clients, 1);
	if ((unsigned)n >= s->o.max_clients) {
		atomic_fetch_sub(&s->clients, 1);
		if (pe)
			qpg__peers_put_qp(&s->peers, pe, qpg__now_ns());
		snprintf(text, text_len, "server full (%u of %u)", s->o.max_clients,
			 s->o.max_clients);
		return QPG_REJECT_SERVER_FULL;
	}
	c->admit_ref = pe;
	c->admitted = true;
	c->conn_id = atomic_fetch_add(&s->next_conn_id, 1) + 1;
	return 0;
}

/* The pending slots are full: make room for a newcomer whose address holds
 * MINE of them by closing the oldest unfinished handshake, on this thread,
 * of the address that holds the most (more than MINE + 1: taking one from
 * an address no heavier than the newcomer's only moves the problem). A
 * thread sees its share of every flood (the listeners are SO_REUSEPORT),
 * so its heaviest is the server's, near enough. True when one was closed. */
static bool evict_heaviest(struct worker *w, unsigned mine)
{
	struct qpg_server *s = w->srv;
	struct qpg__conn *victim = NULL;
	unsigned heaviest = mine + 1;
	qpg__peers_lock(&s->peers);
	for (struct qpg__conn *c = w->ep.handshaking.head; c; c = c->next) {
		if (c->member_index || c->handshake_done || !c->user ||
		    c->state >= QPG_CONN_CLOSING)
			continue;
		unsigned n = qpg__peer_pending_locked(c->user);
		if (n > heaviest ||
		    (n == heaviest && victim && c->started_ns < victim->started_ns)) {
			heaviest = n;
			victim = c;
		}
	}
	qpg__peers_unlock(&s->peers);
	if (!victim)
		return false;
	atomic_fetch_add(&s->pending_evicted, 1);
	qpg__conn_close(victim, QPG_ERR_TIMEOUT,
			"evicted: the pending handshakes were full, and its address held the most "
			"(%u)",
			heaviest);
	return true;
}

void qpg__srv_listen_cb(struct qpg__io *io, uint32_t events)
{
	struct worker *w = qpg__container_of(io, struct worker, listen_io);
	struct qpg_server *s = w->srv;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd =
		    accept4(io->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* The listener stays readable, so accepting again at
				 * once would spin: stop listening for 100 ms. */
				uint64_t n = atomic_fetch_add(&s->accept_backoffs, 1);
				if (n == 0 || n % 100 == 0)
					qpg__srv_log(
					    s,
					    "accept: %s (raise ulimit -n); backing off 100 ms, "
					    "%llu times so far",
					    strerror(errno), (unsigned long long)n + 1);
				w->listen_paused_until = qpg__coarse_ns() + 100000000ull;
				qpg__loop_mod(&w->ep.loop, &w->listen_io, 0);
			}
			return;
		}
		/* Refuse before any TLS work: unfinished handshakes are what a
		 * slowloris attack piles up. When they fill the server, the
		 * heaviest address gives one up, not the newcomer. */
		if ((unsigned)atomic_load(&s->pending) >= s->o.max_pending &&
		    !evict_heaviest(w, qpg__peers_pending_of(&s->peers, &ss))) {
			atomic_fetch_add(&s->refused_pending, 1);
			close(fd);
			continue;
		}
		const struct qpg__peer_limits lim = {
		    .max_pending = s->o.max_pending_per_peer,
		    .max_pending_prefix = s->o.max_pending_per_prefix,
		    .max_conns = s->o.max_conns_per_peer,
		    .rate = s->o.handshake_rate,
		    .burst = s->o.handshake_burst,
		};
		enum qpg__peer_verdict why;
		struct qpg__peer *pe = qpg__peers_enter(&s->peers, &ss, &lim, qpg__now_ns(), &why);
		if (!pe) {
			atomic_fetch_add(why == QPG_PEER_RATE	  ? &s->refused_rate
					 : why == QPG_PEER_CONNS  ? &s->refused_per_peer
					 : why == QPG_PEER_PREFIX ? &s->refused_prefix
								  : &s->refused_pending,
					 1);
			close(fd);
			continue;
		}
		atomic_fetch_add(&s->pending, 1);
		if (qpg__conn_accept(&w->ep, fd, &ss, pe) < 0) {
			atomic_fetch_sub(&s->pending, 1);
			qpg__peers_leave(&s->peers, pe, false, qpg__now_ns());
		}
	}
}

/* One port, one server: the listeners share their port through
 * SO_REUSEPORT, which would as gladly let a second server of the same user
 * join the group and take half of the new connections. A plain bind first
 * (SO_REUSEADDR only, so a TIME_WAIT does not count) fails while any
 * other socket listens there. */
static int probe_port(const struct addrinfo *ai, const struct qpg_server *s, uint16_t port,
		      char *err, size_t err_len)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1, rc = 0;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		rc = -errno;
	else if (bind(fd, ai->ai_addr, ai->ai_addrlen))
		rc = -errno;
	if (rc == -EADDRINUSE)
		snprintf(err, err_len,
			 "port %u on %s is in use by another process (another qpgate-server?): "
			 "stop it, or give this one another -p",
			 port, s->o.bind_addr);
	else if (rc)
		snprintf(err, err_len, "cannot listen on %s:%u: %s", s->o.bind_addr, port,
			 strerror(-rc));
	if (fd >= 0)
		close(fd);
	return rc;
}

int qpg__srv_open_listener(const struct qpg_server *s, uint16_t port, bool first, char *err,
			   size_t err_len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV},
			*ai;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	int rc = getaddrinfo(s->o.bind_addr, ps, &hints, &ai);
	if (rc) {
		snprintf(err, err_len, "bad --bind address '%s': %s", s->o.bind_addr,
			 gai_strerror(rc));
		return -EINVAL;
	}
	if (first && port && (rc = probe_port(ai, s, port, err, err_len)) != 0) {
		freeaddrinfo(ai);
		return rc;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 4096)) {
		rc = -errno;
		snprintf(err, err_len, "cannot listen on %s:%u: %s", s->o.bind_addr, port,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	/* Every accepted socket is a clone of this one: its TCP_NODELAY and
	 * keepalive settings come with it, with no call per connection. */
	qpg__sock_tune(fd);
	return fd;
}

uint16_t qpg__srv_bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
}

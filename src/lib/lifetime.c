/* SPDX-License-Identifier: BSD-2-Clause */
/* The lifetime of a connection: creation and accounting, and the deferred
 * close (as libuv's uv_close and Redis's scheduled close): a close only
 * stops the data path and unlinks; the closed callback runs after the
 * loop's batch, never under the caller, and the memory is freed once every
 * work request has come back (or the transport has made sure none can). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "core.h"
#include "tls.h"

/* Only a client's phases are read (qpg_client_conn_info), and a session's
 * other QPs take its own QP's (qpg__control_established). So a server and
 * a member skip the clock reads: each is a system call and an HPET read in
 * the lab VM (six per QP were 7% of a server's CPU in a run of 64-QP
 * sessions; 15 per QP a tenth of a session client's). */
static bool phased(const struct qpg__conn *c)
{
	return !c->is_server && c->member_index == 0;
}

void qpg__phase_begin(struct qpg__conn *c)
{
	if (phased(c))
		c->phase_start_ns = qpg__now_ns();
}

void qpg__phase_end(struct qpg__conn *c, enum qpg_phase p)
{
	if (!phased(c))
		return;
	uint64_t now = qpg__now_ns();
	c->phase_ns[p] = now - c->phase_start_ns;
	c->phase_start_ns = now;
}

static void list_append(struct qpg__conn_list *l, struct qpg__conn *c)
{
	c->prev = l->tail;
	c->next = NULL;
	QPG__QUEUE_APPEND(l->head, l->tail, c, next);
	l->n++;
}

struct qpg__conn *qpg__conn_new(struct qpg__endpoint *ep, int fd, bool is_server)
{
	struct qpg__conn *c = calloc(1, ep->t->conn_size);
	if (!c)
		return NULL;
	c->boot_in = malloc(QPG_WIRE_MAX_BOOT_LEN);
	if (!c->boot_in) {
		free(c);
		return NULL;
	}
	c->t = ep->t;
	c->ep = ep;
	c->is_server = is_server;
	c->io.fd = fd;
	c->started_ns = qpg__now_ns();
	c->deadline_ns = c->started_ns + ep->handshake_timeout_ns;
	c->phase_start_ns = c->started_ns;
	list_append(&ep->handshaking, c);
	ep->nconns++;
	atomic_fetch_add_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
	return c;
}

struct qpg__conn *qpg__conn_new_member(struct qpg__conn *leader)
{
	struct qpg__endpoint *ep = leader->ep;
	if (leader->nmembers >= QPG_WIRE_MAX_EXTRA_QPS)
		return NULL;
	struct qpg__conn *c = calloc(1, ep->t->conn_size);
	if (!c)
		return NULL;
	c->t = ep->t;
	c->ep = ep;
	c->is_server = leader->is_server;
	c->io.fd = -1;
	c->started_ns = leader->started_ns;
	c->phase_start_ns = leader->phase_start_ns;
	c->peer_addr = leader->peer_addr;
	c->src_gid = leader->src_gid; /* the server checks the session's address */
	c->credits = leader->credits;
	c->max_msg = leader->max_msg;
	c->local.service = leader->local.service;
	c->local.flags = leader->local.flags;
	/* A member of a leader that has already failed must still be closed
	 * (and reported) by its caller: never born closing. */
	c->state = leader->state < QPG_CONN_CLOSING ? leader->state : QPG_CONN_CONNECTING;
	/* No deadline of its own: the leader's covers the session. */
	c->leader = leader;
	c->member_index = ++leader->nmembers;
	c->member_next = leader->members;
	leader->members = c;
	list_append(&ep->handshaking, c);
	ep->nconns++;
	return c;
}

static void list_remove(struct qpg__endpoint *ep, struct qpg__conn *c)
{
	struct qpg__conn_list *l = c->listed_established ? &ep->established : &ep->handshaking;
	if (c->tick_soon) {
		c->tick_soon = false;
		ep->nsoon--;
	}
	if (ep->scan == c)
		ep->scan = c->next;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
	l->n--;
}

void qpg__conn_list_established(struct qpg__conn *c)
{
	if (c->listed_established)
		return;
	list_remove(c->ep, c);
	c->listed_established = true;
	list_append(&c->ep->established, c);
}

static void conn_unlink(struct qpg__conn *c)
{
	list_remove(c->ep, c);
	c->ep->nconns--;
}

/* A session shares one fate: the control channel is the only way to tell
 * the peer that one of its QPs is gone. */
static void close_session(struct qpg__conn *c)
{
	struct qpg__conn *l = c->leader;
	if (l) {
		struct qpg__conn **pp = &l->members;
		while (*pp != c)
			pp = &(*pp)->member_next;
		*pp = c->member_next;
		c->leader = c->member_next = NULL;
		qpg__conn_close(l, c->err, "QP %u of this session closed: %s", c->member_index,
				c->why);
		return;
	}
	while (c->members) {
		struct qpg__conn *m = c->members;
		c->members = m->member_next;
		m->leader = m->member_next = NULL;
		qpg__conn_close(m, c->err, "session closed: %s", c->why);
	}
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
	qpg__stat_add(&ep->stats.closed_by_reason[c->err], 1);
	if (!c->handshake_done && !c->member_index) { /* a member is no handshake */
		atomic_fetch_sub_explicit(&ep->stats.handshaking, 1, memory_order_relaxed);
		qpg__stat_add(&ep->stats.handshakes_failed, 1);
	}
	if (c->counted_connected)
		atomic_fetch_sub_explicit(&ep->stats.connected, 1, memory_order_relaxed);
	/* A polite close_notify when the session is healthy; never block on it. */
	if (c->ssl && c->state == QPG_CONN_ESTABLISHED)
		qpg__tls_close_notify(c->ssl);
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
	QPG__QUEUE_APPEND(ep->closing, ep->closing_tail, c, next_dead);
	ep->nclosing++;
	close_session(c);
}

static void conn_free(struct qpg__conn *c)
{
	c->t->conn_release(c);
	qpg__tls_free(c->ssl);
	qpg__auth_free(&c->auth);
	free(c->boot_in);
	free(c->out);
	free(c);
}

/* Free dead connections once their data path has drained. One whose
 * completions never come back is abandoned after ep->abandon_ns: the
 * transport makes sure nothing in flight can still name it (for RDMA: the QP
 * is destroyed and the CQ drained) before it is freed. */
void qpg__endpoint_reap(struct qpg__endpoint *ep, bool force)
{
	struct qpg__conn **pp = &ep->dead;
	uint64_t now = qpg__now_ns();
	while (*pp) {
		struct qpg__conn *c = *pp;
		bool stuck = qpg__age_ns(now, c->closing_since_ns) > ep->abandon_ns;
		if (force || stuck || !c->t->conn_busy(c)) {
			if (c->t->conn_busy(c) && c->t->conn_abandon) {
				c->t->conn_abandon(c);
				qpg__stat_add(&ep->stats.slots_abandoned, c->in_flight);
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
		qpg__endpoint_reap(ep, false);
}

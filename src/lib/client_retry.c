/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's connects, tried again while the reason may pass: each attempt
 * is a qpg__conn of its own behind the caller's one handle; a session's
 * members follow their leader's attempts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "common.h"
#include "control.h"

bool qpg__client_transient(enum qpg_err_class err, uint16_t reject_code)
{
	switch (err) {
	case QPG_ERR_REFUSED:	  /* TCP: nobody listens (yet): a restart */
	case QPG_ERR_TIMEOUT:	  /* a handshake deadline, ours or the server's */
	case QPG_ERR_PEER_CLOSED: /* a server's limit, or its deadline, before the HELLO */
		return true;
	case QPG_ERR_REJECTED:
		return reject_code == QPG_REJECT_RESOURCES ||
		       reject_code == QPG_REJECT_SHUTTING_DOWN;
	default: /* certificates, names, versions, auth, a full server: as they are */
		return false;
	}
}

static uint64_t backoff_ns(struct qpg_client *cl, unsigned attempts)
{
	/* 100 ms doubled per attempt, at most 3 s; then anywhere in [1/2, 3/2)
	 * of it, so that a burst that failed together does not come back
	 * together. */
	uint64_t base = 100000000ull << (attempts > 6 ? 5 : attempts - 1);
	if (base > 3000000000ull)
		base = 3000000000ull;
	return base / 2 + (uint64_t)rand_r(&cl->seed) % base;
}

int qpg__client_attempt(struct qpg_client *cl, struct qpg_client_conn *h)
{
	unsigned si = cl->nsrc ? cl->next_src++ % cl->nsrc : 0; /* sources in turn */
	struct qpg__client_params p = {
	    .addr = (struct sockaddr *)&cl->addr,
	    .addr_len = cl->addr_len,
	    .src = cl->nsrc ? (struct sockaddr *)&cl->src[si] : NULL,
	    .src_len = cl->addr_len, /* the same family as the server's */
	    .ports = cl->nsrc ? &cl->ports[si] : NULL,
	    .gid = cl->nsrc && cl->src_gid[si].own ? &cl->src_gid[si] : NULL,
	    .servername = cl->servername,
	    .service = cl->o.service,
	    .auth = cl->o.auth,
	    .credits = cl->o.credits,
	    .max_msg = cl->o.max_msg,
	    .test_mutation = cl->test_mutation,
	};
	struct qpg__conn *c;
	int rc = qpg__conn_connect(&cl->ep, &p, &c);
	if (rc)
		return rc;
	h->attempts++;
	h->verdict = QPG__VERDICT_UNDECIDED;
	/* Even if it has already failed: closes are reported from the loop. */
	c->user = h;
	h->c = c;
	for (struct qpg_client_conn *m = h->members; m; m = m->member_next) {
		struct qpg__conn *mc = qpg__conn_new_member(c);
		if (!mc) {
			/* This attempt ends; its members without a QP hear it from
			 * the pump, once their leader's close is final. */
			qpg__conn_close(c, QPG_ERR_LOCAL, "out of memory for the session's QPs");
			break;
		}
		mc->user = m;
		m->c = mc;
		m->attempts = h->attempts;
		/* A leader that has already failed takes its members with it. */
		if (c->state >= QPG_CONN_CLOSING)
			qpg__conn_close(mc, c->err, "%s", c->why);
	}
	return 0;
}

static void wait_add(struct qpg_client *cl, struct qpg_client_conn *h)
{
	h->wait_next = cl->waiting;
	cl->waiting = h;
	cl->nwaiting++;
	for (struct qpg_client_conn *m = h->members; m; m = m->member_next)
		cl->nwaiting++;
}

/* The caller hears that H closed; H is freed (a leader once its members
 * are, as they point at it). */
static void report_closed(struct qpg_client_conn *h, enum qpg_err_class err, const char *why)
{
	struct qpg_client *cl = h->cl;
	if (cl->cbs.closed)
		cl->cbs.closed(h, h->user, err, why); /* its last attempt still readable */
	h->c = NULL;
	h->verdict = QPG__VERDICT_FINAL;
	struct qpg_client_conn *l = h->lead;
	if (l) {
		struct qpg_client_conn **pp = &l->members;
		while (*pp != h)
			pp = &(*pp)->member_next;
		*pp = h->member_next;
		free(h);
		if (l->verdict == QPG__VERDICT_FINAL && !l->members && !l->c)
			free(l);
	} else if (!h->members) {
		free(h);
	}
}

/* Tell the caller that H (a leader) and its members that have no QP left
 * are closed; those with one hear it from their own close. */
static void give_up(struct qpg_client_conn *h, enum qpg_err_class err, const char *why)
{
	struct qpg_client_conn *m = h->members, *next;
	for (; m; m = next) {
		next = m->member_next;
		if (!m->c)
			report_closed(m, err, why);
	}
	report_closed(h, err, why);
}

/* Decide, once per attempt, whether the session H belongs to tries again,
 * from the first of its QPs to report a close (C). */
static bool try_again(struct qpg_client_conn *l, const struct qpg__conn *c)
{
	if (l->verdict == QPG__VERDICT_UNDECIDED) {
		struct qpg_client *cl = l->cl;
		uint64_t now = qpg__now_ns();
		uint64_t wait = backoff_ns(cl, l->attempts);
		uint64_t end = l->started_ns + (uint64_t)cl->o.connect_deadline_ms * 1000000ull;
		bool again = !l->up && !l->cancelled && l->attempts < cl->o.connect_attempts &&
			     now + wait < end && qpg__client_transient(c->err, c->reject_code);
		l->verdict = again ? QPG__VERDICT_RETRY : QPG__VERDICT_FINAL;
		l->retry_ns = now + wait;
	}
	return l->verdict == QPG__VERDICT_RETRY;
}

void qpg__client_conn_closed(struct qpg__conn *c)
{
	struct qpg_client_conn *h = c->user;
	c->user = NULL;
	if (!h || h->c != c)
		return; /* an attempt already replaced */
	struct qpg_client_conn *l = h->lead ? h->lead : h;
	if (try_again(l, c)) {
		h->c = NULL;
		if (h == l)
			wait_add(h->cl, h); /* the session waits as one, on its leader */
		return;
	}
	if (h == l)
		give_up(h, c->err, c->why);
	else
		report_closed(h, c->err, c->why);
}

void qpg__client_retry_cancel(struct qpg_client_conn *h)
{
	struct qpg_client_conn *l = h->lead ? h->lead : h;
	l->cancelled = true;
	l->retry_ns = 0; /* the pump reports it at its next turn */
	qpg__loop_wake_soon(&h->cl->ep.loop);
}

void qpg__client_retry_pump(struct qpg_client *cl)
{
	if (!cl->waiting)
		return;
	uint64_t now = qpg__now_ns();
	struct qpg_client_conn **pp = &cl->waiting, *h;
	while ((h = *pp)) {
		if (!h->cancelled && now < h->retry_ns) {
			pp = &h->wait_next;
			continue;
		}
		*pp = h->wait_next;
		cl->nwaiting--;
		for (struct qpg_client_conn *m = h->members; m; m = m->member_next)
			cl->nwaiting--;
		if (h->cancelled) {
			h->verdict = QPG__VERDICT_FINAL;
			give_up(h, QPG_ERR_NONE, "closed by client");
			continue;
		}
		int rc = qpg__client_attempt(cl, h);
		if (rc) {
			char why[128];
			snprintf(why, sizeof(why), "cannot start attempt %u: %s", h->attempts + 1,
				 strerror(-rc));
			h->verdict = QPG__VERDICT_FINAL;
			give_up(h, QPG_ERR_LOCAL, why);
		}
	}
}

void qpg__client_retry_drop(struct qpg_client *cl)
{
	struct qpg_client_conn *h;
	while ((h = cl->waiting)) {
		cl->waiting = h->wait_next;
		h->verdict = QPG__VERDICT_FINAL;
		give_up(h, QPG_ERR_LOCAL, "endpoint shutting down");
	}
	cl->nwaiting = 0;
}

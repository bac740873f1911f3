/* SPDX-License-Identifier: BSD-2-Clause */
/* TLS 1.3 resumption with stateless tickets (src/lib/tls_tickets.c): a
 * client resumes from the newest ticket, including tickets given on a
 * resumed connection; a ticket is sent only to a HELLO that asks for one
 * (a client that resumes, after a full handshake or once its ticket is a
 * quarter through its lifetime: protocol version 11); a reload of the
 * server's certificates forgets every ticket; a ticket is not accepted
 * past two key periods; resumption off on either side means full
 * handshakes. Real connections over the tcp transport to an echo server on
 * loopback. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "loopback.h"
#include "qpgate/wire.h"

static struct qpg_client *client(const struct qpg_loopback *lb, bool resume)
{
	struct qpg_client_opts o;
	qpg_loopback_client_opts(lb, &o);
	o.tls_resume = resume;
	struct qpg_client *cl;
	char err[256];
	assert_int_equal(qpg_client_create(&cl, &o, &qpg_loopback_cbs, err, sizeof(err)), 0);
	return cl;
}

/* One connection: up, one verified echo (so the keys exported from a
 * resumed session work too), closed. Returns whether it resumed. */
static bool one(struct qpg_client *cl)
{
	char why[256];
	int rc = qpg_loopback_echo_once(cl, why, sizeof(why));
	assert_true(rc >= 0);
	return rc == 1;
}

static unsigned long long resumed_on_server(struct qpg_loopback *lb)
{
	struct qpg_server_stats st;
	qpg_server_stats(lb->srv, &st);
	return st.handshakes_resumed;
}

static unsigned long long tickets_sent(struct qpg_loopback *lb)
{
	struct qpg_server_stats st;
	qpg_server_stats(lb->srv, &st);
	return st.tls_tickets;
}

/* An echo server on loopback whose ticket keys rotate every PERIOD_S
 * seconds (0: no tickets). */
static void serve(struct qpg_loopback *lb, unsigned period_s)
{
	assert_int_equal(qpg_loopback_init(lb), 0);
	lb->o.tls_ticket_period_s = period_s;
	assert_int_equal(qpg_loopback_start(lb), 0);
}

static void resumes_from_the_newest_ticket(void **state)
{
	struct qpg_loopback lb;
	serve(&lb, 3600);
	struct qpg_client *cl = client(&lb, true);
	assert_false(one(cl)); /* no ticket yet: a full handshake, which asks */
	assert_int_equal(tickets_sent(&lb), 1);
	/* The others resume from it. Its lifetime is two hours: a fresh
	 * ticket, so they ask for no other. */
	for (int i = 0; i < 3; i++)
		assert_true(one(cl));
	assert_int_equal(resumed_on_server(&lb), 3);
	assert_int_equal(tickets_sent(&lb), 1);
	qpg_client_destroy(cl);
	/* A client that does not resume: full handshakes only, and it is
	 * sent no ticket. */
	cl = client(&lb, false);
	assert_false(one(cl));
	assert_false(one(cl));
	assert_int_equal(resumed_on_server(&lb), 3);
	assert_int_equal(tickets_sent(&lb), 1);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

/* A reload may change what is trusted (the client CA, or the server's own
 * certificate): no session verified before it resumes after it. */
static void a_reload_forgets_every_ticket(void **state)
{
	struct qpg_loopback lb;
	serve(&lb, 3600);
	struct qpg_client *cl = client(&lb, true);
	assert_false(one(cl));
	assert_true(one(cl));
	char err[256];
	assert_int_equal(qpg_server_reload_tls(lb.srv, err, sizeof(err)), 0);
	assert_false(one(cl)); /* the ticket from before the reload is refused */
	assert_true(one(cl));
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

static void a_ticket_lasts_two_periods_at_most(void **state)
{
	struct qpg_loopback lb;
	serve(&lb, 1);
	struct qpg_client *cl = client(&lb, true);
	assert_false(one(cl));
	assert_true(one(cl));
	usleep(2200 * 1000);
	assert_false(one(cl));
	assert_true(one(cl));
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

static void a_ticket_is_renewed_a_quarter_through_its_life(void **state)
{
	struct qpg_loopback lb;
	serve(&lb, 2); /* a ticket's lifetime hint: two periods, 4 s */
	struct qpg_client *cl = client(&lb, true);
	assert_false(one(cl));
	assert_int_equal(tickets_sent(&lb), 1);
	usleep(1200 * 1000);  /* a second at least, whole seconds apart */
	assert_true(one(cl)); /* resumed, and asked for a new one */
	assert_int_equal(tickets_sent(&lb), 2);
	assert_true(one(cl)); /* and the next resumes from the newest */
	assert_int_equal(resumed_on_server(&lb), 2);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

static void a_server_without_tickets_never_resumes(void **state)
{
	struct qpg_loopback lb;
	serve(&lb, 0);
	struct qpg_client *cl = client(&lb, true);
	assert_false(one(cl));
	assert_false(one(cl));
	assert_int_equal(resumed_on_server(&lb), 0);
	assert_int_equal(tickets_sent(&lb), 0); /* asked for each time, none to send */
	qpg_client_destroy(cl);
	qpg_loopback_fini(&lb);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(resumes_from_the_newest_ticket),
	      cmocka_unit_test(a_reload_forgets_every_ticket),
	      cmocka_unit_test(a_ticket_lasts_two_periods_at_most),
	      cmocka_unit_test(a_ticket_is_renewed_a_quarter_through_its_life),
	      cmocka_unit_test(a_server_without_tickets_never_resumes))

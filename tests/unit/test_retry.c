/* SPDX-License-Identifier: BSD-2-Clause */
/* Connects tried again (qpg_client_opts.connect_attempts): a failure that
 * another try may cure is tried again behind the same handle, up to the
 * attempts, and reported once; one that cannot is reported at once. Real
 * connections over the tcp transport on loopback:
 *
 * - refused, every try: reported once, after exactly the attempts;
 * - refused while nobody listens, then a server starts on that port: the
 *   same handle comes up, and says how many attempts it took;
 * - a host name the certificate does not carry: one attempt only;
 * - an address at its --max-qps-per-peer (its own QPs fill it): one
 *   attempt, the server's reason, and the first connection unharmed;
 * - closed by the caller between two attempts: reported once, later,
 *   never under the caller, with no error;
 * - the classes: which ones are transient. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

#include "client_int.h"
#include "client_testing.h"
#include "loopback.h"
#include "qpgate/wire.h"

struct conn {
	struct qpg_client_conn *c;
	int up, closed;
	unsigned attempts; /* qpg_conn_info.attempts when it came up or closed */
	enum qpg_err_class err;
	bool in_close_call;
	int closed_inside_close_call;
	char why[256];
};

static void on_up(struct qpg_client_conn *c, void *user)
{
	struct conn *k = user;
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	k->attempts = ci.attempts;
	k->up++;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct conn *k = user;
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	k->attempts = ci.attempts;
	k->closed_inside_close_call += k->in_close_call;
	k->closed++;
	k->err = err;
	snprintf(k->why, sizeof(k->why), "%s", why);
}

static const struct qpg_client_cbs cbs = {.established = on_up, .closed = on_closed};

static struct qpg_client *client_of(const struct qpg_loopback *srv, uint16_t port,
				    const char *servername, unsigned attempts)
{
	struct qpg_client_opts o;
	qpg_loopback_client_opts(srv, &o); /* its CA */
	o.port = port;
	if (servername)
		o.servername = servername;
	o.connect_attempts = attempts;
	struct qpg_client *cl;
	char err[256];
	assert_int_equal(qpg_client_create(&cl, &o, &cbs, err, sizeof(err)), 0);
	return cl;
}

/* A loopback port nobody listens on (bound, then let go). */
static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static unsigned attempts_of(struct qpg_client_conn *c)
{
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	return ci.attempts;
}

static void refused_is_tried_up_to_the_attempts(void **state)
{
	struct qpg_client *cl = client_of(&qpg_lb, free_port(), NULL, 3);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	assert_int_equal(k.up, 0);
	assert_int_equal(k.attempts, 3);
	assert_int_equal(k.err, QPG_ERR_REFUSED);
	assert_non_null(strstr(k.why, "connect:"));
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	qpg_client_destroy(cl);
}

static void server_that_starts_late_is_reached(void **state)
{
	struct qpg_loopback late;
	assert_int_equal(qpg_loopback_init(&late), 0);
	late.o.port = free_port();
	struct qpg_client *cl = client_of(&late, late.o.port, NULL, 10);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	/* Refused once, so it waits for its second try (or has made it). */
	RUN_UNTIL(cl, attempts_of(k.c) >= 2);
	assert_true(attempts_of(k.c) >= 2);
	assert_int_equal(k.closed, 0);
	assert_int_equal(qpg_loopback_start(&late), 0);
	RUN_UNTIL(cl, k.up || k.closed);
	assert_int_equal(k.up, 1);
	assert_int_equal(k.closed, 0);
	assert_true(k.attempts >= 2);
	qpg_client_close(k.c);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(k.closed, 1);
	assert_int_equal(k.err, QPG_ERR_NONE);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&late);
}

static void wrong_host_name_is_not_tried_again(void **state)
{
	struct qpg_client *cl = client_of(&qpg_lb, qpg_lb.port, "not-this-server.example", 5);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	assert_int_equal(k.attempts, 1);
	assert_int_equal(k.err, QPG_ERR_HOSTNAME);
	qpg_client_destroy(cl);
}

/* A server that lets one address hold 1 QP: the client's second
 * connection is refused for the limit its first one fills, once, however
 * many attempts it may make (each would cost the server a handshake). */
static void full_address_is_not_tried_again(void **state)
{
	struct qpg_loopback one;
	assert_int_equal(qpg_loopback_init(&one), 0);
	one.o.max_qps_per_peer = 1;
	assert_int_equal(qpg_loopback_start(&one), 0);
	struct qpg_client *cl = client_of(&one, one.port, NULL, 5);
	struct conn a = {0}, b = {0};
	assert_int_equal(qpg_client_connect(cl, &a, &a.c), 0);
	RUN_UNTIL(cl, a.up || a.closed);
	assert_int_equal(a.up, 1);
	assert_int_equal(qpg_client_connect(cl, &b, &b.c), 0);
	RUN_UNTIL(cl, b.closed);
	assert_int_equal(b.closed, 1);
	assert_int_equal(b.up, 0);
	assert_int_equal(b.attempts, 1);
	assert_int_equal(b.err, QPG_ERR_REJECTED);
	assert_non_null(strstr(b.why, "address limit"));
	assert_non_null(strstr(b.why, "--max-qps-per-peer"));
	assert_int_equal(a.closed, 0); /* the first is untouched */
	qpg_client_close(a.c);
	RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	qpg_client_destroy(cl);
	qpg_loopback_fini(&one);
}

static void close_between_attempts_is_reported_once(void **state)
{
	struct qpg_client *cl = client_of(&qpg_lb, free_port(), NULL, 5);
	struct conn k = {0};
	assert_int_equal(qpg_client_connect(cl, &k, &k.c), 0);
	RUN_UNTIL(cl, qpg__client_test_conn(k.c) == NULL); /* waiting for its next try */
	assert_null(qpg__client_test_conn(k.c));
	assert_int_equal(qpg_client_conn_count(cl), 1);
	k.in_close_call = true;
	qpg_client_close(k.c);
	k.in_close_call = false;
	assert_int_equal(k.closed, 0); /* never under the caller */
	RUN_UNTIL(cl, k.closed);
	assert_int_equal(k.closed, 1);
	assert_int_equal(k.closed_inside_close_call, 0);
	assert_int_equal(k.err, QPG_ERR_NONE);
	assert_int_equal(qpg_client_conn_count(cl), 0);
	qpg_client_destroy(cl);
}

static void transient_classes(void **state)
{
	(void)state;
	assert_true(qpg__client_transient(QPG_ERR_REFUSED, 0));
	assert_true(qpg__client_transient(QPG_ERR_TIMEOUT, 0));
	assert_true(qpg__client_transient(QPG_ERR_PEER_CLOSED, 0));
	assert_true(qpg__client_transient(QPG_ERR_REJECTED, QPG_REJECT_RESOURCES));
	assert_true(qpg__client_transient(QPG_ERR_REJECTED, QPG_REJECT_SHUTTING_DOWN));
	assert_false(qpg__client_transient(QPG_ERR_REJECTED, QPG_REJECT_ADDRESS_LIMIT));
	assert_false(qpg__client_transient(QPG_ERR_REJECTED, QPG_REJECT_AUTH_REQUIRED));
	assert_false(qpg__client_transient(QPG_ERR_REJECTED, QPG_REJECT_SERVICE));
	assert_false(qpg__client_transient(QPG_ERR_SERVER_FULL, QPG_REJECT_SERVER_FULL));
	assert_false(qpg__client_transient(QPG_ERR_VERSION, QPG_REJECT_VERSION));
	assert_false(qpg__client_transient(QPG_ERR_CERT, 0));
	assert_false(qpg__client_transient(QPG_ERR_HOSTNAME, 0));
	assert_false(qpg__client_transient(QPG_ERR_TLS, 0));
	assert_false(qpg__client_transient(QPG_ERR_AUTH, 0));
	assert_false(qpg__client_transient(QPG_ERR_NONE, 0));
}

QPG_UNIT_MAIN(qpg_loopback_group_start, qpg_loopback_group_stop, cmocka_unit_test(transient_classes),
	      cmocka_unit_test(refused_is_tried_up_to_the_attempts),
	      cmocka_unit_test(server_that_starts_late_is_reached),
	      cmocka_unit_test(wrong_host_name_is_not_tried_again),
	      cmocka_unit_test(full_address_is_not_tried_again),
	      cmocka_unit_test(close_between_attempts_is_reported_once))

/* SPDX-License-Identifier: BSD-2-Clause */
#include "loopback.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *serve(void *arg)
{
	qpg_server_run(arg);
	return NULL;
}

int qpg_loopback_init(struct qpg_loopback *lb)
{
	memset(lb, 0, sizeof(*lb));
	signal(SIGPIPE, SIG_IGN);
	snprintf(lb->dir, sizeof(lb->dir), "/tmp/qpg-unit.XXXXXX");
	if (!mkdtemp(lb->dir))
		return -1;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s/scripts/make-certs %s localhost >/dev/null 2>&1",
		 QPG_SOURCE_DIR, lb->dir);
	if (system(cmd) != 0)
		return -1;
	static char cert[96], key[96];
	snprintf(cert, sizeof(cert), "%s/server.crt", lb->dir);
	snprintf(key, sizeof(key), "%s/server.key", lb->dir);
	qpg_server_opts_default(&lb->o);
	lb->o.transport = QPG_KIND_TCP;
	lb->o.port = 0;
	lb->o.threads = 1;
	lb->o.cert = cert;
	lb->o.key = key;
	return 0;
}

int qpg_loopback_start(struct qpg_loopback *lb)
{
	char err[256];
	if (qpg_server_create(&lb->srv, &lb->o, err, sizeof(err))) {
		fprintf(stderr, "server: %s\n", err);
		return -1;
	}
	lb->port = qpg_server_port(lb->srv);
	return pthread_create(&lb->thread, NULL, serve, lb->srv) == 0 ? 0 : -1;
}

int qpg_loopback_stop(struct qpg_loopback *lb)
{
	if (!lb->srv)
		return 0;
	qpg_server_stop(lb->srv);
	pthread_join(lb->thread, NULL);
	qpg_server_destroy(lb->srv);
	lb->srv = NULL;
	return 0;
}

void qpg_loopback_fini(struct qpg_loopback *lb)
{
	qpg_loopback_stop(lb);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", lb->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", lb->dir);
}

void qpg_loopback_client_opts(const struct qpg_loopback *lb, struct qpg_client_opts *o)
{
	qpg_client_opts_default(o);
	o->transport = QPG_KIND_TCP;
	o->host = "127.0.0.1";
	o->port = lb->port;
	o->servername = "localhost";
	static char ca[96];
	snprintf(ca, sizeof(ca), "%s/ca.crt", lb->dir);
	o->ca = ca;
	o->handshake_timeout_ms = 5000;
}

static void on_up(struct qpg_client_conn *c, void *user)
{
	((struct qpg_loopback_conn *)user)->up++;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	((struct qpg_loopback_conn *)user)->replies++;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct qpg_loopback_conn *k = user;
	k->closed++;
	snprintf(k->why, sizeof(k->why), "%s", why ? why : "");
}

const struct qpg_client_cbs qpg_loopback_cbs = {
    .established = on_up, .reply = on_reply, .closed = on_closed};

struct qpg_client *qpg_loopback_client(const struct qpg_loopback *lb, const char *cert,
				       const char *key)
{
	struct qpg_client_opts o;
	qpg_loopback_client_opts(lb, &o);
	o.cert = cert;
	o.key = key;
	o.connect_attempts = 1;
	struct qpg_client *cl;
	char err[256];
	if (qpg_client_create(&cl, &o, &qpg_loopback_cbs, err, sizeof(err))) {
		fprintf(stderr, "client: %s\n", err);
		return NULL;
	}
	return cl;
}

int qpg_loopback_echo_once(struct qpg_client *cl, char *why, size_t why_len)
{
	struct qpg_loopback_conn k = {0};
	if (qpg_client_connect(cl, &k, &k.c))
		return -2;
	RUN_UNTIL(cl, k.up || k.closed);
	if (!k.up) {
		RUN_UNTIL(cl, qpg_client_conn_count(cl) == 0);
		snprintf(why, why_len, "%s", k.why);
		return -1;
	}
	struct qpg_conn_info ci;
	qpg_client_conn_info(k.c, &ci);
	int rc = qpg_client_send(k.c, QPG_FRAME_ECHO_REQ, "hello", 5);
	if (rc == 0)
		RUN_UNTIL(cl, k.replies || k.closed);
	qpg_client_close(k.c);
	RUN_UNTIL(cl, k.closed);
	if (rc || k.replies != 1 || k.closed != 1)
		return -2;
	return ci.resumed;
}

struct qpg_loopback qpg_lb;

int qpg_loopback_group_start(void **state)
{
	(void)state;
	return qpg_loopback_init(&qpg_lb) || qpg_loopback_start(&qpg_lb) ? -1 : 0;
}

int qpg_loopback_group_stop(void **state)
{
	(void)state;
	qpg_loopback_fini(&qpg_lb);
	return 0;
}

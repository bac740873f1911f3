/* SPDX-License-Identifier: BSD-2-Clause */
/* N messages to an echo_server, one at a time; every reply is checked.
 *   echo_client HOST PORT CA N [tcp|rdma] */
#include <qpgate/client.h>
#include <qpgate/wire.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int up, done, bad, closed;
static char last[64];

static void on_up(struct qpg_client_conn *c, void *user)
{
	up = 1;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	bad += len != strlen(last) || memcmp(p, last, len) != 0;
	done++;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	closed = 1;
	if (err != QPG_ERR_NONE)
		fprintf(stderr, "echo_client: %s\n", why);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: echo_client HOST PORT CA N [tcp|rdma]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct qpg_client_opts o;
	qpg_client_opts_default(&o);
	o.host = argv[1];
	o.port = (uint16_t)atoi(argv[2]);
	o.ca = argv[3];
	o.servername = "localhost";
	o.service = 200; /* echo_server's own service */
	o.transport = argc > 5 && !strcmp(argv[5], "rdma") ? QPG_KIND_RDMA : QPG_KIND_TCP;
	int n = atoi(argv[4]);
	const struct qpg_client_cbs cbs = {.established = on_up, .reply = on_reply, .closed = on_closed};
	struct qpg_client *cl;
	struct qpg_client_conn *c;
	char err[256];
	if (qpg_client_create(&cl, &o, &cbs, err, sizeof(err)) || qpg_client_connect(cl, NULL, &c)) {
		fprintf(stderr, "echo_client: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n && !closed; i++) {
		while (!up && !closed)
			qpg_client_run(cl, 100);
		snprintf(last, sizeof(last), "message %d", i);
		if (closed || qpg_client_send(c, QPG_FRAME_ECHO_REQ, last, (uint32_t)strlen(last)))
			break;
		while (done == i && !closed)
			qpg_client_run(cl, 100);
	}
	printf("echo_client: %d of %d echoes, %d wrong\n", done, n, bad);
	qpg_client_close(c);
	while (qpg_client_conn_count(cl))
		qpg_client_run(cl, 100);
	qpg_client_destroy(cl);
	return done == n && bad == 0 ? 0 : 1;
}

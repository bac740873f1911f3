/* SPDX-License-Identifier: BSD-2-Clause */
/* A server that runs its own service through qpgate/service.h: every
 * message comes back, in the registered buffer it arrived in.
 *   echo_server PORT CERT KEY [tcp|rdma] */
#include <qpgate/server.h>
#include <qpgate/service.h>
#include <qpgate/wire.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MY_SERVICE 200 /* private ids are 128-255 */

static struct qpg_server *srv;

static void on_message(struct qpg_conn *c, uint8_t type, uint16_t flags, struct qpg_buf *b,
		       uint32_t len)
{
	/* The client keeps within its credits, so the send queue has room. */
	if (qpg_conn_send(c, b, QPG_FRAME_ECHO_REPLY, 0, len) != 0)
		qpg_conn_close(c, QPG_ERR_PROTOCOL, "no room to answer");
}

static const struct qpg_service my_echo = {
    .id = MY_SERVICE, .name = "example-echo", .on_message = on_message};

static void on_signal(int sig)
{
	qpg_server_stop(srv);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: echo_server PORT CERT KEY [tcp|rdma]\n");
		return 2;
	}
	struct qpg_server_opts o;
	qpg_server_opts_default(&o);
	o.port = (uint16_t)atoi(argv[1]);
	o.cert = argv[2];
	o.key = argv[3];
	o.transport = argc > 4 && !strcmp(argv[4], "rdma") ? QPG_KIND_RDMA : QPG_KIND_TCP;
	o.service = &my_echo;
	char err[256];
	int rc = qpg_server_create(&srv, &o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "echo_server: %s (%s)\n", err, qpg_strerror(rc));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("echo_server: listening on port %u\n", qpg_server_port(srv));
	fflush(stdout);
	rc = qpg_server_run(srv);
	qpg_server_destroy(srv);
	return rc ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The smallest qpgate program: one secure echo.  hello HOST PORT CA [tcp] */
#include <qpgate/client_sync.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct qpg_client_opts o;
	qpg_client_opts_default(&o);
	o.host = argv[1], o.port = (uint16_t)atoi(argv[2]), o.ca = argv[3], o.servername = "localhost";
	o.transport = argc > 4 && !strcmp(argv[4], "tcp") ? QPG_KIND_TCP : QPG_KIND_RDMA;
	struct qpg_sync *s;
	char err[256], reply[64];
	uint32_t n;
	if (qpg_sync_open(&s, &o, err, sizeof(err)))
		return fprintf(stderr, "hello: %s\n", err), 1;
	int rc = qpg_sync_request(s, QPG_FRAME_ECHO_REQ, "hello, qpgate", 13, reply, sizeof(reply), &n, 5000);
	printf("%s: %.*s\n", rc ? qpg_sync_error(s) : "echoed", rc ? 0 : (int)n, reply);
	qpg_sync_close(s);
	return rc != 0;
}

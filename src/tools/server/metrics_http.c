/* SPDX-License-Identifier: BSD-2-Clause */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qpgate/server.h"

struct metrics_http {
	struct MHD_Daemon *d;
	struct qpg_server *srv;
	uint16_t port;
	void (*extra)(void *user, FILE *f); /* more metrics after the server's */
	void *extra_user;
};

void metrics_http_extra(struct metrics_http *m, void (*fn)(void *user, FILE *f), void *user)
{
	if (!m)
		return;
	m->extra_user = user;
	m->extra = fn;
}

/* The server's text, then the extra metrics, in one malloc'd buffer. */
static int scrape(struct metrics_http *m, char **out, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	if (qpg_server_prometheus(m->srv, &text, &n) < 0)
		return -1;
	if (!m->extra) {
		*out = text;
		*len = n;
		return 0;
	}
	char *all = NULL;
	size_t alen = 0;
	FILE *f = open_memstream(&all, &alen);
	if (!f) {
		free(text);
		return -1;
	}
	fwrite(text, 1, n, f);
	free(text);
	m->extra(m->extra_user, f);
	if (fclose(f)) {
		free(all);
		return -1;
	}
	*out = all;
	*len = alen;
	return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **req)
{
	struct metrics_http *m = cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned status = MHD_HTTP_OK;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		static const char msg[] = "only GET and HEAD\n";
		resp = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
						       MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics") != 0) {
		static const char msg[] = "see /metrics\n";
		resp = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
						       MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_NOT_FOUND;
	} else {
		char *text = NULL;
		size_t len = 0;
		if (scrape(m, &text, &len) < 0)
			return MHD_NO;
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	}
	if (!resp)
		return MHD_NO;
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct metrics_http *metrics_http_start(struct qpg_server *s, const char *addr, char *err,
					size_t err_len)
{
	char host[128];
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
		snprintf(err, err_len, "--metrics wants HOST:PORT, not '%s'", addr);
		return NULL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end || errno || port > 65535) {
		snprintf(err, err_len, "--metrics port must be 0 to 65535 (0: any), not '%s'",
			 colon + 1);
		return NULL;
	}
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
		snprintf(err, err_len, "--metrics host must be an IPv4 address, not '%s'", host);
		return NULL;
	}
	struct metrics_http *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, err_len, "out of memory for the metrics server");
		return NULL;
	}
	m->srv = s;
	/* epoll, not select: a server holding thousands of connections gives
	 * the metrics socket an fd past FD_SETSIZE. */
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0,
				NULL, NULL,
				answer, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
				MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT,
				10u, MHD_OPTION_END);
	if (!m->d) {
		snprintf(err, err_len, "cannot serve metrics on %s", addr);
		free(m);
		return NULL;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : 0;
	return m;
}

uint16_t metrics_http_port(const struct metrics_http *m)
{
	return m->port;
}

void metrics_http_stop(struct metrics_http *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}

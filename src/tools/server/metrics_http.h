/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server --metrics: Prometheus scrape endpoint (libmicrohttpd). */
#ifndef QPG_METRICS_HTTP_H
#define QPG_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct qpg_server;
struct metrics_http;

/* ADDR is HOST:PORT (PORT 0: any). Returns NULL with a reason in ERR. */
struct metrics_http *metrics_http_start(struct qpg_server *s, const char *addr, char *err,
					size_t err_len);
uint16_t metrics_http_port(const struct metrics_http *m);
void metrics_http_stop(struct metrics_http *m);
/* FN appends more metrics (Prometheus text) after the server's at each
 * scrape, from the scrape's thread. */
void metrics_http_extra(struct metrics_http *m, void (*fn)(void *user, FILE *f), void *user);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The control channel as a byte stream: what is queued on it (the
 * bootstrap, and over the tcp transport every frame), flushed through TLS
 * as the socket takes it, and whether it is read. Below the bootstrap and
 * the tcp transport, above tls.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "common.h"
#include "core.h"
#include "stream.h"
#include "tls.h"

void qpg__stream_update_events(struct qpg__conn *c)
{
	uint32_t ev = (c->read_paused ? 0 : EPOLLIN) |
		      (c->want_write || c->state == QPG_CONN_CONNECTING ? EPOLLOUT : 0);
	qpg__loop_mod(&c->ep->loop, &c->io, ev);
}

void qpg__conn_pause_read(struct qpg__conn *c, bool pause)
{
	if (c->read_paused == pause || c->io.fd < 0)
		return;
	c->read_paused = pause;
	if (pause)
		qpg__stat_add(&c->ep->stats.reads_paused, 1);
	qpg__stream_update_events(c);
}

int qpg__stream_flush(struct qpg__conn *c)
{
	while (c->out_off < c->out_len) {
		size_t n = c->out_retry ? c->out_retry : c->out_len - c->out_off, done = 0;
		enum qpg__tls_io r =
		    qpg__tls_write(c->ssl, c->out + c->out_off, n, &done, c->why, sizeof(c->why));
		if (r == QPG_TLS_DONE) {
			c->out_off += done;
			c->out_flushed_total += done;
			c->out_retry = 0;
			continue;
		}
		if (r == QPG_TLS_WANT_WRITE || r == QPG_TLS_WANT_READ) {
			/* OpenSSL wants the same bytes again on retry. */
			c->out_retry = n;
			if (!c->want_write) {
				c->want_write = true;
				qpg__stream_update_events(c);
			}
			if (c->t->on_flushed && c->state == QPG_CONN_ESTABLISHED)
				c->t->on_flushed(c);
			return 0;
		}
		qpg__conn_close(c, QPG_ERR_PEER_CLOSED, "write failed: %s%s", c->why,
				!c->is_server && c->state == QPG_CONN_BOOTSTRAP ? BOOT_CLOSED_HINT
										: "");
		return -EPIPE;
	}
	c->out_off = c->out_len = 0;
	if (c->out_cap > 65536) { /* a burst's buffer is not kept by an idle connection */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	if (c->want_write) {
		c->want_write = false;
		qpg__stream_update_events(c);
	}
	if (c->state == QPG_CONN_REJECTING)
		qpg__conn_close(c, c->err, "%s", c->why);
	else if (c->t->on_flushed && c->state == QPG_CONN_ESTABLISHED)
		c->t->on_flushed(c);
	qpg__stream_release_tls(c);
	return 0;
}

void qpg__stream_release_tls(struct qpg__conn *c)
{
	if (!c->ssl || c->t->data_on_tls || c->state != QPG_CONN_ESTABLISHED ||
	    c->out_off < c->out_len || c->want_write)
		return;
	qpg__tls_release(c->ssl);
	c->ssl = NULL;
	free(c->out);
	c->out = NULL;
	c->out_cap = c->out_len = c->out_off = 0;
}

int qpg__conn_write(struct qpg__conn *c, const void *data, size_t len)
{
	if (c->state >= QPG_CONN_CLOSING || !c->ssl)
		return -ENOTCONN;
	if (c->out_len + len > c->out_cap) {
		/* Compact first: bytes already sent are dead weight. */
		if (c->out_off && !c->out_retry) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		if (c->out_len + len > c->out_cap) {
			size_t cap = QPG_MAX(c->out_cap * 2, c->out_len + len);
			uint8_t *n = realloc(c->out, cap);
			if (!n)
				return -ENOMEM;
			c->out = n;
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	c->out_queued_total += len;
	if (c->want_write)
		return 0; /* EPOLLOUT will flush */
	return qpg__stream_flush(c);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The control channel's byte stream (stream.c). */
#ifndef QPG_STREAM_H
#define QPG_STREAM_H

#include <stdbool.h>
#include <stddef.h>

struct qpg__conn;

/* A server closes a handshake that outlives its deadline; when that
 * happens after TLS but before our HELLO was read, this is all we see. */
#define BOOT_CLOSED_HINT                                                                           \
	" (the server closed it before answering: past its handshake deadline, it was busy; "      \
	"retry)"

/* Queue bytes on the control channel and try to flush. 0, -ENOTCONN
 * (closing), -ENOMEM, or -EPIPE (the write failed and C is closing). */
int qpg__conn_write(struct qpg__conn *c, const void *data, size_t len);
/* Write what is queued while the socket takes it. */
int qpg__stream_flush(struct qpg__conn *c);
/* Over a transport whose data path does not ride on TLS: once C is
 * established and its bootstrap flushed, free its TLS session and stream
 * buffer (about 14 KB a connection); the control socket stays, for the close. */
void qpg__stream_release_tls(struct qpg__conn *c);
/* Stop (or resume) reading the control socket: the tcp transport's
 * backpressure while its output is full. */
void qpg__conn_pause_read(struct qpg__conn *c, bool pause);
/* Ask epoll for what C waits on now (read unless paused, write while
 * output is pending or the TCP connect is under way). */
void qpg__stream_update_events(struct qpg__conn *c);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/client_sync.h: one connection on its own event loop, driven until
 * what the caller waits for has happened or the time is up. */
#include "qpgate/client_sync.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

struct qpg_sync {
	struct qpg_client *cl;
	struct qpg_client_conn *c;
	bool up, closed, got;
	uint8_t *reply;
	uint32_t cap, len;
	char why[256];
};

static void on_up(struct qpg_client_conn *c, void *user)
{
	((struct qpg_sync *)user)->up = true;
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct qpg_sync *s = user;
	if (s->got || !s->reply)
		return; /* not asked for: a reply this caller no longer waits for */
	s->len = len;
	memcpy(s->reply, p, len < s->cap ? len : s->cap);
	s->got = true;
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct qpg_sync *s = user;
	s->closed = true;
	s->c = NULL;
	snprintf(s->why, sizeof(s->why), "%s", err == QPG_ERR_NONE ? "connection closed" : why);
}

static const struct qpg_client_cbs cbs = {
    .established = on_up, .reply = on_reply, .closed = on_closed};

/* Run the loop until *FLAG, the connection closes, or TIMEOUT_MS pass. */
static int wait_for(struct qpg_sync *s, const bool *flag, int timeout_ms)
{
	uint64_t end = (qpg__now_ns() / 1000000) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	while (!*flag && !s->closed) {
		uint64_t now = (qpg__now_ns() / 1000000);
		if (now >= end) {
			snprintf(s->why, sizeof(s->why), "no answer within %d ms", timeout_ms);
			return -ETIMEDOUT;
		}
		int rc = qpg_client_run(s->cl, (int)(end - now < 100 ? end - now : 100));
		if (rc < 0) {
			snprintf(s->why, sizeof(s->why), "event loop: %s", strerror(-rc));
			return rc;
		}
	}
	return *flag ? 0 : -ENOTCONN;
}

int qpg_sync_open(struct qpg_sync **out, const struct qpg_client_opts *o, char *err,
		  size_t err_len)
{
	struct qpg_sync *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	int rc = qpg_client_create(&s->cl, o, &cbs, err, err_len);
	if (rc)
		goto fail_free;
	rc = qpg_client_connect(s->cl, s, &s->c);
	if (rc) {
		snprintf(err, err_len, "cannot connect: %s", strerror(-rc));
		goto fail_client;
	}
	/* Every attempt within the connect deadline (qpgate/client.h). */
	unsigned ms = o->handshake_timeout_ms;
	if (o->connect_attempts > 1 && o->connect_deadline_ms > ms)
		ms = o->connect_deadline_ms + o->handshake_timeout_ms;
	rc = wait_for(s, &s->up, (int)ms);
	if (rc) {
		snprintf(err, err_len, "%s", s->why);
		goto fail_client;
	}
	*out = s;
	return 0;

fail_client:
	qpg_sync_close(s);
	return rc;
fail_free:
	free(s);
	return rc;
}

int qpg_sync_request(struct qpg_sync *s, uint8_t type, const void *msg, uint32_t len,
		     void *reply, uint32_t cap, uint32_t *reply_len, int timeout_ms)
{
	if (!s->c)
		return -ENOTCONN;
	s->got = false;
	s->reply = reply;
	s->cap = cap;
	int rc = qpg_client_send(s->c, type, msg, len);
	if (rc) {
		snprintf(s->why, sizeof(s->why), "cannot send: %s", strerror(-rc));
		s->reply = NULL;
		return rc;
	}
	rc = wait_for(s, &s->got, timeout_ms);
	s->reply = NULL;
	if (rc)
		return rc;
	*reply_len = s->len;
	return s->len > cap ? -EMSGSIZE : 0;
}

const char *qpg_sync_error(const struct qpg_sync *s)
{
	return s->why;
}

void qpg_sync_close(struct qpg_sync *s)
{
	if (!s)
		return;
	if (s->c)
		qpg_client_close(s->c);
	/* Let the close finish (bounded: a peer that does not answer is cut
	 * off by the client's own deadlines). */
	for (int i = 0; i < 100 && qpg_client_conn_count(s->cl); i++)
		qpg_client_run(s->cl, 50);
	qpg_client_destroy(s->cl);
	free(s);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A watched view of the members, as etcd's clientv3 keeps one: read the
 * prefix, then watch it from the next revision; a stream that fails, or
 * is silent for 5 s, is reopened from the first revision not applied
 * (jittered backoff), so no change is missed; a compacted revision means
 * read the prefix again, and that is a gap. What etcd sends is applied in
 * watch_apply.c, one revision at a time.
 *
 * Nothing here writes to etcd: a client needs read access only. A server
 * keeps its watch known current with writes of its own under the watched
 * prefix (fresh.c), whose events come in order with every other. The
 * watch never depends on etcd's progress notifications: it asks for them
 * (they keep a quiet stream from looking dead) but takes no revision from
 * them. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pace.h"
#include "view.h"
#include "watch_int.h"

/* A stream silent this long is taken for dead. Servers write under the
 * prefix several times a second (fresh.c), so a live cluster's stream is
 * never that quiet; an idle one is reopened, which loses nothing. */
#define SILENT_S 5L

uint64_t qpg_cluster_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int read_prefix(struct qpg_cluster_watch *w, bool gap, char *err, size_t len)
{
	json_t *req = json_pack("{s:o, s:o*}", "key", qpg__etcd_b64(w->members, strlen(w->members)),
				"range_end", qpg__etcd_prefix_end(w->members));
	json_t *resp;
	int rc = qpg__etcd_call(&w->e, "/v3/kv/range", req, &resp, err, len);
	if (rc)
		return rc;
	qpg__watch_apply_read(w, resp, gap);
	json_decref(resp);
	return 0;
}

static size_t on_stream(char *data, size_t size, size_t nmemb, void *arg)
{
	struct qpg_cluster_watch *w = arg;
	size_t n = size * nmemb;
	if (w->blen + n > (8u << 20))
		return 0;
	char *p = realloc(w->buf, w->blen + n);
	if (!p)
		return 0;
	w->buf = p;
	memcpy(w->buf + w->blen, data, n);
	w->blen += n;
	size_t off = 0;
	while (off < w->blen) {
		while (off < w->blen &&
		       (w->buf[off] == '\n' || w->buf[off] == '\r' || w->buf[off] == ' '))
			off++;
		if (off == w->blen)
			break;
		json_error_t je;
		json_t *obj = json_loadb(w->buf + off, w->blen - off, JSON_DISABLE_EOF_CHECK, &je);
		if (!obj) {
			if (json_error_code(&je) == json_error_premature_end_of_input)
				break; /* the rest of it comes with the next read */
			fprintf(stderr, "qpgate: cluster: etcd watch stream: %s\n", je.text);
			return 0;
		}
		off += je.position;
		int rc = qpg__watch_on_result(w, obj);
		json_decref(obj);
		if (rc)
			return 0;
	}
	memmove(w->buf, w->buf + off, w->blen - off);
	w->blen -= off;
	return n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct qpg_cluster_watch *w = arg;
	return atomic_load(&w->stop) ? 1 : 0;
}

static void stream(struct qpg_cluster_watch *w)
{
	json_t *req = json_pack("{s:{s:o, s:o*, s:I, s:b}}", "create_request", "key",
				qpg__etcd_b64(w->root, strlen(w->root)), "range_end",
				qpg__etcd_prefix_end(w->root), "start_revision",
				(json_int_t)w->next_rev, "progress_notify", 1);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!body)
		return;
	struct curl_slist *h;
	CURL *c = qpg__etcd_prepare(&w->e, w->e.cur, "/v3/watch", body, on_stream, w, &h);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, SILENT_S);
	w->blen = 0;
	curl_easy_perform(c);
	curl_slist_free_all(h);
	free(body);
}

static void *watch_main(void *arg)
{
	struct qpg_cluster_watch *w = arg;
	unsigned backoff = 100;
	while (!atomic_load(&w->stop)) {
		char err[256];
		if (w->need_read && read_prefix(w, true, err, sizeof(err))) {
			atomic_store(&w->etcd_ok, false);
			qpg__nap(&w->stop, qpg__jitter(backoff));
			backoff = qpg__backoff_next(backoff, 2000);
			continue;
		}
		int64_t before = w->next_rev;
		/* A stream carries the token it was opened with: a fresh one each
		 * time (tokens expire unused). */
		if (w->e.user && qpg__etcd_auth(&w->e, err, sizeof(err))) {
			atomic_store(&w->etcd_ok, false);
			qpg__nap(&w->stop, qpg__jitter(backoff));
			backoff = qpg__backoff_next(backoff, 2000);
			continue;
		}
		stream(w);
		if (atomic_load(&w->stop))
			break;
		atomic_store(&w->etcd_ok, false);
		atomic_fetch_add(&w->reopens, 1);
		if (w->next_rev != before)
			backoff = 100; /* it worked for a while */
		else if (w->e.n > 1)
			w->e.cur = (w->e.cur + 1) % w->e.n; /* try the next endpoint */
		if (!w->said_down) {
			w->said_down = true;
			fprintf(
			    stderr,
			    "qpgate: cluster: etcd watch stream lost; keeping the view complete "
			    "at revision %lld, reopening from %lld with backoff\n",
			    (long long)(w->next_rev - 1), (long long)w->next_rev);
		}
		qpg__nap(&w->stop, qpg__jitter(backoff));
		backoff = qpg__backoff_next(backoff, 2000);
	}
	return NULL;
}

int qpg_cluster_watch_start(struct qpg_cluster_watch **out, const struct qpg_cluster_opts *o,
			    qpg_cluster_view_cb cb, void *user, char *err, size_t err_len)
{
	if (!qpg_cluster_name_ok(o->name)) {
		snprintf(err, err_len, "the cluster name is not 1 to %d of A-Z a-z 0-9 . _ -",
			 QPG_CLUSTER_NAME_MAX);
		return -EINVAL;
	}
	struct qpg_cluster_watch *w = qpg__watch_new(o->name, cb, user);
	if (!w)
		return -ENOMEM;
	int rc = qpg__etcd_init(&w->e, o, err, err_len);
	if (rc) {
		qpg__watch_free(w);
		return rc;
	}
	if ((rc = read_prefix(w, false, err, err_len)) != 0 ||
	    (rc = -pthread_create(&w->thread, NULL, watch_main, w)) != 0) {
		qpg__etcd_fini(&w->e);
		qpg__watch_free(w);
		return rc;
	}
	w->started = true;
	atomic_store(&w->etcd_ok, true);
	*out = w;
	return 0;
}

int qpg_cluster_watch_catch_up(struct qpg_cluster_watch *w, int64_t rev, unsigned timeout_ms)
{
	if (atomic_load(&w->complete_rev) >= rev)
		return 0;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	int rc = 0;
	while (atomic_load(&w->complete_rev) < rev && rc == 0)
		rc = pthread_cond_timedwait(&w->cv, &w->lock, &until);
	pthread_mutex_unlock(&w->lock);
	return atomic_load(&w->complete_rev) >= rev ? 0 : -ETIMEDOUT;
}

void qpg_cluster_watch_stats(struct qpg_cluster_watch *w, struct qpg_cluster_watch_stats *out)
{
	out->views = atomic_load(&w->views);
	out->reopens = atomic_load(&w->reopens);
	out->rereads = atomic_load(&w->rereads);
	out->bad_entries = atomic_load(&w->bad_entries);
	out->etcd_ok = atomic_load(&w->etcd_ok);
}

void qpg_cluster_watch_stop(struct qpg_cluster_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	if (w->started)
		pthread_join(w->thread, NULL);
	qpg__etcd_fini(&w->e);
	qpg__watch_free(w);
}

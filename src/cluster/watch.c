/* SPDX-License-Identifier: BSD-2-Clause */
/* A watched view of the members, as etcd's clientv3 keeps one: read the
 * prefix, then watch it from the next revision, with progress
 * notifications; a stream silent for 3 s is reopened from where it was
 * (jittered backoff), so no change is missed; a compacted revision means
 * read the prefix again, and that is a gap. Each change is published as a
 * new immutable view behind an atomic pointer, in etcd's order.
 *
 * Catching up: a caller that must know every change up to revision R (a
 * server asked by a client whose view is at R) writes a key of its own
 * under the watched prefix; etcd delivers events in order, so once that
 * write's event is here, so is everything before it. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"
#include "pace.h"
#include "view.h"

struct qpg_cluster_watch {
	struct qpg__etcd e;    /* the watch thread's */
	struct qpg__etcd sync; /* catch-up writes, under lock */
	char root[96];	       /* /qpgate/NAME/ : members/ and sync/ */
	char sync_key[128];
	pthread_t thread;
	atomic_bool stop;
	_Atomic(struct qpg_cluster_view *) cur;
	atomic_long readers;
	atomic_llong complete_rev;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	qpg_cluster_view_cb cb;
	void *user;
	/* The watch thread's working set. */
	struct qpg_cluster_member *work;
	unsigned nwork, cap;
	int64_t next_rev;
	bool need_read, gap, changed;
	char *buf;
	size_t blen;
	int64_t hrev;
	atomic_ullong views, reopens, rereads, bad_entries;
	atomic_bool etcd_ok;
	bool said_down; /* the log said the stream was lost; say when it is back */
	uint64_t sync_ns; /* the last catch-up write (under lock) */
};

/* At most one catch-up write per this many ns: whatever the requests, a
 * member writes to etcd at most 10 times a second for them. */
#define SYNC_EVERY_NS 100000000ull

uint64_t qpg_cluster_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const struct qpg_cluster_view *qpg_cluster_view_get(struct qpg_cluster_watch *w)
{
	/* The publisher waits for readers to be 0 before it lets go of a view
	 * it swapped out, so the view read here lives until it is ref'd. */
	atomic_fetch_add(&w->readers, 1);
	const struct qpg_cluster_view *v = qpg__view_ref(atomic_load(&w->cur));
	atomic_fetch_sub(&w->readers, 1);
	return v;
}

int64_t qpg_cluster_watch_revision(const struct qpg_cluster_watch *w)
{
	return atomic_load(&w->complete_rev);
}

static void publish(struct qpg_cluster_watch *w, int64_t rev)
{
	struct qpg_cluster_view *v = qpg__view_new(w->nwork);
	if (!v)
		return; /* the old view stays; the next change tries again */
	if (w->nwork) /* an empty prefix has no working set at all */
		memcpy(v->m, w->work, w->nwork * sizeof(w->work[0]));
	v->n = w->nwork;
	v->revision = rev;
	qpg__view_sort(v);
	struct qpg_cluster_view *old = atomic_exchange(&w->cur, v);
	while (atomic_load(&w->readers))
		sched_yield();
	atomic_fetch_add(&w->views, 1);
	if (w->cb)
		w->cb(w->user, old, v, w->gap);
	w->gap = false;
	qpg_cluster_view_put(old);
}

static void advance(struct qpg_cluster_watch *w, int64_t rev)
{
	pthread_mutex_lock(&w->lock);
	if (rev > atomic_load(&w->complete_rev))
		atomic_store(&w->complete_rev, rev);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

static void work_remove(struct qpg_cluster_watch *w, const char *id)
{
	for (unsigned i = 0; i < w->nwork; i++)
		if (strcmp(w->work[i].id, id) == 0) {
			w->work[i] = w->work[--w->nwork];
			w->changed = true;
			return;
		}
}

/* A members/ key's event: PUT with VALUE, or DELETE. */
static void apply(struct qpg_cluster_watch *w, const char *id, const json_t *kv, bool del)
{
	work_remove(w, id);
	if (del)
		return;
	char val[QPG_CLUSTER_ENTRY_MAX];
	long n = qpg__etcd_unb64(kv, "value", val, sizeof(val));
	struct qpg_cluster_member m;
	char why[128];
	if (n <= 0 || qpg_cluster_member_from_json(&m, val, (size_t)n, why, sizeof(why)) ||
	    strcmp(m.id, id) != 0) {
		atomic_fetch_add(&w->bad_entries, 1);
		fprintf(stderr, "qpgate: cluster: member entry '%s' left out: %s\n", id,
			n <= 0	 ? "not base64 or too long"
			: why[0] ? why
				 : "its id is another");
		return;
	}
	m.mod_revision = qpg__etcd_i64(kv, "mod_revision", 0);
	if (w->nwork == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 16;
		void *p = realloc(w->work, cap * sizeof(w->work[0]));
		if (!p)
			return;
		w->work = p;
		w->cap = cap;
	}
	w->work[w->nwork++] = m;
	w->changed = true;
}

/* A key under the root: members/ID is applied, sync/ only moves the
 * revision on. */
static void on_key(struct qpg_cluster_watch *w, const json_t *kv, bool del)
{
	char key[256];
	long n = qpg__etcd_unb64(kv, "key", key, sizeof(key) - 1);
	if (n <= 0)
		return;
	key[n] = 0;
	size_t pl = strlen(w->e.prefix);
	if (strncmp(key, w->e.prefix, pl) == 0)
		apply(w, key + pl, kv, del);
}

static int read_prefix(struct qpg_cluster_watch *w, char *err, size_t len)
{
	json_t *req =
	    json_pack("{s:o, s:o*}", "key", qpg__etcd_b64(w->e.prefix, strlen(w->e.prefix)),
		      "range_end", qpg__etcd_prefix_end(w->e.prefix));
	json_t *resp;
	int rc = qpg__etcd_call(&w->e, "/v3/kv/range", req, &resp, err, len);
	if (rc)
		return rc;
	w->nwork = 0;
	json_t *kvs = json_object_get(resp, "kvs"), *kv;
	size_t i;
	json_array_foreach(kvs, i, kv) on_key(w, kv, false);
	int64_t rev = qpg__etcd_i64(json_object_get(resp, "header"), "revision", 0);
	json_decref(resp);
	w->next_rev = rev + 1;
	w->need_read = false;
	publish(w, rev);
	advance(w, rev);
	return 0;
}

/* One object of the stream. -1 stops the stream (a compaction). */
static int on_result(struct qpg_cluster_watch *w, json_t *obj)
{
	json_t *r = json_object_get(obj, "result");
	if (!json_is_object(r))
		return json_object_get(obj, "error") ? -1 : 0;
	int64_t compact = qpg__etcd_i64(r, "compact_revision", 0);
	if (compact > 0 || json_is_true(json_object_get(r, "canceled"))) {
		w->need_read = true;
		w->gap = true;
		atomic_fetch_add(&w->rereads, 1);
		return -1;
	}
	int64_t rev = qpg__etcd_i64(json_object_get(r, "header"), "revision", 0);
	json_t *events = json_object_get(r, "events"), *ev;
	size_t i;
	w->changed = false;
	json_array_foreach(events, i, ev)
	{
		const char *type = json_string_value(json_object_get(ev, "type"));
		on_key(w, json_object_get(ev, "kv"), type && strcmp(type, "DELETE") == 0);
	}
	atomic_store(&w->etcd_ok, true);
	if (w->said_down) {
		w->said_down = false;
		fprintf(stderr, "qpgate: cluster: etcd watch back at revision %lld\n",
			(long long)rev);
	}
	if (w->changed)
		publish(w, rev);
	if (rev >= w->next_rev)
		w->next_rev = rev + 1;
	advance(w, rev);
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
		int rc = on_result(w, obj);
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
	/* Silent for 3 s (progress notifications come every second): gone. */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 3L);
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
		if (w->need_read && read_prefix(w, err, sizeof(err))) {
			atomic_store(&w->etcd_ok, false);
			qpg__nap(&w->stop, qpg__jitter(backoff));
			backoff = qpg__backoff_next(backoff, 2000);
			continue;
		}
		int64_t before = w->next_rev;
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
			    "qpgate: cluster: etcd watch stream lost; keeping the view of revision "
			    "%lld, reopening from %lld with backoff\n",
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
	struct qpg_cluster_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	int rc = qpg__etcd_init(&w->e, o, err, err_len);
	if (rc) {
		free(w);
		return rc;
	}
	struct qpg_cluster_opts quiet = *o;
	quiet.quiet = true;
	if ((rc = qpg__etcd_init(&w->sync, &quiet, err, err_len))) {
		qpg__etcd_fini(&w->e);
		free(w);
		return rc;
	}
	snprintf(w->root, sizeof(w->root), "/qpgate/%s/", o->name);
	uint64_t r = 0;
	RAND_bytes((unsigned char *)&r, sizeof(r));
	snprintf(w->sync_key, sizeof(w->sync_key), "/qpgate/%s/sync/%016llx", o->name,
		 (unsigned long long)r);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->cb = cb;
	w->user = user;
	atomic_init(&w->cur, qpg__view_new(0));
	if (!atomic_load(&w->cur) || (rc = read_prefix(w, err, err_len)) != 0 ||
	    (rc = -pthread_create(&w->thread, NULL, watch_main, w)) != 0) {
		if (rc == 0)
			rc = -ENOMEM;
		qpg__etcd_fini(&w->e);
		qpg__etcd_fini(&w->sync);
		qpg_cluster_view_put(atomic_load(&w->cur));
		free(w->work);
		free(w);
		return rc;
	}
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
	uint64_t now_ns = qpg_cluster_now_ns();
	/* No write due yet: the wait below still sees the stream's events. */
	if (atomic_load(&w->complete_rev) < rev && now_ns - w->sync_ns >= SYNC_EVERY_NS) {
		w->sync_ns = now_ns;
		/* A write of our own: its event comes after every earlier one. */
		json_t *req =
		    json_pack("{s:o, s:o}", "key", qpg__etcd_b64(w->sync_key, strlen(w->sync_key)),
			      "value", qpg__etcd_b64("1", 1));
		json_t *resp = NULL;
		char err[256];
		if (qpg__etcd_call(&w->sync, "/v3/kv/put", req, &resp, err, sizeof(err)) == 0) {
			int64_t now = qpg__etcd_i64(json_object_get(resp, "header"), "revision", 0);
			json_decref(resp);
			if (now > 0 && rev > now) {
				/* Newer than etcd itself: no view can be that new. */
				pthread_mutex_unlock(&w->lock);
				return -ERANGE;
			}
		}
	}
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
	pthread_join(w->thread, NULL);
	/* The sync key is ours: leave nothing behind (best effort). */
	json_t *req = json_pack("{s:o}", "key", qpg__etcd_b64(w->sync_key, strlen(w->sync_key)));
	json_t *resp = NULL;
	char err[256];
	if (qpg__etcd_call(&w->sync, "/v3/kv/deleterange", req, &resp, err, sizeof(err)) == 0)
		json_decref(resp);
	qpg__etcd_fini(&w->e);
	qpg__etcd_fini(&w->sync);
	qpg_cluster_view_put(atomic_load(&w->cur));
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cv);
	free(w->work);
	free(w->buf);
	free(w);
}

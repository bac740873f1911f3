/* SPDX-License-Identifier: BSD-2-Clause */
/* The watch inside the cluster room: its state (watch.c runs the stream,
 * watch_apply.c applies what etcd sends), and the internal calls the
 * member side and the unit tests use. */
#ifndef QPG_CLUSTER_WATCH_INT_H
#define QPG_CLUSTER_WATCH_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd.h"
#include "qpgate/cluster.h"

struct qpg_cluster_watch {
	struct qpg__etcd e; /* the watch thread's */
	char root[96];	    /* /qpgate/NAME/ : members/ and sync/ */
	char members[112];  /* /qpgate/NAME/members/ */
	pthread_t thread;
	bool started;
	atomic_bool stop;
	_Atomic(struct qpg_cluster_view *) cur;
	atomic_long readers;
	/* Every revision up to this one is applied: only ever from events
	 * applied and from a read of the prefix, never from a reply's header
	 * alone (a reopened stream's `created` reply carries etcd's revision
	 * before the events it missed). */
	atomic_llong complete_rev;
	/* A gap was found (a compacted revision): every key was dropped at
	 * once, and nothing is served until the prefix was read again. */
	atomic_bool gapped;
	pthread_mutex_t lock; /* complete_rev's waiters */
	pthread_cond_t cv;
	qpg_cluster_view_cb cb;
	void *user;
	/* The watch thread's working set. */
	struct qpg_cluster_member *work;
	unsigned nwork, cap;
	int64_t next_rev; /* the first revision not applied yet */
	bool need_read, changed;
	char *buf;
	size_t blen;
	atomic_ullong views, reopens, rereads, bad_entries, revisions;
	atomic_bool etcd_ok;
	bool said_down; /* the log said the stream was lost; say when it is back */
};

/* A watch of ROOT ("/qpgate/NAME/") with no etcd behind it: for the
 * stream's thread to fill, and for tests that feed it replies. */
struct qpg_cluster_watch *qpg__watch_new(const char *name, qpg_cluster_view_cb cb, void *user);
void qpg__watch_free(struct qpg_cluster_watch *w);
/* A read of the prefix: RESP is /v3/kv/range's answer. It replaces the
 * working set, is published (as a gap when GAP), and makes the watch
 * complete at its header's revision. */
void qpg__watch_apply_read(struct qpg_cluster_watch *w, const json_t *resp, bool gap);
/* One object of the watch stream. 0, or -1 when the stream must stop (a
 * compacted revision, or a cancel: a gap, reported at once). */
int qpg__watch_on_result(struct qpg_cluster_watch *w, const json_t *obj);
/* Whether a gap was found and the prefix is not read again yet. */
bool qpg__watch_gapped(const struct qpg_cluster_watch *w);

#endif

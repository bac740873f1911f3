/* SPDX-License-Identifier: BSD-2-Clause */
/* The writes that keep a server's view known current (fresh.h). One
 * thread of their own: a write, then a wait for the watch to reach its
 * revision, then the next period. */
#include "fresh.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "pace.h"

struct qpg__fresh {
	struct qpg__etcd e;
	struct qpg_cluster_watch *w;
	_Atomic(struct qpg_cluster_reg *) reg;
	char key[200];
	unsigned period_ms;
	atomic_ullong at_ns;
	atomic_bool stop;
	pthread_t thread;
	atomic_ullong writes, fails;
};

/* One write under LEASE: its revision, or 0. */
static int64_t write_once(struct qpg__fresh *f, int64_t lease)
{
	json_t *req = json_pack("{s:o, s:o, s:I}", "key", qpg__etcd_b64(f->key, strlen(f->key)),
				"value", qpg__etcd_b64("", 0), "lease", (json_int_t)lease);
	json_t *resp = NULL;
	char err[256];
	if (qpg__etcd_call(&f->e, "/v3/kv/put", req, &resp, err, sizeof(err)))
		return 0;
	int64_t rev = qpg__etcd_i64(json_object_get(resp, "header"), "revision", 0);
	json_decref(resp);
	return rev;
}

static void *fresh_main(void *arg)
{
	struct qpg__fresh *f = arg;
	while (!atomic_load(&f->stop)) {
		struct qpg_cluster_reg *r = atomic_load(&f->reg);
		int64_t lease = r ? qpg__cluster_reg_lease(r) : 0;
		if (lease) {
			uint64_t sent = qpg_cluster_now_ns();
			int64_t rev = write_once(f, lease);
			atomic_fetch_add(&f->writes, 1);
			/* Its event comes after every earlier change: once the
			 * watch has it, the view held all that was committed
			 * before SENT. */
			if (rev > 0 &&
			    qpg_cluster_watch_catch_up(f->w, rev, 4 * f->period_ms) == 0) {
				if (sent > atomic_load(&f->at_ns))
					atomic_store(&f->at_ns, sent);
			} else {
				atomic_fetch_add(&f->fails, 1);
			}
		}
		qpg__nap(&f->stop, f->period_ms);
	}
	return NULL;
}

int qpg__fresh_start(struct qpg__fresh **out, const struct qpg_cluster_opts *o, const char *id,
		     struct qpg_cluster_watch *w, unsigned period_ms, char *err, size_t err_len)
{
	struct qpg__fresh *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	struct qpg_cluster_opts quiet = *o;
	quiet.quiet = true;
	int rc = qpg__etcd_init(&f->e, &quiet, err, err_len);
	if (rc) {
		free(f);
		return rc;
	}
	f->w = w;
	f->period_ms = period_ms ? period_ms : 250;
	snprintf(f->key, sizeof(f->key), "/qpgate/%s/sync/%s", o->name, id);
	if ((rc = -pthread_create(&f->thread, NULL, fresh_main, f)) != 0) {
		snprintf(err, err_len, "cannot start the cluster's sync thread");
		qpg__etcd_fini(&f->e);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

void qpg__fresh_set_reg(struct qpg__fresh *f, struct qpg_cluster_reg *r)
{
	atomic_store(&f->reg, r);
}

uint64_t qpg__fresh_at(const struct qpg__fresh *f)
{
	return atomic_load(&((struct qpg__fresh *)(uintptr_t)f)->at_ns);
}

void qpg__fresh_stop(struct qpg__fresh *f)
{
	if (!f)
		return;
	atomic_store(&f->stop, true);
	pthread_join(f->thread, NULL);
	json_t *req = json_pack("{s:o}", "key", qpg__etcd_b64(f->key, strlen(f->key)));
	json_t *resp = NULL;
	char err[256];
	if (qpg__etcd_call(&f->e, "/v3/kv/deleterange", req, &resp, err, sizeof(err)) == 0)
		json_decref(resp);
	qpg__etcd_fini(&f->e);
	free(f);
}

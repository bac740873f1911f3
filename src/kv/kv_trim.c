/* SPDX-License-Identifier: BSD-2-Clause */
/* Eviction ahead of need: one thread per KV service that, when a
 * reservation leaves the store above its high watermark, evicts in SIEVE's
 * order down to the low one, a batch of keys at a time, off the loop
 * threads. A PUT then finds room already made, and evicts inline only
 * when a burst outruns this thread or a value needs a block larger than
 * any free one. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "kv_service.h"

#define TRIM_BATCH 64 /* keys per pass: the store's lock is let go between */

static void kick(void *user)
{
	struct qpg__kv_trimmer *t = user;
	pthread_mutex_lock(&t->lock);
	t->kicked = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->lock);
}

static void *run(void *arg)
{
	struct qpg_kv_service *k = arg;
	struct qpg__kv_trimmer *t = &k->trimmer;
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		if (!t->kicked) {
			pthread_cond_wait(&t->cv, &t->lock);
			continue;
		}
		t->kicked = false;
		pthread_mutex_unlock(&t->lock);
		/* Down to the low watermark, or as far as evicting helps. */
		while (qpg__kv_store_trim(&k->store, TRIM_BATCH) == TRIM_BATCH &&
		       !atomic_load(&t->stopping))
			;
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int qpg__kv_trimmer_start(struct qpg_kv_service *k, unsigned high_pct, unsigned low_pct)
{
	struct qpg__kv_trimmer *t = &k->trimmer;
	memset(t, 0, sizeof(*t));
	if (high_pct == 0 || !k->store.evict)
		return 0; /* off: a PUT evicts what it needs, or is refused */
	if (low_pct >= high_pct || high_pct > 100)
		return -EINVAL;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cv, NULL);
	k->store.wm_high = k->store.capacity / 100 * high_pct;
	k->store.wm_low = k->store.capacity / 100 * low_pct;
	k->store.on_high_user = t;
	k->store.on_high = kick;
	int rc = pthread_create(&t->tid, NULL, run, k);
	if (rc) {
		k->store.on_high = NULL;
		k->store.wm_high = k->store.wm_low = 0;
		pthread_mutex_destroy(&t->lock);
		pthread_cond_destroy(&t->cv);
		return -rc;
	}
	t->started = true;
	return 0;
}

void qpg__kv_trimmer_stop(struct qpg_kv_service *k)
{
	struct qpg__kv_trimmer *t = &k->trimmer;
	if (!t->started)
		return;
	atomic_store(&t->stopping, true);
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->tid, NULL);
	k->store.on_high = NULL;
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cv);
	t->started = false;
}

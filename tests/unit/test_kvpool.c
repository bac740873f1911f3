/* SPDX-License-Identifier: BSD-2-Clause */
/* The pooled KV client over tcp, against a KV service on loopback: workers
 * that issue their next request from their done callback (as kvbench's
 * do) get every value back as they put it, and each stays on the pool
 * thread that ran its first callback: no request of theirs wakes another
 * thread; and the pool as a KV target (qpgate/kv_target.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "unit.h"

#include "kv_service.h"
#include "loopback.h"
#include "qpgate/kv_call.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_server.h"
#include "qpgate/kv_target.h"

#define WORKERS 8
#define ROUNDS	40 /* a PUT and a GET each */
#define VALUE	600

struct worker {
	struct qpg_kv_pool *pool;
	struct qpg_kv_request req;
	int index, step;
	char key[16];
	uint8_t value[VALUE], got[VALUE];
	pthread_t last;
	bool have_last;
	int hops, bad;
	atomic_bool finished;
};

static void on_chunk(struct qpg_kv_request *op, const uint8_t *data, uint32_t len, uint32_t offset,
		     uint32_t value_len)
{
	struct worker *w = op->user;
	if (value_len != VALUE || offset > VALUE || len > VALUE - offset)
		w->bad++;
	else
		memcpy(w->got + offset, data, len);
}

static void issue(struct worker *w);

static void on_done(struct qpg_kv_request *op, int status, uint32_t len)
{
	struct worker *w = op->user;
	pthread_t me = pthread_self();
	if (w->have_last && !pthread_equal(me, w->last))
		w->hops++;
	w->last = me;
	w->have_last = true;
	if (status != QPG_KV_OK)
		w->bad++;
	else if (op->op == QPG_KV_GET && (len != VALUE || memcmp(w->got, w->value, VALUE)))
		w->bad++;
	if (status < 0 || ++w->step >= 2 * ROUNDS) {
		atomic_store(&w->finished, true);
		return;
	}
	issue(w);
}

static void issue(struct worker *w)
{
	bool get = w->step % 2 == 1;
	if (!get) /* a new value each round */
		for (int i = 0; i < VALUE; i++)
			w->value[i] = (uint8_t)(i * 7 + w->step * 13 + w->index);
	memset(w->got, 0, sizeof(w->got));
	w->req = (struct qpg_kv_request){.op = get ? QPG_KV_GET : QPG_KV_PUT,
					 .key = w->key,
					 .key_len = (uint16_t)strlen(w->key),
					 .value = w->value,
					 .value_len = VALUE,
					 .chunk = get ? on_chunk : NULL,
					 .done = on_done,
					 .user = w};
	if (qpg_kv_submit(w->pool, &w->req) != 0) {
		w->bad++;
		atomic_store(&w->finished, true);
	}
}

/* A KV service of CAPACITY bytes on LB's loopback server, and options in
 * PO for a pool of its clients. */
static void kv_loopback(struct qpg_loopback *lb, struct qpg_kv_service **kvs, size_t capacity,
			struct qpg_kv_pool_opts *po)
{
	assert_int_equal(qpg_loopback_init(lb), 0);
	struct qpg_kv_server_opts ko;
	qpg_kv_server_opts_default(&ko);
	ko.capacity = capacity;
	char err[256] = "";
	assert_int_equal(qpg_kv_service_create(kvs, &ko, err, sizeof(err)), 0);
	lb->o.service = qpg_kv_service_ops();
	lb->o.service_ctx = *kvs;
	assert_int_equal(qpg_loopback_start(lb), 0);
	qpg_kv_pool_opts_default(po);
	qpg_loopback_client_opts(lb, &po->client);
	po->client.service = QPG_SERVICE_KV;
}

static void test_workers_stay_on_their_thread(void **state)
{
	(void)state;
	struct qpg_loopback lb;
	struct qpg_kv_service *kvs;
	struct qpg_kv_pool_opts po;
	char err[256] = "";
	kv_loopback(&lb, &kvs, 16u << 20, &po);
	po.threads = 2;
	po.conns = 4;
	struct qpg_kv_pool *pool;
	int rc = qpg_kv_pool_create(&pool, &po, err, sizeof(err));
	if (rc)
		print_message("  pool: %s\n", err);
	assert_int_equal(rc, 0);

	static struct worker w[WORKERS];
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){.pool = pool, .index = i};
		snprintf(w[i].key, sizeof(w[i].key), "worker-%d", i);
		issue(&w[i]);
	}
	int done = 0;
	for (int t = 0; t < 1000 && done < WORKERS; t++) { /* 10 s at most */
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		done = 0;
		for (int i = 0; i < WORKERS; i++)
			done += atomic_load(&w[i].finished);
	}
	qpg_kv_pool_destroy(pool);
	int hops = 0, bad = 0, steps = 0;
	for (int i = 0; i < WORKERS; i++) {
		hops += w[i].hops;
		bad += w[i].bad;
		steps += w[i].step;
	}
	print_message("  %d requests, %d answered wrong, %d moved to another thread\n", steps, bad,
		      hops);
	assert_int_equal(done, WORKERS);
	assert_int_equal(steps, WORKERS * 2 * ROUNDS);
	assert_int_equal(bad, 0);
	assert_int_equal(hops, 0);
	qpg_loopback_fini(&lb);
	qpg_kv_service_destroy(kvs);
}

/* The pool as a KV target: the calls of qpgate/kv_call.h through it, then
 * its info and per-member stats, counted as the requests completed; the
 * caller's host string may be gone by then (a binding's is). */
static void test_pool_as_a_target(void **state)
{
	(void)state;
	struct qpg_loopback lb;
	struct qpg_kv_service *kvs;
	struct qpg_kv_pool_opts po;
	char err[256] = "";
	kv_loopback(&lb, &kvs, 4u << 20, &po);
	char host[32];
	snprintf(host, sizeof(host), "%s", po.client.host);
	po.client.host = host;
	po.threads = 1;
	po.conns = 2;
	struct qpg_kv_pool *pool;
	assert_int_equal(qpg_kv_pool_create(&pool, &po, err, sizeof(err)), 0);
	memset(host, 'x', sizeof(host) - 1); /* the caller's string, gone */
	struct qpg_kv_target *t = qpg_kv_pool_target(pool);

	uint8_t got[16];
	uint32_t len = 0;
	assert_int_equal(qpg_kv_call_wait(t, QPG_KV_PUT, "k", 1, "value", 5, NULL, 0, NULL, NULL),
			 QPG_KV_OK);
	assert_int_equal(
	    qpg_kv_call_wait(t, QPG_KV_GET, "k", 1, NULL, 0, got, sizeof(got), &len, NULL),
	    QPG_KV_OK);
	assert_int_equal(len, 5);
	assert_memory_equal(got, "value", 5);
	assert_int_equal(qpg_kv_call_wait(t, QPG_KV_GET, "none", 4, NULL, 0, got, sizeof(got),
					  &len, NULL),
			 QPG_KV_NOT_FOUND);
	assert_int_equal(qpg_kv_call_wait(t, QPG_KV_DEL, "k", 1, NULL, 0, NULL, 0, NULL, NULL),
			 QPG_KV_OK);
	/* A bad request is refused in the call, with no callback to come. */
	struct qpg_kv_request bad = {.op = QPG_KV_GET, .key = "", .key_len = 0};
	assert_int_equal(qpg_kv_target_submit(t, &bad), -EINVAL);

	struct qpg_kv_target_info info;
	qpg_kv_target_info(t, &info);
	assert_string_equal(info.kind, "pool");
	assert_int_equal(info.members, 1);
	assert_int_equal(info.members_up, 1);
	assert_int_equal(info.conns, 2);
	assert_int_equal(info.connected, 2);
	assert_int_equal(info.view_revision, 0);
	struct qpg_kv_target_stats st;
	assert_int_equal(qpg_kv_target_stats(t, &st), 0);
	assert_int_equal(st.n, 1);
	char id[64];
	snprintf(id, sizeof(id), "127.0.0.1:%u", (unsigned)lb.port);
	assert_string_equal(st.m[0].id, id);
	assert_true(st.m[0].up);
	assert_int_equal(st.m[0].ops, 4);    /* PUT, GET, the miss, DEL */
	assert_int_equal(st.m[0].misses, 1);
	assert_int_equal(st.m[0].errors, 0);
	qpg_kv_target_stats_free(&st);
	assert_null(st.m);
	assert_int_equal(qpg_kv_target_fd(t), -EINVAL); /* it has threads: no loop to run */
	assert_int_equal(qpg_kv_target_run(t), 0);
	qpg_kv_target_destroy(t);
	qpg_loopback_fini(&lb);
	qpg_kv_service_destroy(kvs);
}

struct done_wait_hdr {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int status;
	bool done;
};

static void exists_done(struct qpg_kv_request *op, int status, uint32_t prefix)
{
	(void)prefix;
	struct done_wait_hdr *w = op->user;
	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

/* EXISTS in batches, end to end: 256 keys of 200 bytes (more than one
 * message holds, so the batch is cut into several requests, sent at once)
 * against a store holding the first 100; then a hole at 40. Each answer is
 * the bitmap and the stored prefix. EXISTS reads nothing: no GET hit, no
 * reference, no eviction credit (the store's SIEVE bits stay clear). */
static bool bit(const uint8_t *bits, unsigned i)
{
	return bits[i / 8] >> (i % 8) & 1;
}

static void test_exists_in_batches(void **state)
{
	(void)state;
	struct qpg_loopback lb;
	struct qpg_kv_service *kvs;
	struct qpg_kv_pool_opts po;
	char err[256] = "";
	kv_loopback(&lb, &kvs, 8u << 20, &po);
	po.threads = 2;
	po.conns = 2;
	struct qpg_kv_pool *pool;
	assert_int_equal(qpg_kv_pool_create(&pool, &po, err, sizeof(err)), 0);
	struct qpg_kv_target *t = qpg_kv_pool_target(pool);
	static char names[QPG_KV_EXISTS_MAX][200];
	struct qpg_kv_key keys[QPG_KV_EXISTS_MAX];
	for (unsigned i = 0; i < QPG_KV_EXISTS_MAX; i++) {
		memset(names[i], 'p', sizeof(names[i]));
		snprintf(names[i], 16, "block/%05u", i); /* the rest stays 'p' */
		names[i][strlen(names[i])] = 'p';
		keys[i] = (struct qpg_kv_key){.key = names[i], .len = sizeof(names[i])};
	}
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(qpg_kv_call_wait(t, QPG_KV_PUT, names[i], sizeof(names[i]), "v",
						  1, NULL, 0, NULL, NULL),
				 QPG_KV_OK);
	uint64_t hits0 = atomic_load(&kvs->m.hits);
	unsigned long long reqs0 = atomic_load(&kvs->m.ops[QPG_KV_EXISTS][QPG_KV_OK]);
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t prefix = 999;
	assert_int_equal(
	    qpg_kv_call_exists_wait(t, keys, QPG_KV_EXISTS_MAX, bits, &prefix), QPG_KV_OK);
	assert_int_equal(prefix, 100);
	for (unsigned i = 0; i < QPG_KV_EXISTS_MAX; i++)
		assert_int_equal(bit(bits, i), i < 100);
	unsigned long long reqs = atomic_load(&kvs->m.ops[QPG_KV_EXISTS][QPG_KV_OK]) - reqs0;
	struct qpg_kv_target_info info;
	qpg_kv_target_info(t, &info);
	unsigned per = (info.max_msg - QPG_KV_REQ_HDR_LEN) / 201; /* keys a message holds */
	print_message("  256 keys of 200 bytes: %llu EXISTS requests (%u-byte messages)\n", reqs,
		      info.max_msg);
	assert_true(info.max_msg >= QPG_KV_MIN_MSG);
	assert_int_equal(reqs, (QPG_KV_EXISTS_MAX + per - 1) / per); /* as few as hold them */
	assert_int_equal(atomic_load(&kvs->m.exists_keys[1]), 100);
	assert_int_equal(atomic_load(&kvs->m.exists_keys[0]), 156);

	/* A hole: the prefix stops there, the keys after it are still seen. */
	assert_int_equal(qpg_kv_call_wait(t, QPG_KV_DEL, names[40], sizeof(names[40]), NULL, 0,
					  NULL, 0, NULL, NULL),
			 QPG_KV_OK);
	assert_int_equal(qpg_kv_call_exists_wait(t, keys, 120, bits, &prefix), QPG_KV_OK);
	assert_int_equal(prefix, 40);
	for (unsigned i = 0; i < 120; i++)
		assert_int_equal(bit(bits, i), i < 100 && i != 40);
	/* One key, absent: no prefix. */
	assert_int_equal(qpg_kv_call_exists_wait(t, &keys[200], 1, bits, &prefix), QPG_KV_OK);
	assert_int_equal(prefix, 0);
	assert_int_equal(bits[0], 0);
	/* Nothing read: no hit, no value referenced, no SIEVE credit. */
	assert_int_equal(atomic_load(&kvs->m.hits), hits0);
	pthread_mutex_lock(&kvs->store.lock);
	unsigned visited = 0, held = 0;
	for (struct qpg__kv_value *v = kvs->store.tenants[0]->head; v; v = v->older) {
		visited += v->visited;
		held += atomic_load(&v->refs) != 1;
	}
	pthread_mutex_unlock(&kvs->store.lock);
	assert_int_equal(visited, 0);
	assert_int_equal(held, 0);

	/* Refused in the call: no keys, too many, a key too long. */
	assert_int_equal(qpg_kv_call_exists_wait(t, keys, 0, bits, &prefix), -EINVAL);
	assert_int_equal(qpg_kv_call_exists_wait(t, keys, QPG_KV_EXISTS_MAX + 1, bits, &prefix),
			 -EINVAL);
	struct qpg_kv_key long_key = {.key = names[0], .len = QPG_KV_MAX_KEY + 1};
	assert_int_equal(qpg_kv_call_exists_wait(t, &long_key, 1, bits, &prefix), -EINVAL);
	/* A list no message holds, sent as one request: refused, not stuck. */
	static uint8_t list[QPG_KV_EXISTS_MAX * 201];
	size_t n = 0;
	for (unsigned i = 0; i < 64; i++) {
		list[n++] = 200;
		memcpy(list + n, names[i], 200);
		n += 200;
	}
	struct done_wait_hdr dw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};
	struct qpg_kv_request big = {.op = QPG_KV_EXISTS,
				     .value = list,
				     .value_len = (uint32_t)n,
				     .done = exists_done,
				     .user = &dw};
	assert_int_equal(qpg_kv_target_submit(t, &big), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10; /* bounded: a list stuck unsent would never answer */
	pthread_mutex_lock(&dw.lock);
	while (!dw.done && pthread_cond_timedwait(&dw.cv, &dw.lock, &until) == 0)
		;
	bool answered = dw.done;
	pthread_mutex_unlock(&dw.lock);
	assert_true(answered);
	assert_int_equal(dw.status, QPG_KV_VALUE_TOO_LARGE);
	qpg_kv_target_destroy(t);
	qpg_loopback_fini(&lb);
	qpg_kv_service_destroy(kvs);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_workers_stay_on_their_thread),
	      cmocka_unit_test(test_pool_as_a_target), cmocka_unit_test(test_exists_in_batches))

/* SPDX-License-Identifier: BSD-2-Clause */
/* A gate that says wait (QPG_KV_GATE_WAIT), against a KV service on
 * loopback over tcp: the request is held without blocking the loop, asked
 * again, and served once the gate lets it by, in order with the requests
 * behind it; a gate that never does is answered UNAVAILABLE at the
 * deadline. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "unit.h"

#include "loopback.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_server.h"

static atomic_int waits_left; /* the gate says wait this many more times; -1: always */
static atomic_int asked;

static int gate(void *user, const uint8_t *key, uint16_t key_len, uint64_t view_rev,
		uint64_t *server_rev)
{
	(void)user, (void)key, (void)key_len, (void)view_rev;
	*server_rev = 0;
	atomic_fetch_add(&asked, 1);
	int left = atomic_load(&waits_left);
	if (left < 0)
		return QPG_KV_GATE_WAIT;
	if (left > 0) {
		atomic_fetch_sub(&waits_left, 1);
		return QPG_KV_GATE_WAIT;
	}
	return QPG_KV_OK;
}

struct call {
	struct qpg_kv_request r;
	atomic_bool done;
	int status;
	uint8_t got[64];
	uint32_t got_len;
};

static void on_chunk(struct qpg_kv_request *op, const uint8_t *d, uint32_t len, uint32_t off,
		     uint32_t total)
{
	(void)total;
	struct call *c = op->user;
	if (off + len <= sizeof(c->got)) {
		memcpy(c->got + off, d, len);
		c->got_len = off + len;
	}
}

static void on_done(struct qpg_kv_request *op, int status, uint32_t len)
{
	(void)len;
	struct call *c = op->user;
	c->status = status;
	atomic_store(&c->done, true);
}

static void submit(struct qpg_kv_pool *p, struct call *c, uint8_t op, const char *key,
		   const char *value)
{
	memset(c, 0, sizeof(*c));
	c->r = (struct qpg_kv_request){.op = op,
				       .key = key,
				       .key_len = (uint16_t)strlen(key),
				       .value = value,
				       .value_len = value ? (uint32_t)strlen(value) : 0,
				       .chunk = op == QPG_KV_GET ? on_chunk : NULL,
				       .done = on_done,
				       .user = c};
	assert_int_equal(qpg_kv_submit(p, &c->r), 0);
}

/* Wait for C, 10 s at most. */
static bool wait_done(struct call *c)
{
	for (int t = 0; t < 1000 && !atomic_load(&c->done); t++)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	return atomic_load(&c->done);
}

struct fixture {
	struct qpg_loopback lb;
	struct qpg_kv_service *kvs;
	struct qpg_kv_pool *pool;
};

static int setup(void **state)
{
	static struct fixture f;
	struct qpg_kv_server_opts ko;
	qpg_kv_server_opts_default(&ko);
	ko.capacity = 1u << 20;
	char err[256] = "";
	if (qpg_loopback_init(&f.lb) || qpg_kv_service_create(&f.kvs, &ko, err, sizeof(err)))
		return -1;
	qpg_kv_service_set_gate(f.kvs, gate, NULL);
	f.lb.o.service = qpg_kv_service_ops();
	f.lb.o.service_ctx = f.kvs;
	if (qpg_loopback_start(&f.lb))
		return -1;
	struct qpg_kv_pool_opts po;
	qpg_kv_pool_opts_default(&po);
	qpg_loopback_client_opts(&f.lb, &po.client);
	po.client.service = QPG_SERVICE_KV;
	po.threads = 1;
	po.conns = 1;
	if (qpg_kv_pool_create(&f.pool, &po, err, sizeof(err))) {
		print_message("  pool: %s\n", err);
		return -1;
	}
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	qpg_kv_pool_destroy(f->pool);
	qpg_loopback_fini(&f->lb);
	qpg_kv_service_destroy(f->kvs);
	return 0;
}

/* The PUT waits three askings; the GET behind it on the same connection
 * waits with it and sees its value: held in order, then served. */
static void test_held_then_served_in_order(void **state)
{
	struct fixture *f = *state;
	atomic_store(&asked, 0);
	atomic_store(&waits_left, 3);
	struct call put, get;
	submit(f->pool, &put, QPG_KV_PUT, "parked-1", "the value");
	submit(f->pool, &get, QPG_KV_GET, "parked-1", NULL);
	assert_true(wait_done(&put));
	assert_true(wait_done(&get));
	assert_int_equal(put.status, QPG_KV_OK);
	assert_int_equal(get.status, QPG_KV_OK);
	assert_int_equal(get.got_len, strlen("the value"));
	assert_memory_equal(get.got, "the value", get.got_len);
	assert_true(atomic_load(&asked) >= 4 + 1); /* asked again while held, then the GET */
}

/* A gate that never lets it by: UNAVAILABLE at the deadline, and the
 * connection serves what comes next. */
static void test_deadline_unavailable(void **state)
{
	struct fixture *f = *state;
	atomic_store(&waits_left, -1);
	struct call get;
	submit(f->pool, &get, QPG_KV_GET, "parked-2", NULL);
	assert_true(wait_done(&get));
	assert_int_equal(get.status, QPG_KV_UNAVAILABLE);
	atomic_store(&waits_left, 0);
	submit(f->pool, &get, QPG_KV_GET, "parked-1", NULL);
	assert_true(wait_done(&get));
	assert_int_equal(get.status, QPG_KV_OK);
}

QPG_UNIT_MAIN(setup, teardown, cmocka_unit_test(test_held_then_served_in_order),
	      cmocka_unit_test(test_deadline_unavailable))

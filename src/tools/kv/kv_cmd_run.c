/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kv's commands run in order against a KV target, one request in
 * flight at a time: each GET's value checked (synthetic) or gathered to be
 * written whole, a line on standard error for each. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cmd.h"
#include "kv_testing.h"
#include "kvdata.h"
#include "qpgate/kv_call.h"
#include "qpgate/kv_client.h"

/* One request in flight at a time; its callbacks run on the pool thread. */
struct pending {
	struct qpg_kv_request req;
	const struct cmd *cmd;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint32_t value_len;
	int chunks;
	uint64_t fnv;
	bool mismatch;
	uint8_t *value; /* a GET's value as it arrives (real bytes, not synthetic) */
	uint32_t value_cap;
	bool too_big;
};

static void on_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		     uint32_t total)
{
	struct pending *p = r->user;
	p->chunks++;
	p->fnv = kv_fnv_step(p->fnv, data, len);
	if (p->cmd->op == CMD_GET && !p->cmd->verify) {
		if (!p->value && total > 0) {
			p->value = malloc(total);
			p->value_cap = p->value ? total : 0;
		}
		if ((uint64_t)off + len > p->value_cap)
			p->too_big = true;
		else if (len)
			memcpy(p->value + off, data, len);
	}
	for (uint32_t i = 0; p->cmd->verify && i < len; i++)
		if (data[i] != kv_value_byte(p->cmd->seed, off + i))
			p->mismatch = true;
}

static void on_done(struct qpg_kv_request *r, int status, uint32_t value_len)
{
	struct pending *p = r->user;
	pthread_mutex_lock(&p->lock);
	p->status = status;
	p->value_len = value_len;
	p->done = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

/* GETs READ straight into registered memory so far (qpg_kv_register). */
static uint64_t zero_copy_gets(const struct target *t)
{
	struct qpg_kv_target_stats s;
	uint64_t n = 0;
	if (qpg_kv_target_stats(t->kv, &s) == 0) {
		for (unsigned i = 0; i < s.n; i++)
			n += s.m[i].zero_copy;
		qpg_kv_target_stats_free(&s);
	}
	return n;
}

/* EXISTS of C's keys: "EXISTS a b c: 2 of 3 stored, prefix 2 (110)". 0 when
 * every key is stored, 1 when one is not (as a GET's miss), 3 when the
 * connection failed. */
static int run_exists(const struct target *t, const struct cmd *c)
{
	struct qpg_kv_key keys[QPG_KV_EXISTS_MAX];
	unsigned n = c->nkeys;
	for (unsigned i = 0; i < n; i++)
		keys[i] =
		    (struct qpg_kv_key){.key = c->keys[i], .len = (uint16_t)strlen(c->keys[i])};
	char names[84]; /* the keys as given, cut at 80 bytes */
	size_t at = 0;
	for (unsigned i = 0; i < n && at < 80; i++)
		at += (size_t)snprintf(names + at, 81 - at, "%s%s", i ? " " : "", c->keys[i]);
	names[at < 80 ? at : 80] = 0;
	if (at >= 80)
		strcpy(names + 77, "...");
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t prefix = 0;
	int st = qpg_kv_call_exists_wait(t->kv, keys, n, bits, &prefix);
	if (st < 0) {
		struct qpg_kv_target_info info;
		qpg_kv_target_info(t->kv, &info);
		fprintf(stderr, "EXISTS %s: connection failed: %s\n", names, info.last_error);
		return 3;
	}
	if (st != QPG_KV_OK) {
		fprintf(stderr, "EXISTS %s: %s\n", names, qpg_kv_status_name((uint8_t)st));
		return 1;
	}
	char map[QPG_KV_EXISTS_MAX + 1];
	unsigned stored = 0;
	for (unsigned i = 0; i < n; i++) {
		map[i] = (bits[i / 8] >> (i % 8) & 1) ? '1' : '0';
		stored += map[i] == '1';
	}
	map[n] = 0;
	fprintf(stderr, "EXISTS %s: %u of %u stored, prefix %u (%s)\n", names, stored, n, prefix,
		map);
	return stored == n ? 0 : 1;
}

/* Returns 0 ok, 1 an error status or mismatch, 2 a file, 3 the connection failed. */
static int run_cmd(const struct target *t, const struct cmd *c, struct pending *p, uint8_t abuse)
{
	static const char *const names[] = {"PUT", "GET", "DEL", "BAD"};
	if (c->op == CMD_EXISTS)
		return run_exists(t, c);
	uint8_t *value = NULL;
	uint32_t value_len = 0;
	if (c->op == CMD_PUT && kv_cmd_put_value(c, QPG_KV_MAX_VALUE, &value, &value_len))
		return 2;
	p->cmd = c;
	p->done = p->mismatch = p->too_big = false;
	p->value = NULL;
	p->value_cap = 0;
	p->chunks = 0;
	p->fnv = KV_FNV_INIT;
	p->req = (struct qpg_kv_request){
	    .op = c->op == CMD_PUT   ? QPG_KV_PUT
		  : c->op == CMD_DEL ? QPG_KV_DEL
				     : QPG_KV_GET,
	    .key = c->key,
	    .key_len = (uint16_t)strlen(c->key),
	    .value = value,
	    .value_len = value_len,
	    .ttl_ms = c->op == CMD_PUT ? t->ttl_ms : 0,
	    .chunk = on_chunk,
	    .done = on_done,
	    .user = p,
	};
	qpg__kv_request_hooks(&p->req, c->op == CMD_BAD, c->op == CMD_GET ? abuse : 0);
	p->req.view_rev = t->view_rev;
	/* --register: a synthetic GET lands in a buffer registered for it. */
	uint8_t *into = NULL;
	uint64_t zc0 = 0;
	int rc = 0;
	if (t->reg && c->op == CMD_GET && c->verify && c->size) {
		into = aligned_alloc(4096, ((size_t)c->size + 4095) & ~(size_t)4095);
		rc = into ? qpg_kv_register(t->kv, into, c->size) : -ENOMEM;
		if (rc) {
			fprintf(stderr, "GET %s: cannot register %u bytes: %s\n", c->key, c->size,
				strerror(-rc));
			free(into);
			return 3;
		}
		p->req.into = into;
		p->req.into_cap = c->size;
		zc0 = zero_copy_gets(t);
	}
	rc = qpg_kv_target_submit(t->kv, &p->req);
	pthread_mutex_lock(&p->lock);
	while (rc == 0 && !p->done)
		pthread_cond_wait(&p->cv, &p->lock);
	pthread_mutex_unlock(&p->lock);
	free(value);
	bool in_place = false;
	if (into) {
		in_place = zero_copy_gets(t) > zc0;
		int urc = qpg_kv_unregister(t->kv, into);
		if (urc)
			fprintf(stderr, "GET %s: unregister: %s\n", c->key, strerror(-urc));
		free(into);
	}
	if (rc || p->status < 0) {
		struct qpg_kv_target_info info;
		qpg_kv_target_info(t->kv, &info);
		fprintf(stderr, "%s %s: connection failed: %s\n", names[c->op], c->key,
			info.last_error);
		free(p->value);
		return 3;
	}
	bool ok = p->status == QPG_KV_OK;
	fprintf(stderr, "%s %s: %s", names[c->op], c->op == CMD_BAD ? "(unknown op)" : c->key,
		ok ? "ok" : qpg_kv_status_name((uint8_t)p->status));
	if (c->op == CMD_PUT && ok)
		fprintf(stderr, ", %u bytes", value_len);
	if (c->op == CMD_GET && !ok) /* how much of a failed value reached us */
		fprintf(stderr, ", %d chunk%s delivered", p->chunks, p->chunks == 1 ? "" : "s");
	int wrc = 0;
	if (c->op == CMD_GET && ok) {
		fprintf(stderr, ", %u bytes in %d chunk%s, fnv64 %016llx", p->value_len, p->chunks,
			p->chunks == 1 ? "" : "s", (unsigned long long)p->fnv);
		if (into)
			fprintf(stderr, ", %s", in_place ? "read in place (zero copy)" : "copied");
		if (c->verify) {
			bool bad = p->mismatch || p->value_len != c->size;
			fprintf(stderr, ", %s", bad ? "MISMATCH" : "verified");
			ok = !bad;
		} else if (p->too_big || (p->value_len && !p->value)) {
			fprintf(stderr, ", NOT written (%s)",
				p->too_big ? "more bytes than announced" : "out of memory");
			ok = false;
		} else {
			wrc = kv_cmd_write_value(c, p->value, p->value_len);
		}
	}
	fprintf(stderr, "\n");
	free(p->value);
	p->value = NULL;
	if (c->op == CMD_BAD) /* the server must call it malformed */
		return p->status == QPG_KV_MALFORMED ? 0 : 1;
	return wrc ? wrc : ok ? 0 : 1;
}

int kv_cmds_run(const struct target *t, const struct cmd *cmds, int n, uint8_t abuse)
{
	struct pending p = {0};
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cv, NULL);
	int rc = 0;
	for (int i = 0; i < n && rc < 2; i++) {
		int r = run_cmd(t, &cmds[i], &p, abuse);
		rc = r > rc ? r : rc;
	}
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.lock);
	return rc;
}

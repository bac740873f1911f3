/* SPDX-License-Identifier: BSD-2-Clause */
/* One KV target for every caller: a single server's pool
 * (qpg_kv_pool_target, qpgate/kv_client.h) and a cluster of servers
 * (qpg_kv_cluster_target, qpgate/kv_cluster.h) take the same requests,
 * report in the same shape and close the same way, so a tool, a binding
 * or an application is written once and never asks which one it has.
 *
 * A target is the object it came from: destroying the target destroys
 * the pool or the cluster (and the other way round). */
#ifndef QPGATE_KV_TARGET_H
#define QPGATE_KV_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qpgate/kv.h"
#include "qpgate/kv_client.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qpg_kv_target;

/* Thread-safe. OP must stay valid until its done callback, which runs on
 * one of the target's threads (or inside qpg_kv_target_run), never inside
 * this call: 0, or a negative errno with no callback to come (-EINVAL: a
 * bad request, -ECANCELED: the target is closing). A cluster sets
 * OP->view_rev to the view it routed the key by. */
int qpg_kv_target_submit(struct qpg_kv_target *t, struct qpg_kv_request *op);
/* Fails what is queued (-ECANCELED), closes every connection, joins the
 * threads, frees T. NULL: nothing. */
void qpg_kv_target_destroy(struct qpg_kv_target *t);

struct qpg_kv_target_info {
	const char *kind;      /* "pool" or "cluster" (for a report, not a choice) */
	unsigned members;      /* servers behind it: a pool's is 1 */
	unsigned members_up;   /* with a connection up */
	unsigned conns;	       /* over every member */
	unsigned connected;    /* of those, up */
	unsigned retries;      /* connections tried again while they started */
	uint16_t credits;      /* per connection, as agreed (the first member's) */
	int64_t view_revision; /* of the view in use; a pool's is 0 */
	uint32_t max_msg;      /* the largest request message, as agreed (the least
				* over members; 0 while none is up) */
	char last_error[200];  /* why the last connection to fail failed */
};
void qpg_kv_target_info(struct qpg_kv_target *t, struct qpg_kv_target_info *out);

/* What each member served, counted as requests complete. */
struct qpg_kv_member_stats {
	char id[64]; /* a cluster member's id; a pool's server as HOST:PORT */
	uint64_t incarnation;
	bool active, up, suspect;
	uint64_t ops;	      /* completed OK or a miss */
	uint64_t misses;      /* GETs not found */
	uint64_t unavailable; /* answered, or failed fast, UNAVAILABLE */
	uint64_t wrong_owner; /* redirected */
	uint64_t errors;      /* any other failure */
	uint64_t zero_copy;   /* GETs READ straight into registered memory
			       * (qpg_kv_register; a cluster member's: by its
			       * current pool) */
	uint64_t pool_waits;  /* requests that waited for its pool, a cluster
			       * member's that joined while it was being made
			       * (each counted once; a pool's: 0) */
};
struct qpg_kv_target_stats {
	int64_t revision; /* of the view in use (a pool: 0) */
	uint64_t views;	  /* views taken into use */
	uint64_t redirects, unroutable;
	bool etcd_ok;		       /* a pool: true (it asks no etcd) */
	unsigned n;		       /* members, every one ever seen */
	struct qpg_kv_member_stats *m; /* N entries: qpg_kv_target_stats_free */
};
int qpg_kv_target_stats(struct qpg_kv_target *t, struct qpg_kv_target_stats *out);
void qpg_kv_target_stats_free(struct qpg_kv_target_stats *s);

/* Zero copy into the caller's memory (Mooncake's register_buffer): register
 * [ADDR, ADDR + LEN) once, with every connection the target has or will
 * have (each member's, over a cluster). A one-sided GET whose request names
 * a destination inside it (qpg_kv_request.into, or qpg_kv_call's BUF) then
 * READs the value straight there, and checks its digest there before its
 * done callback; a two-sided GET lands in it with one copy, as any GET.
 * Over tcp, registering succeeds and changes nothing.
 *   The memory stays pinned (RLIMIT_MEMLOCK counts it) until unregistered
 * or the target is destroyed. Free or shrink it only after unregistering:
 * a buffer freed while registered keeps its pages pinned, and READs still
 * land in those old pages, never in whatever is mapped there later.
 *   0, or a negative errno: -EEXIST, it overlaps a registered buffer
 * (registering the same one again is 0); -ENOSPC, 4,096 are registered;
 * -ENOMEM or -EPERM, the device refused it (the locked-memory limit).
 * qpg_kv_unregister: -EBUSY while a GET is READing into it, -ENOENT when
 * ADDR starts no registered buffer. Thread-safe. */
int qpg_kv_register(struct qpg_kv_target *t, void *addr, size_t len);
int qpg_kv_unregister(struct qpg_kv_target *t, void *addr);

/* EXISTS of N keys (1 to QPG_KV_EXISTS_MAX) in one round trip: which are
 * stored, without reading or pinning any (a prefix-cache lookup). The keys
 * are grouped by the member that owns them (a cluster), packed into as few
 * requests as a message holds, and sent at once; KEYS are copied. PRESENT
 * is (N + 7) / 8 bytes, valid until DONE: bit i % 8 of byte i / 8 is set
 * when KEYS[i] is stored. DONE runs once, on a target thread (or inside
 * qpg_kv_target_run): STATUS is QPG_KV_OK when every key was answered, else
 * the first failure (an enum qpg_kv_status or a negative errno), whose keys
 * read as absent; PREFIX is how many keys from the first are all stored.
 * 0, or a negative errno with no callback (-EINVAL: a bad key or count). A
 * target that begins closing part way may run DONE inside this call. */
struct qpg_kv_key {
	const void *key;
	uint16_t len;
};
typedef void (*qpg_kv_exists_done)(void *arg, int status, uint32_t prefix);
int qpg_kv_target_exists(struct qpg_kv_target *t, const struct qpg_kv_key *keys, unsigned n,
			 uint8_t *present, qpg_kv_exists_done done, void *arg);

/* The caller's tenant (qpgate/kv.h's STAT) as each server behind T sees
 * it: a pool's server, or each member of a cluster (a quota is per
 * server). Fills OUT[0..MAX) and returns how many answered (-EINVAL: bad
 * arguments); FAILURE (if not NULL) gets the first server's failure, an
 * enum qpg_kv_status or a negative errno (QPG_KV_OK: none failed). Waits:
 * never call it from a target thread, nor on a target run in the caller's
 * loop. */
int qpg_kv_target_tenant(struct qpg_kv_target *t, struct qpg_kv_tenant_stat *out, unsigned max,
			 int *failure);

/* A target that runs in the caller's event loop (qpgate/kv_call.h:
 * qpg_kv_pool_open_external): its file descriptor to poll for reading,
 * or -EINVAL for a target with threads of its own, which needs no loop. */
int qpg_kv_target_fd(struct qpg_kv_target *t);
/* One turn of that loop: what is ready, without waiting (0; a target with
 * threads of its own: 0, nothing to do). */
int qpg_kv_target_run(struct qpg_kv_target *t);

#ifdef __cplusplus
}
#endif
#endif

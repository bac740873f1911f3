/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service's shared state (kv_server.c makes it, one per server)
 * and the callbacks with which kv_service.c answers each connection. */
#ifndef QPG_KV_SERVICE_H
#define QPG_KV_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv_digest.h"
#include "kv_store.h"
#include "kv_tenants.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"
#include "qpgate/service.h"

/* What the service has done, for --metrics (threads add, a scrape reads). */
struct qpg__kv_metrics {
	atomic_ullong ops[QPG_KV_OP_MAX + 1][QPG_KV_STATUS_MAX + 1]; /* [op][status] */
	atomic_ullong hits, misses;	      /* GETs of a stored / an absent key */
	atomic_ullong exists_keys[2];	      /* keys EXISTS asked about: [0] absent, [1] stored */
	atomic_ullong bytes_in, bytes_out;    /* value bytes stored, and served (sent or granted) */
	atomic_ullong grants, grants_expired; /* windows granted; revoked at their deadline */
	atomic_ullong releases[2];	      /* grants released: [0] by RELEASE, [1] with a GET */
	atomic_llong grants_live;	      /* windows bound now */
	atomic_ullong parked;		      /* requests held until the gate let them by */
	atomic_ullong puts_abandoned;	      /* PUTs whose chunks stopped past --kv-put-timeout */
};

/* kv_trim.c: the thread that evicts ahead of need. */
struct qpg__kv_trimmer {
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool started, stop, kicked;
	atomic_bool stopping; /* read by a trim in progress, without the lock */
};

struct qpg_kv_service {
	struct qpg__kv_store store;
	struct qpg__kv_digests digests;
	uint8_t digest_alg;	 /* of every value (enum qpg_kv_digest, never AUTO) */
	char one_sided_why[160]; /* whether one-sided GETs are served, and why not */
	bool one_sided;		 /* values are registered as they commit, for windows */
	uint32_t grant_min;	 /* QPG_KV_F_GRANT_LARGE: grant values from this size */
	uint64_t grant_ttl_ns;	 /* an unreleased grant is revoked after this (0: never) */
	uint64_t put_timeout_ns; /* a PUT stalled this long gives its space back */
	qpg_kv_gate_fn gate;	 /* in a cluster: may this server serve the key? */
	void *gate_user;
	atomic_ullong drops;   /* passes of qpg_kv_service_drop begun (kv_gate.c) */
	atomic_ullong dropped; /* keys they dropped */
	atomic_ullong parked_bytes; /* requests parked now (kv_park.h) */
	struct qpg__kv_trimmer trimmer;
	struct qpg__kv_tenancy tenancy;
	struct qpg__kv_metrics m;
};

/* kv_gate.c: QPG_KV_OK to serve R, or the status to refuse it with (*REV
 * set for WRONG_OWNER). */
int qpg__kv_gate(struct qpg_kv_service *k, const struct qpg_kv_req *r, uint64_t *rev);
/* A PUT's value V is complete: commit it unless the gate refuses now, and
 * take it back if a drop began meanwhile and the gate refuses then.
 * Returns QPG_KV_OK or the refusal (V released, *REV set). */
int qpg__kv_gated_commit(struct qpg_kv_service *k, struct qpg__kv_value *v, uint64_t view_rev,
			 uint64_t *rev);

/* Start the trimmer with watermarks of HIGH_PCT and LOW_PCT of the store
 * (HIGH_PCT 0, or eviction off: none); stop it before the store goes. */
int qpg__kv_trimmer_start(struct qpg_kv_service *k, unsigned high_pct, unsigned low_pct);
void qpg__kv_trimmer_stop(struct qpg_kv_service *k);

/* One request answered with STATUS. */
void qpg__kv_count(struct qpg_kv_service *k, uint8_t op, uint8_t status);

void qpg__kv_message(struct qpg_conn *c, uint8_t type, uint16_t flags, struct qpg_buf *b,
		     uint32_t len);
void qpg__kv_sent(struct qpg_conn *c);
void qpg__kv_closed(struct qpg_conn *c);
void qpg__kv_revoked(struct qpg_conn *c, void *user);
void qpg__kv_tick(struct qpg_conn *c, uint64_t now);

#endif

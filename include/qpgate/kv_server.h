/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV cache as a qpgate service (libqpgate-kv): PUT, GET and DEL of
 * binary keys, values in one store shared by the server's threads, GETs
 * sent in chunks or granted for one-sided READ. Run it by handing its ops
 * and the service to a server:
 *
 *	struct qpg_kv_service *kv;
 *	qpg_kv_service_create(&kv, &kv_opts, err, sizeof(err));
 *	srv_opts.service = qpg_kv_service_ops();
 *	srv_opts.service_ctx = kv;
 *	... qpg_server_create / run / destroy ...
 *	qpg_kv_service_destroy(kv);
 */
#ifndef QPGATE_KV_SERVER_H
#define QPGATE_KV_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qpgate/service.h"

struct qpg_kv_server_opts {
	size_t capacity;	 /* bytes of value space (default 256 MiB, at most 1 TiB) */
	uint32_t max_value;	 /* largest value (default 1 MiB) */
	uint32_t grant_min;	 /* GETs that leave it to the server get a grant (RDMA
				    READ) from this size on (default 32 KiB) */
	unsigned grant_ttl_ms;	 /* a grant not RELEASEd by then is revoked (0: never) */
	unsigned put_timeout_ms; /* a PUT whose next chunk is this late drops its space */
	/* The digest each value carries for one-sided readers (enum
	 * qpg_kv_digest): QPG_KV_DIGEST_AUTO (the default) takes whichever
	 * is faster on this host, measured once as the service is created. */
	uint8_t digest;
	/* What a PUT that finds the store full does (enum qpg_kv_eviction):
	 * QPG_KV_EVICT_SIEVE (the default) evicts keys, SIEVE's choice, until
	 * a block of its size is free; QPG_KV_EVICT_NONE answers
	 * QPG_KV_STORE_FULL. */
	uint8_t eviction;
	/* Eviction ahead of need, in percent of the store: once more than
	 * WM_HIGH_PCT is in use a thread of the service evicts, SIEVE's
	 * choice, down to WM_LOW_PCT (default 95 and 90; WM_HIGH_PCT 0: off,
	 * a PUT evicts only what it needs). */
	uint8_t wm_high_pct, wm_low_pct;
	/* Tenants (docs/kv.md). With client certificates (the server's
	 * client_ca), every session acts for a tenant: its keys are its own,
	 * and its PUTs live within its limits. TENANTS_FILE (JSON; NULL: each
	 * certificate identity is a tenant of its own, without limits) maps
	 * identities to tenants and limits; an identity it does not name is
	 * refused at connect unless it names a default. TENANT_FROM: which
	 * name of the certificate is the identity (enum qpg_kv_tenant_from).
	 * Without client certificates every client shares one tenant. */
	const char *tenants_file;
	uint8_t tenant_from;
};
enum qpg_kv_tenant_from {
	QPG_KV_TENANT_AUTO = 0, /* the first URI subjectAltName, else the subject CN */
	QPG_KV_TENANT_SAN_URI,
	QPG_KV_TENANT_CN,
	QPG_KV_TENANT_SAN_DNS,
	QPG_KV_TENANT_SAN_EMAIL,
};
enum qpg_kv_eviction { QPG_KV_EVICT_SIEVE, QPG_KV_EVICT_NONE };
void qpg_kv_server_opts_default(struct qpg_kv_server_opts *o);

struct qpg_kv_service;
/* 0, or negative errno with a reason for a person in ERR. */
int qpg_kv_service_create(struct qpg_kv_service **out, const struct qpg_kv_server_opts *o,
			  char *err, size_t err_len);
const struct qpg_service *qpg_kv_service_ops(void);
/* Whether one-sided GETs are served (known once the server has started),
 * and if not, why. */
const char *qpg_kv_service_one_sided(const struct qpg_kv_service *k);
/* The digest chosen (enum qpg_kv_digest, never AUTO). */
uint8_t qpg_kv_service_digest(const struct qpg_kv_service *k);
/* Read the tenants file again (a SIGHUP): new limits apply at once, new
 * identities from the next connect; connections stay. 0, or a negative
 * errno with a reason in ERR, and the tenants as they were. Any thread. */
int qpg_kv_service_reload_tenants(struct qpg_kv_service *k, char *err, size_t err_len);
/* After the server that ran it is destroyed. */
void qpg_kv_service_destroy(struct qpg_kv_service *k);

/* In a cluster, who may serve a key (qpgate/cluster.h knows; the service
 * does not). Called on a loop thread for each PUT, GET and DEL before the
 * store is touched, and again as a PUT commits. VIEW_REV is the request's;
 * returns QPG_KV_OK (serve it), QPG_KV_WRONG_OWNER with the server's view
 * revision in *SERVER_REV, QPG_KV_UNAVAILABLE, or QPG_KV_GATE_WAIT: not
 * yet (the server's view is older than the request's, or it gained the key
 * too recently). The service then holds the request, without blocking its
 * loop, and asks again at each tick (100 ms), for at most 1.5 s; then it
 * answers UNAVAILABLE. Never blocks. */
#define QPG_KV_GATE_WAIT 255 /* not a wire status */
typedef int (*qpg_kv_gate_fn)(void *user, const uint8_t *key, uint16_t key_len, uint64_t view_rev,
			      uint64_t *server_rev);
/* Set before the server starts. */
void qpg_kv_service_set_gate(struct qpg_kv_service *k, qpg_kv_gate_fn gate, void *user);
/* Drop every key KEEP says no to (KEEP NULL: every key): a view change
 * took them from this server, or its lease was lost. Any thread. A PUT
 * that commits meanwhile is checked again against the gate. Returns the
 * keys dropped. */
size_t qpg_kv_service_drop(struct qpg_kv_service *k,
			   bool (*keep)(void *user, const uint8_t *key, uint16_t key_len),
			   void *user);

#endif

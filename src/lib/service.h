/* Services sit above the transports: they see verified frames and answer
 * through qpg__conn_send, never through a transport directly. */
#ifndef QPG_SERVICE_H
#define QPG_SERVICE_H

#include "endpoint.h"

struct qpg__service {
	uint8_t id;
	const char *name;
	void (*message)(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b);
	/* Optional: a send of C completed (room to stream more). */
	void (*sent)(struct qpg__conn *c);
	/* Optional: C is gone; free C->svc. */
	void (*closed)(struct qpg__conn *c);
	/* Optional: a window granted to C with USER is invalid again. */
	void (*revoked)(struct qpg__conn *c, void *user);
	/* Optional: every tick for an established C (deadlines). */
	void (*tick)(struct qpg__conn *c, uint64_t now_ns);
};

extern const struct qpg__service qpg__service_echo;
extern const struct qpg__service qpg__service_kv;

/* The KV service's shared state, one per server (all threads). */
struct qpg__kv_service;
int qpg__kv_service_create(struct qpg__kv_service **out, size_t capacity, uint32_t max_value);
void qpg__kv_service_destroy(struct qpg__kv_service *k);
/* Serve one-sided GETs through EP's transport and device (values are then
 * registered as they commit). -EOPNOTSUPP: the transport or device cannot
 * scope windows to one client. */
int qpg__kv_service_enable_one_sided(struct qpg__kv_service *k, struct qpg__endpoint *ep,
				     uint32_t grant_min);
/* Deadlines: a grant not RELEASEd within GRANT_TTL_MS is revoked (its
 * window invalidated, its value's reference dropped); a PUT whose next
 * chunk has not come within PUT_TIMEOUT_MS gives its space back. 0: never. */
void qpg__kv_service_set_deadlines(struct qpg__kv_service *k, unsigned grant_ttl_ms,
				   unsigned put_timeout_ms);

#endif

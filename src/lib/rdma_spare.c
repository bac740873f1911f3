/* SPDX-License-Identifier: BSD-2-Clause */
/* Spare QPs: a connection's QP, once every work request of it is back, is
 * moved to RESET and kept for the next connection of its endpoint instead
 * of being destroyed. Taking it again costs INIT, RTR and RTS, where a new
 * one costs a create (on rxe a queue mapped into the process and a kernel
 * socket) and, at its end, a destroy: about 80% of a pair of QPs' CPU in
 * the lab (bench/qp_floor.c).
 *
 * What a connection may not inherit from its QP's last owner:
 * - completions: a QP is taken again only after the CQ was seen empty
 *   since it went to RESET (it makes none after that), so no completion of
 *   the old connection can be read as the new one's (the map from QP
 *   number to connection would name the new owner). Until then it waits in
 *   quarantine;
 * - its peer or its sequence numbers: INIT, RTR and RTS set every address,
 *   PSN and access flag again, from the new bootstrap, with a fresh PSN;
 * - its windows: they are unbound before the QP leaves its connection.
 *
 * Bounded (--spare-qps per endpoint) and short-lived: a spare unused for
 * its idle time (--spare-idle, default 10 s) is destroyed by the tick, so
 * an idle server holds none and the device's QP count returns to what its
 * connections hold. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdma.h"

#define QPG__SPARE_IDLE_MS 10000

int qpg__rdma_spare_init(struct rdma_spares *s, uint32_t max, uint32_t idle_ms)
{
	memset(s, 0, sizeof(*s));
	s->idle_ns = (uint64_t)(idle_ms ? idle_ms : QPG__SPARE_IDLE_MS) * 1000000;
	if (max == 0)
		return 0;
	s->slot = calloc(max, sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	s->max = max;
	return 0;
}

static void destroy_at(struct rdma_spares *s, uint32_t i, struct qpg__ep_stats *st)
{
	qpg_qp_destroy(&s->slot[i].qp);
	atomic_fetch_add_explicit(&st->qps_destroyed, 1, memory_order_relaxed);
	memmove(&s->slot[i], &s->slot[i + 1], (s->n - i - 1) * sizeof(s->slot[0]));
	s->n--;
	if (i < s->ready)
		s->ready--;
}

/* Slots [0, ready) may be taken; [ready, n) are in quarantine. Within each,
 * oldest first. */
bool qpg__rdma_spare_take(struct rdma_spares *s, const struct rdma_qp_caps *caps,
			  struct rdma_spare *out)
{
	for (uint32_t i = s->ready; i-- > 0;) /* the newest first: warm in the caches */
		if (memcmp(&s->slot[i].caps, caps, sizeof(*caps)) == 0) {
			*out = s->slot[i];
			memmove(&s->slot[i], &s->slot[i + 1], (s->n - i - 1) * sizeof(s->slot[0]));
			s->n--;
			s->ready--;
			return true;
		}
	return false;
}

bool qpg__rdma_spare_put(struct rdma_spares *s, const struct rdma_spare *qp)
{
	if (s->n >= s->max)
		return false;
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	if (ibv_modify_qp(qp->qp, &reset, IBV_QP_STATE) != 0)
		return false;
	s->slot[s->n++] = *qp;
	return true;
}

void qpg__rdma_spare_cq_empty(struct rdma_spares *s)
{
	s->ready = s->n;
}

void qpg__rdma_spare_trim(struct rdma_spares *s, uint64_t now_ns, struct qpg__ep_stats *st)
{
	/* Oldest first in each part: the quarantine's may be as old as the
	 * ready ones, so both are walked. */
	for (uint32_t i = 0; i < s->n;)
		if (qpg__age_ns(now_ns, s->slot[i].since_ns) > s->idle_ns)
			destroy_at(s, i, st);
		else
			i++;
}

void qpg__rdma_spare_drop_all(struct rdma_spares *s, struct qpg__ep_stats *st)
{
	while (s->n)
		destroy_at(s, s->n - 1, st);
}

void qpg__rdma_spare_fini(struct rdma_spares *s, struct qpg__ep_stats *st)
{
	qpg__rdma_spare_drop_all(s, st);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

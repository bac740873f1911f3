/* SPDX-License-Identifier: BSD-2-Clause */
/* How current a server's view is known to be (fresh.c): a write of its
 * own under the watched prefix, under its lease, every period. A write
 * sent at time T that etcd gave revision R, once the watch is complete at
 * R, proves the view held every change committed before T (etcd is
 * linearizable: a change acknowledged before T has a revision below R).
 * So the view is known current as of T; the member side serves only
 * within the staleness bound of the newest such T. No progress
 * notification, and no lock held across the call. */
#ifndef QPG_CLUSTER_FRESH_H
#define QPG_CLUSTER_FRESH_H

#include <stdint.h>

#include "qpgate/cluster.h"

struct qpg__fresh;

/* Start writing /qpgate/NAME/sync/ID every PERIOD_MS, once a registration
 * is set; W is the watch whose completeness proves each write. */
int qpg__fresh_start(struct qpg__fresh **out, const struct qpg_cluster_opts *o, const char *id,
		     struct qpg_cluster_watch *w, unsigned period_ms, char *err, size_t err_len);
/* The registration whose lease the writes go under. */
void qpg__fresh_set_reg(struct qpg__fresh *f, struct qpg_cluster_reg *r);
/* The send time (qpg_cluster_now_ns) of the newest write the watch has
 * seen: the view is known current as of then. 0 before the first. */
uint64_t qpg__fresh_at(const struct qpg__fresh *f);
/* Stop, and delete the key (it goes with the lease anyway). */
void qpg__fresh_stop(struct qpg__fresh *f);

/* register.c: the lease held now (0: none). */
int64_t qpg__cluster_reg_lease(const struct qpg_cluster_reg *r);

#endif

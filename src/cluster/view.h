/* SPDX-License-Identifier: BSD-2-Clause */
/* Views inside the cluster room (view.c): made by the watch, then
 * immutable, shared by reference count. */
#ifndef QPG_CLUSTER_VIEW_H
#define QPG_CLUSTER_VIEW_H

#include "qpgate/cluster.h"

/* A view with room for N members (v->n = 0), one reference held. */
struct qpg_cluster_view *qpg__view_new(unsigned n);
/* Sort V's members by ID (a view is always sorted). */
void qpg__view_sort(struct qpg_cluster_view *v);
/* One more reference. */
const struct qpg_cluster_view *qpg__view_ref(const struct qpg_cluster_view *v);

#endif

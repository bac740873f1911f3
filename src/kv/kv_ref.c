/* SPDX-License-Identifier: BSD-2-Clause */
/* A value's bytes lent to a send (kv_ref.h). */
#include "kv_ref.h"

#include <stdlib.h>

struct kv_ref {
	struct qpg_buf b; /* first: what the connection gives back */
	struct qpg__kv_store *st;
	struct qpg__kv_value *v;
};

static void ref_done(struct qpg_buf *b)
{
	struct kv_ref *r = (struct kv_ref *)b;
	qpg__kv_release(r->st, r->v);
	free(r);
}

struct qpg_buf *qpg__kv_ref_new(struct qpg__kv_store *st, struct qpg__kv_value *v, uint32_t off,
				uint32_t len)
{
	if (!v->region || len < QPG__KV_REF_MIN)
		return NULL;
	struct kv_ref *r = malloc(sizeof(*r));
	if (!r)
		return NULL;
	qpg__kv_retain(v);
	*r = (struct kv_ref){.b = {.addr = qpg__kv_data(st, v) + off,
				   .len = len,
				   .io_len = len,
				   .release = ref_done},
			     .st = st,
			     .v = v};
	return &r->b;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpg_kv_target_tenant: a STAT to every server behind a target. A STAT's
 * key only routes it, so a cluster's members are reached by keys each of
 * them owns, found through the target's grouping (the owner of a key in
 * its current view). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kv_target_int.h"
#include "qpgate/kv_call.h"

#define PROBES_PER_MEMBER 64 /* routing keys tried per member before giving up */

int qpg_kv_target_tenant(struct qpg_kv_target *t, struct qpg_kv_tenant_stat *out, unsigned max,
			 int *failure)
{
	if (failure)
		*failure = QPG_KV_OK;
	if (!t || !out || max == 0)
		return -EINVAL;
	struct qpg_kv_target_info info;
	qpg_kv_target_info(t, &info);
	unsigned members = info.members ? info.members : 1, want = members < max ? members : max;
	int seen[256];
	unsigned nseen = 0, got = 0;
	int first_err = QPG_KV_OK;
	for (unsigned probe = 0; nseen < want && nseen < 256 && probe < PROBES_PER_MEMBER * members;
	     probe++) {
		char key[32];
		int n = snprintf(key, sizeof(key), "qpgate/stat/%u", probe);
		int g = t->ops->group ? t->ops->group(t, key, (uint16_t)n) : 0;
		bool known = false;
		for (unsigned i = 0; i < nseen && !known; i++)
			known = seen[i] == g;
		if (known)
			continue;
		seen[nseen++] = g;
		uint8_t rec[QPG_KV_STAT_LEN + 256];
		uint32_t len = 0;
		int st = qpg_kv_call_wait(t, QPG_KV_STAT, key, (uint16_t)n, NULL, 0, rec,
					  sizeof(rec), &len, NULL);
		if (st == QPG_KV_OK && len <= sizeof(rec) &&
		    qpg_kv_decode_stat(rec, len, &out[got]) == 0)
			got++;
		else if (first_err == QPG_KV_OK)
			first_err = st == QPG_KV_OK ? QPG_KV_MALFORMED : st;
	}
	if (failure)
		*failure = first_err;
	return (int)got;
}

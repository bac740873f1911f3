/* SPDX-License-Identifier: BSD-2-Clause */
/* Memory mappings: how many this process has, and how many it may have
 * (vm.max_map_count). Some RDMA providers map every QP's queues into the
 * process (Soft-RoCE: a server QP's send queue, one mapping), so a process
 * with tens of thousands of QPs meets the kernel's limit, 65,530 by
 * default, and ibv_create_qp fails with a bare ENOMEM. */
#include <stdio.h>
#include <string.h>

#include "maps.h"
#include "qpgate/qpgate.h"

long qpg_map_count_limit(void)
{
	long v = -1;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

long qpg_map_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	long n = 0;
	char buf[65536];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
		for (char *p = buf; (p = memchr(p, '\n', (size_t)(buf + got - p))); p++)
			n++;
	fclose(f);
	return n;
}

bool qpg__maps_at_limit(void)
{
	long lim = qpg_map_count_limit(), n = lim > 0 ? qpg_map_count() : -1;
	/* A QP that could not be made took none; a few more may be held by
	 * other threads mapping at the same moment. */
	return n >= 0 && n + QPG__MAPS_SLACK >= lim;
}

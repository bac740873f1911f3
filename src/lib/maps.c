/* SPDX-License-Identifier: BSD-2-Clause */
/* Memory mappings: how many this process has, and how many it may have
 * (vm.max_map_count). Some RDMA providers map every QP's queues into the
 * process (Soft-RoCE: a server QP's send queue, one mapping), so a process
 * with tens of thousands of QPs meets the kernel's limit, 65,530 by
 * default, and ibv_create_qp fails with a bare ENOMEM. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
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
	/* At the limit every newcomer's QP fails, and /proc/self/maps is then
	 * 65,000 lines (about 5 MB to make and read, under the process's
	 * mmap lock): one look a second answers for all of them. */
	static _Atomic uint64_t looked_ns;
	static _Atomic bool at_limit;
	uint64_t now = qpg__coarse_ns(), then = atomic_load(&looked_ns);
	if (then && now - then < 1000000000ull)
		return atomic_load(&at_limit);
	if (!atomic_compare_exchange_strong(&looked_ns, &then, now ? now : 1))
		return atomic_load(&at_limit); /* another thread is looking */
	long lim = qpg_map_count_limit(), n = lim > 0 ? qpg_map_count() : -1;
	/* A QP that could not be made took none; a few more may be held by
	 * other threads mapping at the same moment. */
	bool at = n >= 0 && n + QPG__MAPS_SLACK >= lim;
	atomic_store(&at_limit, at);
	return at;
}

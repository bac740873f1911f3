/* SPDX-License-Identifier: BSD-2-Clause */
/* Locked memory. Verbs pins every buffer it registers, and the kernel
 * charges the pages to RLIMIT_MEMLOCK (unless the process has
 * CAP_IPC_LOCK). A limit below what the pools will register would fail
 * later, under load, deep inside ibv_reg_mr; it is checked at start
 * instead: the soft limit is raised to the hard one if that is enough,
 * else the start is refused with the numbers and how to raise them. */
#include "memlock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define CAP_IPC_LOCK_BIT 14 /* linux/capability.h */

static bool has_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return false;
	char line[256];
	unsigned long long caps = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps & (1ull << CAP_IPC_LOCK_BIT);
}

static double mib(unsigned long long b)
{
	return (double)b / (1024.0 * 1024.0);
}

int qpg__memlock_check(uint64_t need, const char *what, char *err, size_t err_len)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_MEMLOCK, &r) || r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= need ||
	    has_ipc_lock())
		return 0;
	if (r.rlim_max == RLIM_INFINITY || r.rlim_max >= need) {
		struct rlimit up = {r.rlim_max, r.rlim_max};
		if (setrlimit(RLIMIT_MEMLOCK, &up) == 0)
			return 0;
	}
	snprintf(err, err_len,
		 "locked memory is limited to %.1f MiB (ulimit -l %llu), and %s need %.1f MiB "
		 "pinned for RDMA: raise it (ulimit -l unlimited as root; 'memlock' in "
		 "/etc/security/limits.conf; LimitMEMLOCK=infinity for a systemd service), "
		 "or ask for less (fewer threads or connections, a smaller --max-msg)",
		 mib(r.rlim_cur), (unsigned long long)r.rlim_cur / 1024, what, mib(need));
	return -ENOMEM;
}

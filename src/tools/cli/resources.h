/* SPDX-License-Identifier: BSD-2-Clause */
/* Resource readings for reports: a process from /proc, and an RDMA
 * device's object counts from `rdma res` (iproute2). */
#ifndef QPG_RESOURCES_H
#define QPG_RESOURCES_H

#include <stdbool.h>
#include <sys/types.h>

struct proc_sample {
	bool ok;
	double cpu_s; /* user + system */
	long rss_kb;
	long hwm_kb;
	int threads;
	int fds;
};

/* PID 0: this process. */
void proc_sample(pid_t pid, struct proc_sample *s);
/* --server-pid's check: 0 when PID is 0 (not given) or names a process
 * here; otherwise it prints the usage error, naming PID, and returns 2. */
int proc_check_server_pid(pid_t pid);

struct dev_counts {
	bool ok;
	long pd, cq, qp, cm_id, mr, ctx, srq;
};

/* DEV NULL: the first device `rdma res` lists. */
void dev_counts(const char *dev, struct dev_counts *c);

#endif

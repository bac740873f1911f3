/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-sweep's state, and one point of its sweep (sweep_point.c): a
 * qpgate-perf run at N clients against a fresh or a running server, its
 * report read, and the wait until the server and the device are back at
 * their baseline. */
#ifndef QPG_TOOLS_SWEEP_H
#define QPG_TOOLS_SWEEP_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "report.h"
#include "resources.h"

struct sweep {
	const char *perf_path;
	const char *out_dir;
	char **perf_args; /* passed through, ends with HOST SERVERNAME */
	int nperf_args;
	pid_t server_pid;
	/* --server-args: a fresh qpgate-server per run, so each run's memory
	 * and resource figures start from an idle server. */
	char *server_argv[64];
	int server_argc;
	const char *server_path;
	const char *dev_name;
	int settle_timeout_s;
	struct proc_sample server_base;
	struct dev_counts dev_base;
	long tw_base; /* TIME_WAIT sockets before the first run */
	struct sweep_report rep;
	volatile sig_atomic_t *stop; /* set by SIGINT/SIGTERM: runs end early */
};

double sweep_now_s(void);
/* TCP sockets in TIME_WAIT in this network namespace, or -1. */
long sweep_time_wait_count(void);
/* One qpgate-perf run at N clients. Returns 0 with P filled in, or -1 when
 * the run produced no report at all (the tool could not start). */
int sweep_run_point(struct sweep *sw, int n, enum sweep_stage stage, struct sweep_point *p);

#endif

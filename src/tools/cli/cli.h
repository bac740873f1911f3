/* SPDX-License-Identifier: BSD-2-Clause */
/* Small helpers the command-line tools share. */
#ifndef QPG_CLI_H
#define QPG_CLI_H

#include <stdint.h>

/* Parse ARG as an integer in [MIN, MAX] or exit(2) naming FLAG. */
long long qpg_cli_int(const char *arg, long long min, long long max, const char *flag);
double qpg_cli_double(const char *arg, double min, double max, const char *flag);
/* A byte count with an optional K, M or G suffix (powers of 1024). */
unsigned long long qpg_cli_size(const char *arg, unsigned long long min, unsigned long long max,
				const char *flag);
/* The index of ARG among the N NAMES (an empty or NULL name is never a
 * choice), or exit(2) naming FLAG and the choices: "error: --x is 'a',
 * 'b' or 'c', not 'd'". */
unsigned qpg_cli_pick(const char *arg, const char *const *names, unsigned n, const char *flag);
/* "rdma" | "tcp", or exit(2). */
int qpg_cli_transport(const char *arg);
/* Raise the soft limit on open files to the hard one (a connection is one
 * fd, or two with its QP's channel); returns the limit now, -1: none. */
long qpg_cli_raise_nofile(void);
/* Over rdma, a note on stderr when CLIENTS (FLAG) may not fit under
 * vm.max_map_count: Soft-RoCE maps each QP's queues into the process,
 * PER_CLIENT mappings per client (in the lab one, at either end: 200
 * clients took 202 more on the server and 199 more in qpgate-perf).
 * Providers that map nothing per QP never meet the limit. */
void qpg_cli_note_map_count(const char *prog, int transport, long clients, int per_client,
			    const char *flag);

#endif

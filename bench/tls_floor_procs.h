/* SPDX-License-Identifier: BSD-2-Clause */
/* qpg_tls_floor --procs (tls_floor_procs.c): the client and the server in
 * two processes. */
#ifndef QPG_BENCH_TLS_FLOOR_PROCS_H
#define QPG_BENCH_TLS_FLOOR_PROCS_H

#include "tls.h"

/* A run of handshakes of one kind, in one thread or two processes. */
struct run {
	int n, resumed;		 /* n: asked for */
	double cli_cpu, srv_cpu; /* each end's CPU, summed over the run, s */
	double wall;		 /* the run's wall time, s */
};

/* OUT->n handshakes, one at a time, between a client from CS (resumed
 * ones if RESUME: each must resume) in this process and a server from
 * SCTX in a child. 0, or -1 with the reason printed. */
int floor_procs(struct qpg__tls_slot *cs, SSL_CTX *sctx, const char *name, int resume,
		struct run *out);

#endif

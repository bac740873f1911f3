/* SPDX-License-Identifier: BSD-2-Clause */
/* What ran out at a sweep's breaking point: from a failed run's failure
 * reasons (qpgate-perf's JSON), the server's log and the limits of this
 * host, the resource that failed first (fds, port numbers, locked memory,
 * QPs, memory mappings, CQ entries, RAM, the server's admission limits, CPU time) and its
 * value. */
#ifndef QPG_EXHAUST_H
#define QPG_EXHAUST_H

#include <jansson.h>
#include <stdbool.h>

enum exhausted_resource {
	EXH_NONE, /* nothing failed */
	EXH_FDS,
	EXH_PORTS,
	EXH_MEMLOCK,
	EXH_QPS,
	EXH_MAPS, /* vm.max_map_count: the provider maps each QP's queues */
	EXH_CQ,
	EXH_RAM,
	EXH_ADMISSION, /* a server limit refused clients: --max-clients, pending, rate */
	EXH_CPU,       /* handshakes missed their deadline: too slow, nothing refused */
	EXH_UNKNOWN,
	EXH_COUNT
};

struct exhausted {
	enum exhausted_resource what;
	char value[96];	    /* the limit or level reached, e.g. "RLIMIT_NOFILE 20000" */
	char evidence[192]; /* the failure text it was read from */
};

/* Inputs of one run; any may be missing (NULL, or false). */
struct exhaust_input {
	json_t *perf;		/* qpgate-perf's JSON */
	const char *server_log; /* path of the server's log */
	long server_log_from;	/* where this run's part of it starts */
	bool server_killed;	/* the server died of SIGKILL (the OOM killer?) */
};

void exhaust_classify(const struct exhaust_input *in, struct exhausted *out);
const char *exhausted_name(enum exhausted_resource r);

#endif

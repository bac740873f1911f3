/* SPDX-License-Identifier: BSD-2-Clause */
/* One option parser for every tool: each tool describes its flags in a
 * table (name, perftest's letter where there is one, kind, where the value
 * goes, its range, help), the shared client flags are one more table, and
 * the parser checks every value against its range, prints the usage from
 * the same tables, and exits 2 on bad input with a clear error. */
#ifndef QPG_OPTS_H
#define QPG_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "qpgate/client.h"

enum qpg_opt_kind {
	OPT_END,
	OPT_FLAG,      /* bool = true */
	OPT_FLAG_OFF,  /* bool = false */
	OPT_COUNT,     /* int += 1 (-v -v) */
	OPT_STR,       /* const char * */
	OPT_INT,       /* int in [min, max] */
	OPT_LONG,      /* long */
	OPT_U8,	       /* uint8_t */
	OPT_U16,       /* uint16_t */
	OPT_U32,       /* uint32_t */
	OPT_UINT,      /* unsigned */
	OPT_DOUBLE,    /* double */
	OPT_SIZE,      /* size_t, K/M/G suffixes */
	OPT_SIZE32,    /* uint32_t, K/M/G suffixes */
	OPT_TRANSPORT, /* int: rdma | tcp */
	OPT_CALL,      /* call(arg, dst): the tool's own parsing */
};

struct qpg_opt {
	const char *name; /* long name, without -- */
	int letter;	  /* short option, 0: none */
	enum qpg_opt_kind kind;
	void *dst;
	double min, max;
	const char *arg;  /* what the value is called in the usage, e.g. "N" */
	const char *help; /* one line; the default belongs here */
	void (*call)(const char *arg, void *dst);
};

#define QPG_OPT_END                                                                                \
	{                                                                                          \
		0                                                                                  \
	}

/* Parse ARGV with TABLES (a NULL-terminated list of tables ending in
 * QPG_OPT_END). --help prints the usage and exits 0; anything wrong prints
 * an error and exits 2. Returns the index of the first positional
 * argument; NPOS of them are required (-1: any number, and options stop at
 * the first; -2: any number, options anywhere). */
int qpg_opts_parse(int argc, char **argv, const struct qpg_opt *const *tables, const char *synopsis,
		   int npos);
void qpg_opts_usage(FILE *f, const struct qpg_opt *const *tables, const char *synopsis);

/* The flags every client-side tool takes, into O (perftest's letters). */
#define QPG_OPTS_CLIENT(o)                                                                           \
	{"port", 'p', OPT_U16, &(o)->port, 1, 65535, "N", "server port (default 7471)"},             \
	    {"ca", 0, OPT_STR, &(o)->ca, 0, 0, "FILE", "CA that signed the server certificate"},     \
	    {"cert", 0, OPT_STR, &(o)->cert, 0, 0, "FILE", "client certificate, for mutual TLS"},    \
	    {"key", 0, OPT_STR, &(o)->key, 0, 0, "FILE", "its private key"},                         \
	    {"transport", 0, OPT_TRANSPORT, &(o)->transport,                                         \
	     0,		  0, "rdma|tcp",    "data path (default rdma)"},                             \
	    {"ib-dev", 'd', OPT_STR, &(o)->ib_dev, 0, 0, "DEV", "RDMA device (default: the first)"}, \
	    {"ib-port", 'i', OPT_INT, &(o)->ib_port, 1, 255, "N", "device port (default: auto)"},    \
	    {"gid-index", 'x',                                                                       \
	     OPT_INT,	  &(o)->gid_index,                                                           \
	     0,		  255,                                                                       \
	     "N",	  "GID index (default: the RoCE v2 GID of the route to the server)"},        \
	    {"no-auth",                                                                              \
	     0,                                                                                      \
	     OPT_FLAG_OFF,                                                                           \
	     &(o)->auth,                                                                             \
	     0,                                                                                      \
	     0,                                                                                      \
	     NULL,                                                                                   \
	     "turn per-message authentication off (to measure its cost)"},                           \
	    {"source",                                                                               \
	     0,                                                                                      \
	     OPT_STR,                                                                                \
	     &(o)->source,                                                                           \
	     0,                                                                                      \
	     0,                                                                                      \
	     "ADDR[,ADDR...]",                                                                       \
	     "local addresses for the control connections, in turn (each has its own ports)"},       \
	    {"no-tls-resume",                                                                        \
	     0,                                                                                      \
	     OPT_FLAG_OFF,                                                                           \
	     &(o)->tls_resume,                                                                       \
	     0,                                                                                      \
	     0,                                                                                      \
	     NULL,                                                                                   \
	     "a full TLS handshake every time, and no ticket asked for (default: resume with the "   \
	     "server's newest ticket)"},                                                             \
	    {"handshake-timeout",                                                                    \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->handshake_timeout_ms,                                                             \
	     10,                                                                                     \
	     3600000,                                                                                \
	     "MS",                                                                                   \
	     "per connection (default 10000)"},                                                      \
	    {"spare-qps",                                                                            \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->spare_qps,                                                                        \
	     0,                                                                                      \
	     65536,                                                                                  \
	     "N",                                                                                    \
	     "rdma: QPs of closed connections kept in RESET for the next ones (default 0: "          \
	     "none)"},                                                                               \
	    {"connect-attempts",                                                                     \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->connect_attempts,                                                                 \
	     1,                                                                                      \
	     100,                                                                                    \
	     "N",                                                                                    \
	     "tries per connection when the reason may pass (server busy, restarting; default "      \
	     "10)"},                                                                                 \
	    {"connect-deadline",                                                                     \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->connect_deadline_ms,                                                              \
	     10,                                                                                     \
	     3600000,                                                                                \
	     "MS",                                                                                   \
	     "no new try after MS from the first (default 60000)"},                                  \
	    {"keepalive",                                                                            \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->keepalive_ms,                                                                     \
	     0,                                                                                      \
	     86400000,                                                                               \
	     "MS",                                                                                   \
	     "a keepalive frame after MS without traffic (default 60000; 0: only as a QP comes "     \
	     "up)"},                                                                                 \
	    {"verify-cache",                                                                         \
	     0,                                                                                      \
	     OPT_UINT,                                                                               \
	     &(o)->verify_cache_s,                                                                   \
	     0,                                                                                      \
	     86400,                                                                                  \
	     "S",                                                                                    \
	     "a server chain verified is not verified again for S seconds (its key and validity "    \
	     "are; default 600; 0: every time)"},                                                    \
	    {"credits", 0,    OPT_U16, &(o)->credits,                                                \
	     1,		1024, "N",     "requests in flight per connection (default 1)"},             \
	    {"tclass", 0,   OPT_U8, &(o)->tclass,                                                    \
	     0,	       255, "N",    "RoCE traffic class of our packets (DSCP << 2; default 0)"},     \
	    {"sl", 0, OPT_U8, &(o)->sl, 0, 15, "N", "service level (default 0)"},                    \
	    {"busy-poll",                                                                            \
	     0,                                                                                      \
	     OPT_U32,                                                                                \
	     &(o)->busy_poll_us,                                                                     \
	     0,                                                                                      \
	     1000000,                                                                                \
	     "US",                                                                                   \
	     "poll for completions (rdma) or on the sockets (tcp) US before sleeping (0: never; "    \
	     "default 200)"},                                                                        \
	{                                                                                            \
		"qp-timeout", 0, OPT_U8, &(o)->qp_timeout, 1, 31, "N",                               \
		    "RC ACK timeout 4.096 us * 2^N, 7 tries (default 18 = 1.07 s)"                   \
	}

/* The flags of the tools that drive load.c (qpgate-client, qpgate-perf),
 * into LO (a struct load_opts); each tool's own defaults are printed. */
#define QPG_OPTS_LOAD(lo)                                                                          \
	{"clients", 'c',      OPT_INT, &(lo)->nconns,                                              \
	 1,	    10000000, "N",     "concurrent clients, one connection each"},                 \
	    {"iters", 'n', OPT_LONG, &(lo)->msgs, 0, 1000000000, "N", "messages per client"},      \
	    {"size", 's', OPT_U32, &(lo)->size, 1, QPG_WIRE_MAX_MSG, "BYTES", "message size"},     \
	    {"window", 0,	 OPT_LONG, &(lo)->window,                                          \
	     1,	       10000000, "N",	   "handshakes (sessions) in progress at once"},           \
	    {"qp",     'q',                                                                        \
	     OPT_UINT, &(lo)->qps_per_session,                                                     \
	     1,	       QPG_WIRE_MAX_EXTRA_QPS + 1,                                                 \
	     "N",      "rdma: clients brought up over each TLS session (default 1)"},              \
	    {"hold", 0,	       OPT_LONG, &(lo)->hold_ms,                                           \
	     0,	     86400000, "MS",	 "once all are connected, wait MS before traffic"},        \
	    {"report_gbits",                                                                       \
	     0,                                                                                    \
	     OPT_FLAG,                                                                             \
	     &(lo)->report_gbits,                                                                  \
	     0,                                                                                    \
	     0,                                                                                    \
	     NULL,                                                                                 \
	     "bandwidth in Gb/s (default MiB/s)"},                                                 \
	{                                                                                          \
		"timeout", 0, OPT_LONG, &(lo)->timeout_ms, 1, 86400000, "MS",                      \
		    "give up on the whole run after MS"                                            \
	}

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The client's own structures, shared by client.c (the endpoint and the
 * request path) and client_retry.c (connects tried again). */
#ifndef QPG_CLIENT_INT_H
#define QPG_CLIENT_INT_H

#include <netinet/in.h>

#include "qpgate/client.h"

#include "control.h"
#include "core.h"
#include "tls.h"

#define QPG__MAX_SOURCES 64

struct qpg_client {
	struct qpg__endpoint ep; /* first */
	struct qpg_client_opts o;
	struct qpg_client_cbs cbs;
	uint8_t test_mutation; /* enum qpg__hello_mutation: a test breaks its HELLOs */
	const struct qpg__transport_ops *t; /* set up (its setup done) */
	struct qpg_rdma_dev dev;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char host[256], servername[256];
	void (*wake_cb)(void *arg);
	void *wake_arg;
	struct qpg__tls_slot tls;
	struct sockaddr_storage src[QPG__MAX_SOURCES];	 /* opts.source, parsed */
	struct qpg__port_cursor ports[QPG__MAX_SOURCES]; /* each source's local ports */
	unsigned nsrc, next_src;
	struct qpg__src_gid src_gid[QPG__MAX_SOURCES]; /* rdma, several sources */
	unsigned seed;				       /* backoff jitter */
	bool silent;				       /* test hook: no keepalives at all */
	struct qpg_client_conn *waiting;	       /* handles between two attempts */
	size_t nwaiting;
};

/* The caller's handle: it lives from qpg_client_connect to its closed
 * callback, across the attempts, each a qpg__conn of its own. */
struct qpg_client_conn {
	struct qpg_client *cl;
	struct qpg__conn *c; /* this attempt's; NULL between attempts */
	void *user;
	uint64_t rts_ns;
	uint64_t first_send_ns; /* the first request handed to the transport */
	uint32_t outstanding;	/* requests sent, reply not yet received */
	bool first_done;
	/* Attempts. A session's are its leader's: its members follow it. */
	struct qpg_client_conn *lead;	 /* a member's leader; NULL otherwise */
	struct qpg_client_conn *members; /* a leader's, linked by member_next */
	struct qpg_client_conn *member_next;
	unsigned attempts;   /* connects started (1: the first) */
	uint64_t started_ns; /* the first one's start */
	uint64_t retry_ns;   /* waiting: when the next starts */
	bool up;	     /* a leader's: some QP of the session came up */
	bool cancelled;	     /* a leader's: closed by the caller while waiting */
	uint8_t verdict;     /* a leader's, on this attempt: enum qpg__verdict */
	struct qpg_client_conn *wait_next;
};

enum qpg__verdict {
	QPG__VERDICT_UNDECIDED, /* this attempt has not closed */
	QPG__VERDICT_RETRY,	/* it closed, another follows */
	QPG__VERDICT_FINAL,	/* it closed, the caller hears it */
};

/* Start an attempt for H (a leader: its members too). */
int qpg__client_attempt(struct qpg_client *cl, struct qpg_client_conn *h);

/* client_sources.c. Parse LIST (comma-separated numeric addresses of
 * FAMILY) into CL->src (the GID each carries over rdma: the transport's
 * setup, rdma_setup.c). 0, or a negative errno with the reason in ERR. */
int qpg__client_parse_sources(struct qpg_client *cl, const char *list, int family, char *err,
			      size_t err_len);
/* The endpoint's closed callback: another attempt, or the caller hears. */
void qpg__client_conn_closed(struct qpg__conn *c);
/* Start the attempts whose backoff has passed; report cancelled ones. */
void qpg__client_retry_pump(struct qpg_client *cl);
/* Closed by the caller between two attempts: reported from the pump. */
void qpg__client_retry_cancel(struct qpg_client_conn *h);
/* The client goes: those between two attempts hear it. */
void qpg__client_retry_drop(struct qpg_client *cl);
/* The classes of failure that another attempt may cure. */
bool qpg__client_transient(enum qpg_err_class err, uint16_t reject_code);

#endif

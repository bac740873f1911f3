/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate server: N event-loop threads, each with its own listener
 * (SO_REUSEPORT), endpoint and shared RDMA resources.
 *
 * A write to a peer that has just closed raises SIGPIPE: programs using
 * this library ignore it (signal(SIGPIPE, SIG_IGN)), as the qpgate tools do. */
#ifndef QPGATE_SERVER_H
#define QPGATE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qpgate/qpgate.h"

struct qpg_service;

struct qpg_server_opts {
	const char *bind_addr; /* default 127.0.0.1 */
	uint16_t port;	       /* 0: pick one (see qpg_server_port) */
	const char *cert, *key;
	const char *client_ca; /* set: mutual TLS required */
	unsigned max_clients;
	unsigned threads; /* 0: number of cores */
	int transport;	  /* enum qpg_transport_kind */
	const char *ib_dev;
	int ib_port;
	int gid_index; /* < 0: auto */
	unsigned handshake_timeout_ms;
	unsigned progress_timeout_ms;  /* sends not completing for this long close it (0: never) */
	unsigned idle_timeout_ms;      /* no traffic for this long closes it (0: never) */
	unsigned max_pending;	       /* unfinished handshakes, whole server */
	unsigned max_pending_per_peer; /* unfinished handshakes per peer address */
	unsigned max_conns_per_peer;   /* 0: no limit (counts sessions, not their QPs) */
	/* rdma: QPs one authenticated session may bring up (docs/protocol.md);
	 * each counts against max_clients. 1: one QP per session. */
	unsigned max_session_qps;
	unsigned handshake_rate;  /* new handshakes per second per peer address (0: no limit) */
	unsigned handshake_burst; /* ... of which this many at once */
	/* TLS resumption: stateless tickets sealed under a key that rotates
	 * every this many seconds; a ticket is good for at most two periods.
	 * 0: no tickets, every connection a full handshake. */
	unsigned tls_ticket_period_s;
	bool allow_no_auth; /* accept clients that turn message auth off */
	bool allow_any_gid; /* rdma: accept a GID other than the control connection's address */
	uint32_t max_msg;
	uint32_t srq_depth;
	uint8_t qp_timeout;    /* RC local ACK timeout: 4.096 us * 2^N per try; 0: default */
	uint8_t tclass;	       /* RoCE traffic class of our QPs' packets (0: default) */
	uint8_t sl;	       /* service level (0: default) */
	uint32_t busy_poll_us; /* each thread polls (its CQ, or tcp sockets) this
				* long before it sleeps (adaptive: an idle thread stops);
				* QPG_BUSY_POLL_US_DEFAULT: the transport's own */
	/* What it offers (qpgate/service.h); NULL: echo. CTX is the service's,
	 * handed to its start() and to every connection (qpg_conn_service_ctx). */
	const struct qpg_service *service;
	void *service_ctx;
	int verbose;
	/* QPs one address (IPv6: one /64) may hold, a session's each counted;
	 * beyond it a session is refused (REJECT resources). 0: no limit;
	 * QPG_QPS_PER_PEER_AUTO (the default): a quarter of max_clients. */
	unsigned max_qps_per_peer;
	/* A QP that has sent no authenticated frame this long after ACCEPT is
	 * closed (every qpgate client sends one as it comes up). 0: never. */
	unsigned bringup_timeout_ms;
	/* No resumption past this long after the full handshake a ticket came
	 * from, however often it was renewed (default 86400; 0: two periods
	 * of tls_ticket_period_s per ticket only). */
	unsigned tls_resume_max_s;
	/* Unfinished handshakes of all the addresses in one IPv4 /24 or IPv6
	 * /48 (0: no limit; default half of max_pending). */
	unsigned max_pending_per_prefix;
	/* With client_ca: certificate revocation lists (PEM files, each may
	 * hold several), checked for every client certificate, on resumption
	 * too, and read again by qpg_server_reload_tls. */
	const char *const *crls;
	unsigned ncrls;
	/* With client_ca: mTLS sessions kept for resumption, at most this many
	 * (the oldest goes first), in place of stateless tickets, whose client
	 * certificate OpenSSL would decode again on every resumption. Same
	 * bounds as tickets. 0: stateless tickets for mTLS too. Default 8192. */
	unsigned tls_cache_max;
	/* rdma: a closed client's QP, every work request of it back, is kept
	 * in RESET for the next client of the same thread, at most this many
	 * per thread, each for at most 10 s unused; taking it again costs three
	 * state changes where a new QP costs a create and, later, a destroy.
	 * Default 0: none kept, so that the device's QP count (rdma res show),
	 * which leak checks read, is what the clients hold; 64 is a good size
	 * where clients come and go (docs/operations.md). */
	unsigned spare_qps;
	/* How long a spare may wait unused before it is destroyed (default
	 * 10000; a client's wait 10 s). */
	unsigned spare_idle_ms;
	/* With client_ca: a client chain this server verified is not verified
	 * again for VERIFY_CACHE_S seconds. A full handshake from a client of
	 * the same certificates in that time checks its CertificateVerify (its
	 * private key), each certificate's validity period and that every CRL
	 * is current, not the chain, its signatures and the CRL lookup once
	 * more. At most 1,024 chains, keyed by every certificate; a reload
	 * (qpg_server_reload_tls) starts an empty cache. Default 600; 0: every
	 * chain verified in full. */
	unsigned verify_cache_s;
};
#define QPG_QPS_PER_PEER_AUTO 0xffffffffu

void qpg_server_opts_default(struct qpg_server_opts *o);

struct qpg_server;

/* 0 with *OUT set, or a negative errno and a reason for a person in ERR. */
int qpg_server_create(struct qpg_server **out, const struct qpg_server_opts *o, char *err,
		      size_t err_len);
uint16_t qpg_server_port(const struct qpg_server *s);
/* Runs until qpg_server_stop(); returns 0 or a negative errno. */
int qpg_server_run(struct qpg_server *s);
/* Async-signal-safe. */
void qpg_server_stop(struct qpg_server *s);
/* Read the certificate, key and client CA again from the files the options
 * name; new handshakes use them, established connections stay as they are.
 * Thread-safe (not async-signal-safe: call it from a thread, e.g. on
 * SIGHUP). On failure the server keeps what it had: negative errno and the
 * reason in ERR. */
int qpg_server_reload_tls(struct qpg_server *s, char *err, size_t err_len);
void qpg_server_destroy(struct qpg_server *s);

struct qpg_server_stats {
	long long connected;
	long long handshaking;
	unsigned long long handshakes_ok, handshakes_failed;
	unsigned long long handshakes_resumed; /* of the ok ones, resumed (a ticket, or mTLS's cache) */
	unsigned long long rejected[16];
	unsigned long long closed_by_reason[QPG_ERR_COUNT];
	unsigned long long auth_failures, seq_failures;
	unsigned long long msgs_in, msgs_out, bytes_in, bytes_out;
	unsigned long long qps_created, qps_destroyed;
	long long cq_depth_max;
	long long pool_in_use, pool_slots; /* message buffers held now / allocated */
	unsigned long long slots_abandoned, reads_paused;
	unsigned long long refused_pending, refused_per_peer, refused_rate;
	unsigned long long accept_backoffs;
	unsigned long long peers_tracked; /* addresses in the peer table now */
	unsigned long long handshake_ns_bucket[24];
	unsigned long long handshake_ns_sum;
	unsigned long long refused_qps_per_peer; /* sessions over --max-qps-per-peer */
	unsigned long long bringup_timeouts;	 /* QPs closed by the bring-up deadline */
	unsigned long long refused_prefix;	 /* over max_pending_per_prefix */
	unsigned long long pending_evicted;	 /* handshakes closed to make room (max_pending full) */
	unsigned long long tls_cache_sessions;	 /* mTLS sessions held for resumption now */
	/* rdma: QPs given to clients from the spares (qpg_server_opts.spare_qps;
	 * qps_created counts only new ones), and spares held now (created and
	 * not destroyed, but no client's). */
	unsigned long long qps_reused;
	long long qps_spare;
	/* rdma: receives posted on the shared receive queues now, and
	 * receives that a closing QP had begun (mid-message) and that came
	 * back flushed. */
	long long srq_receives_posted;
	unsigned long long receives_flushed;
	/* rdma: SENDs received and posted. A SEND carries one or more of
	 * msgs_in / msgs_out's frames: those one connection sends in one turn
	 * of its loop (docs/protocol.md, "Messages"). */
	unsigned long long rdma_sends_in, rdma_sends_out;
	/* Resumption tickets sent: one to each HELLO that asked (a client
	 * that resumes, after a full handshake or when its ticket is a
	 * quarter through its lifetime). */
	unsigned long long tls_tickets;
	/* rdma: of msgs_out, frames whose value went from where the service
	 * keeps it (a KV store's registered memory), gathered into the SEND
	 * without a copy (qpg_conn_send_ref). */
	unsigned long long msgs_by_ref;
	/* Handshakes whose deadline passed while the peer's next bytes were
	 * already here, unread: the wait was this server's (a busy thread),
	 * so the deadline moved on once instead of closing them. */
	unsigned long long deadlines_extended;
	/* mTLS (qpg_server_opts.verify_cache_s): client chains the server
	 * holds as verified now, and full handshakes whose client chain it
	 * found there, since the start or the last reload (which empties it). */
	unsigned long long tls_chains_cached, tls_chain_hits;
};
void qpg_server_stats(struct qpg_server *s, struct qpg_server_stats *out);
/* The stats as Prometheus text (format 0.0.4) in a malloc'd *OUT; 0 or a
 * negative errno. */
int qpg_server_prometheus(struct qpg_server *s, char **out, size_t *len);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate client library: many connections on one event loop, each a
 * TLS-bootstrapped RC QP (or TCP) with authenticated messages. One
 * qpg_client is used from one thread.
 *
 * A write to a peer that has just closed raises SIGPIPE: programs using
 * this library ignore it (signal(SIGPIPE, SIG_IGN)), as the qpgate tools do. */
#ifndef QPGATE_CLIENT_H
#define QPGATE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "qpgate/qpgate.h"

struct qpg_client_opts {
	const char *host;
	uint16_t port;
	const char *servername; /* checked against the server certificate */
	const char *ca;		/* NULL: the system trust store */
	const char *cert, *key; /* for mutual TLS */
	int transport;
	const char *ib_dev;
	int ib_port;
	int gid_index;
	bool auth;
	uint32_t max_msg;
	uint16_t credits;
	uint8_t service;
	unsigned handshake_timeout_ms;
	uint32_t pool_max; /* slots in the client's registered pool; 0: auto */
	uint32_t srq_depth;
	uint8_t qp_timeout;    /* RC local ACK timeout: 4.096 us * 2^N per try; 0: default */
	uint8_t tclass;	       /* RoCE traffic class of our QPs' packets (0: default) */
	uint8_t sl;	       /* service level (0: default) */
	uint32_t busy_poll_us; /* poll (CQ, or tcp sockets) this long before sleeping;
				* QPG_BUSY_POLL_US_DEFAULT: the transport's own */
	uint8_t rd_atomic;     /* one-sided READs in flight per connection; 0: one */
	uint32_t sq_depth;     /* send queue per connection (sends and READs); 0: 2 x credits */
	bool tls_resume; /* offer the server's newest ticket on new connections (default on) */
	/* Local addresses for the control connections, comma-separated, taken in
	 * turn (NULL: the kernel picks). Each address has its own range of ports
	 * towards one server port, so N addresses hold N times the connections. */
	const char *source;
	/* With SOURCE, part PORT_SLICE of PORT_SLICES equal parts of each
	 * address's port range is this client's (0 of 0: all of it): clients
	 * of one process that share source addresses (qpgate-perf --threads)
	 * then never walk into each other's ports. */
	unsigned port_slice, port_slices;
	/* Accept only a server whose certificate's public key (DER
	 * SubjectPublicKeyInfo) has this SHA-256, on top of the CA chain and
	 * the host name (a cluster's member entry names it); NULL: no pin. */
	const uint8_t *spki_sha256;
	/* A connect that fails for a reason another try may cure (the server
	 * closed during the handshake or the bootstrap, its handshake
	 * deadline, its rate or pending limit, a refused TCP connect while it
	 * restarts, a REJECT for resources or shutdown) is tried again after
	 * a jittered, doubling backoff (100 ms, 200 ms, ... at most 3 s), up
	 * to CONNECT_ATTEMPTS tries in all (default 10; 1: never again) and
	 * while CONNECT_DEADLINE_MS have not passed since the first (default
	 * 60000). A certificate, a host name, a version, auth or a full server
	 * are reported at once. The handle stays the same across attempts;
	 * qpg_conn_info.attempts counts them. */
	unsigned connect_attempts;
	unsigned connect_deadline_ms;
	/* Every QP sends a keepalive frame (no reply, no credit) as it comes
	 * up, which a server's bring-up deadline waits for, and again after
	 * KEEPALIVE_MS with no traffic, which keeps a quiet connection inside
	 * a server's idle timeout (default 60000; 0: only the first). Sent
	 * while the caller runs the loop (qpg_client_run). */
	unsigned keepalive_ms;
	/* rdma: as qpg_server_opts.spare_qps, for the client's own QPs (a
	 * pool reconnecting, sessions coming and going). Default 0: none. */
	unsigned spare_qps;
	/* A server chain this client verified is not verified again for
	 * VERIFY_CACHE_S seconds: a full handshake to that server in that time
	 * checks the server's CertificateVerify (its private key) and each
	 * certificate's validity period, not the chain, its signatures and the
	 * host name once more (default 600; 0: every chain verified in full).
	 * At most 32 chains, keyed by every certificate and name checked. */
	unsigned verify_cache_s;
};
void qpg_client_opts_default(struct qpg_client_opts *o);

struct qpg_client;
struct qpg_client_conn;

struct qpg_client_cbs {
	void (*established)(struct qpg_client_conn *c, void *user);
	void (*reply)(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *payload,
		      uint32_t len);
	void (*closed)(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		       const char *why);
	/* Optional: a send completed (room on the send queue again). */
	void (*sent)(struct qpg_client_conn *c, void *user);
	/* A one-sided read landed, scattered over IOVCNT registered buffers
	 * in order (one per qpg_conn_info.read_piece bytes), valid during the
	 * call. A failed read closes the connection. */
	void (*read_done)(struct qpg_client_conn *c, void *user, uint64_t cookie,
			  const struct iovec *iov, unsigned iovcnt);
};

int qpg_client_create(struct qpg_client **out, const struct qpg_client_opts *o,
		      const struct qpg_client_cbs *cbs, char *err, size_t err_len);
void qpg_client_destroy(struct qpg_client *cl);
int qpg_client_connect(struct qpg_client *cl, void *user, struct qpg_client_conn **out);
/* N connections (QPs) over one TLS session and one control connection
 * (rdma only): one handshake instead of N. Each QP has keys and PSNs of its
 * own, USERS[i] and *OUT[i] are the i-th's, and each gets its own
 * established and closed callbacks. The session shares one fate: when any
 * of its QPs closes, on either side, all of them do. N is 1 to 256; a
 * server takes at most its --max-session-qps (default 64). Returns N (or
 * fewer, when memory ran out after the first: those made close with the
 * session and report it), or a negative errno when none was made:
 * -EOPNOTSUPP on the tcp transport for N > 1. */
int qpg_client_connect_session(struct qpg_client *cl, unsigned n, void *const *users,
			       struct qpg_client_conn **out);
/* Copy PAYLOAD into a registered buffer and send it. -EAGAIN: no credit, or
 * the send queue is full (retry from the sent callback). */
int qpg_client_send(struct qpg_client_conn *c, uint8_t type, const void *payload, uint32_t len);
/* Zero copy, as a service's qpg_conn_buf_get / qpg_conn_send: a registered
 * buffer of the connection's loop to build a message of up to
 * qpg_conn_info.max_msg bytes in, at qpg_buf_payload(B) (NULL: the
 * connection is not up, or no buffer is free); then send LEN bytes of it.
 * The send takes B back whatever it returns (errors as qpg_client_send's);
 * a buffer not sent goes back with qpg_client_buf_put. From the
 * connection's loop thread only, as every call on a connection. */
struct qpg_buf;
struct qpg_buf *qpg_client_buf_get(struct qpg_client_conn *c);
void qpg_client_buf_put(struct qpg_client_conn *c, struct qpg_buf *b);
uint8_t *qpg_buf_payload(struct qpg_buf *b);
int qpg_client_send_buf(struct qpg_client_conn *c, struct qpg_buf *b, uint8_t type, uint32_t len);
/* A READ scatters into at most this many registered buffers (fewer where
 * the device allows fewer): qpg_conn_info.read_max / read_piece. */
#define QPG_CLIENT_READ_SLOTS 8
/* One-sided (RDMA): READ LEN bytes at the server's RADDR through a window
 * it granted with RKEY, as one work request; read_done gets COOKIE. -EOPNOTSUPP over tcp,
 * -EMSGSIZE beyond qpg_conn_info.read_max, -EAGAIN: the send queue is full. */
int qpg_client_read(struct qpg_client_conn *c, uint64_t raddr, uint32_t rkey, uint32_t len,
		    uint64_t cookie);
/* Zero copy (RDMA): register the caller's memory [ADDR, ADDR + LEN) with
 * the client's device once (any thread), then READ into it directly. *MR is
 * the registration, for qpg_client_dereg_mr; *LKEY its local key. Memory
 * stays pinned while registered: freeing or shrinking it first leaves the
 * registration holding the old pages, which READs still fill (the new
 * mapping at ADDR, if any, never sees them). -EOPNOTSUPP over tcp. */
int qpg_client_reg_mr(struct qpg_client *cl, void *addr, size_t len, void **mr, uint32_t *lkey);
void qpg_client_dereg_mr(void *mr);
/* The longest READ into registered memory: one work request. */
#define QPG_CLIENT_READ_INTO_MAX (4u << 20)
/* A READ of LEN bytes (1 to QPG_CLIENT_READ_INTO_MAX) at RADDR, through the
 * server's window RKEY, into LOCAL, inside memory registered with LKEY:
 * read_done gets COOKIE and one iovec, {LOCAL, LEN}. Errors as
 * qpg_client_read's. */
int qpg_client_read_into(struct qpg_client_conn *c, uint64_t raddr, uint32_t rkey, void *local,
			 uint32_t lkey, uint32_t len, uint64_t cookie);
/* Close gracefully; the closed callback follows with QPG_ERR_NONE. */
void qpg_client_close(struct qpg_client_conn *c);
/* For a tool that opens many connections to one server: the local ports
 * one address has toward one server port (net.ipv4.ip_local_port_range,
 * the range a source address's cursor hands out), and the local address
 * the route toward HOST leaves from, as text in BUF (0, or a negative
 * errno). */
unsigned qpg_local_port_count(void);
int qpg_local_addr_toward_host(const char *host, char *buf, size_t len);
/* One turn of the event loop. */
int qpg_client_run(struct qpg_client *cl, int timeout_ms);
/* The loop's own file descriptor (an epoll set): readable when a turn of
 * qpg_client_run has work, so that another event loop can poll it. */
int qpg_client_fd(const struct qpg_client *cl);
/* Other threads hand work to a client's loop: they queue it themselves and
 * call qpg_client_wake() (thread-safe; not from a signal handler); CB then
 * runs on the loop's thread. Called from one of the client's own callbacks,
 * CB runs at the end of that batch, with no system call. */
void qpg_client_set_wake(struct qpg_client *cl, void (*cb)(void *arg), void *arg);
void qpg_client_wake(struct qpg_client *cl);
size_t qpg_client_conn_count(const struct qpg_client *cl);

struct qpg_conn_info {
	uint64_t conn_id;
	int transport;
	bool auth;
	uint32_t local_qpn, local_psn, peer_qpn, peer_psn;
	uint32_t max_msg;
	uint32_t read_max;   /* the longest one-sided read: one work request */
	uint32_t read_piece; /* ...scattered over buffers of this many bytes */
	uint16_t credits;
	uint32_t in_flight;
	uint64_t phase_ns[QPG_PHASE_COUNT];
	uint64_t setup_ns;
	bool resumed;	   /* the TLS session was resumed from a ticket */
	unsigned attempts; /* connects it took (1: the first one) */
};
void qpg_client_conn_info(const struct qpg_client_conn *c, struct qpg_conn_info *out);
/* Record the first-message phase once: first send to this first reply. */
void qpg_client_conn_mark_first_msg(struct qpg_client_conn *c);
#endif

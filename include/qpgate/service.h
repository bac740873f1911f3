/* SPDX-License-Identifier: BSD-2-Clause */
/* Services: what a qpgate server offers above its connections.
 *
 * A service is a table of callbacks and a bootstrap service id. A client
 * names the id in its HELLO; the server admits it only to the service it
 * runs (else REJECT "service not offered"). From then on the service sees
 * each message after its sequence number and tag are verified, and answers
 * through the functions below. Echo (qpg_service_echo, built in) and the KV
 * cache (libqpgate-kv) are both written against this header alone.
 *
 * Everything here runs on the loop thread that owns the connection.
 * Messages live in registered buffers (struct qpg_buf): a service that is
 * handed one owns it until it sends it (qpg_conn_send) or puts it back.
 * Closing is deferred: after qpg_conn_close, C stays valid until the
 * callback that called it returns; on_close is C's last call. */
#ifndef QPGATE_SERVICE_H
#define QPGATE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qpgate/qpgate.h"

/* A registered message buffer (its layout: qpgate/verbs.h). A service uses
 * it only through the calls below, on any transport. */
struct qpg_buf;

struct qpg_conn;   /* a server connection, as its service sees it */
struct qpg_region; /* memory a service lets peers READ through windows */
struct qpg_server;

struct qpg_service {
	uint8_t id;	  /* the HELLO's service id (1 echo, 2 KV; 128-255 private) */
	const char *name; /* for logs */
	uint32_t min_msg; /* smallest agreed message size it can work with (0: any) */
	/* If set, the only frame type a client may send: any other closes the
	 * connection (a protocol error) before on_message sees it. 0: the
	 * service checks types itself. */
	uint8_t request_type;
	/* Optional: once, after the server is set up and before it runs;
	 * negative errno fails qpg_server_create with WHY. */
	int (*start)(struct qpg_server *s, void *ctx, char *why, size_t why_len);
	/* Optional: C is established. */
	void (*on_connect)(struct qpg_conn *c);
	/* A verified message of TYPE and FLAGS, LEN bytes at qpg_buf_payload(B).
	 * The service owns B. */
	void (*on_message)(struct qpg_conn *c, uint8_t type, uint16_t flags, struct qpg_buf *b,
			   uint32_t len);
	/* Optional: a send (or one-sided work request) of C completed. */
	void (*on_sent)(struct qpg_conn *c);
	/* Optional: C is gone (C's last call): free its data. */
	void (*on_close)(struct qpg_conn *c);
	/* Optional: append the service's own metrics (Prometheus text format
	 * 0.0.4, names qpgate_<service>_...) to F, for a scrape; any thread. */
	void (*metrics)(void *ctx, FILE *f);
	/* Optional: about once a second for an established C (each tick, every
	 * 100 ms, looks at a tenth of them), and at the next tick after
	 * qpg_conn_tick_soon: deadlines, and work that waits. */
	void (*on_tick)(struct qpg_conn *c, uint64_t now_ns);
	/* Optional: a window granted on C with USER is invalid again. */
	void (*on_revoked)(struct qpg_conn *c, void *user);
	/* Optional: once, from qpg_server_destroy when start() succeeded (or
	 * there is none), after every connection is gone and before the device
	 * closes: close every region the service opened (qpg_region_close). A
	 * region still open past this point is reported, and its memory
	 * registration is lost with the device: it must not be closed later. */
	void (*stop)(struct qpg_server *s, void *ctx);
	/* Optional: may C's peer use the service at all? Once per session,
	 * after the TLS handshake and the HELLO, before any of its QPs counts
	 * against a limit (the session's extra QPs share the answer and the
	 * principal). It may read the peer's verified certificate
	 * (qpg_conn_peer_name) and set C's principal. Returns 0, or a negative
	 * errno with a reason for the client in WHY: the session is refused
	 * (REJECT QPG_REJECT_IDENTITY, not retried by clients). */
	int (*admit)(struct qpg_conn *c, char *why, size_t why_len);
};

/* A name in the peer's verified client certificate (mutual TLS). */
enum qpg_peer_name {
	QPG_PEER_SAN_URI = 1,	/* the first URI subjectAltName (SPIFFE IDs, say) */
	QPG_PEER_CN = 2,	/* the subject's common name (exactly one) */
	QPG_PEER_SAN_DNS = 3,	/* the first DNS subjectAltName */
	QPG_PEER_SAN_EMAIL = 4, /* the first email (rfc822Name) subjectAltName */
};
/* In admit() only (the TLS session may be gone after it): C's peer's name
 * of kind WHICH into OUT, as printable ASCII. Its length, or -ENOTCONN (no
 * verified client certificate), -ENOENT (none of that kind), -EILSEQ (not
 * printable, or two CNs), -ENAMETOOLONG (OUT too short). */
int qpg_conn_peer_name(const struct qpg_conn *c, enum qpg_peer_name which, char *out,
		       size_t cap);
/* Whom C acts for, as the service's admit() decided (NULL until set). The
 * service owns what P points to, and keeps it past every connection. */
void qpg_conn_set_principal(struct qpg_conn *c, void *p);
void *qpg_conn_principal(const struct qpg_conn *c);

/* The built-in echo service: every request comes back in the buffer it
 * arrived in. */
extern const struct qpg_service qpg_service_echo;

/* Per-connection and per-server state of the service. */
void *qpg_conn_data(const struct qpg_conn *c);
void qpg_conn_set_data(struct qpg_conn *c, void *data);
void *qpg_conn_service_ctx(const struct qpg_conn *c);

/* What was agreed in the bootstrap, and where the send queue stands. */
bool qpg_conn_is_open(const struct qpg_conn *c);
/* Ask for C's on_tick at the next tick (within 100 ms) rather than within
 * a second: for a service that holds a request until something changes.
 * Once per call; ask again from on_tick to keep waiting. */
void qpg_conn_tick_soon(struct qpg_conn *c);
uint16_t qpg_conn_credits(const struct qpg_conn *c);
uint32_t qpg_conn_max_msg(const struct qpg_conn *c);
uint32_t qpg_conn_in_flight(const struct qpg_conn *c);
/* Sends (and one-sided work requests) C may still post now. */
uint32_t qpg_conn_send_room(const struct qpg_conn *c);

/* A message buffer from C's thread's pool (NULL: none free), and back. */
struct qpg_buf *qpg_conn_buf_get(struct qpg_conn *c);
void qpg_conn_buf_put(struct qpg_conn *c, struct qpg_buf *b);
/* Where a message's payload starts in B. */
uint8_t *qpg_buf_payload(struct qpg_buf *b);

/* Frame LEN payload bytes of B as TYPE with FLAGS, authenticate and send
 * it; B goes back to the pool once sent, also on failure. 0, or negative
 * errno: -EAGAIN no room (wait for on_sent), -EMSGSIZE beyond max_msg,
 * -ENOTCONN closing; any other failure closes C. */
int qpg_conn_send(struct qpg_conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
		  uint32_t len);
/* As qpg_conn_send, for a payload of B's first HEAD_LEN bytes followed by
 * VALUE's VALUE->io_len bytes at VALUE->addr, inside R (opened with
 * qpg_conn_region_open; NULL: copy them). VALUE is the caller's: a
 * qpg_buf with addr, io_len and a release, which is called once the bytes
 * are no longer needed. On rdma the SEND gathers them from where they lie,
 * without a copy, and release comes when it completes or fails; elsewhere
 * they are copied into B and release comes at once. Either way it has come
 * by the time this returns an error. The bytes must not change before it. */
int qpg_conn_send_ref(struct qpg_conn *c, struct qpg_buf *b, uint8_t type, uint16_t flags,
		      uint32_t head_len, struct qpg_region *r, struct qpg_buf *value);
/* End C with ERR and a reason (deferred: see above). */
void qpg_conn_close(struct qpg_conn *c, enum qpg_err_class err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One-sided access (rdma with type-2 memory windows). */
/* Call from start(): serve grants on every thread. -EOPNOTSUPP where the
 * transport or device cannot scope windows to one QP. */
int qpg_server_enable_grants(struct qpg_server *s);
/* Register [ADDR, ADDR + LEN) so windows over it can be granted (no remote
 * access to the region itself; a window never reaches past its region). */
int qpg_conn_region_open(struct qpg_conn *c, void *addr, size_t len, struct qpg_region **out);
/* Any thread, once no window over it is valid, and before the server is
 * destroyed (the service's stop() is the last place). */
void qpg_region_close(struct qpg_region *r);
/* Let C's peer, and only it, READ [ADDR, ADDR + LEN) of R: a window bound
 * to C's QP, in flight until on_sent. *WINDOW is the handle to revoke; its
 * on_revoked gets USER once it is invalid. */
int qpg_conn_grant_read(struct qpg_conn *c, struct qpg_region *r, const void *addr, uint32_t len,
			void *user, void **window, uint32_t *rkey);
int qpg_conn_revoke(struct qpg_conn *c, void *window);

#endif

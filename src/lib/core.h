/* SPDX-License-Identifier: BSD-2-Clause */
/* Endpoints, connections and the transport ops table.
 *
 * An endpoint is one event loop plus the transport's per-loop resources (for
 * RDMA: a CQ with its completion channel, an SRQ and a registered pool). A
 * server runs one endpoint per thread; a client process runs one or more.
 * Connections belong to exactly one endpoint and are only touched from its
 * thread.
 *
 * The transport is chosen once, by ops table; the control channel, the
 * bootstrap protocol, message authentication and the services above are
 * the same for every transport. */
#ifndef QPG_CORE_H
#define QPG_CORE_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth.h"
#include "loop.h"
#include "qpgate/qpgate.h"
#include "qpgate/verbs.h"
#include "qpgate/wire.h"
#include "tls.h"

struct qpg__endpoint;
struct qpg__conn;

/* What a process's side of a transport is set up with, before any
 * endpoint (qpg__transport_ops.setup). */
struct qpg__transport_setup {
	bool passive;		       /* a server: the device of BIND_ADDR */
	const char *bind_addr;	       /* server: its --bind address (numeric; NULL: any) */
	const struct sockaddr *toward; /* client: our address toward the server (NULL: unknown) */
	const char *toward_what;       /* that address, in an error */
	const struct sockaddr_storage *src; /* client: its --source addresses */
	unsigned nsrc;
	struct qpg__src_gid *src_gid; /* out, NSRC entries: the GID each source carries */
	const char *ib_dev;
	int ib_port;
	int gid_index;
	uint64_t pinned_bytes; /* registered memory the process may pin */
	const char *pinned_what;
};

struct qpg__transport_ops {
	const char *name;
	uint8_t wire_id;
	size_t conn_size;      /* the transport's conn struct, which embeds qpg__conn first */
	uint32_t busy_poll_us; /* its busy-poll window when none is chosen */
	/* Its frames travel inside the TLS session's records (tcp), whose
	 * AEAD already authenticates every byte, in order: they carry no tag
	 * of their own (docs/security.md). */
	bool frames_in_tls;
	/* Process setup (NULL: none, as tcp's): open DEV, the device the
	 * setup's address is on, learn each source's GID, and check that
	 * memlock admits what will be pinned. 0, or a negative errno with a
	 * reason in ERR and nothing left open. teardown undoes it. */
	int (*setup)(const struct qpg__transport_setup *su, struct qpg_rdma_dev *dev, char *err,
		     size_t err_len);
	void (*teardown)(struct qpg_rdma_dev *dev);
	/* " on DEV port P GID G" for the server's start line (NULL: nothing). */
	void (*describe)(const struct qpg_rdma_dev *dev, char *buf, size_t len);
	int (*ep_init)(struct qpg__endpoint *ep);
	void (*ep_fini)(struct qpg__endpoint *ep);
	/* Every tick (100 ms), NULL if nothing to do: the transport's own
	 * deadlines (rdma: spare QPs unused too long). NOW_NS UINT64_MAX: the
	 * loop stops, every deadline is due (qpg__endpoint_stopping). */
	void (*ep_tick)(struct qpg__endpoint *ep, uint64_t now_ns);
	/* Server: may PEER's data path be reached at the address the control
	 * connection came from? 0, or -EPERM with a reason in WHY. NULL: no
	 * data-path address of its own (tcp). */
	int (*check_peer)(struct qpg__conn *c, const struct qpg_wire_params *peer, char *why,
			  size_t why_len);
	/* Create the data path and describe it in LOCAL (QP to INIT, PSN drawn). */
	int (*conn_prepare)(struct qpg__conn *c, struct qpg_wire_params *local);
	/* Connect to the peer (RTR, RTS). */
	int (*conn_establish)(struct qpg__conn *c, const struct qpg_wire_params *peer);
	/* Post a frame of LEN bytes in B; B comes back through the pool. */
	int (*send)(struct qpg__conn *c, struct qpg_buf *b, size_t len);
	/* Post a frame of B's HEAD bytes, V's bytes (V->io_len, inside
	 * REGION, the transport's handle), then B's next TAG bytes, without
	 * copying V's; V comes back through its release once sent (or
	 * failed). NULL, or can_ref false for C: frames are copied whole. */
	int (*send_ref)(struct qpg__conn *c, struct qpg_buf *b, size_t head, struct qpg_buf *v,
			void *region, size_t tag);
	bool (*can_ref)(const struct qpg__conn *c);
	/* The control socket is readable after the bootstrap. */
	void (*on_stream)(struct qpg__conn *c);
	/* Stop traffic; busy() stays true while work is still in flight. */
	void (*conn_shutdown)(struct qpg__conn *c);
	bool (*conn_busy)(struct qpg__conn *c);
	/* Busy for too long: make sure nothing in flight can still reach C
	 * (destroy the QP, then take every completion left in the CQ), so that
	 * C can be freed. NULL where nothing outlives conn_shutdown. */
	void (*conn_abandon)(struct qpg__conn *c);
	void (*conn_release)(struct qpg__conn *c);
	/* Bytes queued on the control channel have left the process (up to
	 * C->out_flushed_total). NULL where sends do not ride on it. */
	void (*on_flushed)(struct qpg__conn *c);
	/* The data path rides on the TLS session (tcp). Otherwise the session
	 * is freed once the bootstrap is done and flushed: the control
	 * connection then only carries its close (docs/protocol.md). */
	bool data_on_tls;

	/* One-sided access; all NULL where the transport has none.
	 * 0 if windows can be scoped to one connection, else -EOPNOTSUPP. */
	int (*windows_probe)(struct qpg__endpoint *ep);
	/* Register [ADDR, ADDR + LEN) so that windows over it can be granted
	 * (no remote access to the region itself). A window never reaches
	 * past its region, whatever the device does with the window's own
	 * bounds, so a region is one value. */
	int (*region_open)(struct qpg__endpoint *ep, void *addr, size_t len, void **region);
	void (*region_close)(void *region);
	/* Let C's peer, and only it, RDMA READ [ADDR, ADDR + LEN) of REGION:
	 * a window bound to C's QP. *WINDOW is the handle to revoke it with;
	 * the endpoint's revoked callback gets USER once it is invalid. */
	int (*grant_read)(struct qpg__conn *c, void *region, const void *addr, uint32_t len,
			  void *user, void **window, uint32_t *rkey);
	int (*revoke)(struct qpg__conn *c, void *window);
	/* RDMA READ B->io_len bytes at the peer's RADDR into B. */
	int (*read)(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
	/* Test hook: RDMA WRITE B->io_len bytes of B to the peer's RADDR. */
	int (*test_write)(struct qpg__conn *c, struct qpg_buf *b, uint64_t raddr, uint32_t rkey);
};

extern const struct qpg__transport_ops qpg__transport_rdma;
extern const struct qpg__transport_ops qpg__transport_tcp;
const struct qpg__transport_ops *qpg__transport_by_kind(int kind);

/* Counters an endpoint keeps. Relaxed atomics: the metrics thread reads them
 * while the loop thread writes. */
struct qpg__ep_stats {
	atomic_ullong handshakes_ok;
	atomic_ullong handshakes_resumed; /* of those, TLS resumed from a ticket */
	atomic_ullong tls_tickets;	  /* resumption tickets sent, each asked for */
	atomic_ullong handshakes_failed;
	atomic_ullong deadlines_extended; /* qpg__control_deadline: ours, not the peer's */
	atomic_ullong rejected[16];	  /* by enum qpg_reject_code */
	atomic_ullong closed_by_reason[QPG_ERR_COUNT];
	atomic_ullong auth_failures; /* bad tag */
	atomic_ullong seq_failures;  /* out-of-order sequence */
	atomic_ullong msgs_in, msgs_out, bytes_in, bytes_out;
	atomic_ullong qps_created, qps_destroyed; /* on the device (taking or keeping a
						   * spare is neither) */
	atomic_ullong qps_reused;		  /* connections given a spare QP */
	atomic_llong qps_spare;			  /* spares held now */
	atomic_llong connected;
	atomic_llong handshaking;
	atomic_llong cq_depth_max;
	atomic_ullong slots_abandoned; /* in flight when a stuck connection was freed */
	atomic_llong pool_in_use;      /* copied from the loop's pool at every tick */
	atomic_llong pool_slots;
	atomic_llong regions_open;	/* a service's regions opened here, not yet closed */
	atomic_ullong reads_paused;	/* tcp: input paused while the output was full */
	atomic_ullong bringup_timeouts; /* QPs closed: no frame within the bring-up deadline */
	atomic_llong srq_posted;	/* rdma: receives on the SRQ, copied at every tick */
	atomic_ullong recv_flushed;	/* rdma: receives a closing QP had begun, flushed back */
	atomic_ullong rdma_msgs_in, rdma_msgs_out; /* rdma: SENDs, each of one or more frames */
	atomic_ullong frames_by_ref;		   /* of msgs_out: a value gathered, not copied */
	atomic_ullong handshake_ns_bucket[24];	   /* log2 buckets from 1 us */
	atomic_ullong handshake_ns_sum;
};

struct qpg__ep_opts {
	const struct qpg__transport_ops *t;
	struct qpg_rdma_dev *dev; /* shared by the process's endpoints (RDMA only) */
	uint32_t max_msg;	  /* payload bytes per frame */
	uint32_t srq_depth;
	uint32_t pool_max; /* slots; bounds everything in flight */
	uint32_t qp_max_send_wr;
	uint8_t qp_timeout;	/* local ACK timeout exponent, 0: the verbs default */
	uint8_t rd_atomic;	/* RDMA READs in flight per QP, 0: one */
	uint8_t tclass, sl;	/* RoCE traffic class and service level of our QPs */
	uint32_t busy_poll_us;	/* spin this long for completions before sleeping */
	uint32_t spare_qps;	/* rdma: QPs kept in RESET for the next connections */
	uint32_t spare_idle_ms; /* ...each for at most this long unused (0: 10 s) */
	uint32_t tick_ms;
};

enum qpg__conn_state {
	QPG_CONN_CONNECTING, /* client: TCP connect in progress */
	QPG_CONN_TLS,
	QPG_CONN_BOOTSTRAP, /* server: waiting for HELLO; client: for ACCEPT */
	QPG_CONN_ESTABLISHED,
	QPG_CONN_REJECTING, /* server: REJECT queued, close once flushed */
	QPG_CONN_CLOSING,   /* data path draining */
	QPG_CONN_DEAD,
};

/* An rdma client with several source addresses sends each connection from
 * the GID its source carries (the server checks HELLO's GID against the
 * control connection's address). OWN false: the device's GID. */
struct qpg__src_gid {
	bool own;
	uint8_t index;
	uint8_t gid[16];
};

struct qpg__conn {
	const struct qpg__transport_ops *t;
	struct qpg__endpoint *ep;
	struct qpg__src_gid src_gid; /* rdma client, several sources: its source's */
	struct qpg__io io;	     /* control socket */
	SSL *ssl;
	enum qpg__conn_state state;
	bool is_server;
	bool want_write;
	bool counted_connected;
	bool admitted;
	bool handshake_done;
	bool deadline_extended; /* its handshake deadline moved on once (control.c) */
	bool resumed;		/* the TLS session was resumed from a ticket */
	bool corrupt_next_tag;	/* test hook */
	bool oversize_next;	/* test hook: let the next frame exceed max_msg */
	bool read_paused;	/* stop reading requests until our output drains */
	uint8_t test_mutation;	/* test hook: enum qpg__hello_mutation */
	uint64_t closing_since_ns;
	struct qpg__conn *prev, *next; /* endpoint's handshaking or established list */
	bool listed_established;
	bool tick_soon; /* the service asked for its tick at the next one (ep->nsoon) */
	struct qpg__conn *next_dead; /* on the endpoint's closing, then dead list */
	uint64_t progress_ns;	     /* last send completion, or the first send after none */
	uint64_t active_ns;	     /* last frame in or send completed (idle timeout) */
	uint64_t started_ns;
	uint64_t deadline_ns; /* 0: none */
	uint64_t phase_ns[QPG_PHASE_COUNT];
	uint64_t phase_start_ns;
	struct sockaddr_storage peer_addr;
	struct qpg_wire_params local, peer;
	struct qpg__auth auth;
	uint32_t max_msg;   /* payload limit agreed for frames to the peer */
	uint16_t credits;   /* agreed requests in flight */
	uint32_t in_flight; /* sends posted, not completed */
	uint8_t read_slots; /* pool slots one READ may scatter into (0: no READs) */
	uint64_t conn_id;
	/* Bootstrap input (QPG_WIRE_MAX_BOOT_LEN bytes), only while the
	 * bootstrap lasts; after it, (tcp) frame reassembly is the transport's. */
	uint8_t *boot_in;
	size_t boot_in_len;
	/* A session's extra QPs (rdma; docs/protocol.md). The leader owns the
	 * control channel; its members have none, and the session shares one
	 * fate: when any of its connections closes, all of them do. */
	struct qpg__conn *leader;  /* a member's; NULL otherwise */
	struct qpg__conn *members; /* a leader's, linked by member_next */
	struct qpg__conn *member_next;
	uint16_t nmembers;
	uint16_t member_index; /* 1, 2, ...: the context its keys are exported with */
	/* control channel output (bootstrap, and tcp frames) */
	uint8_t *out;
	size_t out_len, out_off, out_cap, out_retry;
	uint64_t out_queued_total, out_flushed_total; /* bytes ever queued / written */
	enum qpg_err_class err;
	uint16_t reject_code; /* client: the server's REJECT code (0: none came) */
	bool got_frame;	      /* an authenticated frame has come (bring-up deadline) */
	uint64_t up_ns;	      /* established (ACCEPT sent or taken) */
	void *admit_ref;      /* server: the peer entry this QP is counted on */
	char why[256];
	void *user;
	void *svc;	 /* the service's per-connection state (server side) */
	void *principal; /* whom the service's admit() said the peer acts for */
};

struct qpg__endpoint_cbs {
	/* Server: HELLO is valid; return 0 to admit, or a reject code with TEXT. */
	int (*admit)(struct qpg__conn *c, char *text, size_t text_len);
	void (*established)(struct qpg__conn *c);
	/* A verified frame. The callee owns B (send it back, or put it). */
	void (*message)(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b);
	/* A send completed (B already returned to the pool). */
	void (*sent)(struct qpg__conn *c);
	/* Last call for C: it ended with C->err / C->why. */
	void (*closed)(struct qpg__conn *c);
	/* A window granted with USER is invalid again (C still established). */
	void (*revoked)(struct qpg__conn *c, void *user);
	/* Every tick (100 ms) for an established C: the service's deadlines. */
	void (*tick)(struct qpg__conn *c, uint64_t now_ns);
	/* A one-sided read completed into B. The callee owns B. */
	void (*read_done)(struct qpg__conn *c, struct qpg_buf *b);
};

struct qpg__conn_list {
	struct qpg__conn *head, *tail;
	size_t n;
};

struct qpg__endpoint {
	struct qpg__loop loop;
	const struct qpg__transport_ops *t;
	void *tep;	   /* the transport's per-endpoint state */
	void *service_ctx; /* the service's shared state (server side) */
	uint32_t min_msg;  /* smallest agreed message size the service can work with */
	struct qpg_rdma_dev *dev;
	struct qpg_pool pool;
	uint32_t max_msg;
	uint32_t srq_depth;
	uint32_t qp_max_send_wr;
	uint32_t spare_qps, spare_idle_ms;
	uint8_t qp_timeout;
	uint8_t tclass, sl;
	uint8_t rd_atomic;	   /* RDMA READs in flight per QP (as reader and as target) */
	bool grants_reads;	   /* peers may READ through windows granted to them */
	struct qpg__tls_slot *tls; /* the owner's (server: one for all its threads) */
	bool is_server;
	bool auth_required; /* server: refuse HELLOs without the auth flag */
	bool allow_any_gid; /* server: skip check_peer (control and RoCE on other networks) */
	uint8_t service;
	uint16_t credits_max;
	uint16_t session_qps_max; /* server: QPs a session may bring up (0 or 1: one) */
	uint64_t handshake_timeout_ns;
	/* Open connections. Each tick checks every handshaking one's deadline
	 * (their number is bounded by the server's --max-pending) and a tenth
	 * of the established ones, from SCAN on, so each of those once a
	 * second: walking 100,000 connections every tick would cost a core. */
	struct qpg__conn_list handshaking, established;
	struct qpg__conn *scan;
	/* Established connections whose service asked for a tick at the next
	 * one (qpg_conn_tick_soon): while any does, each tick walks the list
	 * for them. Rare and short (a KV request waiting for a view). */
	size_t nsoon;
	/* Closed, their closed callback not yet called: that happens after the
	 * batch, never under the caller of qpg__conn_close (as uv_close). */
	struct qpg__conn *closing, *closing_tail;
	size_t nclosing;
	struct qpg__conn *dead;	  /* closed callback done; freed once drained */
	uint64_t progress_ns_max; /* sends not completed for this long: close (0: never) */
	uint64_t idle_ns_max;	  /* no traffic for this long: close (0: never) */
	uint64_t bringup_ns_max;  /* no frame this long after ACCEPT: close (0: never) */
	uint64_t abandon_ns;	  /* a closed connection still busy after this is abandoned */
	size_t nconns;
	struct qpg__endpoint_cbs cbs;
	struct qpg__ep_stats stats;
	void *user;
};

/* server.c, for prometheus.c: the per-transport connection gauges and the
 * service's own metrics. */
struct qpg_server;
void qpg__server_metrics(struct qpg_server *s, FILE *f);

/* Message slots a server thread's pool may register. */
#define QPG__SERVER_POOL_SLOTS 16384u
/* A pool slot's bytes for messages up to MAX_MSG (qpg_pool_init rounds up
 * to 64), which is what each registered slot pins. */
static inline size_t qpg__pool_slot_size(uint32_t max_msg)
{
	return (qpg_frame_len(max_msg, 1) + 63) & ~(size_t)63;
}

int qpg__endpoint_init(struct qpg__endpoint *ep, const struct qpg__ep_opts *o);
void qpg__endpoint_fini(struct qpg__endpoint *ep);
/* Enforce deadlines (closes are deferred; nothing is freed here). */
void qpg__endpoint_tick(struct qpg__endpoint *ep);
/* A session is idle at NOW when all of its QPs are (none with a send in
 * flight, none active within IDLE_NS): one idle QP must not end its busy
 * siblings, so only the leader (or a lone connection) is judged. */
bool qpg__session_idle(const struct qpg__conn *c, uint64_t now, uint64_t idle_ns);
/* The owner's loop has stopped for good: what the endpoint kept only for
 * later connections goes now (so the owner's final stats show it gone). */
void qpg__endpoint_stopping(struct qpg__endpoint *ep);
/* Free closed connections whose data path has drained (all of them with
 * FORCE, after making sure nothing in flight can still name them). */
void qpg__endpoint_reap(struct qpg__endpoint *ep, bool force);
/* Run pending closed callbacks, then free what has drained. Called by the
 * loop after each batch, and by the endpoint's owner outside the loop. */
void qpg__endpoint_settle(struct qpg__endpoint *ep);

/* Count a connection that is only starting (used by control.c). */
struct qpg__conn *qpg__conn_new(struct qpg__endpoint *ep, int fd, bool is_server);
/* One more QP in LEADER's session: a connection with no control channel of
 * its own, closed with it. NULL when out of memory or the wire's limit. */
struct qpg__conn *qpg__conn_new_member(struct qpg__conn *leader);
/* Move C from the handshaking list to the established one. */
void qpg__conn_list_established(struct qpg__conn *c);
/* Ticks over which the tick visits every established connection once. */
#define QPG__SCAN_TICKS 10u
/* End C with ERR and a reason. Idempotent. C stays valid until the loop's
 * current batch has ended: its closed callback runs then, never inside this
 * call, and C is freed only after that and once its data path has drained. */
void qpg__conn_close(struct qpg__conn *c, enum qpg_err_class err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void qpg__stat_add(atomic_ullong *a, unsigned long long v)
{
	atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}

void qpg__phase_begin(struct qpg__conn *c);
void qpg__phase_end(struct qpg__conn *c, enum qpg_phase p);

#endif

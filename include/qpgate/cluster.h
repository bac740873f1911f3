/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate across many servers: membership and liveness in etcd (v3, through
 * its JSON gateway), a member's entry, the view of every member, and which
 * member owns a key.
 *
 * etcd holds only who the members are: their control address, TLS name,
 * public-key hash, state and load. Never a value, a key of the KV store,
 * an rkey, a grant or a ticket: the data path stays qpgate's.
 *
 * Keys in etcd: /qpgate/NAME/members/ID, each under its server's lease.
 * The value is a member entry in JSON (docs/protocol.md, "Cluster
 * membership"). */
#ifndef QPGATE_CLUSTER_H
#define QPGATE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QPG_CLUSTER_ID_MAX     63   /* [A-Za-z0-9._-], 1..63 bytes */
#define QPG_CLUSTER_NAME_MAX   63   /* the cluster's name: the same alphabet */
#define QPG_CLUSTER_HOST_MAX   253  /* a DNS name, or a numeric address */
#define QPG_CLUSTER_ENTRY_MAX  2048 /* a member entry's JSON, at most */
#define QPG_CLUSTER_WEIGHT_MAX 1000

enum qpg_member_state {
	QPG_MEMBER_WARMING = 0,	 /* registered, not serving keys yet */
	QPG_MEMBER_ACTIVE = 1,	 /* owns its share of the keys */
	QPG_MEMBER_DRAINING = 2, /* leaving: owns nothing, finishes what is in flight */
};
const char *qpg_member_state_name(enum qpg_member_state s);

struct qpg_cluster_member {
	char id[QPG_CLUSTER_ID_MAX + 1];
	char host[QPG_CLUSTER_HOST_MAX + 1]; /* control address */
	uint16_t port;
	bool tcp;				 /* transport: tcp, else rdma */
	char tls_name[QPG_CLUSTER_HOST_MAX + 1]; /* the name its certificate carries */
	uint64_t incarnation;			 /* random, new at each registration */
	enum qpg_member_state state;
	uint32_t weight; /* 1..QPG_CLUSTER_WEIGHT_MAX */
	uint32_t clients, max_clients;
	uint8_t spki_sha256[32]; /* SHA-256 of its certificate's public key (DER SPKI) */
	int64_t mod_revision;	 /* etcd's, of this entry (not part of the JSON) */
};

/* M as JSON into BUF: its length, or -ENOSPC / -EINVAL (M is not valid). */
int qpg_cluster_member_to_json(const struct qpg_cluster_member *m, char *buf, size_t len);
/* Parse and check an entry: 0, or -EINVAL with the reason in WHY. Every
 * field is required, typed and bounded; unknown fields are ignored (a newer
 * server may add some). */
int qpg_cluster_member_from_json(struct qpg_cluster_member *m, const char *json, size_t len,
				 char *why, size_t why_len);
/* True when S is a valid member ID or cluster name. */
bool qpg_cluster_name_ok(const char *s);

/* Every member, as of one etcd revision. Immutable once published. */
struct qpg_cluster_view {
	int64_t revision; /* etcd's revision this view is complete at */
	unsigned n;
	struct qpg_cluster_member m[]; /* sorted by id */
};

/* The member that owns KEY: weighted rendezvous hashing (HRW) over the
 * view's ACTIVE members. Its index in V, or -1 when no member is active.
 * Servers and clients compute it alike, from the member IDs alone, so a
 * member that restarts under the same ID owns the same keys. */
int qpg_cluster_owner(const struct qpg_cluster_view *v, const void *key, size_t len);
/* The index of the member with ID in V, or -1. */
int qpg_cluster_find(const struct qpg_cluster_view *v, const char *id);

/* Where etcd is and how to reach it. */
struct qpg_cluster_opts {
	const char *endpoints; /* "https://h1:2379,https://h2:2379" (http:// for a lab) */
	const char *name;      /* the cluster's name */
	const char *ca;	       /* TLS to etcd: its CA, our certificate and key */
	const char *cert;
	const char *key;
	/* etcd's own users (its token auth): a name, and a file that holds the
	 * password (never the password itself: a command line is public). NULL:
	 * no user. Clients need a user whose role may only read /qpgate/NAME/;
	 * servers one that may also write it (docs/cluster.md, "Trust"). */
	const char *user;
	const char *password_file;
	unsigned timeout_ms; /* one request (default 2000) */
	bool quiet;	     /* no warning on stderr for a plain http:// endpoint */
	/* Servers: the staleness bound S (default QPG_CLUSTER_STALENESS_MS). A
	 * member answers only while its view is known current within S, and
	 * serves a key it gained only S after it learned of the change. Every
	 * member of a cluster must use the same S. */
	unsigned staleness_ms;
};
#define QPG_CLUSTER_STALENESS_MS 1000

/* ---- A watched view (clients, and servers of their own cluster) ---- */

struct qpg_cluster_watch;
/* Called on the watch's thread after each new view is published, in order:
 * one view for each etcd revision that changed a member, so no change is
 * ever folded into a later one. GAP: changes may have been missed (the
 * watch's revision was compacted: called at once with OLD == NOW, and again
 * with the view read afresh): a server drops every key then. */
typedef void (*qpg_cluster_view_cb)(void *user, const struct qpg_cluster_view *old,
				    const struct qpg_cluster_view *now, bool gap);

/* Read the member prefix (an error, and nothing started, when etcd cannot
 * be read), then watch it from the next revision on a thread of its own:
 * a stream that fails or is silent for 5 s reopened from the first
 * revision not applied, with jittered backoff; a compacted revision read
 * again. Reads only: a client needs no write access to etcd. CB may be
 * NULL. */
int qpg_cluster_watch_start(struct qpg_cluster_watch **out, const struct qpg_cluster_opts *o,
			    qpg_cluster_view_cb cb, void *user, char *err, size_t err_len);
void qpg_cluster_watch_stop(struct qpg_cluster_watch *w);
/* The current view, with a reference of the caller's own (no lock: an
 * atomic pointer). Every get is paired with a put. */
const struct qpg_cluster_view *qpg_cluster_view_get(struct qpg_cluster_watch *w);
void qpg_cluster_view_put(const struct qpg_cluster_view *v);
/* The newest etcd revision the watch is known complete at: every change up
 * to it is applied. Taken only from events applied and from reads, never
 * from a reply's header or a progress notification alone. */
int64_t qpg_cluster_watch_revision(const struct qpg_cluster_watch *w);
/* Wait until the watch is complete at REV or later, at most TIMEOUT_MS: 0
 * or -ETIMEDOUT. Writes nothing to etcd (servers' own writes, several a
 * second each, keep every watch of a live cluster moving). */
int qpg_cluster_watch_catch_up(struct qpg_cluster_watch *w, int64_t rev, unsigned timeout_ms);

struct qpg_cluster_watch_stats {
	uint64_t views;	      /* views published */
	uint64_t reopens;     /* streams reopened (silent, closed or failed) */
	uint64_t rereads;     /* prefix read again (compaction) */
	uint64_t bad_entries; /* entries that did not parse, left out of views */
	bool etcd_ok;	      /* the stream is up now */
};
void qpg_cluster_watch_stats(struct qpg_cluster_watch *w, struct qpg_cluster_watch_stats *out);

/* ---- A server's registration ---- */

struct qpg_cluster_reg;
struct qpg_cluster_reg_opts {
	struct qpg_cluster_opts etcd;
	struct qpg_cluster_member self; /* id, host, port, tcp, tls_name, weight, spki */
	unsigned ttl_s;			/* lease TTL (default 3; etcd's least is 2) */
	unsigned keepalive_ms;		/* default 1000 */
	unsigned load_every_ms;		/* refresh the load at most this often (default 3000) */
	/* The lease is lost (etcd said so, or keepalives failed for a whole
	 * TTL): stop serving and drop what may be stale, now. Called on the
	 * registration's thread, before it registers again. */
	void (*lost)(void *user);
	/* The load to publish: connected clients and the limit. */
	void (*load)(void *user, uint32_t *clients, uint32_t *max_clients);
	void *user;
	/* The caller listens on self.port now, alone (qpgate-server checks that
	 * no other process holds it). Then an entry under this ID that names
	 * self.host and self.port can only be a dead predecessor's, whose lease
	 * still runs: the first registration takes it over instead of failing.
	 * An entry naming any other address is still refused. */
	bool holds_port;
};

/* Grant a lease and create this member's entry if absent (state warming).
 * Fails with -EEXIST when a member with the same ID is registered (the
 * error says which; but see holds_port), with -EHOSTUNREACH when etcd cannot be reached, and
 * starts nothing then. Otherwise a thread keeps the lease alive. */
int qpg_cluster_register(struct qpg_cluster_reg **out, const struct qpg_cluster_reg_opts *o,
			 char *err, size_t err_len);
/* Publish a new state (warming → active → draining). 0 or a negative errno. */
int qpg_cluster_set_state(struct qpg_cluster_reg *r, enum qpg_member_state s);
/* Until when (CLOCK_BOOTTIME ns) the lease is known alive: the send time of
 * the last acknowledged keepalive plus the TTL. A server serves keys only
 * before it: lease fencing. 0 while unregistered. Lock-free. */
uint64_t qpg_cluster_lease_until(const struct qpg_cluster_reg *r);
/* The incarnation registered now (it changes after a lost lease). */
uint64_t qpg_cluster_incarnation(const struct qpg_cluster_reg *r);
/* A graceful leave: state draining, then the lease revoked (the entry goes
 * with it), then the thread ends. Safe to call once; destroy frees. */
void qpg_cluster_leave(struct qpg_cluster_reg *r);
void qpg_cluster_reg_destroy(struct qpg_cluster_reg *r);

struct qpg_cluster_reg_stats {
	uint64_t registrations;	  /* 1 at start, one more per lost lease */
	uint64_t leases_lost;	  /* lost leases */
	uint64_t keepalive_fails; /* keepalives etcd did not answer */
	bool etcd_ok;		  /* the last keepalive was answered */
};
void qpg_cluster_reg_stats(const struct qpg_cluster_reg *r, struct qpg_cluster_reg_stats *out);

/* ---- A KV service as a member ---- */

struct qpg_kv_service;
struct qpg_cluster_kv;
/* Watch the cluster O names and gate K's requests by it: a key is served
 * only by its owner, in a view at least as new as the request's, while the
 * lease is known alive. Every view change drops the keys this member no
 * longer owns (all of them after a gap). Until qpg_cluster_kv_set_reg,
 * every request is answered UNAVAILABLE. */
int qpg_cluster_kv_attach(struct qpg_cluster_kv **out, struct qpg_kv_service *k,
			  const struct qpg_cluster_opts *o, const char *member_id, char *err,
			  size_t err_len);
/* The registration whose lease and incarnation the gate judges by. */
void qpg_cluster_kv_set_reg(struct qpg_cluster_kv *a, struct qpg_cluster_reg *r);
/* The lease was lost: drop every key now (the registration's `lost`). */
void qpg_cluster_kv_lost(struct qpg_cluster_kv *a);
/* Stop gating and watching, and free A: once the server's loops have
 * stopped (no request is in the gate). */
void qpg_cluster_kv_detach(struct qpg_cluster_kv *a);

struct qpg_cluster_kv_stats {
	uint64_t drops;	       /* view changes that dropped keys */
	uint64_t keys_dropped; /* keys they dropped */
	uint64_t catch_ups;    /* times a request was told to wait (a newer view, a gained key) */
	uint64_t wrong_owner;  /* requests answered WRONG_OWNER */
	uint64_t fenced;       /* requests answered UNAVAILABLE (lease, gap) */
	uint64_t stale;	       /* ... UNAVAILABLE: the view not known current within S */
};
void qpg_cluster_kv_stats(struct qpg_cluster_kv *a, struct qpg_cluster_kv_stats *out);

/* The CLOCK_BOOTTIME now, in ns: the clock lease fencing is judged on (it
 * goes on through a suspend, where CLOCK_MONOTONIC stops). */
uint64_t qpg_cluster_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif

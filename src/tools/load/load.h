/* SPDX-License-Identifier: BSD-2-Clause */
/* The load engine behind qpgate-client and qpgate-perf: open N connections
 * from one event loop (at most WINDOW handshakes at a time, optionally
 * RAMP per second), hold them all open together, then echo and verify
 * messages for a count or a duration, and collect what happened. */
#ifndef QPG_LOAD_H
#define QPG_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "qpgate/client.h"
#include "qpgate/hist.h"
#include "stamp.h"

struct load_result;

struct load_opts {
	int nconns;
	long msgs;	   /* per connection; ignored when duration_s > 0 */
	double duration_s; /* traffic phase length, 0: use msgs */
	uint32_t size;
	long window;		  /* handshakes (sessions) in flight */
	unsigned qps_per_session; /* connections brought up over one TLS session */
	long inflight;		  /* echoes in flight over all connections, 0: one per connection */
	/* Time one echo in this many on each connection (1: every echo; all
	 * are verified either way). A clock read can cost a system call (a
	 * VM's HPET: about 1 us), and a busy client makes two per echo. */
	long lat_every;
	const struct stamp *clock; /* of the latency stamps; NULL: CLOCK_MONOTONIC */
	double ramp;		   /* new connections per second, 0: as fast as the window allows */
	long hold_ms;		   /* all connected -> wait -> traffic */
	long timeout_ms;	   /* whole run */
	int corrupt_at;		   /* test hook, -1: off */
	int oversize_at;	   /* test hook: conn 0 sends message K oversized, -1: off */
	/* Test hook: conn 0 stops before message PAUSE_AT (-1: off), writes
	 * RESUME_FILE.paused, and goes on once RESUME_FILE exists: a quiet,
	 * live connection for a packet injector to aim at. */
	int pause_at;
	const char *resume_file;
	const char *ready_file;
	const char *release_file; /* end the hold early once this file exists */
	const char *stop_file;	  /* stop sending, as if the duration ended, once it exists */
	bool verbose;
	bool report_gbits; /* --report_gbits: bandwidth in Gb/s, not MiB/s */
	/* Open one connection alone first, so that the rest can resume its
	 * TLS session (set when the client resumes). */
	bool prime;
	/* Called about every 250 ms while running (live progress). */
	void (*progress)(const struct load_result *r, const char *phase, void *arg);
	void *progress_arg;
	/* Called once when the connect phase ends, all connections still up. */
	void (*connected)(const struct load_result *r, void *arg);
	/* Called for every connection that was established, as it closes
	 * (with threads, from each engine's thread). */
	void (*conn_done)(const struct qpg_conn_info *ci, void *arg);
	/* Set by load_run_spread for each of its engines: the global index of
	 * the engine's first connection, and what the engines share (NULL for
	 * an engine alone): their common start, their rendezvous once
	 * connected (the first announces the sum), and their summed progress
	 * (load_spread.c). */
	int base;
	void *sync;
	uint64_t (*sync_t0)(void *sync);
	void (*sync_connected)(void *sync, struct qpg_client *cl, const struct load_result *r);
	void (*sync_progress)(void *sync, const struct load_result *r, const char *phase);
};

struct load_result {
	int nconns;
	int started, established, failed;
	int settled;   /* handshakes that ended: established, or failed before that */
	int resumed;   /* established with a resumed TLS session */
	long attempts; /* connects made, retries included (qpg_conn_info.attempts) */
	int retried;   /* connections that took more than one */
	long sent, verified, mismatches;
	bool timed_out;
	double connect_s, traffic_s;
	/* With prime: from the start to the priming connection's settling,
	 * the span in which only it ran (a full handshake, for the ticket
	 * the others resume); 0 without. */
	double prime_s;
	double clock_drift;    /* stamp_check() at the end of the traffic */
	struct qpg_hist lat;   /* echo round trip, ns */
	struct qpg_hist setup; /* TCP connect to RTS, ns */
	struct qpg_hist phase[QPG_PHASE_COUNT];
	int fail_by_class[QPG_ERR_COUNT];
	char fail_example[QPG_ERR_COUNT][256];
	struct qpg_conn_info first; /* connection 0, for the QPN/PSN line */
	bool have_first;
};

/* Size CO for O: messages of O's size, and a pool for its connection count
 * (a receive and a send each). */
void load_size_client(struct qpg_client_opts *co, const struct load_opts *o);
/* Options that cannot work together: false, with why on stderr. */
bool load_opts_fit(const struct qpg_client_opts *co, const struct load_opts *o, const char *prog);
/* load_ports.c. Whether O's clients fit in the local ports of CO's source
 * addresses (one without --source) toward one server port: false, with
 * what to do on stderr. */
bool load_ports_fit(const struct qpg_client_opts *co, const struct load_opts *o, const char *prog);
/* Without --source, for many clients: the local address toward CO's host,
 * written to BUF and set as CO's source, so that the library picks the
 * local ports (a cursor over the range) instead of connect()'s search. */
void load_pick_source(struct qpg_client_opts *co, const struct load_opts *o, char *buf, size_t len,
		      const char *prog);
/* A note on stderr when many connections over loopback may outrun
 * net.core.netdev_max_backlog (load_ports.c says why). */
void load_note_loopback(const struct qpg_client_opts *co, const struct load_opts *o,
			const char *prog);

/* Pass these to qpg_client_create for a client that load_run drives. */
extern const struct qpg_client_cbs load_callbacks;

void load_opts_default(struct load_opts *o);
/* Runs the whole thing on CL. Returns 0, or -ENOMEM. */
int load_run(struct qpg_client *cl, const struct load_opts *o, struct load_result *r);
/* load_spread.c: the same over THREADS engines, each a thread with a client
 * of its own made from CO and CBS (load_callbacks), with its share of the
 * connections, the window, --inflight and --ramp: a client's handshakes
 * then use as many cores as the server's. The engines connect, announce
 * (ready file, connected) and start their traffic together; R is the sum.
 * 0, -ENOMEM, or -EIO with the reason in ERR. */
int load_run_spread(const struct qpg_client_opts *co, const struct load_opts *o, int threads,
		    struct load_result *r, char *err, size_t err_len);
/* The engines per default: one per online CPU, none with fewer than 64
 * connections (and never more than 64). */
int load_default_threads(int nconns);

/* What an engine of load_run_spread calls (load.c). */
void load_result_init(struct load_result *r, int nconns);
void load_announce_connected(const struct load_opts *o, const struct load_result *r);
/* perftest-style summary on stdout. */
/* perftest-style tables; bandwidth in MiB/s, or Gb/s with O->report_gbits. */
void load_print(const struct load_result *r, const struct load_opts *o);
/* True when every connection connected and every echo verified. */
bool load_ok(const struct load_result *r, const struct load_opts *o);

#endif

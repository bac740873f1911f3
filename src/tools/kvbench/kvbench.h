/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kvbench's load: logical workers issuing GETs through a KV pool,
 * each value checked against the checksum of what was stored. The tool
 * (kvbench.c) sets a bench up, runs it at each point, and reports. */
#ifndef QPG_KVBENCH_H
#define QPG_KVBENCH_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <xxhash.h>

#include "qpgate/hist.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_cluster.h"

struct bench;
struct kvb_turn;
struct worker;

/* A workload other than the GETs (kvbench_run.c's own): its turn, and the
 * state each worker keeps for one. The main picks it; the load only calls
 * it, so the load does not depend on any workload. */
struct kvb_workload {
	void (*issue)(struct worker *w); /* the next turn (from kvb_issue) */
	struct kvb_turn *(*turn_new)(const struct bench *b);
	void (*turn_free)(struct kvb_turn *t);
};

struct worker {
	struct qpg_kv_request req;
	struct bench *b;
	uint64_t rng;
	uint32_t key;
	char keybuf[24];
	XXH64_state_t *xxh; /* running checksum of the value being received */
	uint64_t t0;
	long ops, mismatches, errors;
	long puts; /* of OPS, PUTs (--put-ratio) */
	/* --cluster: a miss is filled again (cache-aside), with this value */
	long misses, unavailable, refills;
	uint8_t *refill;
	/* --workload prefix (kvbench_prefix.c): the turn in progress, turns
	 * done, EXISTS lookups, blocks asked about and found cached. OPS
	 * counts its GETs verified and PUTs, MISSES the blocks evicted
	 * between the lookup and the read. */
	struct kvb_turn *turn;
	long turns, lookups, blocks, blocks_hit;
	uint8_t *into; /* --register: where its GETs land (a slice of the arena) */
};

/* Latencies are added on the thread that completes a GET: one histogram
 * per such thread (the pool's, and the caller's for inline completions). */
#define KVB_LAT_SLOTS 260

struct bench {
	struct qpg_kv_pool_opts po;
	unsigned workers;
	uint32_t nkeys, value_size;
	double duration_s;
	long max_ops;
	bool zipf;
	double *zipf_cdf;
	uint64_t *expect; /* XXH64 of each key's value */
	/* --put-ratio: this percentage of the workers' operations are PUTs of
	 * the key's own value (so GETs still verify), from VALUES, every
	 * key's value laid out in turn (NULL without PUTs). */
	unsigned put_pct;
	uint8_t *values;
	/* --workload prefix: blocks per prompt (0: the GET workload), the
	 * first SHARED of them a family's system prompt; NKEYS is then the
	 * number of prompts, and EXPECT is per block (kvb_prefix_ids). */
	unsigned blocks, shared;
	const struct kvb_workload *workload; /* NULL: GETs (and --put-ratio PUTs) */
	/* its prompts in the order turns began, for --lru-capacity */
	uint32_t *trace;
	long trace_cap;
	atomic_long trace_n;
	pid_t server_pid; /* --server-pid: its CPU per GET too (0: none) */
	/* --register: the workers GET into one arena registered with the
	 * target (qpg_kv_register), a value's room each, as an inference
	 * engine's KV pool: one-sided GETs READ straight into it. */
	bool reg;
	/* Where the GETs go: one server's pool, or with --cluster the members
	 * etcd names (kvbench_cluster.c), behind one interface. */
	struct qpg_kv_target *target;
	struct qpg_cluster_opts etcd;
	/* A miss is filled again (cache-aside): a key evicted, or not (yet)
	 * held by a member that took it over. Else a miss is an error. */
	bool refill_misses;
	struct kvb_view {
		double t; /* seconds since the run's start */
		int64_t rev;
		unsigned members, active;
	} views[256];
	atomic_int nviews;
	uint64_t run_t0;
	json_t *cluster_report; /* the last run's, from kvb_target_close */
	atomic_long issued;
	atomic_bool stop;
	atomic_int active;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct qpg_hist *lat; /* [KVB_LAT_SLOTS], one per completing thread */
	atomic_int lat_slots; /* handed out */
	int lat_generation;   /* a run's slots are not the last run's */
};

struct run_result {
	uint8_t get_mode;
	unsigned workers, clients, threads;
	unsigned credits; /* per connection, as agreed with the server */
	long ops, mismatches, errors;
	long puts;				 /* of OPS (--put-ratio) */
	long misses, unavailable, refills;	 /* --cluster */
	long turns, lookups, blocks, blocks_hit; /* --workload prefix */
	long zero_copy;				 /* GETs READ straight into the arena */
	double secs, ops_per_s, gib_per_s;
	struct qpg_hist lat;
	long rss_kb;
	/* CPU (user + system) per GET over the measured part of the run:
	 * this process's, and the server's if its pid was given (< 0: not
	 * known). In one machine's loopback the device's work is done in
	 * whichever process posts, so only their sum compares across builds. */
	double client_cpu_us, server_cpu_us;
	long dev_qps; /* device QPs while the pool was up, minus before */
	int connect_error;
	char why[256];
};

/* Connect a pool of CLIENTS connections on THREADS threads, preload the
 * keys, run WORKERS workers until the duration or op count, into R. */
void kvbench_run_once(struct bench *b, unsigned threads, unsigned clients, unsigned workers,
		      bool do_preload, struct run_result *res);

/* Submit to the target. */
int kvb_submit(struct bench *b, struct qpg_kv_request *r);
/* kvbench_run.c, for the workloads: a worker's next operation (or turn),
 * unless the run is over; a worker is done; this thread's
 * latency histogram; the next key (or prompt) by the distribution. */
void kvb_issue(struct worker *w);
void kvb_worker_stop(struct bench *b);
struct qpg_hist *kvb_thread_lat(struct bench *b);
uint32_t kvb_pick_key(struct worker *w);
/* kvbench_prefix.c: --workload prefix, and how many blocks it has
 * (EXPECT's size). */
extern const struct kvb_workload kvb_prefix_workload;
uint64_t kvb_prefix_ids(const struct bench *b);
/* The hit ratio an exact LRU of ROOM_BYTES (in the store's blocks for a
 * value) reaches on the last run's trace of turns; -1 if it cannot. */
double kvb_prefix_lru(const struct bench *b, uint64_t room_bytes);
/* kvbench_cluster.c: the target for one run, from PO: the cluster etcd
 * names (--cluster), else PO's one server. */
int kvb_target_open(struct bench *b, const struct qpg_kv_pool_opts *po, char *err, size_t len);
/* A target routed by a view (a cluster): per member ops, misses,
 * unavailable, errors, and the view changes seen, with their times,
 * printed and returned as JSON (else NULL). Then closed. */
json_t *kvb_target_close(struct bench *b);

#endif

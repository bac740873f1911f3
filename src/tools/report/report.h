/* SPDX-License-Identifier: BSD-2-Clause */
/* The capacity sweep's report: report.json, report.md and a self-contained
 * report.html with SVG charts, from the points the sweep measured. */
#ifndef QPG_REPORT_H
#define QPG_REPORT_H

#include <jansson.h>
#include <stdbool.h>

#include "exhaust.h"
#include "seeds.h"

enum sweep_stage { STAGE_STEP, STAGE_SEARCH_FULL, STAGE_SEARCH_99 };

/* One qpgate-perf run, reduced to what the report draws. Unknown values
 * are negative. */
struct sweep_point {
	int clients;
	enum sweep_stage stage;
	int connected, failed;
	double success;	   /* 0..1 */
	bool all_verified; /* every echo came back intact (perf exited 0) */
	double connect_p50_ms, connect_p99_ms;
	double kb_per_client;
	double msgs_per_s, lat_p50_us, lat_p99_us;
	long verified, mismatches;
	double dev_qps_per_client; /* device QPs (connected - baseline) / clients */
	double wall_s;
	bool settled;	     /* resources back to baseline before the next run */
	bool server_exit_ok; /* a server the sweep started exited 0 */
	double settle_s;
	char failures[256];   /* "timeout 3, server_full 1" or "" */
	struct exhausted exh; /* what ran out, when anything failed */
	json_t *perf;	      /* qpgate-perf's own JSON (owned) */
};

/* The largest N found at a success level: exact when the search closed the
 * bracket [n, fail_at) down to the resolution, a lower bound otherwise
 * (nothing failed up to the largest N tried). */
struct sweep_bound {
	int n;	     /* 0: no run reached the level */
	int fail_at; /* smallest N seen below the level, 0: none */
};

struct sweep_report {
	const char *title;
	const char *command; /* how qpgate-perf was run */
	const char *transport;
	char date[32];
	struct sweep_point *points;
	int npoints;
	struct sweep_bound full, p99;
	double total_s;
	bool compare_seeds; /* --compare-seeds: the seed prototype's figures beside ours */
	const struct seed_runs *seeds; /* read from their data file (seeds.h) */
};

/* Writes DIR/report.json, DIR/report.md and DIR/report.html. Returns 0, or
 * -errno naming the file that failed in ERR. */
int report_write(const struct sweep_report *rep, const char *dir, char *err, size_t err_len);

const char *sweep_stage_name(enum sweep_stage s);

#endif

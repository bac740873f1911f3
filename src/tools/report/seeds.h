/* SPDX-License-Identifier: BSD-2-Clause */
/* The original team's published capacity runs, read from their data file
 * (data/seed-runs.json; installed in DATADIR/qpgate/), for qpgate-sweep
 * --compare-seeds. */
#ifndef QPG_TOOLS_SEEDS_H
#define QPG_TOOLS_SEEDS_H

#include <stddef.h>

#define SEED_RUNS_MAX 64

struct seed_runs {
	char source[200];
	char resources[80]; /* per client */
	int largest_at_100, practical_limit;
	int n;
	struct {
		int clients, connected;
	} run[SEED_RUNS_MAX];
};

/* Read PATH (NULL: $QPGATE_DATADIR/seed-runs.json, else the installed
 * DATADIR/qpgate/seed-runs.json beside this program's prefix, else the
 * source tree's data/). 0, or -errno / -EINVAL with the file and the reason
 * in ERR. */
int seed_runs_load(struct seed_runs *s, const char *path, char *err, size_t err_len);

#endif

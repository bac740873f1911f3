/* SPDX-License-Identifier: BSD-2-Clause */
/* What a batch EXISTS costs against one GET: issue 57's bar is "an EXISTS
 * of 64 keys at most 1.5x one 4 KiB GET's round trip". One request at a
 * time through one pool connection, alternating a GET of a 4 KiB value
 * and an EXISTS of 64 keys (64-hex names, as a prefix cache's), ROUNDS
 * times; prints the median and p99 of each and their ratio.
 *   qpg_exists_rtt HOST SERVERNAME PORT CA TRANSPORT [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qpgate/kv_call.h"
#include "qpgate/kv_target.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: qpg_exists_rtt HOST SERVERNAME PORT CA TRANSPORT [ROUNDS]\n");
		return 2;
	}
	int rounds = argc > 6 ? atoi(argv[6]) : 2000;
	if (rounds < 10)
		rounds = 10;
	struct qpg_kv_target *t;
	char err[256];
	if (qpg_kv_pool_open(&t, argv[1], (uint16_t)atoi(argv[3]), argv[2], argv[4], NULL, NULL,
			     argv[5], 1, 1, 0, err, sizeof(err))) {
		fprintf(stderr, "qpg_exists_rtt: %s\n", err);
		return 1;
	}
	static uint8_t value[4096], got[4096];
	memset(value, 0x5a, sizeof(value));
	static char names[64][80];
	struct qpg_kv_key keys[64];
	for (int i = 0; i < 64; i++) {
		snprintf(names[i], sizeof(names[i]), "bench-model/%064x", i * 2654435761u);
		keys[i] = (struct qpg_kv_key){.key = names[i], .len = (uint16_t)strlen(names[i])};
		/* half of them stored: a prefix of 32 */
		if (i < 32 && qpg_kv_call_wait(t, QPG_KV_PUT, names[i], keys[i].len, "v", 1, NULL, 0,
					       NULL, NULL)) {
			fprintf(stderr, "qpg_exists_rtt: PUT failed\n");
			return 1;
		}
	}
	if (qpg_kv_call_wait(t, QPG_KV_PUT, "rtt-4k", 6, value, sizeof(value), NULL, 0, NULL, NULL)) {
		fprintf(stderr, "qpg_exists_rtt: PUT failed\n");
		return 1;
	}
	uint64_t *g = calloc((size_t)rounds, sizeof(*g)), *e = calloc((size_t)rounds, sizeof(*e));
	if (!g || !e)
		return 1;
	uint8_t bits[8];
	for (int r = -50; r < rounds; r++) { /* 50 to warm up */
		uint64_t t0 = now_ns();
		uint32_t len = 0;
		int st = qpg_kv_call_wait(t, QPG_KV_GET, "rtt-4k", 6, NULL, 0, got, sizeof(got), &len,
					  NULL);
		uint64_t t1 = now_ns();
		uint32_t prefix = 0;
		int xs = qpg_kv_call_exists_wait(t, keys, 64, bits, &prefix);
		uint64_t t2 = now_ns();
		if (st || len != sizeof(value) || xs || prefix != 32) {
			fprintf(stderr, "qpg_exists_rtt: a wrong answer (%d %u %d %u)\n", st, len, xs,
				prefix);
			return 1;
		}
		if (r >= 0) {
			g[r] = t1 - t0;
			e[r] = t2 - t1;
		}
	}
	qsort(g, (size_t)rounds, sizeof(*g), cmp);
	qsort(e, (size_t)rounds, sizeof(*e), cmp);
	double gm = g[rounds / 2] / 1e3, em = e[rounds / 2] / 1e3;
	printf(" %-28s %10s %10s\n", "one at a time", "p50 us", "p99 us");
	printf(" %-28s %10.1f %10.1f\n", "GET 4 KiB", gm, g[rounds * 99 / 100] / 1e3);
	printf(" %-28s %10.1f %10.1f\n", "EXISTS 64 keys (32 stored)", em,
	       e[rounds * 99 / 100] / 1e3);
	printf(" EXISTS/GET at p50: %.2fx (issue 57's bar: at most 1.5x), %d rounds, %s\n", em / gm,
	       rounds, argv[5]);
	free(g);
	free(e);
	qpg_kv_target_destroy(t);
	return 0;
}

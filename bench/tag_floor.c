/* SPDX-License-Identifier: BSD-2-Clause */
/* The cost of one message tag, as the echo path pays it: qpg__auth_tag and
 * qpg__auth_verify (auth.c) on a frame of a given length, keyed as from
 * TLS. An echo round trip makes four of them (the request's tag and check,
 * the reply's tag and check), so bench/anchors.sh sets auth's extra cost
 * per round trip (the echo p50 with auth less without) against 4 x this.
 *
 *   qpg_tag_floor [-l FRAME_BYTES] [-n N]
 *
 * Prints "tag len=L ns=T" (T: CPU nanoseconds per tag or check, the mean of
 * N of each, on one thread). Exits 1 if a check fails. */
#include "auth.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floor.h"

int main(int argc, char **argv)
{
	long len = 80, n = 200000; /* a 64-byte echo's frame: 16 of header */
	int c;
	while ((c = getopt(argc, argv, "l:n:")) != -1) {
		char *end;
		long v = strtol(optarg, &end, 10);
		if (*end || v <= 0 || (c == 'l' && v > 65536)) {
			fprintf(stderr, "qpg_tag_floor: -%c wants a positive count, not '%s'\n", c, optarg);
			return 2;
		}
		if (c == 'l')
			len = v;
		else if (c == 'n')
			n = v;
		else
			return 2;
	}
	uint8_t key[QPG__AUTH_KEY_LEN], salt[QPG__AUTH_SALT_LEN];
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 7 + 1);
	memset(salt, 0x5a, sizeof(salt));
	struct qpg__auth tx, rx;
	if (qpg__auth_init_raw(&tx, key, salt, key, salt) || qpg__auth_init_raw(&rx, key, salt, key, salt)) {
		fprintf(stderr, "qpg_tag_floor: could not set up the MAC\n");
		return 1;
	}
	uint8_t *frame = calloc(1, (size_t)len);
	uint8_t tag[16];
	int bad = 0;
	double t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < n; i++) {
		frame[i % len] ^= 1;
		qpg__auth_tag(&tx.tx, (uint64_t)i, frame, (size_t)len, tag);
		bad |= qpg__auth_verify(&rx.rx, (uint64_t)i, frame, (size_t)len, tag);
	}
	double t = floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	qpg__auth_free(&tx);
	qpg__auth_free(&rx);
	free(frame);
	if (bad) {
		fprintf(stderr, "qpg_tag_floor: a tag did not verify\n");
		return 1;
	}
	printf("tag len=%ld ns=%.0f\n", len, t * 1e9 / (2.0 * (double)n));
	return 0;
}

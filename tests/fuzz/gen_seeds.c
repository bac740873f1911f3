/* SPDX-License-Identifier: BSD-2-Clause */
/* Writes the seed corpus for the fuzzers: valid HELLO/ACCEPT/REJECT
 * messages, each invalid variant the server names, and valid frames.
 *   gen_seeds DIR   (creates DIR/bootstrap and DIR/frame) */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "qpgate/kv.h"
#include "qpgate/wire.h"
#include "wire_sample.h"

static void put(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		perror(path);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	char boot[400], frame[400];
	snprintf(boot, sizeof(boot), "%s/bootstrap", argv[1]);
	snprintf(frame, sizeof(frame), "%s/frame", argv[1]);
	mkdir(argv[1], 0755);
	mkdir(boot, 0755);
	mkdir(frame, 0755);

	uint8_t b[256];
	struct qpg_wire_params p = qpg_test_wire_sample();
	int n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_HELLO, &p, NULL);
	put(boot, "hello-rdma", b, (size_t)n);
	p.conn_id = 42;
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_ACCEPT, &p, NULL);
	put(boot, "accept-rdma", b, (size_t)n);
	/* a session of three QPs, both ways */
	struct qpg_wire_qp extra[2] = {{0x123, 0x456, 0}, {0x789, 0xabc, 0}};
	struct qpg_wire_params sess = qpg_test_wire_sample();
	sess.extra_qps = 2;
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_HELLO, &sess, extra);
	put(boot, "hello-session", b, (size_t)n);
	sess.conn_id = 7;
	extra[0].conn_id = 8;
	extra[1].conn_id = 9;
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_ACCEPT, &sess, extra);
	put(boot, "accept-session", b, (size_t)n);
	struct qpg_wire_params t = {.transport = QPG_TRANSPORT_TCP,
				    .service = QPG_SERVICE_KV,
				    .max_msg = 1 << 20,
				    .credits = 64};
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_HELLO, &t, NULL);
	put(boot, "hello-tcp", b, (size_t)n);
	t.flags = QPG_WIRE_FLAG_TICKET; /* a client that resumes, asking for a ticket */
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_HELLO, &t, NULL);
	put(boot, "hello-tcp-ticket", b, (size_t)n);
	t.flags = 0;
	n = qpg_wire_encode_reject(b, sizeof(b), QPG_REJECT_SERVER_FULL,
				   "server full (100 of 100)");
	put(boot, "reject-full", b, (size_t)n);
	p.psn = 0x1000000;
	n = qpg_wire_encode_params(b, sizeof(b), QPG_WIRE_HELLO, &p, NULL);
	put(boot, "hello-bad-psn", b, (size_t)n);
	p.psn = 1;
	b[4] = QPG_WIRE_VERSION + 1; /* a version this side does not speak */
	put(boot, "hello-unknown-version", b, (size_t)n);
	put(boot, "hello-truncated", b, 20);

	static const char *const payloads[] = {"", "x", "hello, qpgate",
					       "0123456789abcdef0123456789abcdef"};
	for (unsigned i = 0; i < 4; i++) {
		struct qpg_frame_hdr h = {.version = QPG_WIRE_VERSION,
					  .type = QPG_FRAME_ECHO_REQ,
					  .len = (uint32_t)strlen(payloads[i]),
					  .seq = i};
		qpg_frame_hdr_encode(b, &h);
		memcpy(b + QPG_FRAME_HDR_LEN, payloads[i], h.len);
		memset(b + QPG_FRAME_HDR_LEN + h.len, 0x5a, QPG_FRAME_TAG_LEN);
		char name[32];
		snprintf(name, sizeof(name), "frame-%u", i);
		put(frame, name, b, QPG_FRAME_HDR_LEN + h.len + QPG_FRAME_TAG_LEN);
	}
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* One valid set of bootstrap parameters (RDMA, auth on, GID
 * ::ffff:127.0.0.1), shared by the wire unit test and the fuzzers' seeds. */
#ifndef QPG_TESTS_WIRE_SAMPLE_H
#define QPG_TESTS_WIRE_SAMPLE_H

#include "qpgate/wire.h"

static inline struct qpg_wire_params qpg_test_wire_sample(void)
{
	struct qpg_wire_params p = {.transport = QPG_TRANSPORT_RDMA,
				    .flags = QPG_WIRE_FLAG_AUTH,
				    .service = QPG_SERVICE_ECHO,
				    .mtu = 5,
				    .qpn = 0x123456,
				    .psn = 0xabcdef,
				    .lid = 0,
				    .port = 1,
				    .max_msg = 4096,
				    .credits = 4,
				    .conn_id = 77};
	p.gid[10] = p.gid[11] = 0xff;
	p.gid[12] = 127;
	p.gid[15] = 1;
	return p;
}

#endif

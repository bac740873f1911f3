/* Services sit above the transports: they see verified frames and answer
 * through qpg__conn_send, never through a transport directly. */
#ifndef QPG_SERVICE_H
#define QPG_SERVICE_H

#include "endpoint.h"

struct qpg__service {
	uint8_t id;
	const char *name;
	void (*message)(struct qpg__conn *c, const struct qpg_frame_hdr *h, struct qpg_buf *b);
};

extern const struct qpg__service qpg__service_echo;

#endif

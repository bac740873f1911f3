/* SPDX-License-Identifier: BSD-2-Clause */
/* The device, port and GID for an IP address (see gid_pick.c). */
#ifndef QPG_GID_PICK_H
#define QPG_GID_PICK_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct qpg__gid_pick {
	char dev[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	int index;
};

/* The one RoCE v2 GID that carries ADDR (a wildcard address: the one GID of
 * its family), on device DEV_NAME (NULL: any) and PORT (0: any). 0 and
 * *OUT; or -ENODEV, -EADDRNOTAVAIL (none) or -ENOTUNIQ (several), with the
 * candidates listed in ERR. WHAT names ADDR for a person ("the --bind
 * address"). */
int qpg__gid_pick(const struct sockaddr *addr, const char *what, const char *dev_name, int port,
		  struct qpg__gid_pick *out, char *err, size_t err_len);

/* The local address the kernel would send from toward PEER (no packet). */
int qpg__local_addr_toward(const struct sockaddr *peer, socklen_t peer_len,
			   struct sockaddr_storage *out);

/* Open the device for LOCAL (qpg__gid_pick) unless GID_INDEX >= 0 names
 * the GID (then NAME, PORT; 0: 1). 0, or negative errno and a reason. */
struct qpg_rdma_dev;
int qpg__rdma_dev_open_for(struct qpg_rdma_dev *dev, const struct sockaddr *local,
			   const char *what, const char *name, int port, int gid_index, char *err,
			   size_t err_len);

#endif

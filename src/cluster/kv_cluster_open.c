/* SPDX-License-Identifier: BSD-2-Clause */
/* qpg_kv_cluster_open: a cluster target from plain arguments, for a
 * binding that cannot lay out struct qpg_kv_cluster_opts. */
#include <errno.h>
#include <stdio.h>

#include "qpgate/kv_cluster.h"

int qpg_kv_cluster_open(struct qpg_kv_target **out, const char *endpoints, const char *name,
			const char *etcd_ca, const char *etcd_cert, const char *etcd_key,
			const char *etcd_user, const char *etcd_password_file, const char *ca,
			const char *cert, const char *key, unsigned conns, unsigned threads,
			uint32_t busy_poll_us, char *err, size_t err_len)
{
	*out = NULL;
	if (!endpoints || !name) {
		snprintf(err, err_len, "a cluster needs etcd's endpoints and the cluster's name");
		return -EINVAL;
	}
	struct qpg_kv_cluster_opts o;
	qpg_kv_cluster_opts_default(&o);
	o.etcd.endpoints = endpoints;
	o.etcd.name = name;
	o.etcd.ca = etcd_ca;
	o.etcd.cert = etcd_cert;
	o.etcd.key = etcd_key;
	o.etcd.user = etcd_user;
	o.etcd.password_file = etcd_password_file;
	o.etcd.quiet = true;
	o.pool.client.ca = ca;
	o.pool.client.cert = cert;
	o.pool.client.key = key;
	o.pool.client.busy_poll_us = busy_poll_us;
	if (conns)
		o.pool.conns = conns;
	if (threads)
		o.pool.threads = threads;
	if (o.pool.threads > o.pool.conns)
		o.pool.threads = o.pool.conns;
	struct qpg_kv_cluster *c = NULL;
	int rc = qpg_kv_cluster_create(&c, &o, err, err_len);
	if (rc == 0)
		*out = qpg_kv_cluster_target(c);
	return rc;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server's membership: its flags into the library's join, and the
 * join's leave and metrics (qpgate/cluster_join.h). */
#include "server_cluster.h"

#include <stdio.h>

int srv_cluster_start(struct srv_cluster *c, struct qpg_server *s, const struct qpg_server_opts *o,
		      const char *cert_file, struct qpg_kv_service *kv)
{
	if (!c->etcd.endpoints)
		return 0;
	if (!c->etcd.name) {
		fprintf(stderr, "qpgate-server: error: --cluster needs --cluster-name NAME\n");
		return 1;
	}
	struct qpg_cluster_join_opts jo = {
	    .etcd = c->etcd,
	    .cert_file = cert_file,
	    .id = c->id,
	    .advertise = c->advertise,
	    .advertise_name = c->advertise_name,
	    .ttl_s = c->ttl_s,
	    .weight = c->weight,
	    .drain_ms = c->drain_ms,
	};
	jo.etcd.staleness_ms = c->staleness_ms;
	char err[1024];
	if (qpg_cluster_kv_join(&c->join, s, o, kv, &jo, err, sizeof(err))) {
		fprintf(stderr, "qpgate-server: error: %s\n", err);
		return 1;
	}
	const struct qpg_cluster_member *m = qpg_cluster_join_self(c->join);
	fprintf(stderr,
		"qpgate-server: cluster %s: member %s at %s:%u (%s), incarnation %016llx, "
		"active\n",
		c->etcd.name, m->id, m->host, m->port, m->tls_name,
		(unsigned long long)qpg_cluster_join_incarnation(c->join));
	return 0;
}

void srv_cluster_signal(struct srv_cluster *c)
{
	qpg_cluster_kv_drain(c->join);
}

void srv_cluster_stop(struct srv_cluster *c)
{
	if (!c->join)
		return;
	struct qpg_cluster_kv_stats st;
	qpg_cluster_join_kv_stats(c->join, &st);
	qpg_cluster_kv_leave(c->join);
	c->join = NULL;
	fprintf(stderr, "qpgate-server: cluster: left (lease revoked)\n");
	fprintf(stderr,
		"qpgate-server: cluster: %llu view change(s) dropped %llu key(s); %llu "
		"request wait(s), %llu answered wrong owner, %llu unavailable (%llu of "
		"them with a view not known current)\n",
		(unsigned long long)st.drops, (unsigned long long)st.keys_dropped,
		(unsigned long long)st.catch_ups, (unsigned long long)st.wrong_owner,
		(unsigned long long)(st.fenced + st.stale), (unsigned long long)st.stale);
}

void srv_cluster_metrics(void *user, FILE *f)
{
	struct srv_cluster *c = user;
	if (c->join)
		qpg_cluster_join_metrics(c->join, f);
}

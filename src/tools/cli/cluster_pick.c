/* SPDX-License-Identifier: BSD-2-Clause */
/* The power of two choices over the load members publish (connected
 * clients against --max-clients): two members at random, the less loaded
 * one. It spreads load nearly as well as asking every member, and a burst
 * of clients reading the same view does not all land on the one member
 * that looked least loaded. */
#include "cluster_pick.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool cluster_pick_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "--cluster", 9) == 0 && (argv[i][9] == 0 || argv[i][9] == '='))
			return true;
	return false;
}

int cluster_pick_parse(struct cluster_pick *p, int argc, char **argv, const struct qpg_opt *client,
		       const struct qpg_opt *own, const char *synopsis, bool *clustered)
{
	const struct qpg_opt cluster[] = {QPG_OPTS_CLUSTER_PICK(p), QPG_OPT_END};
	const struct qpg_opt *const tables[] = {client, own, cluster, NULL};
	char usage[256];
	*clustered = cluster_pick_wanted(argc, argv);
	snprintf(usage, sizeof(usage), *clustered ? "%s --cluster URL --cluster-name NAME [options]"
						  : "%s [options] HOST SERVERNAME",
		 synopsis);
	return qpg_opts_parse(argc, argv, tables, usage, *clustered ? 0 : 2);
}

static double load_of(const struct qpg_cluster_member *m)
{
	return m->max_clients ? (double)m->clients / m->max_clients : (double)m->clients;
}

/* Whether M takes a TCP connection on its control port (1 s at most). */
static bool answers(const struct qpg_cluster_member *m)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	char port[8];
	snprintf(port, sizeof(port), "%u", m->port);
	if (getaddrinfo(m->host, port, &hints, &ai))
		return false;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	bool ok = false;
	if (fd >= 0) {
		int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc == 0) {
			ok = true;
		} else if (errno == EINPROGRESS) {
			struct pollfd pfd = {fd, POLLOUT, 0};
			int err = 0;
			socklen_t l = sizeof(err);
			ok = poll(&pfd, 1, 1000) == 1 &&
			     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0;
		}
		close(fd);
	}
	freeaddrinfo(ai);
	return ok;
}

static uint32_t rnd(uint32_t n)
{
	uint32_t r = 0;
	RAND_bytes((unsigned char *)&r, sizeof(r));
	return n ? r % n : 0;
}

int cluster_pick(struct cluster_pick *p, struct qpg_client_opts *co, const char *tool)
{
	if (!p->etcd.name) {
		fprintf(stderr, "error: --cluster needs --cluster-name NAME\n");
		return 1;
	}
	struct qpg_cluster_watch *w;
	char err[512];
	struct qpg_cluster_opts o = p->etcd;
	o.quiet = true;
	if (qpg_cluster_watch_start(&w, &o, NULL, NULL, err, sizeof(err))) {
		fprintf(stderr, "%s: error: cannot read the cluster: %s\n", tool, err);
		return 1;
	}
	const struct qpg_cluster_view *v = qpg_cluster_view_get(w);
	bool tcp = co->transport == QPG_TRANSPORT_TCP;
	unsigned *cand = calloc(v->n ? v->n : 1, sizeof(*cand)), n = 0;
	for (unsigned i = 0; cand && i < v->n; i++)
		if (v->m[i].state == QPG_MEMBER_ACTIVE && v->m[i].tcp == tcp)
			cand[n++] = i;
	int rc = 1;
	while (n > 0) {
		/* Two at random (the same one when only one is left). */
		unsigned a = rnd(n), b = rnd(n);
		unsigned pick = load_of(&v->m[cand[b]]) < load_of(&v->m[cand[a]]) ? b : a;
		const struct qpg_cluster_member *m = &v->m[cand[pick]];
		if (answers(m)) {
			p->chosen = *m;
			fprintf(stderr,
				"%s: cluster %s: member %s at %s:%u (load %u/%u), of %u active\n",
				tool, p->etcd.name, m->id, m->host, m->port, m->clients,
				m->max_clients, n);
			rc = 0;
			break;
		}
		fprintf(stderr, "%s: cluster %s: member %s at %s:%u refused the connect; another\n",
			tool, p->etcd.name, m->id, m->host, m->port);
		cand[pick] = cand[--n];
	}
	if (rc)
		fprintf(stderr, "%s: error: no active %s member of cluster %s takes connections\n",
			tool, tcp ? "tcp" : "rdma", p->etcd.name);
	free(cand);
	qpg_cluster_view_put(v);
	qpg_cluster_watch_stop(w);
	if (rc == 0) {
		co->host = p->chosen.host;
		co->port = p->chosen.port;
		co->servername = p->chosen.tls_name;
		co->spki_sha256 = p->chosen.spki_sha256;
	}
	return rc;
}

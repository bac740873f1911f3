/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server's membership: the flags, the SPKI hash of its certificate,
 * its registration, and the graceful leave (draining, a pause so that
 * watchers route elsewhere, then the lease revoked). */
#include "server_cluster.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static sem_t leave_sem;
static pthread_t leave_thread;
static bool leave_started;
static atomic_bool leave_cancel;
static struct {
	struct qpg_server *s;
	uint32_t max_clients;
} self;

/* SHA-256 of the certificate's public key (DER SubjectPublicKeyInfo), as
 * clients pin it. */
static int spki_hash(const char *cert_file, uint8_t out[32], char *err, size_t len)
{
	FILE *f = fopen(cert_file, "r");
	if (!f) {
		snprintf(err, len, "cannot read %s: %s", cert_file, strerror(errno));
		return -1;
	}
	X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	unsigned char *der = NULL;
	int n = x ? i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &der) : -1;
	X509_free(x);
	unsigned int hl = 0;
	int ok = n > 0 && EVP_Digest(der, (size_t)n, out, &hl, EVP_sha256(), NULL) == 1 && hl == 32;
	OPENSSL_free(der);
	if (!ok)
		snprintf(err, len, "cannot read the public key of %s", cert_file);
	return ok ? 0 : -1;
}

/* The lease is lost: the KV store may hold values another member has
 * since replaced. The echo service owns nothing. */
static void on_lost(void *user)
{
	struct srv_cluster *c = user;
	if (c->kv)
		qpg_cluster_kv_lost(c->kv);
}

static void on_load(void *user, uint32_t *clients, uint32_t *max)
{
	(void)user;
	struct qpg_server_stats st;
	qpg_server_stats(self.s, &st);
	*clients = st.connected > 0 ? (uint32_t)st.connected : 0;
	*max = self.max_clients;
}

/* HOST:PORT or [V6]:PORT into HOST and *PORT. */
static int split_hostport(const char *s, char *host, size_t hl, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s)
		return -1;
	const char *h = s, *he = colon;
	if (*h == '[') {
		h++;
		if (he[-1] != ']')
			return -1;
		he--;
	}
	char *end;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (*end || p == 0 || p > 65535 || (size_t)(he - h) >= hl || he == h)
		return -1;
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = 0;
	*port = (uint16_t)p;
	return 0;
}

static void *leave_main(void *arg)
{
	struct srv_cluster *c = arg;
	while (sem_wait(&leave_sem) && errno == EINTR)
		;
	if (atomic_load(&leave_cancel))
		return NULL;
	if (qpg_cluster_set_state(c->reg, QPG_MEMBER_DRAINING) == 0)
		fprintf(stderr,
			"qpgate-server: cluster: draining (clients route elsewhere); leaving in "
			"%u ms\n",
			c->drain_ms);
	struct timespec ts = {c->drain_ms / 1000, (long)(c->drain_ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	qpg_server_stop(self.s);
	return NULL;
}

int srv_cluster_start(struct srv_cluster *c, struct qpg_server *s, const struct qpg_server_opts *o,
		      const char *cert_file, struct qpg_kv_service *kv)
{
	if (!c->etcd.endpoints)
		return 0;
	char err[1024];
	struct qpg_cluster_reg_opts ro = {
	    .etcd = c->etcd,
	    .ttl_s = c->ttl_s,
	    .lost = on_lost,
	    .load = on_load,
	    .user = c,
	};
	self.s = s;
	self.max_clients = o->max_clients;
	if (!c->etcd.name) {
		fprintf(stderr, "qpgate-server: error: --cluster needs --cluster-name NAME\n");
		return 1;
	}
	struct qpg_cluster_member *m = &ro.self;
	if (c->advertise) {
		if (split_hostport(c->advertise, m->host, sizeof(m->host), &m->port)) {
			fprintf(stderr,
				"qpgate-server: error: --advertise '%s' is not HOST:PORT (or "
				"[V6]:PORT)\n",
				c->advertise);
			return 1;
		}
	} else {
		snprintf(m->host, sizeof(m->host), "%s", o->bind_addr ? o->bind_addr : "127.0.0.1");
		m->port = qpg_server_port(s);
	}
	snprintf(m->tls_name, sizeof(m->tls_name), "%s",
		 c->advertise_name ? c->advertise_name : m->host);
	/* The listeners are up, on a port no other process held (the server
	 * refuses to start on one, lib/server.c): an entry naming this address
	 * and port is a dead predecessor's. Not so behind an --advertise that
	 * names another port. */
	ro.holds_port = m->port == qpg_server_port(s);
	if (c->id)
		snprintf(m->id, sizeof(m->id), "%s", c->id);
	else {
		char id[QPG_CLUSTER_HOST_MAX + 8];
		snprintf(id, sizeof(id), "%s-%u", m->host, m->port);
		if (strlen(id) > QPG_CLUSTER_ID_MAX) {
			fprintf(stderr,
				"qpgate-server: error: '%s' is too long for a member ID: "
				"give one with --cluster-id\n",
				id);
			return 1;
		}
		memcpy(m->id, id, strlen(id) + 1);
		for (char *p = m->id; *p; p++)
			if (*p == ':')
				*p = '.';
	}
	m->tcp = o->transport == QPG_TRANSPORT_TCP;
	m->weight = c->weight ? c->weight : 1;
	m->max_clients = o->max_clients;
	if (spki_hash(cert_file, m->spki_sha256, err, sizeof(err))) {
		fprintf(stderr, "qpgate-server: error: %s\n", err);
		return 1;
	}
	ro.etcd.staleness_ms = c->staleness_ms;
	/* The gate first: no KV request is served before this member knows
	 * its view and its lease. */
	if (kv && qpg_cluster_kv_attach(&c->kv, kv, &ro.etcd, m->id, err, sizeof(err))) {
		fprintf(stderr, "qpgate-server: error: cannot read the cluster's view: %s\n", err);
		return 1;
	}
	int rc = qpg_cluster_register(&c->reg, &ro, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "qpgate-server: error: %s\n", err);
		qpg_cluster_kv_detach(c->kv);
		c->kv = NULL;
		return 1;
	}
	if (c->kv)
		qpg_cluster_kv_set_reg(c->kv, c->reg);
	if (qpg_cluster_set_state(c->reg, QPG_MEMBER_ACTIVE)) {
		fprintf(stderr, "qpgate-server: error: cannot mark this member active in etcd\n");
		srv_cluster_stop(c);
		return 1;
	}
	fprintf(stderr,
		"qpgate-server: cluster %s: member %s at %s:%u (%s), incarnation %016llx, "
		"active\n",
		c->etcd.name, m->id, m->host, m->port, m->tls_name,
		(unsigned long long)qpg_cluster_incarnation(c->reg));
	sem_init(&leave_sem, 0, 0);
	leave_started = pthread_create(&leave_thread, NULL, leave_main, c) == 0;
	return 0;
}

void srv_cluster_signal(struct srv_cluster *c)
{
	(void)c;
	sem_post(&leave_sem);
}

void srv_cluster_stop(struct srv_cluster *c)
{
	if (!c->reg)
		return;
	if (leave_started) {
		atomic_store(&leave_cancel, true); /* a leave thread still waiting does nothing */
		sem_post(&leave_sem);
		pthread_join(leave_thread, NULL);
		leave_started = false;
	}
	qpg_cluster_leave(c->reg);
	fprintf(stderr, "qpgate-server: cluster: left (lease revoked)\n");
	if (c->kv) {
		struct qpg_cluster_kv_stats st;
		qpg_cluster_kv_stats(c->kv, &st);
		fprintf(stderr,
			"qpgate-server: cluster: %llu view change(s) dropped %llu key(s); %llu "
			"request wait(s), %llu answered wrong owner, %llu unavailable (%llu of "
			"them with a view not known current)\n",
			(unsigned long long)st.drops, (unsigned long long)st.keys_dropped,
			(unsigned long long)st.catch_ups, (unsigned long long)st.wrong_owner,
			(unsigned long long)(st.fenced + st.stale), (unsigned long long)st.stale);
		qpg_cluster_kv_detach(c->kv);
		c->kv = NULL;
	}
	qpg_cluster_reg_destroy(c->reg);
	c->reg = NULL;
}

void srv_cluster_metrics(void *user, FILE *f)
{
	struct srv_cluster *c = user;
	struct qpg_cluster_reg *r = c->reg;
	if (!r)
		return;
	struct qpg_cluster_reg_stats rs;
	qpg_cluster_reg_stats(r, &rs);
	bool alive = qpg_cluster_now_ns() < qpg_cluster_lease_until(r);
	fprintf(
	    f,
	    "# HELP qpgate_cluster_etcd_up Whether the last keepalive reached etcd.\n"
	    "# TYPE qpgate_cluster_etcd_up gauge\n"
	    "qpgate_cluster_etcd_up %d\n"
	    "# HELP qpgate_cluster_lease_alive Whether the lease is known alive now "
	    "(KV keys are served only then).\n"
	    "# TYPE qpgate_cluster_lease_alive gauge\n"
	    "qpgate_cluster_lease_alive %d\n"
	    "# HELP qpgate_cluster_registrations_total Registrations, one more per lost lease.\n"
	    "# TYPE qpgate_cluster_registrations_total counter\n"
	    "qpgate_cluster_registrations_total %llu\n"
	    "# HELP qpgate_cluster_leases_lost_total Leases lost.\n"
	    "# TYPE qpgate_cluster_leases_lost_total counter\n"
	    "qpgate_cluster_leases_lost_total %llu\n"
	    "# HELP qpgate_cluster_keepalive_failures_total Keepalives etcd did not answer.\n"
	    "# TYPE qpgate_cluster_keepalive_failures_total counter\n"
	    "qpgate_cluster_keepalive_failures_total %llu\n",
	    rs.etcd_ok, alive, (unsigned long long)rs.registrations,
	    (unsigned long long)rs.leases_lost, (unsigned long long)rs.keepalive_fails);
	if (!c->kv)
		return;
	struct qpg_cluster_kv_stats ks;
	qpg_cluster_kv_stats(c->kv, &ks);
	fprintf(f,
		"# HELP qpgate_cluster_kv_keys_dropped_total KV keys dropped: owned no longer, "
		"or a lost lease.\n"
		"# TYPE qpgate_cluster_kv_keys_dropped_total counter\n"
		"qpgate_cluster_kv_keys_dropped_total %llu\n"
		"# HELP qpgate_cluster_kv_catch_ups_total Times a KV request was told to wait: "
		"for a newer view, or a key gained less than the staleness bound ago.\n"
		"# TYPE qpgate_cluster_kv_catch_ups_total counter\n"
		"qpgate_cluster_kv_catch_ups_total %llu\n"
		"# HELP qpgate_cluster_kv_refused_total KV requests answered UNAVAILABLE, by "
		"why.\n"
		"# TYPE qpgate_cluster_kv_refused_total counter\n"
		"qpgate_cluster_kv_refused_total{reason=\"fenced\"} %llu\n"
		"qpgate_cluster_kv_refused_total{reason=\"stale_view\"} %llu\n",
		(unsigned long long)ks.keys_dropped, (unsigned long long)ks.catch_ups,
		(unsigned long long)ks.fenced, (unsigned long long)ks.stale);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/cluster_join.h: a server's membership in two calls. The order
 * (the gate, the registration, ACTIVE), the SHA-256 of the certificate's
 * public key as clients pin it, and the drain thread that a signal
 * handler can start. */
#include "qpgate/cluster_join.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct qpg_cluster_join {
	struct qpg_server *s;
	uint32_t max_clients;
	unsigned drain_ms;
	struct qpg_cluster_member self;
	struct qpg_cluster_reg *reg;
	struct qpg_cluster_kv *kv; /* the KV service's gate, if there is one */
	sem_t drain_sem;
	pthread_t drain_thread;
	bool drain_started;
	atomic_bool drain_posted;
	atomic_bool drain_cancel;
};

/* SHA-256 of the certificate's public key (DER SubjectPublicKeyInfo), as
 * clients pin it. */
static int spki_hash(const char *cert_file, uint8_t out[32], char *err, size_t len)
{
	FILE *f = cert_file ? fopen(cert_file, "r") : NULL;
	if (!f) {
		snprintf(err, len, "cannot read the certificate %s: %s",
			 cert_file ? cert_file : "(none given)", cert_file ? strerror(errno) : "");
		return -EINVAL;
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
	return ok ? 0 : -EINVAL;
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

/* The entry this member registers: where clients reach it, and as whom. */
static int self_entry(struct qpg_cluster_member *m, struct qpg_server *s,
		      const struct qpg_server_opts *so, const struct qpg_cluster_join_opts *o,
		      char *err, size_t len)
{
	if (o->advertise) {
		if (split_hostport(o->advertise, m->host, sizeof(m->host), &m->port)) {
			snprintf(err, len, "the advertised address '%s' is not HOST:PORT (or [V6]:PORT)",
				 o->advertise);
			return -EINVAL;
		}
	} else {
		snprintf(m->host, sizeof(m->host), "%s", so->bind_addr ? so->bind_addr : "127.0.0.1");
		m->port = qpg_server_port(s);
	}
	snprintf(m->tls_name, sizeof(m->tls_name), "%s",
		 o->advertise_name ? o->advertise_name : m->host);
	if (o->id) {
		if (strlen(o->id) > QPG_CLUSTER_ID_MAX) {
			snprintf(err, len, "the member ID '%.80s' is over %d bytes", o->id,
				 QPG_CLUSTER_ID_MAX);
			return -EINVAL;
		}
		snprintf(m->id, sizeof(m->id), "%s", o->id);
	} else {
		char id[QPG_CLUSTER_HOST_MAX + 8];
		snprintf(id, sizeof(id), "%s-%u", m->host, m->port);
		if (strlen(id) > QPG_CLUSTER_ID_MAX) {
			snprintf(err, len, "'%s' is too long for a member ID: give one (--cluster-id)",
				 id);
			return -EINVAL;
		}
		memcpy(m->id, id, strlen(id) + 1);
		for (char *p = m->id; *p; p++)
			if (*p == ':')
				*p = '.';
	}
	m->tcp = so->transport == QPG_TRANSPORT_TCP;
	m->weight = o->weight ? o->weight : 1;
	m->max_clients = so->max_clients;
	return spki_hash(o->cert_file, m->spki_sha256, err, len);
}

/* The lease is lost: the KV store may hold values another member has
 * since replaced. A service without keys owns nothing. */
static void on_lost(void *user)
{
	struct qpg_cluster_join *j = user;
	if (j->kv)
		qpg_cluster_kv_lost(j->kv);
}

static void on_load(void *user, uint32_t *clients, uint32_t *max)
{
	struct qpg_cluster_join *j = user;
	struct qpg_server_stats st;
	qpg_server_stats(j->s, &st);
	*clients = st.connected > 0 ? (uint32_t)st.connected : 0;
	*max = j->max_clients;
}

static void *drain_main(void *arg)
{
	struct qpg_cluster_join *j = arg;
	while (sem_wait(&j->drain_sem) && errno == EINTR)
		;
	if (atomic_load(&j->drain_cancel))
		return NULL;
	if (qpg_cluster_set_state(j->reg, QPG_MEMBER_DRAINING) == 0)
		fprintf(stderr, "qpgate: cluster: draining (clients route elsewhere); leaving in %u ms\n",
			j->drain_ms);
	struct timespec ts = {j->drain_ms / 1000, (long)(j->drain_ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	qpg_server_stop(j->s);
	return NULL;
}

int qpg_cluster_kv_join(struct qpg_cluster_join **out, struct qpg_server *s,
			const struct qpg_server_opts *so, struct qpg_kv_service *kv,
			const struct qpg_cluster_join_opts *o, char *err, size_t err_len)
{
	*out = NULL;
	if (!o->etcd.endpoints || !o->etcd.name) {
		snprintf(err, err_len, "a cluster needs etcd's endpoints and the cluster's name");
		return -EINVAL;
	}
	struct qpg_cluster_join *j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	j->s = s;
	j->max_clients = so->max_clients;
	j->drain_ms = o->drain_ms;
	int rc = self_entry(&j->self, s, so, o, err, err_len);
	if (rc)
		goto fail;
	struct qpg_cluster_reg_opts ro = {
	    .etcd = o->etcd,
	    .self = j->self,
	    .ttl_s = o->ttl_s,
	    .lost = on_lost,
	    .load = on_load,
	    .user = j,
	};
	/* The listeners are up, on a port no other process held (the server
	 * refuses to start on one, lib/server.c): an entry naming this address
	 * and port is a dead predecessor's. Not so behind an advertised
	 * address that names another port. */
	ro.holds_port = j->self.port == qpg_server_port(s);
	/* The gate first: no KV request is served before this member knows
	 * its view and its lease. */
	char why[768];
	if (kv && (rc = qpg_cluster_kv_attach(&j->kv, kv, &ro.etcd, j->self.id, why, sizeof(why)))) {
		snprintf(err, err_len, "cannot read the cluster's view: %s", why);
		goto fail;
	}
	if ((rc = qpg_cluster_register(&j->reg, &ro, err, err_len)))
		goto fail_gate;
	if (j->kv)
		qpg_cluster_kv_set_reg(j->kv, j->reg);
	if ((rc = qpg_cluster_set_state(j->reg, QPG_MEMBER_ACTIVE))) {
		snprintf(err, err_len, "cannot mark this member active in etcd");
		goto fail_reg;
	}
	if (sem_init(&j->drain_sem, 0, 0)) {
		rc = -errno;
		snprintf(err, err_len, "cannot make the drain's semaphore");
		goto fail_reg;
	}
	if ((rc = -pthread_create(&j->drain_thread, NULL, drain_main, j))) {
		snprintf(err, err_len, "cannot start the drain thread");
		sem_destroy(&j->drain_sem);
		goto fail_reg;
	}
	j->drain_started = true;
	*out = j;
	return 0;
fail_reg:
	qpg_cluster_leave(j->reg);
	qpg_cluster_reg_destroy(j->reg);
fail_gate:
	qpg_cluster_kv_detach(j->kv);
fail:
	free(j);
	return rc;
}

void qpg_cluster_kv_drain(struct qpg_cluster_join *j)
{
	if (j && !atomic_exchange(&j->drain_posted, true))
		sem_post(&j->drain_sem);
}

void qpg_cluster_kv_leave(struct qpg_cluster_join *j)
{
	if (!j)
		return;
	atomic_store(&j->drain_cancel, true); /* a drain thread still waiting does nothing */
	sem_post(&j->drain_sem);
	pthread_join(j->drain_thread, NULL);
	sem_destroy(&j->drain_sem);
	qpg_cluster_leave(j->reg);
	qpg_cluster_kv_detach(j->kv);
	qpg_cluster_reg_destroy(j->reg);
	free(j);
}

const struct qpg_cluster_member *qpg_cluster_join_self(const struct qpg_cluster_join *j)
{
	return &j->self;
}

uint64_t qpg_cluster_join_incarnation(const struct qpg_cluster_join *j)
{
	return qpg_cluster_incarnation(j->reg);
}

void qpg_cluster_join_kv_stats(struct qpg_cluster_join *j, struct qpg_cluster_kv_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (j->kv)
		qpg_cluster_kv_stats(j->kv, out);
}

void qpg_cluster_join_metrics(struct qpg_cluster_join *j, FILE *f)
{
	struct qpg_cluster_reg_stats rs;
	qpg_cluster_reg_stats(j->reg, &rs);
	bool alive = qpg_cluster_now_ns() < qpg_cluster_lease_until(j->reg);
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
	if (!j->kv)
		return;
	struct qpg_cluster_kv_stats ks;
	qpg_cluster_kv_stats(j->kv, &ks);
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

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server: the secure multi-client RDMA (or TCP) echo server. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "metrics_http.h"
#include "notify.h"
#include "opts.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"
#include "qpgate/server.h"
#include "server_args.h"
#include "server_cluster.h"

static struct qpg_server *g_server; /* for the signal handler only */
static struct srv_cluster g_cluster = {.drain_ms = 500};

static void on_signal(int sig)
{
	if (g_cluster.join && sig == SIGTERM)
		srv_cluster_signal(&g_cluster); /* draining, then a stop */
	else if (g_server)
		qpg_server_stop(g_server);
}

/* SIGHUP reloads the certificate, key and client CA. The signal is
 * blocked in every thread and taken here with sigwait, so the reload runs
 * on an ordinary thread, never inside a signal handler. */
struct reloader {
	pthread_t thread;
	struct qpg_server *s;
	struct qpg_kv_service *kv; /* with a tenants file: read it again too */
	atomic_bool quit;
};

static void *reload_thread(void *arg)
{
	struct reloader *r = arg;
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	for (;;) {
		int sig;
		if (sigwait(&hup, &sig) || atomic_load(&r->quit))
			return NULL;
		svc_notify("RELOADING=1");
		char err[512];
		if (qpg_server_reload_tls(r->s, err, sizeof(err)) == 0)
			fprintf(stderr, "qpgate-server: SIGHUP: certificate, key and client CA "
					"reloaded; new handshakes use them\n");
		else
			fprintf(stderr,
				"qpgate-server: SIGHUP: reload failed, still using the "
				"previous certificate: %s\n",
				err);
		if (r->kv && qpg_kv_service_reload_tenants(r->kv, err, sizeof(err)) == 0)
			fprintf(stderr, "qpgate-server: SIGHUP: tenants file reloaded; its limits "
					"apply now, its identities from the next connect\n");
		else if (r->kv)
			fprintf(stderr,
				"qpgate-server: SIGHUP: tenants file not reloaded, the previous "
				"tenants stay: %s\n",
				err);
		svc_notify("READY=1");
	}
}

static void print_stats(struct qpg_server *s)
{
	struct qpg_server_stats st;
	qpg_server_stats(s, &st);
	unsigned long long rej = 0;
	for (int i = 0; i < 16; i++)
		rej += st.rejected[i];
	fprintf(stderr,
		"qpgate-server: stats: connected=%lld handshakes_ok=%llu handshakes_failed=%llu "
		"rejected=%llu server_full=%llu refused_pending=%llu refused_per_peer=%llu "
		"refused_rate=%llu "
		"timeouts=%llu auth_failures=%llu seq_failures=%llu msgs_in=%llu msgs_out=%llu "
		"qps_created=%llu qps_destroyed=%llu qps_reused=%llu cq_depth_max=%lld "
		"pool_in_use=%lld "
		"reads_paused=%llu accept_backoffs=%llu refused_qps_per_peer=%llu "
		"bringup_timeouts=%llu refused_prefix=%llu pending_evicted=%llu\n",
		st.connected, st.handshakes_ok, st.handshakes_failed, rej,
		st.rejected[QPG_REJECT_SERVER_FULL], st.refused_pending, st.refused_per_peer,
		st.refused_rate, st.closed_by_reason[QPG_ERR_TIMEOUT], st.auth_failures,
		st.seq_failures, st.msgs_in, st.msgs_out, st.qps_created, st.qps_destroyed,
		st.qps_reused, st.cq_depth_max, st.pool_in_use, st.reads_paused, st.accept_backoffs,
		st.refused_qps_per_peer, st.bringup_timeouts, st.refused_prefix,
		st.pending_evicted);
}

/* The limits of this process that would bound --max-clients first. */
static void note_limits(const struct qpg_server_opts *o)
{
	long nofile = qpg_cli_raise_nofile();
	if (nofile >= 0 && (unsigned long)nofile < (unsigned long)o->max_clients + 64)
		fprintf(stderr,
			"qpgate-server: note: open files are limited to %ld (ulimit -n), so fewer "
			"than --max-clients %u clients fit; past that, accepts fail with EMFILE\n",
			nofile, (unsigned)o->max_clients);
	qpg_cli_note_map_count("qpgate-server", o->transport, (long)o->max_clients, 1,
			       "--max-clients");
}

/* PATH gets "PORT METRICS_PORT", written whole (by a rename) once both
 * listen. Returns 0 or -1. */
static int write_port_file(const char *path, uint16_t port, uint16_t metrics_port)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	int bad = fprintf(f, "%u %u\n", port, metrics_port) < 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Until SIGINT or SIGTERM: the server runs, SIGHUP reloads what it can,
 * and systemd hears when it is ready and when it stops. */
static int run(struct qpg_server *s, struct qpg_kv_service *tenants_kv)
{
	struct reloader rl = {.s = s, .kv = tenants_kv};
	bool reloading = pthread_create(&rl.thread, NULL, reload_thread, &rl) == 0;
	svc_notify("READY=1");
	int rc = qpg_server_run(s);
	svc_notify("STOPPING=1");
	fprintf(stderr, "qpgate-server: stopping\n");
	if (reloading) {
		atomic_store(&rl.quit, true);
		pthread_kill(rl.thread, SIGHUP);
		pthread_join(rl.thread, NULL);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct server_args a;
	const struct qpg_opt cluster[] = {QPG_OPTS_SERVER_CLUSTER(&g_cluster), QPG_OPT_END};
	if (srv_parse_args(&a, cluster, argc, argv))
		return 2;
	note_limits(&a.o);
	char err[512];
	/* Before any thread exists, so that all of them inherit it. */
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	int rc = 1;
	struct qpg_kv_service *kvs = NULL;
	struct qpg_server *s = NULL;
	struct metrics_http *metrics = NULL;
	if (a.kv) {
		if (qpg_kv_service_create(&kvs, &a.kvo, err, sizeof(err))) {
			fprintf(stderr, "qpgate-server: error: %s\n", err);
			return 1;
		}
		a.o.service = qpg_kv_service_ops();
		a.o.service_ctx = kvs;
	}
	if (qpg_server_create(&s, &a.o, err, sizeof(err))) {
		fprintf(stderr, "qpgate-server: error: %s\n", err);
		goto out_kv;
	}
	g_server = s;
	if (kvs)
		fprintf(stderr, "qpgate-server: kv one-sided GET: %s; values digested with %s%s\n",
			qpg_kv_service_one_sided(kvs),
			qpg_kv_digest_name(qpg_kv_service_digest(kvs)),
			a.kvo.digest ? "" : " (auto: the faster here)");
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (a.metrics_addr) {
		metrics = metrics_http_start(s, a.metrics_addr, err, sizeof(err));
		if (!metrics) {
			fprintf(stderr, "qpgate-server: error: %s\n", err);
			goto out_server;
		}
		fprintf(stderr, "qpgate-server: metrics on http://%.*s:%u/metrics\n",
			(int)(strrchr(a.metrics_addr, ':') - a.metrics_addr), a.metrics_addr,
			metrics_http_port(metrics));
	}
	if (a.port_file && write_port_file(a.port_file, qpg_server_port(s),
					   metrics ? metrics_http_port(metrics) : 0)) {
		fprintf(stderr, "qpgate-server: error: cannot write %s\n", a.port_file);
		goto out_metrics;
	}
	/* In a cluster, the server joins once it listens: registered as
	 * warming, then active. */
	if (srv_cluster_start(&g_cluster, s, &a.o, a.o.cert, kvs))
		goto out_metrics;
	if (g_cluster.join)
		metrics_http_extra(metrics, srv_cluster_metrics, &g_cluster);
	rc = run(s, a.kvo.tenants_file ? kvs : NULL) ? 1 : 0;
	metrics_http_stop(metrics); /* no scrape reads the cluster's state from here on */
	metrics = NULL;
	srv_cluster_stop(&g_cluster);
	print_stats(s);
out_metrics:
	metrics_http_stop(metrics);
out_server:
	g_server = NULL;
	qpg_server_destroy(s);
out_kv:
	qpg_kv_service_destroy(kvs);
	return rc;
}

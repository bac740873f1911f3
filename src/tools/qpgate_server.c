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

/* --service echo|kv */
static void parse_service(const char *arg, void *dst)
{
	if (strcmp(arg, "echo") && strcmp(arg, "kv")) {
		fprintf(stderr, "error: --service is 'echo' or 'kv', not '%s'\n", arg);
		exit(2);
	}
	*(bool *)dst = strcmp(arg, "kv") == 0;
}

/* --kv-digest auto|sha256|sha512-256 */
static void parse_digest(const char *arg, void *dst)
{
	for (uint8_t a = 0; a <= QPG_KV_DIGEST_MAX; a++)
		if (strcmp(arg, qpg_kv_digest_name(a)) == 0) {
			*(uint8_t *)dst = a;
			return;
		}
	fprintf(stderr, "error: --kv-digest is 'auto', 'sha256' or 'sha512-256', not '%s'\n", arg);
	exit(2);
}

/* --kv-eviction sieve|none */
static void parse_eviction(const char *arg, void *dst)
{
	if (strcmp(arg, "sieve") == 0 || strcmp(arg, "none") == 0) {
		*(uint8_t *)dst = arg[0] == 's' ? QPG_KV_EVICT_SIEVE : QPG_KV_EVICT_NONE;
		return;
	}
	fprintf(stderr, "error: --kv-eviction is 'sieve' or 'none', not '%s'\n", arg);
	exit(2);
}

/* --kv-tenant-from auto|san-uri|cn|san-dns|san-email */
static void parse_tenant_from(const char *arg, void *dst)
{
	static const char *const names[] = {"auto", "san-uri", "cn", "san-dns", "san-email"};
	for (uint8_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(arg, names[i]) == 0) {
			*(uint8_t *)dst = i;
			return;
		}
	fprintf(stderr,
		"error: --kv-tenant-from is 'auto', 'san-uri', 'cn', 'san-dns' or 'san-email', "
		"not '%s'\n",
		arg);
	exit(2);
}

/* --kv-watermarks HIGH,LOW (percent of the store) or off */
static void parse_watermarks(const char *arg, void *dst)
{
	struct qpg_kv_server_opts *o = dst;
	unsigned high, low;
	char end;
	if (strcmp(arg, "off") == 0) {
		o->wm_high_pct = o->wm_low_pct = 0;
		return;
	}
	if (sscanf(arg, "%u,%u%c", &high, &low, &end) == 2 && low < high && high <= 100 &&
	    low > 0) {
		o->wm_high_pct = (uint8_t)high;
		o->wm_low_pct = (uint8_t)low;
		return;
	}
	fprintf(stderr,
		"error: --kv-watermarks is HIGH,LOW in percent of the store, LOW below HIGH (e.g. "
		"95,90), or off; not '%s'\n",
		arg);
	exit(2);
}

/* --crl FILE, as many as given */
static const char *crl_files[16];
static void parse_crl(const char *arg, void *dst)
{
	struct qpg_server_opts *o = dst;
	if (o->ncrls == sizeof(crl_files) / sizeof(crl_files[0])) {
		fprintf(stderr, "error: at most %zu --crl files (a file may hold several CRLs)\n",
			sizeof(crl_files) / sizeof(crl_files[0]));
		exit(2);
	}
	crl_files[o->ncrls++] = arg;
	o->crls = crl_files;
}

/* --handshake-rate RATE[,BURST] */
static void parse_rate(const char *arg, void *dst)
{
	struct qpg_server_opts *o = dst;
	char rate[32];
	snprintf(rate, sizeof(rate), "%s", arg);
	char *comma = strchr(rate, ',');
	if (comma)
		*comma = 0;
	o->handshake_rate = (unsigned)qpg_cli_int(rate, 0, 10000000, "--handshake-rate");
	o->handshake_burst =
	    comma ? (unsigned)qpg_cli_int(comma + 1, 1, 10000000, "--handshake-rate (burst)")
		  : (o->handshake_rate ? o->handshake_rate : 1);
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

/* The command line: the server's options, the KV service's, and the
 * tool's own. */
struct server_args {
	struct qpg_server_opts o;
	struct qpg_kv_server_opts kvo;
	bool kv;
	const char *port_file, *metrics_addr;
};

/* Parses the command line into A, with the defaults first. Returns 0, or 2
 * for options that do not go together. */
static int parse_args(struct server_args *a, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	qpg_server_opts_default(&a->o);
	qpg_kv_server_opts_default(&a->kvo);
	const struct qpg_opt opts[] = {
	    {"port", 'p', OPT_U16, &a->o.port, 0, 65535, "N",
	     "TCP port for the TLS control channel (default 7471; 0: any)"},
	    {"bind", 0, OPT_STR, &a->o.bind_addr, 0, 0, "ADDR",
	     "address to listen on (default 127.0.0.1)"},
	    {"cert", 0, OPT_STR, &a->o.cert, 0, 0, "FILE", "server certificate chain (PEM)"},
	    {"key", 0, OPT_STR, &a->o.key, 0, 0, "FILE", "server private key (PEM)"},
	    {"client-ca", 0, OPT_STR, &a->o.client_ca, 0, 0, "FILE",
	     "require client certificates signed by this CA (mTLS)"},
	    {"crl", 0, OPT_CALL, &a->o, 0, 0, "FILE",
	     "with --client-ca: refuse client certificates this CRL (PEM) revokes, resumed ones "
	     "too; repeat for more; SIGHUP reads them again",
	     parse_crl},
	    {"max-clients", 0, OPT_UINT, &a->o.max_clients, 1, 10000000, "N",
	     "admitted clients at once (default 100000)"},
	    {"threads", 0, OPT_UINT, &a->o.threads, 1, 256, "N",
	     "event-loop threads (default: number of cores)"},
	    {"transport", 0, OPT_TRANSPORT, &a->o.transport, 0, 0, "rdma|tcp",
	     "data path (default rdma)"},
	    {"ib-dev", 'd', OPT_STR, &a->o.ib_dev, 0, 0, "DEV", "RDMA device (default: the first)"},
	    {"ib-port", 'i', OPT_INT, &a->o.ib_port, 1, 255, "N",
	     "device port (default: the one whose GID carries the --bind address)"},
	    {"gid-index", 'x', OPT_INT, &a->o.gid_index, 0, 255, "N",
	     "GID index (default: the RoCE v2 GID that carries the --bind address)"},
	    {"handshake-timeout", 0, OPT_UINT, &a->o.handshake_timeout_ms, 10, 3600000, "MS",
	     "deadline for TCP+TLS+bootstrap (default 5000)"},
	    {"progress-timeout", 0, OPT_UINT, &a->o.progress_timeout_ms, 0, 3600000, "MS",
	     "close a client whose sends do not complete for MS (default 15000, 0: never)"},
	    {"idle-timeout", 0, OPT_UINT, &a->o.idle_timeout_ms, 0, 86400000, "MS",
	     "close a client with no traffic for MS (default 300000; clients send a keepalive "
	     "after 60 s of quiet; 0: never)"},
	    {"bringup-timeout", 0, OPT_UINT, &a->o.bringup_timeout_ms, 0, 3600000, "MS",
	     "close a QP that sends no authenticated frame within MS of ACCEPT (default 10000; "
	     "0: never)"},
	    {"max-pending", 0, OPT_UINT, &a->o.max_pending, 1, 10000000, "N",
	     "unfinished handshakes, whole server (default 4096)"},
	    {"max-pending-per-peer", 0, OPT_UINT, &a->o.max_pending_per_peer, 1, 10000000, "N",
	     "unfinished handshakes per address, IPv6 per /64 (default 1024)"},
	    {"max-pending-per-prefix", 0, OPT_UINT, &a->o.max_pending_per_prefix, 0, 10000000, "N",
	     "unfinished handshakes per IPv4 /24 or IPv6 /48 (default 2048; 0: no limit)"},
	    {"max-conns-per-peer", 0, OPT_UINT, &a->o.max_conns_per_peer, 0, 10000000, "N",
	     "connections per address, IPv6 per /64 (default 16384; 0: no limit)"},
	    {"max-qps-per-peer", 0, OPT_UINT, &a->o.max_qps_per_peer, 0, 10000000, "N",
	     "QPs per address, a session's each (default: a quarter of --max-clients; 0: no "
	     "limit)"},
	    {"max-session-qps", 0, OPT_UINT, &a->o.max_session_qps, 1, QPG_WIRE_MAX_EXTRA_QPS + 1,
	     "N",
	     "rdma: QPs one TLS session may bring up, each a client of --max-clients "
	     "(default 64)"},
	    {"handshake-rate", 0, OPT_CALL, &a->o, 0, 0, "N[,B]",
	     "new handshakes a second per address, B at once (default 500,1000; 0: off)",
	     parse_rate},
	    {"tls-tickets", 0, OPT_UINT, &a->o.tls_ticket_period_s, 0, 7 * 86400, "S",
	     "TLS resumption: ticket keys rotate every S seconds, a ticket lasts 2S at most "
	     "(default 3600; 0: every connection a full handshake)"},
	    {"tls-resume-max", 0, OPT_UINT, &a->o.tls_resume_max_s, 0, 365 * 86400, "S",
	     "no resumption S seconds after the full handshake a ticket came from, renewed "
	     "or not (default 86400; 0: no bound but the ticket's two periods)"},
	    {"tls-cache", 0, OPT_UINT, &a->o.tls_cache_max, 0, 10000000, "N",
	     "with --client-ca: mTLS sessions kept for resumption, the oldest dropped first "
	     "(default 8192; 0: stateless tickets, slower to resume)"},
	    {"allow-no-auth", 0, OPT_FLAG, &a->o.allow_no_auth, 0, 0, NULL,
	     "accept clients that turn per-message auth off"},
	    {"allow-any-gid", 0, OPT_FLAG, &a->o.allow_any_gid, 0, 0, NULL,
	     "rdma: accept a HELLO GID other than the control address (off: reflection)"},
	    {"max-msg", 's', OPT_U32, &a->o.max_msg, 1, QPG_WIRE_MAX_MSG, "BYTES",
	     "largest message (default 4096)"},
	    {"service", 0, OPT_CALL, &a->kv, 0, 0, "echo|kv",
	     "what the server offers (default echo)", parse_service},
	    {"kv-capacity", 0, OPT_SIZE, &a->kvo.capacity, 4096, 1024.0 * (1ull << 30), "BYTES",
	     "KV store size, e.g. 256M or 16G (default 256M, at most 1T; memory is taken as "
	     "values land)"},
	    {"kv-max-value", 0, OPT_SIZE32, &a->kvo.max_value, 1, QPG_KV_MAX_VALUE, "BYTES",
	     "largest KV value, e.g. 1M (default 1M, at most 256M)"},
	    {"kv-grant-ttl", 0, OPT_UINT, &a->kvo.grant_ttl_ms, 0, 3600000, "MS",
	     "a grant not RELEASEd by then is revoked (default 10000)"},
	    {"kv-put-timeout", 0, OPT_UINT, &a->kvo.put_timeout_ms, 0, 3600000, "MS",
	     "a PUT whose next chunk is this late drops its space (default 10000)"},
	    {"kv-grant-min", 0, OPT_SIZE32, &a->kvo.grant_min, 1, QPG_KV_MAX_VALUE, "BYTES",
	     "rdma: values from this size go by RDMA READ unless asked otherwise (default 32K)"},
	    {"kv-digest", 0, OPT_CALL, &a->kvo.digest, 0, 0, "NAME",
	     "rdma: what one-sided readers check values with: sha256, sha512-256 or auto, "
	     "the faster here (default auto)",
	     parse_digest},
	    {"kv-eviction", 0, OPT_CALL, &a->kvo.eviction, 0, 0, "sieve|none",
	     "a PUT into a full store evicts keys, SIEVE's choice (default), or is refused "
	     "(none: 'store full')",
	     parse_eviction},
	    {"kv-watermarks", 0, OPT_CALL, &a->kvo, 0, 0, "HIGH,LOW",
	     "evict ahead of need: past HIGH percent of the store in use, a thread evicts "
	     "(SIEVE) down to LOW (default 95,90; off: a PUT evicts what it needs)",
	     parse_watermarks},
	    {"kv-tenants", 0, OPT_STR, &a->kvo.tenants_file, 0, 0, "FILE",
	     "with --client-ca: tenants (JSON: names, identities, quotas; docs/kv.md), read again "
	     "on SIGHUP (default: each client identity a tenant of its own, no quota)"},
	    {"kv-tenant-from", 0, OPT_CALL, &a->kvo.tenant_from, 0, 0, "KIND",
	     "with --client-ca: the certificate name that is a client's identity: auto (a URI "
	     "subjectAltName, else the CN; default), san-uri, cn, san-dns or san-email",
	     parse_tenant_from},
	    {"srq-depth", 0, OPT_U32, &a->o.srq_depth, 16, 1 << 20, "N",
	     "receives posted per thread (default 4096)"},
	    {"tclass", 0, OPT_U8, &a->o.tclass, 0, 255, "N",
	     "RoCE traffic class of our packets (DSCP << 2; default 0)"},
	    {"sl", 0, OPT_U8, &a->o.sl, 0, 15, "N", "service level (default 0)"},
	    {"spare-qps", 0, OPT_U32, &a->o.spare_qps, 0, 65536, "N",
	     "rdma: QPs of closed clients kept in RESET per thread for the next ones, each "
	     "for at most --spare-idle unused, where clients come and go (default 0: none)"},
	    {"spare-idle", 0, OPT_U32, &a->o.spare_idle_ms, 1, 3600000, "MS",
	     "rdma: a spare QP unused this long is destroyed (default 10000)"},
	    {"busy-poll", 0, OPT_U32, &a->o.busy_poll_us, 0, 1000000, "US",
	     "each thread polls for completions (rdma) or on its sockets (tcp) US before sleeping "
	     "(0: never; default 200)"},
	    {"qp-timeout", 0, OPT_U8, &a->o.qp_timeout, 1, 31, "N",
	     "RC ACK timeout 4.096 us * 2^N, 7 tries (default 18 = 1.07 s)"},
	    {"port-file", 0, OPT_STR, &a->port_file, 0, 0, "FILE",
	     "write the bound port (and the metrics port) here once listening"},
	    {"metrics", 0, OPT_STR, &a->metrics_addr, 0, 0, "HOST:PORT",
	     "serve Prometheus metrics at /metrics (e.g. 127.0.0.1:9471)"},
	    {"verbose", 'v', OPT_COUNT, &a->o.verbose, 0, 0, NULL, "log every connection"},
	    QPG_OPT_END};
	const struct qpg_opt cluster[] = {QPG_OPTS_SERVER_CLUSTER(&g_cluster), QPG_OPT_END};
	const struct qpg_opt *const tables[] = {opts, cluster, NULL};
	qpg_opts_parse(argc, argv, tables, "qpgate-server --cert FILE --key FILE [options]", 0);
	if (a->kvo.tenants_file && (!a->kv || !a->o.client_ca)) {
		fprintf(stderr, "error: --kv-tenants needs --service kv and --client-ca: tenants "
				"are named by client certificates\n");
		return 2;
	}
	if (!a->o.cert || !a->o.key) {
		fprintf(stderr, "error: --cert and --key are required (development certificates: "
				"'make certs')\n");
		return 2;
	}
	return 0;
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
	if (parse_args(&a, argc, argv))
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

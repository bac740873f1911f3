/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-server's command line: its option tables, in the order the usage
 * lists them, and the checks of options that must go together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qpgate/kv.h"
#include "qpgate/wire.h"
#include "server_args.h"

/* What the tables write into; srv_parse_args hands the caller a copy. */
static struct server_args args;

/* --service echo|kv */
static void parse_service(const char *arg, void *dst)
{
	static const char *const names[] = {"echo", "kv"};
	*(bool *)dst = qpg_cli_pick(arg, names, 2, "--service") == 1;
}

/* --kv-digest auto|sha256|sha512-256 */
static void parse_digest(const char *arg, void *dst)
{
	const char *names[QPG_KV_DIGEST_MAX + 1];
	for (uint8_t a = 0; a <= QPG_KV_DIGEST_MAX; a++)
		names[a] = qpg_kv_digest_name(a);
	*(uint8_t *)dst = (uint8_t)qpg_cli_pick(arg, names, QPG_KV_DIGEST_MAX + 1, "--kv-digest");
}

/* --kv-eviction sieve|none */
static void parse_eviction(const char *arg, void *dst)
{
	static const char *const names[] = {"sieve", "none"};
	unsigned i = qpg_cli_pick(arg, names, 2, "--kv-eviction");
	*(uint8_t *)dst = i == 0 ? QPG_KV_EVICT_SIEVE : QPG_KV_EVICT_NONE;
}

/* --kv-tenant-from auto|san-uri|cn|san-dns|san-email */
static void parse_tenant_from(const char *arg, void *dst)
{
	static const char *const names[] = {"auto", "san-uri", "cn", "san-dns", "san-email"};
	*(uint8_t *)dst =
	    (uint8_t)qpg_cli_pick(arg, names, sizeof(names) / sizeof(names[0]), "--kv-tenant-from");
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

/* The listener, its TLS and its device. */
static const struct qpg_opt listen_opts[] = {
    {"port", 'p', OPT_U16, &args.o.port, 0, 65535, "N",
     "TCP port for the TLS control channel (default 7471; 0: any)"},
    {"bind", 0, OPT_STR, &args.o.bind_addr, 0, 0, "ADDR",
     "address to listen on (default 127.0.0.1)"},
    {"cert", 0, OPT_STR, &args.o.cert, 0, 0, "FILE", "server certificate chain (PEM)"},
    {"key", 0, OPT_STR, &args.o.key, 0, 0, "FILE", "server private key (PEM)"},
    {"client-ca", 0, OPT_STR, &args.o.client_ca, 0, 0, "FILE",
     "require client certificates signed by this CA (mTLS)"},
    {"crl", 0, OPT_CALL, &args.o, 0, 0, "FILE",
     "with --client-ca: refuse client certificates this CRL (PEM) revokes, resumed ones "
     "too; repeat for more; SIGHUP reads them again",
     parse_crl},
    {"max-clients", 0, OPT_UINT, &args.o.max_clients, 1, 10000000, "N",
     "admitted clients at once (default 100000)"},
    {"threads", 0, OPT_UINT, &args.o.threads, 1, 256, "N",
     "event-loop threads (default: number of cores)"},
    {"transport", 0, OPT_TRANSPORT, &args.o.transport, 0, 0, "rdma|tcp",
     "data path (default rdma)"},
    {"ib-dev", 'd', OPT_STR, &args.o.ib_dev, 0, 0, "DEV", "RDMA device (default: the first)"},
    {"ib-port", 'i', OPT_INT, &args.o.ib_port, 1, 255, "N",
     "device port (default: the one whose GID carries the --bind address)"},
    {"gid-index", 'x', OPT_INT, &args.o.gid_index, 0, 255, "N",
     "GID index (default: the RoCE v2 GID that carries the --bind address)"},
    QPG_OPT_END};

/* Deadlines, bounds and what clients may ask for. */
static const struct qpg_opt limit_opts[] = {
    {"handshake-timeout", 0, OPT_UINT, &args.o.handshake_timeout_ms, 10, 3600000, "MS",
     "deadline for TCP+TLS+bootstrap (default 5000)"},
    {"progress-timeout", 0, OPT_UINT, &args.o.progress_timeout_ms, 0, 3600000, "MS",
     "close a client whose sends do not complete for MS (default 15000, 0: never)"},
    {"idle-timeout", 0, OPT_UINT, &args.o.idle_timeout_ms, 0, 86400000, "MS",
     "close a client with no traffic for MS (default 300000; clients send a keepalive "
     "after 60 s of quiet; 0: never)"},
    {"bringup-timeout", 0, OPT_UINT, &args.o.bringup_timeout_ms, 0, 3600000, "MS",
     "close a QP that sends no authenticated frame within MS of ACCEPT (default 10000; "
     "0: never)"},
    {"max-pending", 0, OPT_UINT, &args.o.max_pending, 1, 10000000, "N",
     "unfinished handshakes, whole server (default 4096)"},
    {"max-pending-per-peer", 0, OPT_UINT, &args.o.max_pending_per_peer, 1, 10000000, "N",
     "unfinished handshakes per address, IPv6 per /64 (default 1024)"},
    {"max-pending-per-prefix", 0, OPT_UINT, &args.o.max_pending_per_prefix, 0, 10000000, "N",
     "unfinished handshakes per IPv4 /24 or IPv6 /48 (default 2048; 0: no limit)"},
    {"max-conns-per-peer", 0, OPT_UINT, &args.o.max_conns_per_peer, 0, 10000000, "N",
     "connections per address, IPv6 per /64 (default 16384; 0: no limit)"},
    {"max-qps-per-peer", 0, OPT_UINT, &args.o.max_qps_per_peer, 0, 10000000, "N",
     "QPs per address, a session's each (default: a quarter of --max-clients; 0: no "
     "limit)"},
    {"max-session-qps", 0, OPT_UINT, &args.o.max_session_qps, 1, QPG_WIRE_MAX_EXTRA_QPS + 1, "N",
     "rdma: QPs one TLS session may bring up, each a client of --max-clients "
     "(default 64)"},
    {"handshake-rate", 0, OPT_CALL, &args.o, 0, 0, "N[,B]",
     "new handshakes a second per address, B at once (default 500,1000; 0: off)", parse_rate},
    {"tls-tickets", 0, OPT_UINT, &args.o.tls_ticket_period_s, 0, 7 * 86400, "S",
     "TLS resumption: ticket keys rotate every S seconds, a ticket lasts 2S at most "
     "(default 3600; 0: every connection a full handshake)"},
    {"tls-resume-max", 0, OPT_UINT, &args.o.tls_resume_max_s, 0, 365 * 86400, "S",
     "no resumption S seconds after the full handshake a ticket came from, renewed "
     "or not (default 86400; 0: no bound but the ticket's two periods)"},
    {"tls-cache", 0, OPT_UINT, &args.o.tls_cache_max, 0, 10000000, "N",
     "with --client-ca: mTLS sessions kept for resumption, the oldest dropped first "
     "(default 8192; 0: stateless tickets, slower to resume)"},
    {"verify-cache", 0, OPT_UINT, &args.o.verify_cache_s, 0, 86400, "S",
     "with --client-ca: a client chain verified is not verified again for S seconds "
     "(its key, validity and the CRLs' are; default 600; 0: every time)"},
    {"allow-no-auth", 0, OPT_FLAG, &args.o.allow_no_auth, 0, 0, NULL,
     "accept clients that turn per-message auth off"},
    {"allow-any-gid", 0, OPT_FLAG, &args.o.allow_any_gid, 0, 0, NULL,
     "rdma: accept a HELLO GID other than the control address (off: reflection)"},
    {"max-msg", 's', OPT_U32, &args.o.max_msg, 1, QPG_WIRE_MAX_MSG, "BYTES",
     "largest message (default 4096)"},
    QPG_OPT_END};

/* The service, and the KV cache's own. */
static const struct qpg_opt kv_opts[] = {
    {"service", 0, OPT_CALL, &args.kv, 0, 0, "echo|kv", "what the server offers (default echo)",
     parse_service},
    {"kv-capacity", 0, OPT_SIZE, &args.kvo.capacity, 4096, 1024.0 * (1ull << 30), "BYTES",
     "KV store size, e.g. 256M or 16G (default 256M, at most 1T; memory is taken as "
     "values land)"},
    {"kv-max-value", 0, OPT_SIZE32, &args.kvo.max_value, 1, QPG_KV_MAX_VALUE, "BYTES",
     "largest KV value, e.g. 1M (default 1M, at most 256M)"},
    {"kv-grant-ttl", 0, OPT_UINT, &args.kvo.grant_ttl_ms, 0, 3600000, "MS",
     "a grant not RELEASEd by then is revoked (default 10000)"},
    {"kv-put-timeout", 0, OPT_UINT, &args.kvo.put_timeout_ms, 0, 3600000, "MS",
     "a PUT whose next chunk is this late drops its space (default 10000)"},
    {"kv-grant-min", 0, OPT_SIZE32, &args.kvo.grant_min, 1, QPG_KV_MAX_VALUE, "BYTES",
     "rdma: values from this size go by RDMA READ unless asked otherwise (default 32K)"},
    {"kv-digest", 0, OPT_CALL, &args.kvo.digest, 0, 0, "NAME",
     "rdma: what one-sided readers check values with: sha256, sha512-256 or auto, "
     "the faster here (default auto)",
     parse_digest},
    {"kv-eviction", 0, OPT_CALL, &args.kvo.eviction, 0, 0, "sieve|none",
     "a PUT into a full store evicts keys, SIEVE's choice (default), or is refused "
     "(none: 'store full')",
     parse_eviction},
    {"kv-watermarks", 0, OPT_CALL, &args.kvo, 0, 0, "HIGH,LOW",
     "evict ahead of need: past HIGH percent of the store in use, a thread evicts "
     "(SIEVE) down to LOW (default 95,90; off: a PUT evicts what it needs)",
     parse_watermarks},
    {"kv-tenants", 0, OPT_STR, &args.kvo.tenants_file, 0, 0, "FILE",
     "with --client-ca: tenants (JSON: names, identities, quotas; docs/kv.md), read again "
     "on SIGHUP (default: each client identity a tenant of its own, no quota)"},
    {"kv-tenant-from", 0, OPT_CALL, &args.kvo.tenant_from, 0, 0, "KIND",
     "with --client-ca: the certificate name that is a client's identity: auto (a URI "
     "subjectAltName, else the CN; default), san-uri, cn, san-dns or san-email",
     parse_tenant_from},
    QPG_OPT_END};

/* The rdma path's tuning. */
static const struct qpg_opt tuning_opts[] = {
    {"srq-depth", 0, OPT_U32, &args.o.srq_depth, 16, 1 << 20, "N",
     "receives posted per thread (default 4096)"},
    {"tclass", 0, OPT_U8, &args.o.tclass, 0, 255, "N",
     "RoCE traffic class of our packets (DSCP << 2; default 0)"},
    {"sl", 0, OPT_U8, &args.o.sl, 0, 15, "N", "service level (default 0)"},
    {"spare-qps", 0, OPT_U32, &args.o.spare_qps, 0, 65536, "N",
     "rdma: QPs of closed clients kept in RESET per thread for the next ones, each "
     "for at most --spare-idle unused, where clients come and go (default 0: none)"},
    {"spare-idle", 0, OPT_U32, &args.o.spare_idle_ms, 1, 3600000, "MS",
     "rdma: a spare QP unused this long is destroyed (default 10000)"},
    {"busy-poll", 0, OPT_U32, &args.o.busy_poll_us, 0, 1000000, "US",
     "each thread polls for completions (rdma) or on its sockets (tcp) US before sleeping "
     "(0: never; default 200)"},
    {"qp-timeout", 0, OPT_U8, &args.o.qp_timeout, 1, 31, "N",
     "RC ACK timeout 4.096 us * 2^N, 7 tries (default 18 = 1.07 s)"},
    QPG_OPT_END};

/* What the tool itself writes. */
static const struct qpg_opt tool_opts[] = {
    {"port-file", 0, OPT_STR, &args.port_file, 0, 0, "FILE",
     "write the bound port (and the metrics port) here once listening"},
    {"metrics", 0, OPT_STR, &args.metrics_addr, 0, 0, "HOST:PORT",
     "serve Prometheus metrics at /metrics (e.g. 127.0.0.1:9471)"},
    {"verbose", 'v', OPT_COUNT, &args.o.verbose, 0, 0, NULL, "log every connection"},
    QPG_OPT_END};

int srv_parse_args(struct server_args *a, const struct qpg_opt *more, int argc, char **argv)
{
	memset(&args, 0, sizeof(args));
	qpg_server_opts_default(&args.o);
	qpg_kv_server_opts_default(&args.kvo);
	const struct qpg_opt *const tables[] = {listen_opts, limit_opts, kv_opts, tuning_opts,
						tool_opts,   more,	 NULL};
	qpg_opts_parse(argc, argv, tables, "qpgate-server --cert FILE --key FILE [options]", 0);
	*a = args;
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

/* qpgate-server: the secure multi-client RDMA (or TCP) echo server. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "metrics_http.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"
#include "qpgate/server.h"

static struct qpg_server *g_server; /* for the signal handler only */

static void on_signal(int sig)
{
	if (g_server)
		qpg_server_stop(g_server);
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: qpgate-server --cert FILE --key FILE [options]\n"
	    "  -p, --port N             TCP port for the TLS control channel (default 7471; 0: "
	    "any)\n"
	    "      --bind ADDR          address to listen on (default 127.0.0.1)\n"
	    "      --cert FILE          server certificate chain (PEM)\n"
	    "      --key FILE           server private key (PEM)\n"
	    "      --client-ca FILE     require client certificates signed by this CA (mTLS)\n"
	    "      --max-clients N      admitted clients at once (default 100000)\n"
	    "      --threads N          event-loop threads (default: number of cores)\n"
	    "      --transport rdma|tcp data path (default rdma)\n"
	    "  -d, --ib-dev DEV         RDMA device (default: the first)\n"
	    "  -i, --ib-port N          device port (default 1)\n"
	    "  -x, --gid-index N        GID index (default: the IPv4-mapped RoCE v2 GID)\n"
	    "      --handshake-timeout MS  deadline for TCP+TLS+bootstrap (default 5000)\n"
	    "      --progress-timeout MS   close a client whose sends do not complete for MS\n"
	    "                           (it stopped reading; default 15000, 0: never)\n"
	    "      --idle-timeout MS    close a client with no traffic for MS (default 0: never)\n"
	    "      --max-pending N      unfinished handshakes, whole server (default 4096)\n"
	    "      --max-pending-per-peer N  unfinished handshakes per peer address, IPv6 per\n"
	    "                           /64 (default 1024)\n"
	    "      --max-conns-per-peer N    connections per peer address, IPv6 per /64\n"
	    "                           (default 16384; 0: no limit)\n"
	    "      --handshake-rate N[,BURST]  new handshakes per second per peer address\n"
	    "                           (IPv6 per /64), BURST at once (default 500,1000;\n"
	    "                           0: no limit); refused at accept, before TLS\n"
	    "      --allow-no-auth      accept clients that turn per-message auth off\n"
	    "      --allow-any-gid      rdma: accept a HELLO whose GID is not the address its\n"
	    "                           control connection came from (RoCE and control on\n"
	    "                           different networks; off by default: reflection)\n"
	    "  -s, --max-msg BYTES      largest message (default 4096)\n"
	    "      --service echo|kv    what the server offers (default echo)\n"
	    "      --kv-capacity BYTES  KV store size, e.g. 256M (default 256M, at most 4G)\n"
	    "      --kv-max-value BYTES largest KV value, e.g. 1M (default 1M)\n"
	    "      --kv-grant-ttl MS    a grant not RELEASEd by then is revoked (default 10000)\n"
	    "      --kv-put-timeout MS  a PUT whose next chunk is this late drops its space\n"
	    "                           (default 10000)\n"
	    "      --kv-grant-min BYTES rdma: values from this size go by RDMA READ unless\n"
	    "                           the client asks otherwise (default 32K)\n"
	    "      --srq-depth N        receives posted per thread (default 4096)\n"
	    "      --qp-timeout N       RC ACK timeout 4.096 us * 2^N, 7 tries (default 18 = "
	    "1.07 s)\n"
	    "      --port-file FILE     write the bound port (and the metrics port) here once "
	    "listening\n"
	    "      --metrics HOST:PORT  serve Prometheus metrics at /metrics (e.g. "
	    "127.0.0.1:9471)\n"
	    "  -v, --verbose            log every connection\n");
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
		"qps_created=%llu qps_destroyed=%llu cq_depth_max=%lld pool_in_use=%lld "
		"reads_paused=%llu accept_backoffs=%llu\n",
		st.connected, st.handshakes_ok, st.handshakes_failed, rej,
		st.rejected[QPG_REJECT_SERVER_FULL], st.refused_pending, st.refused_per_peer,
		st.refused_rate, st.closed_by_reason[QPG_ERR_TIMEOUT], st.auth_failures,
		st.seq_failures, st.msgs_in, st.msgs_out, st.qps_created, st.qps_destroyed,
		st.cq_depth_max, st.pool_in_use, st.reads_paused, st.accept_backoffs);
}

int main(int argc, char **argv)
{
	struct qpg_server_opts o;
	qpg_server_opts_default(&o);
	struct qpg_kv_server_opts kvo;
	qpg_kv_server_opts_default(&kvo);
	bool kv = false;
	const char *port_file = NULL, *metrics_addr = NULL;
	enum {
		O_BIND = 256,
		O_CERT,
		O_KEY,
		O_CA,
		O_MAX,
		O_THREADS,
		O_TRANSPORT,
		O_HTO,
		O_MP,
		O_MPP,
		O_MCP,
		O_NOAUTH,
		O_SRQ,
		O_PORTFILE,
		O_METRICS,
		O_QPTO,
		O_SERVICE,
		O_KVCAP,
		O_KVMAX,
		O_KVGRANT,
		O_PROGRESS,
		O_IDLE,
		O_ANYGID,
		O_KVTTL,
		O_KVPUTTO,
		O_RATE
	};
	static const struct option lo[] = {
	    {"port", 1, 0, 'p'},
	    {"bind", 1, 0, O_BIND},
	    {"cert", 1, 0, O_CERT},
	    {"key", 1, 0, O_KEY},
	    {"client-ca", 1, 0, O_CA},
	    {"max-clients", 1, 0, O_MAX},
	    {"threads", 1, 0, O_THREADS},
	    {"transport", 1, 0, O_TRANSPORT},
	    {"ib-dev", 1, 0, 'd'},
	    {"ib-port", 1, 0, 'i'},
	    {"gid-index", 1, 0, 'x'},
	    {"handshake-timeout", 1, 0, O_HTO},
	    {"progress-timeout", 1, 0, O_PROGRESS},
	    {"allow-any-gid", 0, 0, O_ANYGID},
	    {"idle-timeout", 1, 0, O_IDLE},
	    {"max-pending", 1, 0, O_MP},
	    {"max-pending-per-peer", 1, 0, O_MPP},
	    {"max-conns-per-peer", 1, 0, O_MCP},
	    {"handshake-rate", 1, 0, O_RATE},
	    {"allow-no-auth", 0, 0, O_NOAUTH},
	    {"max-msg", 1, 0, 's'},
	    {"srq-depth", 1, 0, O_SRQ},
	    {"qp-timeout", 1, 0, O_QPTO},
	    {"service", 1, 0, O_SERVICE},
	    {"kv-capacity", 1, 0, O_KVCAP},
	    {"kv-max-value", 1, 0, O_KVMAX},
	    {"kv-grant-min", 1, 0, O_KVGRANT},
	    {"kv-grant-ttl", 1, 0, O_KVTTL},
	    {"kv-put-timeout", 1, 0, O_KVPUTTO},
	    {"port-file", 1, 0, O_PORTFILE},
	    {"metrics", 1, 0, O_METRICS},
	    {"verbose", 0, 0, 'v'},
	    {"help", 0, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "p:d:i:x:s:vh", lo, NULL)) != -1) {
		switch (ch) {
		case 'p':
			o.port = (uint16_t)qpg_cli_int(optarg, 0, 65535, "--port");
			break;
		case O_BIND:
			o.bind_addr = optarg;
			break;
		case O_SERVICE:
			if (!strcmp(optarg, "echo"))
				kv = false;
			else if (!strcmp(optarg, "kv"))
				kv = true;
			else {
				fprintf(stderr, "error: --service is 'echo' or 'kv', not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case O_KVCAP:
			kvo.capacity =
			    (size_t)qpg_cli_size(optarg, 4096, 4ull << 30, "--kv-capacity");
			break;
		case O_KVMAX:
			kvo.max_value =
			    (uint32_t)qpg_cli_size(optarg, 1, QPG_KV_MAX_VALUE, "--kv-max-value");
			break;
		case O_KVTTL:
			kvo.grant_ttl_ms =
			    (unsigned)qpg_cli_int(optarg, 0, 3600000, "--kv-grant-ttl");
			break;
		case O_KVPUTTO:
			kvo.put_timeout_ms =
			    (unsigned)qpg_cli_int(optarg, 0, 3600000, "--kv-put-timeout");
			break;
		case O_KVGRANT:
			kvo.grant_min =
			    (uint32_t)qpg_cli_size(optarg, 1, QPG_KV_MAX_VALUE, "--kv-grant-min");
			break;
		case O_CERT:
			o.cert = optarg;
			break;
		case O_KEY:
			o.key = optarg;
			break;
		case O_CA:
			o.client_ca = optarg;
			break;
		case O_MAX:
			o.max_clients = (unsigned)qpg_cli_int(optarg, 1, 10000000, "--max-clients");
			break;
		case O_THREADS:
			o.threads = (unsigned)qpg_cli_int(optarg, 1, 256, "--threads");
			break;
		case O_TRANSPORT:
			o.transport = qpg_cli_transport(optarg);
			break;
		case 'd':
			o.ib_dev = optarg;
			break;
		case 'i':
			o.ib_port = (int)qpg_cli_int(optarg, 1, 255, "--ib-port");
			break;
		case 'x':
			o.gid_index = (int)qpg_cli_int(optarg, 0, 255, "--gid-index");
			break;
		case O_ANYGID:
			o.allow_any_gid = true;
			break;
		case O_PROGRESS:
			o.progress_timeout_ms =
			    (unsigned)qpg_cli_int(optarg, 0, 3600000, "--progress-timeout");
			break;
		case O_IDLE:
			o.idle_timeout_ms =
			    (unsigned)qpg_cli_int(optarg, 0, 86400000, "--idle-timeout");
			break;
		case O_HTO:
			o.handshake_timeout_ms =
			    (unsigned)qpg_cli_int(optarg, 10, 3600000, "--handshake-timeout");
			break;
		case O_MP:
			o.max_pending = (unsigned)qpg_cli_int(optarg, 1, 10000000, "--max-pending");
			break;
		case O_MPP:
			o.max_pending_per_peer =
			    (unsigned)qpg_cli_int(optarg, 1, 10000000, "--max-pending-per-peer");
			break;
		case O_MCP:
			o.max_conns_per_peer =
			    (unsigned)qpg_cli_int(optarg, 0, 10000000, "--max-conns-per-peer");
			break;
		case O_RATE: {
			char *comma = strchr(optarg, ',');
			if (comma)
				*comma = 0;
			o.handshake_rate =
			    (unsigned)qpg_cli_int(optarg, 0, 10000000, "--handshake-rate");
			o.handshake_burst = comma
						? (unsigned)qpg_cli_int(comma + 1, 1, 10000000,
									"--handshake-rate (burst)")
						: (o.handshake_rate ? o.handshake_rate : 1);
			break;
		}
		case O_NOAUTH:
			o.allow_no_auth = true;
			break;
		case 's':
			o.max_msg = (uint32_t)qpg_cli_int(optarg, 1, QPG_WIRE_MAX_MSG, "--max-msg");
			break;
		case O_QPTO:
			o.qp_timeout = (uint8_t)qpg_cli_int(optarg, 1, 31, "--qp-timeout");
			break;
		case O_SRQ:
			o.srq_depth = (uint32_t)qpg_cli_int(optarg, 16, 1 << 20, "--srq-depth");
			break;
		case O_PORTFILE:
			port_file = optarg;
			break;
		case O_METRICS:
			metrics_addr = optarg;
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!o.cert || !o.key) {
		fprintf(stderr, "error: --cert and --key are required (development certificates: "
				"'make certs')\n");
		return 2;
	}
	char err[512];
	struct qpg_kv_service *kvs = NULL;
	if (kv) {
		if (qpg_kv_service_create(&kvs, &kvo, err, sizeof(err))) {
			fprintf(stderr, "qpgate-server: error: %s\n", err);
			return 1;
		}
		o.service = qpg_kv_service_ops();
		o.service_ctx = kvs;
	}
	struct qpg_server *s;
	if (qpg_server_create(&s, &o, err, sizeof(err))) {
		fprintf(stderr, "qpgate-server: error: %s\n", err);
		qpg_kv_service_destroy(kvs);
		return 1;
	}
	g_server = s;
	if (kvs)
		fprintf(stderr, "qpgate-server: kv one-sided GET: %s\n",
			qpg_kv_service_one_sided(kvs));
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct metrics_http *metrics = NULL;
	if (metrics_addr) {
		metrics = metrics_http_start(s, metrics_addr, err, sizeof(err));
		if (!metrics) {
			fprintf(stderr, "qpgate-server: error: %s\n", err);
			qpg_server_destroy(s);
			qpg_kv_service_destroy(kvs);
			return 1;
		}
		fprintf(stderr, "qpgate-server: metrics on http://%.*s:%u/metrics\n",
			(int)(strrchr(metrics_addr, ':') - metrics_addr), metrics_addr,
			metrics_http_port(metrics));
	}
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f ||
		    fprintf(f, "%u %u\n", qpg_server_port(s),
			    metrics ? metrics_http_port(metrics) : 0) < 0 ||
		    fclose(f) || rename(tmp, port_file)) {
			fprintf(stderr, "qpgate-server: error: cannot write %s\n", port_file);
			return 1;
		}
	}
	int rc = qpg_server_run(s);
	fprintf(stderr, "qpgate-server: stopping\n");
	g_server = NULL;
	print_stats(s);
	metrics_http_stop(metrics);
	qpg_server_destroy(s);
	qpg_kv_service_destroy(kvs);
	return rc ? 1 : 0;
}

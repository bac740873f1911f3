/* SPDX-License-Identifier: BSD-2-Clause */
/* The server's counters in the Prometheus text exposition format 0.0.4. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core.h"
#include "qpgate/server.h"

static const char *reject_reason(int code)
{
	switch (code) {
	case QPG_REJECT_MALFORMED:
		return "malformed";
	case QPG_REJECT_VERSION:
		return "version";
	case QPG_REJECT_SERVER_FULL:
		return "server_full";
	case QPG_REJECT_BAD_PARAMS:
		return "bad_params";
	case QPG_REJECT_TRANSPORT:
		return "transport";
	case QPG_REJECT_SERVICE:
		return "service";
	case QPG_REJECT_AUTH_REQUIRED:
		return "auth_required";
	case QPG_REJECT_RESOURCES:
		return "resources";
	case QPG_REJECT_SHUTTING_DOWN:
		return "shutting_down";
	case QPG_REJECT_ADDRESS_LIMIT:
		return "address_limit";
	case QPG_REJECT_IDENTITY:
		return "identity";
	default:
		return NULL;
	}
}

/* A metric with one value and no labels. */
struct plain_metric {
	const char *name, *type, *help;
	long long value;
};

static void header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A bucket bound as Prometheus writes it: "0.000002", never "2e-06". */
static void le_text(char *buf, size_t len, double v)
{
	int n = snprintf(buf, len, "%.6f", v);
	while (n > 1 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 1 && buf[n - 1] == '.')
		buf[--n] = '\0';
}

/* The process collector's usual metrics (process_*), from /proc/self. */
static void process_metrics(FILE *f)
{
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0;
	FILE *st = fopen("/proc/self/stat", "r");
	if (st) {
		char buf[1024];
		size_t n = fread(buf, 1, sizeof(buf) - 1, st);
		buf[n] = '\0';
		const char *p = strrchr(buf, ')'); /* after the command name */
		if (p)
			sscanf(p + 2,
			       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
			       "%*d %*d %*d %llu %llu %lld",
			       &utime, &stime, &start, &vsize, &rss);
		fclose(st);
	}
	unsigned long long btime = 0;
	FILE *ps = fopen("/proc/stat", "r");
	char line[256];
	while (ps && fgets(line, sizeof(line), ps))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	if (ps)
		fclose(ps);
	long fds = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d && (e = readdir(d));)
		fds += e->d_name[0] != '.';
	if (d)
		closedir(d);
	struct rlimit nofile = {0};
	getrlimit(RLIMIT_NOFILE, &nofile);
	double hz = (double)sysconf(_SC_CLK_TCK);
	fprintf(f,
		"# HELP process_cpu_seconds_total User and system CPU time spent in seconds.\n"
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
		"# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
		"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n"
		"# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
		"# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n"
		"# HELP process_open_fds Number of open file descriptors.\n"
		"# TYPE process_open_fds gauge\nprocess_open_fds %ld\n"
		"# HELP process_max_fds Maximum number of open file descriptors.\n"
		"# TYPE process_max_fds gauge\nprocess_max_fds %llu\n"
		"# HELP process_start_time_seconds Start time of the process since unix epoch in "
		"seconds.\n"
		"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
		(double)(utime + stime) / hz, rss * (long long)sysconf(_SC_PAGESIZE), vsize, fds - 1,
		(unsigned long long)nofile.rlim_cur, (double)btime + (double)start / hz);
}

/* The metrics of one value and no labels. */
static void plain_metrics(FILE *f, const struct qpg_server_stats *st)
{
	const struct plain_metric plain[] = {
	    {"qpgate_connected_clients", "gauge", "Clients with an established connection.",
	     st->connected},
	    {"qpgate_handshakes_in_progress", "gauge", "Unfinished TCP+TLS+bootstrap handshakes.",
	     st->handshaking},
	    {"qpgate_peers_tracked", "gauge",
	     "Peer addresses (IPv6: /64s) the server keeps counts or a handshake rate for.",
	     (long long)st->peers_tracked},
	    {"qpgate_tls_cache_sessions", "gauge",
	     "mTLS sessions held for resumption (--tls-cache; about 6 kB each).",
	     (long long)st->tls_cache_sessions},
	    {"qpgate_tls_chains_cached", "gauge",
	     "mTLS: client certificate chains held as verified (--verify-cache).",
	     (long long)st->tls_chains_cached},
	    {"qpgate_tls_chain_hits_total", "counter",
	     "mTLS: full handshakes whose client chain was found verified (since the last "
	     "reload).",
	     (long long)st->tls_chain_hits},
	    {"qpgate_tls_tickets_total", "counter",
	     "TLS resumption tickets sent, each to a client whose HELLO asked for one.",
	     (long long)st->tls_tickets},
	    {"qpgate_qps", "gauge", "Queue pairs the server's clients hold now.",
	     (long long)(st->qps_created - st->qps_destroyed) - st->qps_spare},
	    {"qpgate_qps_created_total", "counter", "Queue pairs created.",
	     (long long)st->qps_created},
	    {"qpgate_qps_reused_total", "counter",
	     "Clients given a spare queue pair (--spare-qps) instead of a new one.",
	     (long long)st->qps_reused},
	    {"qpgate_qps_spare", "gauge", "Queue pairs kept in RESET for the next clients.",
	     st->qps_spare},
	    {"qpgate_cq_completions_per_poll_max", "gauge",
	     "Most completions drained from one completion queue in one pass of the loop.",
	     st->cq_depth_max},
	    {"qpgate_accept_backoffs_total", "counter",
	     "Times accept failed for want of file descriptors and the listener paused 100 ms.",
	     (long long)st->accept_backoffs},
	    {"qpgate_pool_slots_in_use", "gauge",
	     "Message buffers held now (posted receives, sends in flight, queued replies).",
	     st->pool_in_use},
	    {"qpgate_pool_slots", "gauge",
	     "Message buffers allocated (the pools' high-water mark).", st->pool_slots},
	    {"qpgate_pool_slots_abandoned_total", "counter",
	     "Buffers of work requests that never completed, lost with a stuck connection.",
	     (long long)st->slots_abandoned},
	    {"qpgate_srq_receives_posted", "gauge",
	     "rdma: receives posted on the shared receive queues now.", st->srq_receives_posted},
	    {"qpgate_receives_flushed_total", "counter",
	     "rdma: receives a closing connection had begun (mid-message), given back flushed.",
	     (long long)st->receives_flushed},
	    {"qpgate_reads_paused_total", "counter",
	     "Times a tcp connection's requests were held back while its output was full.",
	     (long long)st->reads_paused},
	};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		header(f, plain[i].name, plain[i].type, plain[i].help);
		fprintf(f, "%s %lld\n", plain[i].name, plain[i].value);
	}
}

/* The metrics with labels: a value by result, reason or direction. */
static void labelled_metrics(FILE *f, const struct qpg_server_stats *st)
{
	header(f, "qpgate_build_info", "gauge", "Always 1; the library's version is a label.");
	fprintf(f, "qpgate_build_info{version=\"%s\"} 1\n", qpg_version());
	header(f, "qpgate_handshakes_total", "counter", "Finished handshakes by result.");
	fprintf(f, "qpgate_handshakes_total{result=\"ok\"} %llu\n", st->handshakes_ok);
	fprintf(f, "qpgate_handshakes_total{result=\"failed\"} %llu\n", st->handshakes_failed);
	header(f, "qpgate_handshakes_resumed_total", "counter",
	       "Of the finished handshakes, those that resumed a TLS session (a ticket, or mTLS's cache).");
	fprintf(f, "qpgate_handshakes_resumed_total %llu\n", st->handshakes_resumed);
	header(f, "qpgate_rejections_total", "counter", "Connections refused, by reason.");
	for (int code = 1; code < 16; code++)
		if (reject_reason(code))
			fprintf(f, "qpgate_rejections_total{reason=\"%s\"} %llu\n",
				reject_reason(code), st->rejected[code]);
	fprintf(f, "qpgate_rejections_total{reason=\"pending_limit\"} %llu\n", st->refused_pending);
	fprintf(f, "qpgate_rejections_total{reason=\"per_peer_limit\"} %llu\n",
		st->refused_per_peer);
	fprintf(f, "qpgate_rejections_total{reason=\"peer_rate_limit\"} %llu\n", st->refused_rate);
	fprintf(f, "qpgate_rejections_total{reason=\"per_peer_qp_limit\"} %llu\n",
		st->refused_qps_per_peer);
	fprintf(f, "qpgate_rejections_total{reason=\"per_prefix_pending_limit\"} %llu\n",
		st->refused_prefix);
	header(f, "qpgate_pending_evictions_total", "counter",
	       "Unfinished handshakes closed to make room for a lighter address (pending full).");
	fprintf(f, "qpgate_pending_evictions_total %llu\n", st->pending_evicted);
	header(f, "qpgate_handshake_deadlines_extended_total", "counter",
	       "Handshakes given their deadline once more: the peer's next bytes were here, "
	       "unread (the server was busy).");
	fprintf(f, "qpgate_handshake_deadlines_extended_total %llu\n", st->deadlines_extended);
	header(f, "qpgate_bringup_timeouts_total", "counter",
	       "QPs closed because no authenticated frame came within the bring-up deadline.");
	fprintf(f, "qpgate_bringup_timeouts_total %llu\n", st->bringup_timeouts);
	header(f, "qpgate_connections_closed_total", "counter", "Closed connections by reason.");
	for (int e = 0; e < QPG_ERR_COUNT; e++)
		fprintf(f, "qpgate_connections_closed_total{reason=\"%s\"} %llu\n",
			qpg_err_class_name((enum qpg_err_class)e), st->closed_by_reason[e]);
	header(f, "qpgate_messages_total", "counter", "Authenticated messages, by direction.");
	fprintf(f, "qpgate_messages_total{direction=\"in\"} %llu\n", st->msgs_in);
	fprintf(f, "qpgate_messages_total{direction=\"out\"} %llu\n", st->msgs_out);
	header(f, "qpgate_rdma_sends_total", "counter",
	       "rdma: SENDs, by direction; each carries one or more of the messages above.");
	fprintf(f, "qpgate_rdma_sends_total{direction=\"in\"} %llu\n", st->rdma_sends_in);
	fprintf(f, "qpgate_rdma_sends_total{direction=\"out\"} %llu\n", st->rdma_sends_out);
	header(f, "qpgate_messages_by_reference_total", "counter",
	       "rdma: sent messages whose value the SEND gathered from where the service keeps it, "
	       "without a copy.");
	fprintf(f, "qpgate_messages_by_reference_total %llu\n", st->msgs_by_ref);
	header(f, "qpgate_message_bytes_total", "counter", "Message payload bytes, by direction.");
	fprintf(f, "qpgate_message_bytes_total{direction=\"in\"} %llu\n", st->bytes_in);
	fprintf(f, "qpgate_message_bytes_total{direction=\"out\"} %llu\n", st->bytes_out);
	header(f, "qpgate_auth_failures_total", "counter",
	       "Messages refused: bad tag, or sequence number out of order.");
	fprintf(f, "qpgate_auth_failures_total{kind=\"tag\"} %llu\n", st->auth_failures);
	fprintf(f, "qpgate_auth_failures_total{kind=\"sequence\"} %llu\n", st->seq_failures);
}

/* Accept to established, as a histogram of powers of two. */
static void handshake_histogram(FILE *f, const struct qpg_server_stats *st)
{
	header(f, "qpgate_handshake_duration_seconds", "histogram",
	       "Accept to established, successful handshakes.");
	/* Bucket k < 23 holds durations below 2^(k+1) microseconds; bucket 23
	 * is everything longer, so it only shows in +Inf. */
	unsigned long long cum = 0;
	for (int k = 0; k < 23; k++) {
		char le[32];
		cum += st->handshake_ns_bucket[k];
		le_text(le, sizeof(le), (double)(1ull << (k + 1)) / 1e6);
		fprintf(f, "qpgate_handshake_duration_seconds_bucket{le=\"%s\"} %llu\n", le, cum);
	}
	cum += st->handshake_ns_bucket[23];
	fprintf(f, "qpgate_handshake_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	fprintf(f, "qpgate_handshake_duration_seconds_sum %.9f\n",
		(double)st->handshake_ns_sum / 1e9);
	fprintf(f, "qpgate_handshake_duration_seconds_count %llu\n", cum);
}

int qpg_server_prometheus(struct qpg_server *s, char **out, size_t *len)
{
	struct qpg_server_stats st;
	qpg_server_stats(s, &st);
	FILE *f = open_memstream(out, len);
	if (!f)
		return -errno;
	plain_metrics(f, &st);
	labelled_metrics(f, &st);
	handshake_histogram(f, &st);
	qpg__server_metrics(s, f);
	process_metrics(f);
	if (fclose(f) == 0)
		return 0;
	int rc = -errno;
	free(*out);
	*out = NULL;
	return rc;
}

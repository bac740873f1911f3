/* The server's counters in the Prometheus text exposition format 0.0.4. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
	default:
		return NULL;
	}
}

int qpg_server_prometheus(struct qpg_server *s, char **out, size_t *len)
{
	struct qpg_server_stats st;
	qpg_server_stats(s, &st);
	FILE *f = open_memstream(out, len);
	if (!f)
		return -errno;
#define METRIC(name, type, help) fprintf(f, "# HELP " name " " help "\n# TYPE " name " " type "\n")
	METRIC("qpgate_connected_clients", "gauge", "Clients with an established connection.");
	fprintf(f, "qpgate_connected_clients %lld\n", st.connected);
	METRIC("qpgate_handshakes_in_progress", "gauge",
	       "Unfinished TCP+TLS+bootstrap handshakes.");
	fprintf(f, "qpgate_handshakes_in_progress %lld\n", st.handshaking);
	METRIC("qpgate_handshakes_total", "counter", "Finished handshakes by result.");
	fprintf(f, "qpgate_handshakes_total{result=\"ok\"} %llu\n", st.handshakes_ok);
	fprintf(f, "qpgate_handshakes_total{result=\"failed\"} %llu\n", st.handshakes_failed);
	METRIC("qpgate_rejections_total", "counter", "Connections refused, by reason.");
	for (int code = 1; code < 16; code++)
		if (reject_reason(code))
			fprintf(f, "qpgate_rejections_total{reason=\"%s\"} %llu\n",
				reject_reason(code), st.rejected[code]);
	fprintf(f, "qpgate_rejections_total{reason=\"pending_limit\"} %llu\n", st.refused_pending);
	fprintf(f, "qpgate_rejections_total{reason=\"per_peer_limit\"} %llu\n",
		st.refused_per_peer);
	fprintf(f, "qpgate_rejections_total{reason=\"peer_rate_limit\"} %llu\n", st.refused_rate);
	METRIC("qpgate_peers_tracked", "gauge",
	       "Peer addresses (IPv6: /64s) the server keeps counts or a handshake rate for.");
	fprintf(f, "qpgate_peers_tracked %llu\n", st.peers_tracked);
	METRIC("qpgate_connections_closed_total", "counter", "Closed connections by reason.");
	for (int e = 0; e < QPG_ERR_COUNT; e++)
		fprintf(f, "qpgate_connections_closed_total{reason=\"%s\"} %llu\n",
			qpg_err_class_name((enum qpg_err_class)e), st.closed_by_reason[e]);
	METRIC("qpgate_qps", "gauge", "Queue pairs the server holds now.");
	fprintf(f, "qpgate_qps %llu\n", st.qps_created - st.qps_destroyed);
	METRIC("qpgate_qps_created_total", "counter", "Queue pairs created.");
	fprintf(f, "qpgate_qps_created_total %llu\n", st.qps_created);
	METRIC("qpgate_cq_depth_max", "gauge", "Most completions drained from one CQ in one pass.");
	fprintf(f, "qpgate_cq_depth_max %lld\n", st.cq_depth_max);
	METRIC("qpgate_accept_backoffs_total", "counter",
	       "Times accept failed for want of file descriptors and the listener paused 100 ms.");
	fprintf(f, "qpgate_accept_backoffs_total %llu\n", st.accept_backoffs);
	METRIC("qpgate_pool_slots_in_use", "gauge",
	       "Message buffers held now (posted receives, sends in flight, queued replies).");
	fprintf(f, "qpgate_pool_slots_in_use %lld\n", st.pool_in_use);
	METRIC("qpgate_pool_slots", "gauge",
	       "Message buffers allocated (the pools' high-water mark).");
	fprintf(f, "qpgate_pool_slots %lld\n", st.pool_slots);
	METRIC("qpgate_pool_slots_abandoned_total", "counter",
	       "Buffers of work requests that never completed, lost with a stuck connection.");
	fprintf(f, "qpgate_pool_slots_abandoned_total %llu\n", st.slots_abandoned);
	METRIC("qpgate_reads_paused_total", "counter",
	       "Times a tcp connection's requests were held back while its output was full.");
	fprintf(f, "qpgate_reads_paused_total %llu\n", st.reads_paused);
	METRIC("qpgate_messages_total", "counter", "Authenticated messages, by direction.");
	fprintf(f, "qpgate_messages_total{direction=\"in\"} %llu\n", st.msgs_in);
	fprintf(f, "qpgate_messages_total{direction=\"out\"} %llu\n", st.msgs_out);
	METRIC("qpgate_message_bytes_total", "counter", "Message payload bytes, by direction.");
	fprintf(f, "qpgate_message_bytes_total{direction=\"in\"} %llu\n", st.bytes_in);
	fprintf(f, "qpgate_message_bytes_total{direction=\"out\"} %llu\n", st.bytes_out);
	METRIC("qpgate_auth_failures_total", "counter",
	       "Messages refused: bad tag, or sequence number out of order.");
	fprintf(f, "qpgate_auth_failures_total{kind=\"tag\"} %llu\n", st.auth_failures);
	fprintf(f, "qpgate_auth_failures_total{kind=\"sequence\"} %llu\n", st.seq_failures);
	METRIC("qpgate_handshake_duration_seconds", "histogram",
	       "Accept to established, successful handshakes.");
	/* Bucket k < 23 holds durations below 2^(k+1) microseconds; bucket 23
	 * is everything longer, so it only shows in +Inf. */
	unsigned long long cum = 0;
	for (int k = 0; k < 23; k++) {
		cum += st.handshake_ns_bucket[k];
		fprintf(f, "qpgate_handshake_duration_seconds_bucket{le=\"%g\"} %llu\n",
			(double)(1ull << (k + 1)) / 1e6, cum);
	}
	cum += st.handshake_ns_bucket[23];
	fprintf(f, "qpgate_handshake_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	fprintf(f, "qpgate_handshake_duration_seconds_sum %.9f\n",
		(double)st.handshake_ns_sum / 1e9);
	fprintf(f, "qpgate_handshake_duration_seconds_count %llu\n", cum);
#undef METRIC
	return fclose(f) == 0 ? 0 : -1;
}

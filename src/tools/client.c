/* qpgate-client: connect over TLS-bootstrapped RC QPs (or TCP), echo
 * messages, verify every byte, and report setup phases and latency. With -c
 * it opens many connections at once from one event loop. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "qpgate/client.h"
#include "qpgate/hist.h"

struct run;

struct conn_state {
	struct run *run;
	struct qpg_client_conn *c;
	int index;
	int sent, verified;
	uint64_t sent_ns;
	bool established, closed, done;
	enum qpg_err_class err;
	struct qpg_conn_info info; /* captured as the connection closes */
};

struct run {
	struct qpg_client *cl;
	struct conn_state *conns;
	int nconns;
	int msgs;
	uint32_t size;
	int corrupt_at; /* test hook: corrupt message K's tag on connection 0 */
	int established, closed, failed, done_traffic;
	long mismatches;
	uint8_t *payload;
	struct qpg_hist lat;
	int fail_by_class[QPG_ERR_COUNT];
	char fail_example[QPG_ERR_COUNT][256];
	bool traffic_started;
	int verbose;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t pattern(int conn, int msg, uint32_t j)
{
	return (uint8_t)(conn * 131 + msg * 7 + (int)j * 13 + 1);
}

static void send_next(struct run *r, struct conn_state *s)
{
	for (uint32_t j = 0; j < r->size; j++)
		r->payload[j] = pattern(s->index, s->sent, j);
	if (s->index == 0 && s->sent == r->corrupt_at)
		qpg_client_conn_corrupt_next_tag(s->c);
	s->sent_ns = now_ns();
	int rc = qpg_client_send(s->c, QPG_FRAME_ECHO_REQ, r->payload, r->size);
	if (rc == 0)
		s->sent++;
	else
		fprintf(stderr, "qpgate-client: conn %d: send failed: %s\n", s->index, strerror(-rc));
}

static void on_established(struct qpg_client_conn *c, void *user)
{
	struct conn_state *s = user;
	struct run *r = s->run;
	(void)c;
	s->established = true;
	r->established++;
}

static void finish_traffic(struct run *r, struct conn_state *s)
{
	if (!s->done) {
		s->done = true;
		r->done_traffic++;
	}
}

static void on_reply(struct qpg_client_conn *c, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct conn_state *s = user;
	struct run *r = s->run;
	qpg_hist_add(&r->lat, now_ns() - s->sent_ns);
	if (s->verified == 0)
		qpg_client_conn_mark_first_msg(c);
	int msg = s->verified;
	bool ok = type == QPG_FRAME_ECHO_REPLY && len == r->size;
	for (uint32_t j = 0; ok && j < len; j++)
		ok = p[j] == pattern(s->index, msg, j);
	if (!ok)
		r->mismatches++;
	s->verified++;
	if (s->sent < r->msgs)
		send_next(r, s);
	else
		finish_traffic(r, s);
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct conn_state *s = user;
	if (!s)
		return;
	struct run *r = s->run;
	/* The handle is valid only until this callback returns. */
	qpg_client_conn_info(c, &s->info);
	s->closed = true;
	s->err = err;
	r->closed++;
	if (err != QPG_ERR_NONE) {
		r->failed++;
		if (r->fail_by_class[err]++ == 0)
			snprintf(r->fail_example[err], sizeof(r->fail_example[err]), "%s", why);
		if (r->verbose || r->nconns == 1)
			fprintf(stderr, "qpgate-client: conn %d: %s\n", s->index, why);
	}
	finish_traffic(r, s);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qpgate-client [options] HOST SERVERNAME\n"
		"  -p, --port N          server port (default 7471)\n"
		"      --ca FILE         CA that signed the server certificate\n"
		"      --cert FILE --key FILE   client certificate for mutual TLS\n"
		"  -c, --conns N         concurrent connections (default 1)\n"
		"  -n, --iters N         messages per connection (default 100)\n"
		"  -s, --size BYTES      message size (default 64)\n"
		"      --transport rdma|tcp  (default rdma)\n"
		"  -d, --ib-dev DEV  -i, --ib-port N  -x, --gid-index N\n"
		"      --no-auth         turn per-message authentication off (benchmarks)\n"
		"      --timeout MS      give up on the whole run after MS (default 120000)\n"
		"      --handshake-timeout MS  per connection (default 10000)\n"
		"      --hold MS         once all are connected, wait MS before traffic\n"
		"      --ready-file F    create F once all connections are up\n"
		"      --window N        handshakes in progress at once (default 64)\n"
		"      --expect-error CLASS  succeed only if every connection fails with CLASS\n"
		"  -v, --verbose\n"
		"test hooks: --test-corrupt-tag-at K, --test-bad-hello "
		"version|psn|qpn|truncated|length|stall\n");
}

static void print_phases(struct run *r)
{
	printf("\n %-16s %12s %12s %12s\n", "setup phase", "mean [us]", "p50 [us]", "max [us]");
	for (int p = 0; p < QPG_PHASE_COUNT; p++) {
		struct qpg_hist h;
		qpg_hist_init(&h);
		for (int i = 0; i < r->nconns; i++)
			if (r->conns[i].established)
				qpg_hist_add(&h, r->conns[i].info.phase_ns[p]);
		if (!h.count)
			continue;
		printf(" %-16s %12.1f %12.1f %12.1f\n", qpg_phase_name((enum qpg_phase)p),
		       qpg_hist_mean(&h) / 1e3, (double)qpg_hist_quantile(&h, 0.5) / 1e3,
		       (double)h.max / 1e3);
	}
}

int main(int argc, char **argv)
{
	struct qpg_client_opts o;
	qpg_client_opts_default(&o);
	struct run r = {.nconns = 1, .msgs = 100, .size = 64, .corrupt_at = -1};
	long timeout_ms = 120000, hold_ms = 0, window = 64;
	const char *expect = NULL, *ready_file = NULL;
	enum { O_CA = 256, O_CERT, O_KEY, O_TRANSPORT, O_NOAUTH, O_TIMEOUT, O_HTO, O_HOLD,
	       O_EXPECT, O_CORRUPT, O_BADHELLO, O_WINDOW, O_READY };
	static const struct option lo[] = {
		{"port", 1, 0, 'p'},         {"ca", 1, 0, O_CA},
		{"cert", 1, 0, O_CERT},      {"key", 1, 0, O_KEY},
		{"conns", 1, 0, 'c'},        {"iters", 1, 0, 'n'},
		{"size", 1, 0, 's'},         {"transport", 1, 0, O_TRANSPORT},
		{"ib-dev", 1, 0, 'd'},       {"ib-port", 1, 0, 'i'},
		{"gid-index", 1, 0, 'x'},    {"no-auth", 0, 0, O_NOAUTH},
		{"timeout", 1, 0, O_TIMEOUT}, {"handshake-timeout", 1, 0, O_HTO},
		{"hold", 1, 0, O_HOLD},      {"expect-error", 1, 0, O_EXPECT},
		{"test-corrupt-tag-at", 1, 0, O_CORRUPT}, {"test-bad-hello", 1, 0, O_BADHELLO},
		{"window", 1, 0, O_WINDOW},   {"ready-file", 1, 0, O_READY},   {"verbose", 0, 0, 'v'},
		{"help", 0, 0, 'h'},
		{0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "p:c:n:s:d:i:x:vh", lo, NULL)) != -1) {
		switch (ch) {
		case 'p': o.port = (uint16_t)qpg_cli_int(optarg, 1, 65535, "--port"); break;
		case O_CA: o.ca = optarg; break;
		case O_CERT: o.cert = optarg; break;
		case O_KEY: o.key = optarg; break;
		case 'c': r.nconns = (int)qpg_cli_int(optarg, 1, 1000000, "--conns"); break;
		case 'n': r.msgs = (int)qpg_cli_int(optarg, 0, 1000000000, "--iters"); break;
		case 's': r.size = (uint32_t)qpg_cli_int(optarg, 1, QPG_WIRE_MAX_MSG, "--size"); break;
		case O_TRANSPORT: o.transport = qpg_cli_transport(optarg); break;
		case 'd': o.ib_dev = optarg; break;
		case 'i': o.ib_port = (int)qpg_cli_int(optarg, 1, 255, "--ib-port"); break;
		case 'x': o.gid_index = (int)qpg_cli_int(optarg, 0, 255, "--gid-index"); break;
		case O_NOAUTH: o.auth = false; break;
		case O_TIMEOUT: timeout_ms = qpg_cli_int(optarg, 1, 86400000, "--timeout"); break;
		case O_HTO: o.handshake_timeout_ms = (unsigned)qpg_cli_int(optarg, 10, 3600000, "--handshake-timeout"); break;
		case O_HOLD: hold_ms = qpg_cli_int(optarg, 0, 86400000, "--hold"); break;
		case O_EXPECT: expect = optarg; break;
		case O_CORRUPT: r.corrupt_at = (int)qpg_cli_int(optarg, 0, 1000000000, "--test-corrupt-tag-at"); break;
		case O_BADHELLO: {
			static const char *const modes[] = {"", "version", "psn", "qpn", "truncated", "length", "stall"};
			o.test_mutation = 0;
			for (unsigned k = 1; k < sizeof(modes) / sizeof(modes[0]); k++)
				if (strcmp(optarg, modes[k]) == 0)
					o.test_mutation = (uint8_t)k;
			if (!o.test_mutation) {
				fprintf(stderr, "error: unknown --test-bad-hello mode '%s'\n", optarg);
				return 2;
			}
			break;
		}
		case O_READY: ready_file = optarg; break;
		case O_WINDOW: window = qpg_cli_int(optarg, 1, 1000000, "--window"); break;
		case 'v': r.verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	o.host = argv[optind];
	o.servername = argv[optind + 1];
	o.max_msg = r.size > o.max_msg ? r.size : o.max_msg;
	signal(SIGPIPE, SIG_IGN);

	char err[512];
	struct qpg_client_cbs cbs = {on_established, on_reply, on_closed};
	int rc = qpg_client_create(&r.cl, &o, &cbs, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "qpgate-client: error: %s\n", err);
		return 1;
	}
	qpg_hist_init(&r.lat);
	r.payload = malloc(r.size);
	r.conns = calloc((size_t)r.nconns, sizeof(*r.conns));
	if (!r.conns || !r.payload)
		return 1;
	uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)timeout_ms * 1000000ull;
	/* Open connections keeping at most WINDOW handshakes in flight, as a
	 * fleet of real clients arrives: the server's handshake deadline then
	 * measures the server, not a self-made queue. */
	int started = 0;
	while (r.established + r.failed < r.nconns && now_ns() < deadline) {
		while (started < r.nconns && started - (r.established + r.failed) < window) {
			r.conns[started].run = &r;
			r.conns[started].index = started;
			rc = qpg_client_connect(r.cl, &r.conns[started], &r.conns[started].c);
			if (rc) {
				fprintf(stderr, "qpgate-client: connect: %s\n", strerror(-rc));
				return 1;
			}
			started++;
		}
		qpg_client_run(r.cl, 100);
	}
	for (int i = started; i < r.nconns; i++) { /* never started: count as timed out */
		r.conns[i].run = &r;
		r.conns[i].index = i;
		r.conns[i].closed = true;
		r.failed++;
		if (r.fail_by_class[QPG_ERR_TIMEOUT]++ == 0)
			snprintf(r.fail_example[QPG_ERR_TIMEOUT], sizeof(r.fail_example[0]),
				 "not started before --timeout");
	}
	uint64_t t_connected = now_ns(), t_up = t_connected;
	if (ready_file) {
		FILE *f = fopen(ready_file, "w");
		if (f) {
			fprintf(f, "%d %d\n", r.established, r.failed);
			fclose(f);
		}
	}
	/* Every connection stays up through the hold: concurrency is real. */
	uint64_t hold_until = now_ns() + (uint64_t)hold_ms * 1000000ull;
	while (now_ns() < hold_until)
		qpg_client_run(r.cl, 100);
	t_connected = now_ns();
	/* All connected at once, then traffic: every connection is live together. */
	for (int i = 0; i < r.nconns; i++) {
		struct conn_state *s = &r.conns[i];
		if (s->established && !s->closed && r.msgs > 0)
			send_next(&r, s);
		else if (!s->done) {
			s->done = true;
			r.done_traffic++;
		}
	}
	while (r.done_traffic < r.nconns && now_ns() < deadline)
		qpg_client_run(r.cl, 100);
	uint64_t t_traffic = now_ns();
	int timed_out = r.done_traffic < r.nconns;

	long verified = 0, sent = 0;
	int alive = 0;
	for (int i = 0; i < r.nconns; i++) {
		verified += r.conns[i].verified;
		sent += r.conns[i].sent;
		if (!r.conns[i].closed) {
			alive++;
			qpg_client_close(r.conns[i].c);
		}
	}
	for (int k = 0; k < 100 && qpg_client_conn_count(r.cl); k++)
		qpg_client_run(r.cl, 10);
	for (int i = 0; i < r.nconns; i++) {
		struct conn_state *s = &r.conns[i];
		if (!s->established || (i > 0 && !r.verbose))
			continue;
		const struct qpg_conn_info *ci = &s->info;
		if (ci->transport == QPG_TRANSPORT_RDMA)
			printf(" conn %-5d local QPN 0x%06x PSN 0x%06x | remote QPN 0x%06x PSN 0x%06x | "
			       "auth %s | conn id %llu\n",
			       i, ci->local_qpn, ci->local_psn, ci->peer_qpn, ci->peer_psn,
			       ci->auth ? "on" : "off", (unsigned long long)ci->conn_id);
		else
			printf(" conn %-5d tcp transport | auth %s | conn id %llu\n", i,
			       ci->auth ? "on" : "off", (unsigned long long)ci->conn_id);
	}
	if (r.established)
		print_phases(&r);
	(void)alive;

	double conn_s = (double)(t_up - t0) / 1e9, traffic_s = (double)(t_traffic - t_connected) / 1e9;
	printf("\n %-8s %-10s %-7s %-10s %-7s %-10s %-11s %-9s %-9s %-9s %-10s\n", "#conns",
	       "connected", "failed", "#msgs", "size", "verified", "mismatches", "p50[us]",
	       "p99[us]", "p99.9[us]", "msg/s");
	printf(" %-8d %-10d %-7d %-10ld %-7u %-10ld %-11ld %-9.1f %-9.1f %-9.1f %-10.0f\n",
	       r.nconns, r.established, r.failed, sent, r.size, verified, r.mismatches,
	       (double)qpg_hist_quantile(&r.lat, 0.5) / 1e3, (double)qpg_hist_quantile(&r.lat, 0.99) / 1e3,
	       (double)qpg_hist_quantile(&r.lat, 0.999) / 1e3,
	       traffic_s > 0 ? (double)verified / traffic_s : 0.0);
	printf(" connect phase %.3f s, traffic phase %.3f s%s\n", conn_s, traffic_s,
	       hold_ms ? " (after the hold)" : "");
	for (int e = 1; e < QPG_ERR_COUNT; e++)
		if (r.fail_by_class[e])
			printf(" failed: %d x %s, e.g. \"%s\"\n   -> %s\n", r.fail_by_class[e],
			       qpg_err_class_name((enum qpg_err_class)e), r.fail_example[e],
			       qpg_err_class_hint((enum qpg_err_class)e));
	if (timed_out)
		printf(" run timed out after %ld ms with %d of %d connections unfinished\n", timeout_ms,
		       r.nconns - r.done_traffic, r.nconns);
	qpg_client_destroy(r.cl);
	free(r.conns);
	free(r.payload);

	if (expect) {
		for (int e = 0; e < QPG_ERR_COUNT; e++)
			if (strcmp(expect, qpg_err_class_name((enum qpg_err_class)e)) == 0) {
				bool all = r.fail_by_class[e] == r.nconns;
				printf(" expected every connection to fail with %s: %s\n", expect,
				       all ? "yes" : "NO");
				return all ? 0 : 1;
			}
		fprintf(stderr, "error: unknown error class '%s'\n", expect);
		return 2;
	}
	bool ok = !timed_out && r.failed == 0 && r.mismatches == 0 &&
		  verified == (long)r.nconns * r.msgs;
	return ok ? 0 : 1;
}

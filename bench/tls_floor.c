/* SPDX-License-Identifier: BSD-2-Clause */
/* The TLS floor of a connect: N TLS 1.3 handshakes between a client and a
 * server made exactly as qpgate makes them (tls.c: the same contexts,
 * certificates, host check and stateless tickets), over a local socketpair,
 * with nothing else: no bootstrap, no QP, no event loop. A thread plays
 * both ends in turn and times each end's CPU (CLOCK_THREAD_CPUTIME_ID, user
 * and kernel) from SSL_new to SSL_free.
 *
 * bench/anchors.sh prints this beside the public-key floor (openssl speed)
 * and cmtime: the public-key floor is what the handshake's asymmetric
 * crypto costs; this is what OpenSSL's whole handshake costs; what qpgate
 * adds is the rest.
 *
 *   qpg_tls_floor --cert C --key K --ca CA [-n N] [--servername NAME]
 *                 [--client-cert CC --client-key CK] [--variant V] [--tcp]
 *                 [--threads N] [--procs]
 *
 * --tcp: over a TCP connection on loopback instead, with the options of
 * qpgate's control connection (qpg__sock_tune, the accepted end's
 * inherited from the listener), its connect() and accept() timed to the
 * client and the server: what TCP adds to a connect, which a socketpair
 * leaves out. On loopback the sender's CPU also carries the receiving
 * end's TCP processing, as qpgate's processes do in one VM.
 *
 * --threads N: N threads (each with its own pairs and, over TCP, its own
 * listener) make the handshakes of each kind at once, N times -n in all,
 * sharing the contexts and the client's ticket as a qpgate process's event
 * loops do. Besides the CPU figures, a line "wall full=F resumed=R
 * threads=N": the handshakes each kind made per second of the wall clock,
 * all threads together. That is what the library reaches on the host's
 * cores with everything a CPU figure leaves out (the kernel's work in
 * other contexts, the scheduler, threads that wait), as a qpgate client
 * and server on the same cores are timed by the wall clock too.
 *
 * --procs: then the same handshakes with the client and the server in two
 * processes, each blocking on its socket (tls_floor_procs.c): rows
 * procs-full and procs-resumed, and lines "procs full=F resumed=R" (from
 * their CPU, as the floor's) and "procs-wall full=F resumed=R" (one at a
 * time, by the wall clock).
 *
 * --variant changes one setting of tls.c on every context, to measure what
 * it is worth (docs/performance.md): auto-chain (OpenSSL builds the
 * certificate chain on every handshake), two-tickets (OpenSSL's default
 * count), server-cache (a server session cache beside the tickets),
 * x25519-only (no other key-exchange group), no-compat (no TLS 1.3
 * middlebox-compatibility records), mtls-tickets (mTLS resumes from
 * stateless tickets, as with --tls-cache 0). base: as qpgate is.
 *
 * Prints a table, then one line "floor full=F resumed=R" (handshakes/s on
 * 2 cores: 2 / (client + server CPU per handshake)). With --client-cert and
 * --client-key (signed by the CA), mutual TLS too: rows mtls-full and
 * mtls-resumed, and a line "floor mtls-full=F mtls-resumed=R". The resumed run
 * starts after one untimed full handshake (the first ticket). Exits 1 if
 * any handshake fails, or a resumption did not resume. */
#include "sockets.h"
#include "tls.h"

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "floor.h"
#include "tls_floor_procs.h"
#include <unistd.h>

struct side {
	SSL *ssl;
	double cpu; /* seconds, summed over the run */
	int done;
};

/* One step of a side's handshake, timed; -1 on failure (with a reason). */
static int step(struct side *s, char *why, size_t why_len)
{
	if (s->done)
		return 0;
	double t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
	enum qpg__tls_io r = qpg__tls_handshake(s->ssl, why, why_len);
	s->cpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	if (r == QPG_TLS_DONE)
		s->done = 1;
	return r == QPG_TLS_FAILED ? -1 : 0;
}

/* The client reads what the server sent after its Finished (the ticket):
 * qpgate's client does it while reading the bootstrap reply. */
static void take_ticket(struct side *c)
{
	char b[1], why[256];
	size_t n;
	double t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
	(void)qpg__tls_read(c->ssl, b, sizeof(b), &n, why, sizeof(why));
	c->cpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
}

/* --tcp: the listener on 127.0.0.1 the pairs are made from (-1:
 * socketpairs), and its address. Its TCP options are qpgate's control
 * connection's (qpg__sock_tune), which the accepted end inherits, as a
 * qpgate server's does. */
static bool use_tcp;
static _Thread_local int tcp_listener = -1; /* each thread its own (--threads) */
static _Thread_local struct sockaddr_in tcp_addr;

static int open_tcp_listener(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(tcp_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&tcp_addr, &alen)) {
		perror("qpg_tls_floor: --tcp: listener on 127.0.0.1");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	qpg__sock_tune(fd);
	return fd;
}

/* A connected pair: fds[0] the client's, fds[1] the server's. Over TCP,
 * the connect is client CPU and the accept server CPU. */
static int make_pair(int fds[2], double *ccpu, double *scpu)
{
	if (use_tcp && tcp_listener < 0 && (tcp_listener = open_tcp_listener()) < 0)
		return -1;
	if (!use_tcp) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds)) {
			perror("socketpair");
			return -1;
		}
		return 0;
	}
	double t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fds[0] < 0 || (connect(fds[0], (struct sockaddr *)&tcp_addr, sizeof(tcp_addr)) &&
			   errno != EINPROGRESS)) {
		perror("qpg_tls_floor: --tcp: connect");
		if (fds[0] >= 0)
			close(fds[0]);
		return -1;
	}
	qpg__sock_tune(fds[0]);
	*ccpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	fds[1] = -1;
	for (int i = 0; i < 1000 && fds[1] < 0; i++) {
		t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
		fds[1] = accept4(tcp_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		*scpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
		if (fds[1] < 0 && errno != EAGAIN)
			break;
		if (fds[1] < 0)
			usleep(100); /* the handshake is on its way */
	}
	if (fds[1] < 0) {
		perror("qpg_tls_floor: --tcp: accept");
		close(fds[0]);
		return -1;
	}
	return 0;
}

/* Over TCP a flight can still be on its way after a round of steps:
 * loopback hands each segment to a softirq, which a loaded VM may run
 * late. Wait up to 1 s for the side not done (C, S on FDS) to have
 * something to read: 1 when one has, 0 when none had, -1 on an error. */
static int wait_flight(const int fds[2], const struct side *c, const struct side *s)
{
	struct pollfd p[2];
	nfds_t n = 0;
	if (!c->done)
		p[n++] = (struct pollfd){.fd = fds[0], .events = POLLIN};
	if (!s->done)
		p[n++] = (struct pollfd){.fd = fds[1], .events = POLLIN};
	return poll(p, n, 1000);
}

static int handshakes(struct qpg__tls_slot *cs, SSL_CTX *sctx, const char *name, int resume,
		      struct run *out)
{
	struct timespec w0, w1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	for (int i = 0; i < out->n; i++) {
		int fds[2];
		struct side c = {0}, s = {0};
		if (make_pair(fds, &c.cpu, &s.cpu))
			return -1;
		double t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
		c.ssl = qpg__tls_slot_session(cs, fds[0], 0, name);
		double t1 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
		s.ssl = qpg__tls_session(sctx, fds[1], 1, NULL);
		s.cpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t1;
		c.cpu += t1 - t0;
		char why[256] = "";
		int rounds = 0, waits = 0;
		if (!c.ssl || !s.ssl) {
			snprintf(why, sizeof(why), "cannot make a TLS session");
			goto fail;
		}
		/* A handshake takes a few rounds of steps. Past 20, over TCP, each
		 * round first waits for a flight still on its way (10 waits of up
		 * to 1 s at most); over a socketpair every flight is there at once. */
		while (!(c.done && s.done)) {
			if (step(&c, why, sizeof(why)) || step(&s, why, sizeof(why)))
				goto fail;
			if ((c.done && s.done) || ++rounds < 20)
				continue;
			if (!use_tcp || waits++ >= 10 || wait_flight(fds, &c, &s) < 0) {
				snprintf(why, sizeof(why),
					 "handshake did not finish in %d rounds of steps (%d waits for "
					 "a flight)",
					 rounds, waits);
				goto fail;
			}
		}
		/* As qpgate's bootstrap: a ticket when the client's HELLO would
		 * ask for one (a full handshake of a client that resumes, or a
		 * ticket a quarter through its lifetime), sent by the server
		 * ahead of its answer. */
		if (qpg__tls_slot_wants_ticket(cs, c.ssl)) {
			double t2 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
			int offered = qpg__tls_ticket_offer(s.ssl);
			enum qpg__tls_io r = qpg__tls_handshake(s.ssl, why, sizeof(why));
			s.cpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t2;
			if (offered != 1 || r == QPG_TLS_FAILED) {
				snprintf(why, sizeof(why), "the server sent no ticket");
				goto fail;
			}
			take_ticket(&c);
		}
		if (qpg__tls_resumed(c.ssl))
			out->resumed++;
		else if (resume) {
			snprintf(why, sizeof(why), "handshake %d was not resumed", i);
			goto fail;
		}
		/* As qpgate does once the bootstrap is over: TLS goes, the
		 * connection (and the client's ticket) stays good. */
		t0 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
		qpg__tls_release(c.ssl);
		close(fds[0]);
		t1 = floor_clock_s(CLOCK_THREAD_CPUTIME_ID);
		qpg__tls_release(s.ssl);
		close(fds[1]);
		s.cpu += floor_clock_s(CLOCK_THREAD_CPUTIME_ID) - t1;
		c.cpu += t1 - t0;
		out->cli_cpu += c.cpu;
		out->srv_cpu += s.cpu;
		continue;
fail:
		fprintf(stderr, "qpg_tls_floor: handshake %d: %s\n", i, why);
		qpg__tls_free(c.ssl);
		qpg__tls_free(s.ssl);
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &w1);
	out->wall = (w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9;
	return 0;
}

/* --threads: how many threads make each kind's handshakes at once. */
static int nthreads = 1;

struct lane {
	pthread_t id;
	struct qpg__tls_slot *cs;
	SSL_CTX *sctx;
	const char *name;
	int resume, rc;
	struct run r;
};

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	l->rc = handshakes(l->cs, l->sctx, l->name, l->resume, &l->r);
	if (tcp_listener >= 0)
		close(tcp_listener);
	return NULL;
}

/* OUT->n handshakes of one kind in each of THREADS threads at once; OUT
 * sums their counts and CPU, and OUT->wall is the wall time from the first
 * start to the last end. One thread: in this one. */
static int phase(struct qpg__tls_slot *cs, SSL_CTX *sctx, const char *name, int resume, int threads,
		 struct run *out)
{
	if (threads == 1)
		return handshakes(cs, sctx, name, resume, out);
	struct lane l[8];
	int started = 0, rc = 0;
	double w0 = floor_clock_s(CLOCK_MONOTONIC);
	for (; started < threads; started++) {
		l[started] = (struct lane){
		    .cs = cs, .sctx = sctx, .name = name, .resume = resume, .r = {.n = out->n}};
		if (pthread_create(&l[started].id, NULL, lane_main, &l[started])) {
			fprintf(stderr, "qpg_tls_floor: cannot start a thread\n");
			rc = -1;
			break;
		}
	}
	for (int i = 0; i < started; i++) {
		pthread_join(l[i].id, NULL);
		rc = rc ? rc : l[i].rc;
		out->resumed += l[i].r.resumed;
		out->cli_cpu += l[i].r.cli_cpu;
		out->srv_cpu += l[i].r.srv_cpu;
	}
	out->wall = floor_clock_s(CLOCK_MONOTONIC) - w0;
	out->n *= threads;
	return rc;
}

static double floor_rate(const struct run *r)
{
	return 2.0 * r->n / (r->cli_cpu + r->srv_cpu);
}

/* --procs: the two-process runs too. */
static bool use_procs;

static void row(const char *what, const struct run *r)
{
	printf(" %-13s %8d %8d %14.1f %14.1f %16.0f\n", what, r->n, r->resumed,
	       1e6 * r->cli_cpu / r->n, 1e6 * r->srv_cpu / r->n, floor_rate(r));
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: qpg_tls_floor --cert FILE --key FILE --ca FILE [-n N] "
	       "[--servername NAME] [--client-cert FILE --client-key FILE]\n"
	       "       [--variant base|auto-chain|two-tickets|server-cache|x25519-only|no-compat|verify-cache|\n"
	       "                 mtls-tickets] [--tcp] [--threads N] [--procs]\n");
}

/* --variant: one setting of tls.c changed, to measure what it is worth. */
static const char *variant = "base";

static int apply_variant(SSL_CTX *ctx, int is_server)
{
	if (strcmp(variant, "base") == 0 || strcmp(variant, "mtls-tickets") == 0)
		return 0; /* mtls-tickets: mTLS resumes from stateless tickets (--tls-cache 0) */
	if (strcmp(variant, "auto-chain") == 0) /* OpenSSL builds our chain per handshake */
		SSL_CTX_clear_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
	else if (strcmp(variant, "two-tickets") == 0) /* OpenSSL's default: 2 per handshake */
		return is_server && SSL_CTX_get_num_tickets(ctx) ? !SSL_CTX_set_num_tickets(ctx, 2) : 0;
	else if (strcmp(variant, "server-cache") == 0) /* a session cache beside the tickets */
		SSL_CTX_set_session_cache_mode(ctx, is_server ? SSL_SESS_CACHE_SERVER
							      : SSL_SESS_CACHE_OFF);
	else if (strcmp(variant, "x25519-only") == 0) /* no other group offered or accepted */
		return SSL_CTX_set1_groups_list(ctx, "X25519") != 1;
	else if (strcmp(variant, "no-compat") == 0) /* no middlebox-compatibility records */
		SSL_CTX_clear_options(ctx, SSL_OP_ENABLE_MIDDLEBOX_COMPAT);
	else if (strcmp(variant, "verify-cache") == 0) /* qpgate's caches of verified chains */
		return qpg__tls_vcache_attach(ctx, QPG__TLS_VCACHE_TTL_S,
					      is_server ? QPG__TLS_VCACHE_SERVER_MAX : QPG__TLS_VCACHE_MAX);
	else
		return -1;
	return 0;
}

/* Full handshakes, then resumed ones, between contexts made from SF (the
 * server's files) and CF (the client's); rows named PREFIX"full" and
 * PREFIX"resumed". 0, or 1 with the reason printed. */
static int measure(const struct qpg__tls_files *sf, const struct qpg__tls_files *cf,
		   const char *name, int n, const char *prefix, double rates[4])
{
	char err[256];
	struct qpg__tls_tickets *tickets = NULL;
	SSL_CTX *full_s = NULL, *res_s = NULL, *full_c = NULL, *res_c = NULL;
	int rc = 1;
	/* As a server with --client-ca resumes mTLS: from its cache (the
	 * default size). */
	if (qpg__tls_tickets_new(&tickets, 3600, 86400) ||
	    (strcmp(variant, "mtls-tickets") && qpg__tls_tickets_cache(tickets, 8192))) {
		fprintf(stderr, "qpg_tls_floor: cannot make ticket keys\n");
		return 1;
	}
	full_s = qpg__tls_server_ctx(sf, NULL, err, sizeof(err));
	res_s = full_s ? qpg__tls_server_ctx(sf, tickets, err, sizeof(err)) : NULL;
	full_c = res_s ? qpg__tls_client_ctx(cf, err, sizeof(err)) : NULL;
	res_c = full_c ? qpg__tls_client_ctx(cf, err, sizeof(err)) : NULL;
	if (!res_c) {
		fprintf(stderr, "qpg_tls_floor: %s\n", err);
		goto out;
	}
	if (apply_variant(full_s, 1) || apply_variant(res_s, 1) || apply_variant(full_c, 0) ||
	    apply_variant(res_c, 0)) {
		fprintf(stderr, "qpg_tls_floor: --variant %s: unknown, or it did not apply\n",
			variant);
		goto out;
	}
	struct qpg__tls_slot full_slot, res_slot;
	qpg__tls_slot_init(&full_slot, full_c);
	qpg__tls_slot_init(&res_slot, res_c);
	full_c = res_c = NULL; /* the slots own them */
	struct run full = {.n = n}, res = {.n = n};
	struct run warm = {.n = 1}; /* a full handshake for the first ticket */
	if (qpg__tls_slot_resume(&res_slot) == 0 &&
	    phase(&full_slot, full_s, name, 0, nthreads, &full) == 0 &&
	    handshakes(&res_slot, res_s, name, 0, &warm) == 0 &&
	    phase(&res_slot, res_s, name, 1, nthreads, &res) == 0) {
		char what[32];
		snprintf(what, sizeof(what), "%sfull", prefix);
		row(what, &full);
		snprintf(what, sizeof(what), "%sresumed", prefix);
		row(what, &res);
		rates[0] = floor_rate(&full);
		rates[1] = floor_rate(&res);
		rates[2] = full.n / full.wall;
		rates[3] = res.n / res.wall;
		rc = 0;
	}
	struct run pf = {.n = n}, pr = {.n = n};
	if (rc == 0 && use_procs)
		rc = floor_procs(&full_slot, full_s, name, 0, &pf) ||
		     floor_procs(&res_slot, res_s, name, 1, &pr);
	if (rc == 0 && use_procs) {
		char what[32];
		snprintf(what, sizeof(what), "%sprocs-full", prefix);
		row(what, &pf);
		snprintf(what, sizeof(what), "%sprocs-resumed", prefix);
		row(what, &pr);
		printf("%sprocs full=%.0f resumed=%.0f\n", prefix, floor_rate(&pf),
		       floor_rate(&pr));
		printf("%sprocs-wall full=%.0f resumed=%.0f\n", prefix, n / pf.wall, n / pr.wall);
	}
	qpg__tls_slot_fini(&full_slot);
	qpg__tls_slot_fini(&res_slot);
out:
	SSL_CTX_free(full_s);
	SSL_CTX_free(res_s);
	SSL_CTX_free(full_c);
	SSL_CTX_free(res_c);
	qpg__tls_tickets_free(tickets);
	return rc;
}

int main(int argc, char **argv)
{
	struct qpg__tls_files sf = {0}, cf = {0};
	const char *name = "localhost", *ccert = NULL, *ckey = NULL;
	long n = 500;
	static const struct option lo[] = {{"cert", required_argument, NULL, 'C'},
					   {"key", required_argument, NULL, 'K'},
					   {"ca", required_argument, NULL, 'A'},
					   {"servername", required_argument, NULL, 'S'},
					   {"iters", required_argument, NULL, 'n'},
					   {"help", no_argument, NULL, 'h'},
					   {"client-cert", required_argument, NULL, 'c'},
					   {"client-key", required_argument, NULL, 'k'},
					   {"variant", required_argument, NULL, 'v'},
					   {"tcp", no_argument, NULL, 't'},
					   {"threads", required_argument, NULL, 'T'},
					   {"procs", no_argument, NULL, 'P'},
					   {NULL, 0, NULL, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (o) {
		case 'C': sf.cert = optarg; break;
		case 'K': sf.key = optarg; break;
		case 'A': cf.ca = optarg; break;
		case 'S': name = optarg; break;
		case 'c': ccert = optarg; break;
		case 'k': ckey = optarg; break;
		case 'v': variant = optarg; break;
		case 't': use_tcp = true; break;
		case 'P':
			use_procs = true;
			break;
		case 'T': nthreads = (int)floor_num("qpg_tls_floor: --threads", optarg, 1, 8); break;
		case 'n': {
			char *end;
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || n < 2 || n > 1000000) {
				fprintf(stderr, "qpg_tls_floor: -n wants 2 to 1000000, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!sf.cert || !sf.key || !cf.ca || optind != argc || (!ccert != !ckey)) {
		usage(stderr);
		return 2;
	}
	printf(" TLS 1.3 handshakes in %d thread%s, over %s, as qpgate makes them\n", nthreads,
	       nthreads == 1 ? "" : "s at once", use_tcp ? "TCP on loopback" : "a socketpair");
	printf(" %-13s %8s %8s %14s %14s %16s\n", "kind", "count", "resumed", "client [us]",
	       "server [us]", "floor/s, 2 cores");
	double plain[4], mtls[4];
	if (measure(&sf, &cf, name, (int)n, "", plain))
		return 1;
	if (ccert) {
		/* Mutual TLS: the server asks for a certificate signed by the
		 * same CA, and checks it (on resumption too, tls_tickets.c). */
		struct qpg__tls_files msf = sf, mcf = cf;
		msf.ca = cf.ca;
		mcf.cert = ccert;
		mcf.key = ckey;
		if (measure(&msf, &mcf, name, (int)n, "mtls-", mtls))
			return 1;
	}
	printf("floor full=%.0f resumed=%.0f\n", plain[0], plain[1]);
	if (ccert)
		printf("floor mtls-full=%.0f mtls-resumed=%.0f\n", mtls[0], mtls[1]);
	printf("wall full=%.0f resumed=%.0f threads=%d\n", plain[2], plain[3], nthreads);
	if (ccert)
		printf("wall mtls-full=%.0f mtls-resumed=%.0f threads=%d\n", mtls[2], mtls[3],
		       nthreads);
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpg_tls_floor --procs: the same handshakes with the client and the server
 * in two processes over TCP on loopback, each blocking on its socket (as
 * `openssl s_time` against `openssl s_server`), one handshake at a time.
 * The one-thread floor plays both ends in turn and never sleeps; here each
 * end waits for the other's flight as every TLS client and server does,
 * and as qpgate's do: what a handshake costs two processes, the kernel's
 * wake-ups and the switches between address spaces included. Each
 * process's CPU is its own (CLOCK_PROCESS_CPUTIME_ID over its loop: TCP
 * connect or accept, the handshake, TLS freed, the close). */
#include "tls_floor_procs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "floor.h"
#include "sockets.h"

/* Drives SSL's handshake to its end, waiting on FD as it asks. 0, or -1
 * with the reason in WHY. */
static int handshake_blocking(SSL *ssl, int fd, char *why, size_t why_len)
{
	for (int turns = 0; turns < 64; turns++) {
		enum qpg__tls_io r = qpg__tls_handshake(ssl, why, why_len);
		if (r == QPG_TLS_DONE)
			return 0;
		if (r == QPG_TLS_FAILED)
			return -1;
		struct pollfd p = {.fd = fd, .events = r == QPG_TLS_WANT_WRITE ? POLLOUT : POLLIN};
		if (poll(&p, 1, 10000) != 1) {
			snprintf(why, why_len, "the peer went quiet for 10 s");
			return -1;
		}
	}
	snprintf(why, why_len, "the handshake did not end in 64 turns");
	return -1;
}

/* The server's end: N accepts and handshakes; its CPU to WFD. */
static int server_loop(int lfd, SSL_CTX *sctx, int n, int wfd)
{
	double t0 = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID);
	char why[256] = "";
	for (int i = 0; i < n; i++) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, 10000) != 1) {
			fprintf(stderr, "qpg_tls_floor --procs: server: no connect for 10 s\n");
			return 1;
		}
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			perror("qpg_tls_floor --procs: accept");
			return 1;
		}
		SSL *s = qpg__tls_session(sctx, fd, 1, NULL);
		if (!s || handshake_blocking(s, fd, why, sizeof(why))) {
			fprintf(stderr, "qpg_tls_floor --procs: server, handshake %d: %s\n", i,
				s ? why : "cannot make a TLS session");
			qpg__tls_free(s);
			close(fd);
			return 1;
		}
		qpg__tls_release(s);
		close(fd);
	}
	double cpu = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
	return write(wfd, &cpu, sizeof(cpu)) == sizeof(cpu) ? 0 : 1;
}

/* The client's end: N connects and handshakes, each resumed if RESUME. */
static int client_loop(const struct sockaddr_in *at, struct qpg__tls_slot *cs, const char *name,
		       int resume, struct run *out)
{
	char why[256] = "";
	for (int i = 0; i < out->n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || (connect(fd, (const struct sockaddr *)at, sizeof(*at)) &&
			       errno != EINPROGRESS)) {
			perror("qpg_tls_floor --procs: connect");
			if (fd >= 0)
				close(fd);
			return -1;
		}
		qpg__sock_tune(fd);
		SSL *c = qpg__tls_slot_session(cs, fd, 0, name);
		int rc = c ? handshake_blocking(c, fd, why, sizeof(why)) : -1;
		if (!c)
			snprintf(why, sizeof(why), "cannot make a TLS session");
		else if (rc == 0 && qpg__tls_resumed(c))
			out->resumed++;
		else if (rc == 0 && resume)
			snprintf(why, sizeof(why), "not resumed"), rc = -1;
		if (rc) {
			fprintf(stderr, "qpg_tls_floor --procs: client, handshake %d: %s\n", i,
				why);
			qpg__tls_free(c);
			close(fd);
			return -1;
		}
		qpg__tls_release(c);
		close(fd);
	}
	return 0;
}

int floor_procs(struct qpg__tls_slot *cs, SSL_CTX *sctx, const char *name, int resume,
		struct run *out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), pfd[2] = {-1, -1};
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) || pipe(pfd)) {
		perror("qpg_tls_floor --procs: listener on 127.0.0.1");
		goto fail;
	}
	qpg__sock_tune(lfd);
	fflush(NULL);
	double w0 = floor_clock_s(CLOCK_MONOTONIC);
	pid_t pid = fork();
	if (pid < 0) {
		perror("qpg_tls_floor --procs: fork");
		goto fail;
	}
	if (pid == 0) {
		close(pfd[0]);
		_exit(server_loop(lfd, sctx, out->n, pfd[1]));
	}
	close(pfd[1]);
	pfd[1] = -1;
	double t0 = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID);
	int rc = client_loop(&a, cs, name, resume, out);
	out->cli_cpu = floor_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
	if (rc)
		kill(pid, SIGKILL);
	int status = 0;
	ssize_t got = read(pfd[0], &out->srv_cpu, sizeof(out->srv_cpu));
	waitpid(pid, &status, 0);
	out->wall = floor_clock_s(CLOCK_MONOTONIC) - w0;
	close(pfd[0]);
	close(lfd);
	if (rc || got != sizeof(out->srv_cpu) || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	return 0;
fail:
	if (lfd >= 0)
		close(lfd);
	if (pfd[0] >= 0)
		close(pfd[0]), close(pfd[1]);
	return -1;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A TCP forwarder on loopback, for cutting one server or client off from
 * etcd in a test:
 *   tcp_proxy LISTEN_PORT TARGET_PORT [READY_FILE]
 * One process, one thread: SIGSTOP freezes every connection through it,
 * SIGCONT lets them go on, and killing it cuts them all; starting it again
 * on the same port restores them. It writes READY_FILE (the port, by a
 * rename) once it listens. A port still held (a connection of the proxy
 * killed a moment ago) is tried again for up to 10 s; then it exits 1 with
 * the reason.
 * With QPG_PROXY_FLIP=N in its environment it is a wire attacker instead:
 * the byte at offset N of each connection's client-to-server stream goes
 * through with its lowest bit flipped.
 * Each direction holds at most one read's bytes (64 KiB) until the other
 * end takes them, so a stopped peer stalls only its own connection.
 * (C rather than Python: under the lab's emulated CPU a Python process
 * takes about 5 s to start, and the nemesis test starts seven proxies.) */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 512
#define BUF	  (64 * 1024)

struct dir {
	int from, to;
	char buf[BUF];
	size_t off, len;
	long long seen; /* bytes read so far (the flip's offset) */
	bool eof;	/* FROM ended and its bytes went to TO (TO shut for writing) */
};

struct pair {
	struct dir up, down; /* up: client to server */
};

static struct pair *pairs[MAX_PAIRS];
static long long flip = -1;

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listen_on(int port)
{
	for (int i = 0; i < 100; i++) {
		int fd = tcp_socket(), one = 1;
		if (fd < 0)
			return -1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		struct sockaddr_in a = loopback(port);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 128) == 0)
			return fd;
		int e = errno;
		close(fd);
		if (e != EADDRINUSE) {
			errno = e;
			return -1;
		}
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	}
	fprintf(stderr, "tcp_proxy: port %d stayed in use for 10 s: pick another\n", port);
	exit(1);
}

/* A blocking connect to the target on loopback: it is answered at once,
 * or refused (then the client's connection is closed). */
static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = loopback(port);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void drop(int i)
{
	close(pairs[i]->up.from);
	close(pairs[i]->up.to);
	free(pairs[i]);
	pairs[i] = NULL;
}

/* Move what D holds or can read. false: the connection is broken. */
static bool pump(struct dir *d, bool up)
{
	for (;;) {
		while (d->off < d->len) {
			ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
			if (n < 0)
				return errno == EAGAIN || errno == EINTR;
			d->off += (size_t)n;
		}
		if (d->eof)
			return true;
		ssize_t n = recv(d->from, d->buf, BUF, 0);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0) { /* the end: pass it on */
			d->eof = true;
			shutdown(d->to, SHUT_WR);
			return true;
		}
		if (up && flip >= d->seen && flip < d->seen + n)
			d->buf[flip - d->seen] ^= 1;
		d->seen += n;
		d->off = 0;
		d->len = (size_t)n;
	}
}

static short events(const struct dir *d, int fd)
{
	short e = 0;
	if (fd == d->from && !d->eof && d->off == d->len)
		e |= POLLIN;
	if (fd == d->to && d->off < d->len)
		e |= POLLOUT;
	return e;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tcp_proxy LISTEN_PORT TARGET_PORT [READY_FILE]\n");
		return 2;
	}
	int port = atoi(argv[1]), target = atoi(argv[2]);
	const char *f = getenv("QPG_PROXY_FLIP");
	if (f && *f)
		flip = atoll(f);
	int lfd = listen_on(port);
	if (lfd < 0) {
		fprintf(stderr, "tcp_proxy: listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return 1;
	}
	if (argc > 3) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]);
		FILE *r = fopen(tmp, "w");
		if (!r || fprintf(r, "%d\n", port) < 0 || fclose(r) != 0 ||
		    rename(tmp, argv[3]) != 0) {
			fprintf(stderr, "tcp_proxy: ready file %s: %s\n", argv[3], strerror(errno));
			return 1;
		}
	}
	static struct pollfd pfd[1 + 2 * MAX_PAIRS];
	static int who[1 + 2 * MAX_PAIRS];
	for (;;) {
		int n = 0;
		pfd[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *p = pairs[i];
			if (!p)
				continue;
			int fds[2] = {p->up.from, p->up.to};
			for (int k = 0; k < 2; k++) {
				who[n] = i;
				pfd[n++] = (struct pollfd){.fd = fds[k],
							   .events = events(&p->up, fds[k]) |
								     events(&p->down, fds[k])};
			}
		}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("tcp_proxy: poll");
			return 1;
		}
		for (int k = 1; k < n; k++) {
			int i = who[k];
			if (!pfd[k].revents || !pairs[i])
				continue;
			struct pair *p = pairs[i];
			/* What can still move moves; an error or a hang-up (a
			 * reset, or both ways shut) then ends the connection, or
			 * poll would report it again and again. */
			if (!pump(&p->up, true) || !pump(&p->down, false) ||
			    (p->up.eof && p->down.eof) ||
			    (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL)))
				drop(i);
		}
		if (pfd[0].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (c < 0)
				continue;
			int s = dial(target), slot = -1;
			for (int i = 0; i < MAX_PAIRS && slot < 0; i++)
				if (!pairs[i])
					slot = i;
			struct pair *p = s >= 0 && slot >= 0 ? calloc(1, sizeof(*p)) : NULL;
			if (!p) {
				close(c);
				if (s >= 0)
					close(s);
				continue;
			}
			p->up.from = p->down.to = c;
			p->up.to = p->down.from = s;
			pairs[slot] = p;
		}
	}
}

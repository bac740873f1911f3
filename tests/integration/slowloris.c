/* SPDX-License-Identifier: BSD-2-Clause */
/* A slowloris attacker for the connection-limit test: opens N TCP
 * connections from SRC to HOST:PORT; every other one also sends the first
 * bytes of a TLS ClientHello and then stalls. It holds them all and reports
 * how many the server closed, and when, as "closed=K of N, last after S s".
 *   slowloris SRC HOST PORT N WAIT_S
 * Bounded: it never waits longer than WAIT_S and never reconnects. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: slowloris SRC HOST PORT N WAIT_S\n");
		return 2;
	}
	int n = atoi(argv[4]);
	double wait_s = atof(argv[5]);
	struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
	if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1 || n <= 0 || n > 60000) {
		fprintf(stderr, "slowloris: bad arguments\n");
		return 2;
	}
	dst.sin_port = htons((uint16_t)atoi(argv[3]));
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	if (!p)
		return 1;
	/* A TLS record header for a handshake message plus the start of a
	 * ClientHello: the server's TLS layer waits for the rest. */
	static const unsigned char partial[] = {0x16, 0x03, 0x01, 0x02, 0x00,
						0x01, 0x00, 0x01, 0xfc};
	int opened = 0;
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) ||
		    connect(fd, (struct sockaddr *)&dst, sizeof(dst))) {
			fprintf(stderr, "slowloris: socket %d: %s\n", i, strerror(errno));
			if (fd >= 0)
				close(fd);
			p[i].fd = -1;
			continue;
		}
		if (i % 2 && write(fd, partial, sizeof(partial)) < 0)
			fprintf(stderr, "slowloris: write %d: %s\n", i, strerror(errno));
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		p[i].fd = fd;
		p[i].events = POLLIN;
		opened++;
	}
	double t0 = now_s(), last = 0;
	int closed = 0;
	while (closed < opened && now_s() - t0 < wait_s) {
		if (poll(p, (nfds_t)n, 200) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[4096];
			ssize_t r = read(p[i].fd, buf, sizeof(buf));
			if (r > 0)
				continue; /* a TLS alert on its way to the close */
			if (r < 0 && errno == EAGAIN)
				continue;
			close(p[i].fd);
			p[i].fd = -1;
			closed++;
			last = now_s() - t0;
		}
	}
	printf("opened=%d closed=%d of %d, last after %.2f s\n", opened, closed, n, last);
	for (int i = 0; i < n; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	free(p);
	return 0;
}

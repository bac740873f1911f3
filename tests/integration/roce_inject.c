/* SPDX-License-Identifier: BSD-2-Clause */
/* roce_inject: an off-path RoCE v2 packet injector for the two-VM lab.
 *
 *   roce_inject IFACE SERVER_IP MODE QUIET_FILE [SECONDS]
 *     MODE: wrong-psn | bad-icrc | forged | replay
 *
 * It watches IFACE (AF_PACKET, outgoing packets too) for RC SEND packets to
 * SERVER_IP:4791, and once QUIET_FILE exists (the victim client has gone
 * quiet), takes the last one it saw, L, as the template: it knows the
 * server's queue pair (L's destination QPN) and the PSN the server expects
 * next (L's PSN + 1). It first recomputes L's ICRC (CRC32 over the masked
 * pseudo-header, headers and payload, as the IBTA spec and rxe define it)
 * and refuses to go on unless it reproduces the captured one: the packets
 * it forges are then ones the device would accept on their ICRC alone.
 * Then it sends one packet, from the victim's addresses:
 *   wrong-psn  L's payload at PSN + 1000 (a guessed PSN): must be dropped
 *   bad-icrc   L's payload at the expected PSN, ICRC corrupted: dropped
 *   forged     the expected PSN, a valid ICRC, L's frame with the next
 *              sequence number and one byte of its message changed: only
 *              the message tag can catch it
 *   replay     L again, byte for byte: must not be executed twice
 * What it did goes to stdout, one line "inject: ..." per fact.
 * Exit: 0 sent, 1 usage, 2 nothing captured in time, 3 ICRC not reproduced,
 * 4 socket error. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define ROCE_PORT     4791
#define BTH_LEN	      12
#define ICRC_LEN      4
#define ETH_LEN	      14
#define FRAME_SEQ_OFF 8 /* qpgate frame header: version type flags len seq */

enum mode { WRONG_PSN, BAD_ICRC, FORGED, REPLAY };

struct pkt {
	uint8_t b[2048];
	size_t len;
	size_t ip, udp, bth, payload; /* offsets */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An RC SEND (first/middle/last/only, with or without immediate) to DST
 * on UDP 4791? Fills the offsets. */
static int parse(struct pkt *p, uint32_t dst)
{
	if (p->len < ETH_LEN + 20 + 8 + BTH_LEN + ICRC_LEN)
		return 0;
	if (p->b[12] != 0x08 || p->b[13] != 0x00)
		return 0;
	p->ip = ETH_LEN;
	/* Copied out: the IP header sits 14 bytes into the frame, where a
	 * struct iphdr may not be read in place (UBSan: misaligned). */
	struct iphdr ip;
	memcpy(&ip, p->b + p->ip, sizeof(ip));
	if (ip.version != 4 || ip.ihl != 5 || ip.protocol != IPPROTO_UDP || ip.daddr != dst)
		return 0;
	p->udp = p->ip + 20;
	struct udphdr u;
	memcpy(&u, p->b + p->udp, sizeof(u));
	if (ntohs(u.dest) != ROCE_PORT)
		return 0;
	p->bth = p->udp + 8;
	p->payload = p->bth + BTH_LEN;
	uint8_t op = p->b[p->bth];
	return op <= 0x05; /* RC SEND_* */
}

static uint32_t get_psn(const struct pkt *p)
{
	const uint8_t *b = p->b + p->bth;
	return (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
}

static void set_psn(struct pkt *p, uint32_t psn)
{
	uint8_t *b = p->b + p->bth;
	b[9] = (uint8_t)(psn >> 16);
	b[10] = (uint8_t)(psn >> 8);
	b[11] = (uint8_t)psn;
}

static uint32_t get_qpn(const struct pkt *p)
{
	const uint8_t *b = p->b + p->bth;
	return (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
}

/* RoCE v2 ICRC: CRC32 over 8 bytes of ones (the LRH a RoCE v2 packet does
 * not have), the IP header with TOS, TTL and checksum set to ones, the UDP
 * header with its checksum set to ones, the BTH with its reserved byte set
 * to ones, and the rest of the packet up to the ICRC. */
static uint32_t icrc(const struct pkt *p)
{
	uint8_t pseudo[8 + 20 + 8 + BTH_LEN];
	memset(pseudo, 0xff, 8);
	memcpy(pseudo + 8, p->b + p->ip, 20 + 8 + BTH_LEN);
	uint8_t *ip = pseudo + 8, *u = ip + 20; /* by byte: no alignment */
	ip[1] = 0xff;				/* TOS */
	ip[8] = 0xff;				/* TTL */
	ip[10] = ip[11] = 0xff;			/* checksum */
	u[6] = u[7] = 0xff;			/* UDP checksum */
	pseudo[8 + 20 + 8 + 4] = 0xff;		/* BTH resv8a */
	uLong c = crc32(0L, Z_NULL, 0);
	c = crc32(c, pseudo, sizeof(pseudo));
	c = crc32(c, p->b + p->payload, (uInt)(p->len - ICRC_LEN - p->payload));
	return (uint32_t)c;
}

/* The ICRC goes on the wire least significant byte first (rxe stores the
 * CRC as a host-order word); LITTLE says whether that held for a capture. */
static void put_icrc(struct pkt *p, uint32_t v)
{
	uint8_t *t = p->b + p->len - ICRC_LEN;
	for (int i = 0; i < 4; i++)
		t[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t wire_icrc(const struct pkt *p)
{
	const uint8_t *t = p->b + p->len - ICRC_LEN;
	return (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
}

static int parse_mode(const char *s)
{
	static const char *const names[] = {"wrong-psn", "bad-icrc", "forged", "replay"};
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 5 || argc > 6 || parse_mode(argv[3]) < 0) {
		fprintf(stderr,
			"usage: roce_inject IFACE SERVER_IP wrong-psn|bad-icrc|forged|replay "
			"QUIET_FILE [SECONDS]\n");
		return 1;
	}
	enum mode mode = (enum mode)parse_mode(argv[3]);
	const char *quiet = argv[4];
	int secs = argc == 6 ? atoi(argv[5]) : 60;
	struct in_addr dst;
	if (inet_pton(AF_INET, argv[2], &dst) != 1) {
		fprintf(stderr, "roce_inject: bad address %s\n", argv[2]);
		return 1;
	}
	unsigned ifindex = if_nametoindex(argv[1]);
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (!ifindex || fd < 0) {
		fprintf(stderr, "roce_inject: %s: %s\n", argv[1], strerror(errno));
		return 4;
	}
	struct sockaddr_ll sll = {
	    .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)ifindex};
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		fprintf(stderr, "roce_inject: bind: %s\n", strerror(errno));
		return 4;
	}
	struct pkt last = {0}, cur;
	long seen = 0;
	uint64_t until = now_ms() + (uint64_t)secs * 1000;
	/* Capture until the victim is quiet and we have a template. */
	while (now_ms() < until) {
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, 100) > 0) {
			ssize_t n = recv(fd, cur.b, sizeof(cur.b), 0);
			if (n > 0) {
				cur.len = (size_t)n;
				if (parse(&cur, dst.s_addr)) {
					last = cur;
					seen++;
				}
			}
			continue;
		}
		if (access(quiet, F_OK) == 0 && seen > 0)
			break;
	}
	if (seen == 0) {
		fprintf(stderr, "roce_inject: no RC SEND to %s captured in %d s\n", argv[2], secs);
		return 2;
	}
	uint32_t psn = get_psn(&last);
	uint32_t expect = (psn + 1) & 0xffffff;
	printf("inject: captured %ld RC SEND packets; template: QPN 0x%06x PSN 0x%06x, %zu bytes, "
	       "%zu bytes of payload\n",
	       seen, get_qpn(&last), psn, last.len, last.len - last.payload - ICRC_LEN);
	uint32_t mine = icrc(&last), theirs = wire_icrc(&last);
	printf("inject: ICRC of the captured packet 0x%08x, recomputed 0x%08x: %s\n", theirs, mine,
	       mine == theirs ? "reproduced" : "NOT reproduced");
	if (mine != theirs)
		return 3;

	struct pkt out = last;
	switch (mode) {
	case WRONG_PSN:
		set_psn(&out, (expect + 1000) & 0xffffff);
		put_icrc(&out, icrc(&out));
		break;
	case BAD_ICRC:
		set_psn(&out, expect);
		put_icrc(&out, icrc(&out) ^ 0x00010000);
		break;
	case FORGED: {
		/* The next frame of this connection, as far as anything but the
		 * message tag can tell: sequence number + 1, one byte changed. */
		uint8_t *f = out.b + out.payload;
		size_t flen = out.len - out.payload - ICRC_LEN;
		if (flen < 16 + 1) {
			fprintf(stderr, "roce_inject: template too short to forge\n");
			return 2;
		}
		uint64_t seq = 0;
		for (int i = 0; i < 8; i++)
			seq = seq << 8 | f[FRAME_SEQ_OFF + i];
		seq++;
		for (int i = 7; i >= 0; i--, seq >>= 8)
			f[FRAME_SEQ_OFF + i] = (uint8_t)seq;
		f[16] ^= 0x55;
		set_psn(&out, expect);
		put_icrc(&out, icrc(&out));
		break;
	}
	case REPLAY:
		break; /* byte for byte */
	}
	if (send(fd, out.b, out.len, 0) != (ssize_t)out.len) {
		fprintf(stderr, "roce_inject: send: %s\n", strerror(errno));
		return 4;
	}
	printf("inject: sent %s: QPN 0x%06x PSN 0x%06x (server expects 0x%06x), ICRC 0x%08x "
	       "(%s)\n",
	       argv[3], get_qpn(&out), get_psn(&out), expect, wire_icrc(&out),
	       wire_icrc(&out) == icrc(&out) ? "valid" : "corrupt");
	close(fd);
	return 0;
}

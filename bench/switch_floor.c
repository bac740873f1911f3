/* SPDX-License-Identifier: BSD-2-Clause */
/* What a context switch costs on this machine: between two processes (a
 * change of address space) and between two threads of one process. A byte
 * goes back and forth over two pipes, both ends pinned to one CPU, so every
 * round trip is two switches; each end touches W KiB of its own memory per
 * turn, the pages it must find again after a switch. Under qemu's TCG a
 * change of address space empties the vCPU's software TLB, and qpgate's
 * client and server, two processes on the lab VM's two vCPUs, pay that on
 * every switch between them (docs/secure-path.md, "What a second thread
 * costs under TCG").
 *
 *   qpg_switch_floor [-n ROUND_TRIPS] [-w KIB] [--cpu N]
 *
 * Prints a line per mode, then "switch process_us=P thread_us=T w_kib=W"
 * (P, T: wall-clock µs per switch, half a round trip). Exit 1 on a failure
 * of the system (pipes, fork, affinity), 2 on a usage error. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "floor.h"

struct pingpong {
	int to_peer[2], to_main[2]; /* pipes: [0] read, [1] write */
	long n, w_kib;
	int cpu;
	volatile unsigned sink;
};

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s) ? -errno : 0;
}

/* Touches a page in every 4 KiB of M (W_KIB KiB), so its translations are
 * needed again after each switch. */
static void touch(struct pingpong *pp, unsigned char *m)
{
	for (long i = 0; i < pp->w_kib * 1024; i += 4096)
		pp->sink += m[i]++;
}

/* The far end: answers each byte after touching its memory. 0, or -errno. */
static int peer(struct pingpong *pp)
{
	int rc = pin(pp->cpu);
	unsigned char *m = calloc(1, (size_t)pp->w_kib * 1024 + 1);
	if (!rc && !m)
		rc = -ENOMEM;
	char c;
	for (long i = 0; !rc && i < pp->n; i++) {
		if (read(pp->to_peer[0], &c, 1) != 1)
			rc = -EPIPE;
		touch(pp, m);
		if (!rc && write(pp->to_main[1], &c, 1) != 1)
			rc = -EPIPE;
	}
	free(m);
	if (rc) { /* the main end reads EOF instead of waiting for an answer */
		close(pp->to_main[1]);
		pp->to_main[1] = -1;
	}
	return rc;
}

static void *peer_thread(void *arg)
{
	return (void *)(long)peer(arg);
}

static void close_pipes(struct pingpong *pp)
{
	for (int i = 0; i < 2; i++) {
		if (pp->to_peer[i] >= 0)
			close(pp->to_peer[i]);
		if (pp->to_main[i] >= 0)
			close(pp->to_main[i]);
	}
}

/* N round trips with the peer in a process of its own (PROC) or in a
 * thread; µs per switch into *US. 0, or a message's errno. */
static int run(struct pingpong *pp, int proc, double *us)
{
	int rc = 0;
	pid_t pid = -1;
	pthread_t t;
	unsigned char *m = NULL;
	pp->to_peer[0] = pp->to_peer[1] = pp->to_main[0] = pp->to_main[1] = -1;
	if (pipe(pp->to_peer) || pipe(pp->to_main)) {
		rc = -errno;
		goto out;
	}
	if ((rc = pin(pp->cpu)) != 0)
		goto out;
	if (proc) {
		pid = fork();
		if (pid < 0) {
			rc = -errno;
			goto out;
		}
		if (pid == 0)
			_exit(peer(pp) ? 1 : 0);
		close(pp->to_main[1]); /* the child's copy is the only write end now */
		pp->to_main[1] = -1;
	} else if ((rc = -pthread_create(&t, NULL, peer_thread, pp)) != 0) {
		goto out;
	}
	if (!(m = calloc(1, (size_t)pp->w_kib * 1024 + 1)))
		rc = -ENOMEM;
	char c = 'x';
	double t0 = floor_clock_s(CLOCK_MONOTONIC);
	for (long i = 0; !rc && i < pp->n; i++) {
		touch(pp, m);
		if (write(pp->to_peer[1], &c, 1) != 1 || read(pp->to_main[0], &c, 1) != 1)
			rc = -EPIPE;
	}
	*us = (floor_clock_s(CLOCK_MONOTONIC) - t0) / (double)pp->n / 2 * 1e6;
	close(pp->to_peer[1]); /* a peer still waiting reads EOF and ends */
	pp->to_peer[1] = -1;
	if (proc) {
		int st = 0;
		if (waitpid(pid, &st, 0) == pid && (!WIFEXITED(st) || WEXITSTATUS(st)) && !rc)
			rc = -EPIPE;
	} else {
		void *r;
		pthread_join(t, &r);
		/* A broken pipe here is the peer's failure showing: its own
		 * reason is the cause. Ours, if it came first, stays. */
		if (r && (!rc || rc == -EPIPE))
			rc = (int)(long)r;
	}
out:
	free(m);
	close_pipes(pp);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: qpg_switch_floor [-n ROUND_TRIPS] [-w KIB] [--cpu N]\n"
		   "  -n N       round trips per mode (default 4000), each two switches\n"
		   "  -w KIB     memory each end touches per turn, a page per 4 KiB (default 0)\n"
		   "  --cpu N    the CPU both ends are pinned to (default 0)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"cpu", required_argument, NULL, 'c'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct pingpong pp = {.n = 4000};
	int c;
	while ((c = getopt_long(argc, argv, "n:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			pp.n = floor_num("qpg_switch_floor", optarg, 1, 100000000);
			break;
		case 'w':
			pp.w_kib = floor_num("qpg_switch_floor", optarg, 0, 1 << 20);
			break;
		case 'c':
			pp.cpu = (int)floor_num("qpg_switch_floor", optarg, 0, CPU_SETSIZE - 1);
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
	signal(SIGPIPE, SIG_IGN); /* a dead peer is an error, not a signal */
	double us[2];
	const char *name[2] = {"processes", "threads"};
	printf(" %-10s %12s %8s %14s\n", "between", "round trips", "memory", "us per switch");
	for (int proc = 1; proc >= 0; proc--) {
		int rc = run(&pp, proc, &us[!proc]);
		if (rc) {
			fprintf(stderr, "qpg_switch_floor: %s: %s%s\n", name[!proc], strerror(-rc),
				rc == -EINVAL ? " (is --cpu a CPU this process may run on?)" : "");
			return 1;
		}
		printf(" %-10s %12ld %5ld KiB %14.2f\n", name[!proc], pp.n, pp.w_kib, us[!proc]);
	}
	printf("switch process_us=%.2f thread_us=%.2f w_kib=%ld\n", us[0], us[1], pp.w_kib);
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* kill_storm: start N copies of a command at once and SIGKILL each at a
 * random point of its own life, 0 to MAX ms after its start.
 *
 *   kill_storm [--max-ms MS] [--seed S] [--no-kill] [--out DIR] N -- COMMAND [ARG...]
 *
 * --no-kill starts them the same way and lets each run to its end (a burst:
 * storm.sh burst). --out DIR sends child I's output and errors (I from 1)
 * to DIR/cI.out instead of /dev/null, and a line is printed for each child
 * that did not exit 0:
 *   kill_storm: child I (DIR/cI.out): exit status X   (or: killed by signal X)
 *
 * storm.sh's kill rounds used to start each client, and then each client's
 * killer, as a bash subshell. Under the lab's TCG a bash fork costs about
 * 0.2 s, so 100 clients took 17-21 s to start and their killers 18 s more
 * (2026-12-01): each client lived 20-40 s before its kill, long past its
 * handshake, and a round took 45 s. Here each child is started by
 * posix_spawn (a vfork: no copy of this process), and dies where its own
 * schedule says: in its start, the TLS handshake, the bootstrap, the QP's
 * bring-up or the data. (The clients' own starts remain: in the lab VM 100
 * of them take 8-19 s to start.)
 *
 * The children's standard input is /dev/null, and so are their output and
 * errors without --out. The seed (default: from the clock and the pid) is
 * printed, so a round can be replayed. Every child is reaped after the
 * last kill, so no pid is reused while one is still to be killed. Prints,
 * after the lines of --out:
 *   kill_storm: seed S: N started, K killed, E exited on their own (Z with
 *   status 0, first other exit status X); started in A s, all gone B s after
 * Exit status: 0, or 1 if a child could not be started (those already
 * started are killed and reaped), 2 on a usage error. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct child {
	pid_t pid;
	unsigned long idx;  /* 1-based, in the order started: DIR/cIDX.out */
	struct timespec at; /* when to kill it */
	int sent;           /* SIGKILL sent */
	int status;         /* from waitpid */
};

static int usage(void)
{
	fprintf(stderr, "usage: kill_storm [--max-ms MS] [--seed S] [--no-kill] [--out DIR] N -- COMMAND [ARG...]\n");
	return 2;
}

static int by_time(const void *a, const void *b)
{
	const struct timespec *x = &((const struct child *)a)->at, *y = &((const struct child *)b)->at;
	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int number(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -1;
	*out = v;
	return 0;
}

#define OUT_DIR_MAX 4000 /* --out DIR's length; spawn_one's path holds DIR/cI.out */

struct opts {
	unsigned long max_ms, n, seed;
	int no_kill;
	const char *out; /* --out DIR, or NULL */
	char **cmd;
};

static int parse(int argc, char **argv, struct opts *o)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	*o = (struct opts){.max_ms = 3000, .seed = (unsigned long)now.tv_nsec ^ ((unsigned long)getpid() << 16)};
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--max-ms") == 0 && i + 1 < argc) {
			if (number(argv[++i], 3600000, &o->max_ms) < 0 || o->max_ms == 0)
				return -1;
		} else if (strcmp(argv[i], "--no-kill") == 0) {
			o->no_kill = 1;
		} else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
			o->out = argv[++i];
			if (strlen(o->out) > OUT_DIR_MAX) /* DIR/cI.out must fit spawn_one's path */
				return -1;
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			if (number(argv[++i], 0xffffffffUL, &o->seed) < 0)
				return -1;
		} else if (o->n != 0 || number(argv[i], 100000, &o->n) < 0 || o->n == 0) {
			return -1;
		}
	}
	if (o->n == 0 || i + 1 >= argc)
		return -1;
	o->cmd = argv + i + 1;
	return 0;
}

/* Kill each started child whose time has come (never one already sent). */
static void kill_due(struct child *kids, unsigned long started)
{
	struct child now = {0};
	clock_gettime(CLOCK_MONOTONIC, &now.at);
	for (unsigned long k = 0; k < started; k++)
		if (!kids[k].sent && by_time(&kids[k], &now) <= 0) {
			kill(kids[k].pid, SIGKILL); /* unreaped, so still this child */
			kids[k].sent = 1;
		}
}

/* One child's posix_spawn: /dev/null in, and out to DIR/cI.out (or
 * /dev/null). */
static int spawn_one(const struct opts *o, struct child *c)
{
	posix_spawn_file_actions_t fa;
	char path[OUT_DIR_MAX + 32];
	if (o->out)
		snprintf(path, sizeof(path), "%s/c%lu.out", o->out, c->idx);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, o->out ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	int err = posix_spawnp(&c->pid, o->cmd[0], &fa, NULL, o->cmd, environ);
	posix_spawn_file_actions_destroy(&fa);
	return err;
}

/* Starts the children, each with its time to die (none with --no-kill);
 * kills those due as it goes (under an emulated CPU a start can take
 * 0.1 s). Returns how many started; *err is set if one could not. */
static unsigned long spawn_all(const struct opts *o, struct child *kids, int *err)
{
	srandom((unsigned)o->seed);
	unsigned long started = 0;
	*err = 0;
	for (; started < o->n; started++) {
		if (!o->no_kill)
			kill_due(kids, started);
		struct child *c = &kids[started];
		c->idx = started + 1;
		*err = spawn_one(o, c);
		if (*err)
			break;
		clock_gettime(CLOCK_MONOTONIC, &c->at);
		long ms = random() % (long)o->max_ms;
		c->at.tv_sec += ms / 1000;
		c->at.tv_nsec += (ms % 1000) * 1000000L;
		if (c->at.tv_nsec >= 1000000000L) {
			c->at.tv_sec++;
			c->at.tv_nsec -= 1000000000L;
		}
	}
	return started;
}

enum kill_when { KILL_ON_SCHEDULE, KILL_NOW, KILL_NONE };

/* Kills those not yet sent (on schedule, at once, or not at all), then
 * reaps every child into its status. */
static void kill_and_reap(struct child *kids, unsigned long started, enum kill_when when)
{
	if (when == KILL_NOW)
		for (unsigned long k = 0; k < started; k++)
			kids[k].at = (struct timespec){0, 0};
	qsort(kids, started, sizeof(*kids), by_time);
	for (unsigned long k = 0; when != KILL_NONE && k < started; k++) {
		if (kids[k].sent)
			continue;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &kids[k].at, NULL) == EINTR)
			;
		kill(kids[k].pid, SIGKILL);
		kids[k].sent = 1;
	}
	for (unsigned long k = 0; k < started; k++)
		while (waitpid(kids[k].pid, &kids[k].status, 0) < 0 && errno == EINTR)
			;
}

struct tally {
	unsigned long killed, exited, exited_ok;
	int first_status; /* of the first (in start order) that exited otherwise, or -1 */
};

static int by_idx(const void *a, const void *b)
{
	unsigned long x = ((const struct child *)a)->idx, y = ((const struct child *)b)->idx;
	return (x > y) - (x < y);
}

/* Counts how the children ended; with --out, names each that did not exit 0. */
static struct tally count(const struct opts *o, struct child *kids, unsigned long started)
{
	struct tally t = {.first_status = -1};
	qsort(kids, started, sizeof(*kids), by_idx);
	for (unsigned long k = 0; k < started; k++) {
		int st = kids[k].status;
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (kids[k].sent && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
			t.killed++;
			continue;
		}
		t.exited++;
		if (code == 0) {
			t.exited_ok++;
			continue;
		}
		if (t.first_status < 0)
			t.first_status = code;
		if (o->out)
			printf("kill_storm: child %lu (%s/c%lu.out): %s %d\n", kids[k].idx, o->out, kids[k].idx,
			       WIFEXITED(st) ? "exit status" : "killed by signal", WIFEXITED(st) ? code : WTERMSIG(st));
	}
	return t;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse(argc, argv, &o) < 0)
		return usage();
	struct child *kids = calloc(o.n, sizeof(*kids));
	if (!kids) {
		perror("kill_storm: calloc");
		return 1;
	}
	struct timespec t0, t1, t2;
	int err;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long started = spawn_all(&o, kids, &err);
	if (err)
		fprintf(stderr, "kill_storm: cannot start %s: %s\n", o.cmd[0], strerror(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	kill_and_reap(kids, started, err ? KILL_NOW : o.no_kill ? KILL_NONE : KILL_ON_SCHEDULE);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	struct tally t = count(&o, kids, started);
	printf("kill_storm: seed %lu: %lu started, %lu killed, %lu exited on their own (%lu with status 0", o.seed,
	       started, t.killed, t.exited, t.exited_ok);
	if (t.first_status >= 0)
		printf(", first other exit status %d", t.first_status);
	printf("); started in %.1f s, all gone %.1f s after\n", secs(&t0, &t1), secs(&t1, &t2));
	free(kids);
	return err ? 1 : 0;
}

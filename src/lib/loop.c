/* SPDX-License-Identifier: BSD-2-Clause */
#include "loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common.h"

/* The loop this thread is running a turn of, if any: a wake from inside
 * one of its own callbacks needs no system call (qpg__loop_wake_soon). */
static _Thread_local struct qpg__loop *running_here;

/* eventfd and timerfd both hold a counter that must be read to re-arm. */
static void drain_counter(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof(v)) == sizeof(v))
		;
}

static void wake_cb(struct qpg__io *io, uint32_t events)
{
	struct qpg__loop *l = qpg__container_of(io, struct qpg__loop, wake);
	if (events) /* not when deferred by a wake from the loop's own thread */
		drain_counter(io->fd);
	/* Before on_wake looks for work: a wake after this point writes
	 * again, so nothing handed over after on_wake has looked is missed. */
	atomic_store(&l->wake_pending, false);
	if (l->on_wake)
		l->on_wake(l);
}

static void tick_cb(struct qpg__io *io, uint32_t events)
{
	struct qpg__loop *l = qpg__container_of(io, struct qpg__loop, tick);
	drain_counter(io->fd);
	if (l->on_tick)
		l->on_tick(l);
}

int qpg__loop_init(struct qpg__loop *l, uint32_t tick_ms)
{
	memset(l, 0, sizeof(*l));
	l->wake.fd = l->tick.fd = -1;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return -errno;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0 || qpg__loop_add(l, &l->wake, fd, EPOLLIN, wake_cb) < 0)
		goto fail;
	if (tick_ms) {
		l->tick_ms = tick_ms;
		fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (fd < 0)
			goto fail;
		struct itimerspec its = {
		    .it_interval = {tick_ms / 1000, (long)(tick_ms % 1000) * 1000000L},
		    .it_value = {tick_ms / 1000, (long)(tick_ms % 1000) * 1000000L},
		};
		if (timerfd_settime(fd, 0, &its, NULL) < 0 ||
		    qpg__loop_add(l, &l->tick, fd, EPOLLIN, tick_cb) < 0) {
			close(fd);
			goto fail;
		}
	}
	return 0;
fail : {
	int rc = -errno;
	qpg__loop_fini(l);
	return rc ? rc : -ENOMEM;
}
}

void qpg__loop_fini(struct qpg__loop *l)
{
	if (l->tick.fd >= 0) {
		close(l->tick.fd);
		l->tick.fd = -1;
	}
	if (l->wake.fd >= 0) {
		close(l->wake.fd);
		l->wake.fd = -1;
	}
	if (l->epfd >= 0) {
		close(l->epfd);
		l->epfd = -1;
	}
}

int qpg__loop_add(struct qpg__loop *l, struct qpg__io *io, int fd, uint32_t events, qpg__io_cb cb)
{
	io->fd = fd;
	io->events = events;
	io->cb = cb;
	io->deferred = 0;
	io->next_deferred = NULL;
	struct epoll_event ev = {.events = events, .data.ptr = io};
	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int qpg__loop_mod(struct qpg__loop *l, struct qpg__io *io, uint32_t events)
{
	if (io->events == events)
		return 0;
	io->events = events;
	struct epoll_event ev = {.events = events, .data.ptr = io};
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0 ? -errno : 0;
}

void qpg__loop_defer(struct qpg__loop *l, struct qpg__io *io)
{
	if (io->deferred)
		return;
	io->deferred = 1;
	io->next_deferred = l->deferred;
	l->deferred = io;
}

void qpg__loop_del(struct qpg__loop *l, struct qpg__io *io)
{
	if (io->deferred) {
		struct qpg__io **lists[] = {&l->deferred, &l->running};
		for (int i = 0; i < 2; i++)
			for (struct qpg__io **pp = lists[i]; *pp; pp = &(*pp)->next_deferred)
				if (*pp == io) {
					*pp = io->next_deferred;
					break;
				}
		io->deferred = 0;
	}
	if (io->fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
}

/* The loop's clock: the monotonic clock, or the test's. */
static uint64_t loop_now(const struct qpg__loop *l)
{
	return l->clock_ns ? l->clock_ns() : qpg__now_ns();
}

/* The CPU time this thread has had: the kernel's count, or the test's. */
static uint64_t thread_cpu(const struct qpg__loop *l)
{
	return l->cpu_ns ? l->cpu_ns() : qpg__thread_cpu_ns();
}

#define SPIN_BACKOFF_MIN 16u
#define SPIN_BACKOFF_MAX 1024u

/* A spin on the fds began at T0 (this thread's CPU time then: C0) with a
 * window of WINDOW ns, and ended. If the thread spent more than 1 ms (and
 * twice the window) of it off its core, it lost its core to other threads
 * that wanted it for a scheduler's time slice: more threads want the CPUs
 * than there are, and the spin kept one of them from running, so the next
 * spins are skipped (loop.h, spin_skip). A kernel thread's turn (the
 * network's softirq work, which under emulation can take a few hundred
 * us) passes unnoticed, and so does a spin that ran long on its core
 * (polls that are slow, as under emulation). */
static void fd_spin_ended(struct qpg__loop *l, uint64_t t0, uint64_t c0, uint64_t window)
{
	uint64_t wall = loop_now(l) - t0, cpu = thread_cpu(l) - c0;
	if (qpg__age_ns(wall, cpu) <= QPG_MAX(2 * window, 1000000ull)) { /* time off the core */
		l->spin_backoff = 0;
		return;
	}
	l->spin_backoff =
	    l->spin_backoff ? QPG_MIN(l->spin_backoff * 2, SPIN_BACKOFF_MAX) : SPIN_BACKOFF_MIN;
	l->spin_skip = l->spin_backoff;
	l->spin_ns = 0;
}

/* Poll for up to l->spin_ns from T0 before the caller sleeps: the poll source if
 * there is one (it handles what it finds and returns how much), else the
 * fds themselves (epoll without waiting; the events are left in EVS).
 * Returns what was found; adapts the window. The clock is read every few
 * turns: reading it can cost more than a poll (a VM's HPET traps), though
 * less than the system call that each epoll is. */
static int spin(struct qpg__loop *l, struct epoll_event *evs, int max, uint64_t t0)
{
	uint64_t end = t0 + l->spin_ns;
	unsigned clock_every = l->poll ? 32 : 4;
	for (unsigned i = 1;; i++) {
		int r = l->poll ? l->poll(l) : epoll_wait(l->epfd, evs, max, 0);
		if (r != 0) {
			if (r > 0)
				l->spin_ns = l->spin_max_ns;
			return r;
		}
		/* A poll source's spin looks at no fd, but a wake from
		 * another thread (work handed over) ends it: the flag is
		 * plain memory, set before the eventfd is written. */
		if (l->poll && atomic_load_explicit(&l->wake_pending, memory_order_relaxed))
			return 0;
		if (i % clock_every == 0 && loop_now(l) >= end)
			break;
	}
	l->spin_ns = l->spin_ns / 2 < 1000 ? 0 : l->spin_ns / 2;
	return 0;
}

static int run_once(struct qpg__loop *l, int timeout_ms);

int qpg__loop_run_once(struct qpg__loop *l, int timeout_ms)
{
	struct qpg__loop *outer = running_here;
	running_here = l;
	int n = run_once(l, timeout_ms);
	running_here = outer;
	return n;
}

/* See unlooked in loop.h. A turn's poll drains a whole CQ batch, so under
 * load (32 or more a turn) the fds are looked at every turn, as before. */
#define QPG__LOOP_FD_EVERY 32

static int run_once(struct qpg__loop *l, int timeout_ms)
{
	struct epoll_event evs[256];
	if (l->flush)
		l->flush(l);
	int got = l->poll ? l->poll(l) : 0; /* no syscall: a CQ is user memory */
	bool may_sleep = !l->deferred && !got && timeout_ms != 0;
	int n = 0;
	if (l->poll) {
		/* Nothing found and allowed to sleep: spin on the poll source
		 * first, then arm it, and only then look at the fds, waiting.
		 * Work found (now or by the spin): look at the fds without
		 * waiting, once they are due. */
		if (may_sleep) {
			got = l->spin_ns ? spin(l, evs, (int)QPG_ARRAY_SIZE(evs), loop_now(l)) : 0;
			/* A wake pending: its eventfd ends the wait at once,
			 * so no need to arm the source first. */
			if (!got && l->arm && !atomic_load(&l->wake_pending))
				got = l->arm(l);
		}
		l->unlooked += (unsigned)got;
		if (!got || l->unlooked >= QPG__LOOP_FD_EVERY || l->deferred) {
			n = epoll_wait(l->epfd, evs, (int)QPG_ARRAY_SIZE(evs),
				       may_sleep && !got ? timeout_ms : 0);
			l->unlooked = 0;
		}
	} else {
		/* The fds are the only source: spin on them (tcp), or wait. */
		bool look_first = l->spin_fds && l->spin_ns;
		n = epoll_wait(l->epfd, evs, (int)QPG_ARRAY_SIZE(evs),
			       may_sleep && !look_first ? timeout_ms : 0);
		if (n == 0 && may_sleep && look_first) {
			uint64_t t0 = loop_now(l), c0 = thread_cpu(l), window = l->spin_ns;
			n = spin(l, evs, (int)QPG_ARRAY_SIZE(evs), t0);
			fd_spin_ended(l, t0, c0, window);
			if (n == 0)
				n = epoll_wait(l->epfd, evs, (int)QPG_ARRAY_SIZE(evs), timeout_ms);
		} else if (n == 0 && may_sleep && l->spin_skip && --l->spin_skip == 0) {
			l->spin_ns = l->spin_max_ns; /* the next sleep tries a spin again */
		}
	}
	if (n < 0)
		return errno == EINTR ? got : -errno;
	if (n > 0 && l->spin_fds && !l->spin_skip)
		l->spin_ns = l->spin_max_ns; /* traffic: spin again before the next sleep */
	for (int i = 0; i < n; i++) {
		struct qpg__io *io = evs[i].data.ptr;
		io->cb(io, evs[i].events);
	}
	n += got;
	/* Taken as a whole: a callback may defer itself again, for the next
	 * batch, after the fds that are ready by then. */
	l->running = l->deferred;
	l->deferred = NULL;
	while (l->running) {
		struct qpg__io *io = l->running;
		l->running = io->next_deferred;
		io->deferred = 0;
		io->cb(io, 0);
		n++;
	}
	if (l->flush)
		l->flush(l);
	if (l->on_batch_end)
		l->on_batch_end(l);
	return n;
}

void qpg__loop_wake(struct qpg__loop *l)
{
	if (atomic_exchange(&l->wake_pending, true))
		return; /* the loop has a wake coming: it will see this work too */
	uint64_t one = 1;
	ssize_t r = write(l->wake.fd, &one, sizeof(one));
	(void)r;
}

void qpg__loop_wake_soon(struct qpg__loop *l)
{
	if (running_here != l) {
		qpg__loop_wake(l);
		return;
	}
	/* From one of its own callbacks: on_wake runs at the end of this
	 * batch, with no eventfd written, read or polled. */
	if (!atomic_exchange(&l->wake_pending, true))
		qpg__loop_defer(l, &l->wake);
}

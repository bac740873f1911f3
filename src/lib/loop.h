/* SPDX-License-Identifier: BSD-2-Clause */
/* One epoll loop per thread. Anything that waits on an fd embeds a
 * struct qpg__io and gets its callback when the fd is ready. Other threads
 * never touch a loop's state: they queue work and call qpg__loop_wake(). */
#ifndef QPG_LOOP_H
#define QPG_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct qpg__io;
typedef void (*qpg__io_cb)(struct qpg__io *io, uint32_t events);

struct qpg__io {
	int fd;
	uint32_t events;
	qpg__io_cb cb;
	struct qpg__io *next_deferred;
	int deferred;
};

struct qpg__loop {
	int epfd;
	struct qpg__io wake;
	/* A wake is written and not yet taken: later wakes until then write
	 * nothing (they coalesce, as libuv's uv_async_send). */
	atomic_bool wake_pending;
	struct qpg__io tick;
	uint32_t tick_ms;
	void (*on_wake)(struct qpg__loop *loop);
	void (*on_tick)(struct qpg__loop *loop);
	/* After each dispatch batch: where closed objects are freed, so no
	 * event later in the same batch can reach freed memory. */
	void (*on_batch_end)(struct qpg__loop *loop);
	/* Work the turn gathered goes out (rdma: each connection's frames, one
	 * SEND each): called at the start of every turn (what was gathered
	 * outside one) and after its callbacks, before on_batch_end. Unlike a
	 * deferred call it makes the turn look at no fd: at one echo in
	 * flight, that look was a system call per message on each side. */
	void (*flush)(struct qpg__loop *loop);
	/* A source of work that needs no fd to be looked at (a CQ): poll
	 * handles what it finds and returns how much; it is called at the
	 * start of every turn. Before sleeping the loop polls for up to
	 * spin_ns (busy polling; the window is halved after each spin that
	 * found nothing, so an idle loop soon sleeps at once, and whole again
	 * once work comes), then calls arm, which asks for an fd event on the
	 * next work and polls once more (work that came before the arm). */
	int (*poll)(struct qpg__loop *loop);
	int (*arm)(struct qpg__loop *loop);
	uint64_t spin_max_ns, spin_ns;
	/* No poll source (tcp): spin on the fds themselves (epoll without
	 * waiting) for up to spin_ns before sleeping, with the same window.
	 * Each such poll is a system call, and a spinning thread holds a core:
	 * a spin during which the thread spent more than 1 ms off its core
	 * (preempted: the CPUs have more runnable threads than cores, and
	 * the spin kept one of them, maybe the one that would answer, from
	 * running) makes the loop sleep at once for its next spin_skip
	 * sleeps, a count that doubles while spins keep being preempted (16
	 * to 1,024) and is forgotten after a spin that was not. */
	bool spin_fds;
	unsigned spin_skip, spin_backoff;
	/* NULL: the monotonic clock, and this thread's CPU time (tests set
	 * their own). */
	uint64_t (*clock_ns)(void), (*cpu_ns)(void);
	/* With a poll source: the work the poll found since the fds were
	 * last looked at. While it keeps finding work the fds (the wake, the
	 * tick, the control channels) are looked at once per
	 * QPG__LOOP_FD_EVERY of it, not at every turn: each look is a system
	 * call, and at one echo in flight it was one per echo on each side. */
	unsigned unlooked;
	void *owner;
	struct qpg__io *deferred; /* to call again after this batch */
	struct qpg__io *running;  /* deferred ones being called now */
};

/* TICK_MS > 0 arms a periodic timer that calls on_tick (deadlines). */
int qpg__loop_init(struct qpg__loop *l, uint32_t tick_ms);
void qpg__loop_fini(struct qpg__loop *l);
int qpg__loop_add(struct qpg__loop *l, struct qpg__io *io, int fd, uint32_t events, qpg__io_cb cb);
int qpg__loop_mod(struct qpg__loop *l, struct qpg__io *io, uint32_t events);
void qpg__loop_del(struct qpg__loop *l, struct qpg__io *io);
/* Wait up to TIMEOUT_MS (-1: forever) and dispatch. Returns events handled. */
int qpg__loop_run_once(struct qpg__loop *l, int timeout_ms);
/* Any thread, and signal handlers (an eventfd write): on_wake runs on the
 * loop's thread soon. */
void qpg__loop_wake(struct qpg__loop *l);
/* The same, from any thread but not from a signal handler: from inside one
 * of the loop's own callbacks, on_wake runs at the end of the current
 * batch with no system call. */
void qpg__loop_wake_soon(struct qpg__loop *l);
/* Call IO's callback again (events 0) right after this batch, without
 * waiting: for a handler that stopped with work left so that other fds get
 * their turn, when no new event would bring it back. */
void qpg__loop_defer(struct qpg__loop *l, struct qpg__io *io);

#endif

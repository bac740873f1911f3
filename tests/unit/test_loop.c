/* SPDX-License-Identifier: BSD-2-Clause */
/* The event loop's deferred calls: a handler that stops with work left is
 * called again after the batch, without waiting for an event. Its wakes
 * coalesce without losing work handed over from other threads, and a
 * wake from the loop's own callbacks writes nothing. With a poll source
 * (a CQ) that never runs dry, the fds are still served, within a bound;
 * with one that is idle, the loop spins, arms it and sleeps on the fds.
 * Spinning on the fds (tcp) stops for a while after a spin that overran
 * its window (the thread was off its core), and comes back. The flush hook
 * brackets every turn. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "unit.h"

#include "common.h"
#include "loop.h"

struct probe {
	struct qpg__io io;
	struct qpg__loop *loop;
	int calls, zero_event_calls;
	int defer_again;	/* times left to defer itself again */
	struct qpg__io *victim; /* deleted from the loop on the first call */
};

static void probe_cb(struct qpg__io *io, uint32_t events)
{
	struct probe *p = qpg__container_of(io, struct probe, io);
	p->calls++;
	if (events == 0)
		p->zero_event_calls++;
	if (p->victim) {
		qpg__loop_del(p->loop, p->victim);
		p->victim = NULL;
	}
	if (p->defer_again > 0) {
		p->defer_again--;
		qpg__loop_defer(p->loop, io);
	}
}

static int probe_add(struct qpg__loop *l, struct probe *p)
{
	p->loop = l;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(qpg__loop_add(l, &p->io, fd, EPOLLIN, probe_cb), 0);
	return fd;
}

/* One pass of the loop (waiting up to TIMEOUT_MS) ran RAN batches, and P
 * has been called CALLS times in all. */
static void run_expect(struct qpg__loop *l, int timeout_ms, int ran, const struct probe *p,
		       int calls)
{
	assert_int_equal(qpg__loop_run_once(l, timeout_ms), ran);
	assert_int_equal(p->calls, calls);
}

/* A poll source, as a CQ is to the rdma transport: each poll finds
 * BUSY_LEFT > 0 ? one completion : nothing. */
struct source {
	int busy_left, polls, arms;
};

static int source_poll(struct qpg__loop *l)
{
	struct source *s = l->owner;
	s->polls++;
	if (s->busy_left <= 0)
		return 0;
	s->busy_left--;
	return 1;
}

static int source_arm(struct qpg__loop *l)
{
	struct source *s = l->owner;
	s->arms++;
	return source_poll(l);
}

/* A loop with SRC as its poll source, spinning up to SPIN_NS, and P on an
 * eventfd (returned) in it. */
static int source_loop(struct qpg__loop *l, struct source *src, uint64_t spin_ns, struct probe *p)
{
	assert_int_equal(qpg__loop_init(l, 0), 0);
	l->owner = src;
	l->poll = source_poll;
	l->arm = source_arm;
	l->spin_max_ns = l->spin_ns = spin_ns;
	return probe_add(l, p);
}

/* Undoes source_loop. */
static void source_loop_end(struct qpg__loop *l, struct probe *p, int fd)
{
	qpg__loop_del(l, &p->io);
	close(fd);
	qpg__loop_fini(l);
}

/* Makes the eventfd FD ready. */
static void ready(int fd)
{
	uint64_t one = 1;
	assert_int_equal(write(fd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* The fds are looked at once per few completions while the poll keeps
 * finding work (not at every turn: each look is a system call), and never
 * later than 64 turns of one completion each: an fd ready all along (a
 * wake handed over from another thread, the tick) is not starved. */
static void test_busy_poll_source_still_serves_fds(void **state)
{
	(void)state;
	struct qpg__loop l;
	struct source src = {.busy_left = 1000};
	struct probe p = {0};
	int fd = source_loop(&l, &src, 50 * 1000, &p);
	ready(fd);
	int turns = 0;
	while (p.calls == 0 && turns < 1000) {
		assert_true(qpg__loop_run_once(&l, -1) >= 1);
		turns++;
	}
	assert_int_equal(p.calls, 1);
	assert_true(turns > 1);	       /* not looked at on every turn with work */
	assert_true(turns <= 64);      /* but within the bound */
	assert_int_equal(src.arms, 0); /* never about to sleep */
	source_loop_end(&l, &p, fd);
}

/* Idle: the loop spins on the poll, arms it and polls once more, then
 * sleeps on the fds, and the fd that becomes ready ends the sleep. */
static void test_idle_poll_source_arms_then_sleeps(void **state)
{
	(void)state;
	struct qpg__loop l;
	struct source src = {0};
	struct probe p = {0};
	int fd = source_loop(&l, &src, 20 * 1000, &p);
	assert_int_equal(qpg__loop_run_once(&l, 10), 0); /* nothing: slept 10 ms */
	assert_int_equal(src.arms, 1);
	assert_true(src.polls >= 3); /* the turn's, the spin's, the arm's */
	ready(fd);
	assert_int_equal(qpg__loop_run_once(&l, -1), 1); /* would block forever if not */
	assert_int_equal(p.calls, 1);
	source_loop_end(&l, &p, fd);
}

/* Work handed over by another thread (qpg__loop_wake) while the loop spins
 * on an idle poll source ends the spin: the spin looks at the wake flag,
 * so the loop goes to its fds without arming the source or spinning out
 * the window (2 s here; the run would arm once it had). */
struct wake_source {
	struct source src; /* first: the loop's owner points at it */
	int wakes;
};

static void count_source_wake(struct qpg__loop *l)
{
	((struct wake_source *)l->owner)->wakes++;
}

struct waker {
	struct qpg__loop *l;
	atomic_int go;
};

static void *wake_later(void *arg)
{
	struct waker *w = arg;
	while (!atomic_load(&w->go))
		;
	usleep(2000); /* the loop is spinning by now, or soon will be */
	qpg__loop_wake(w->l);
	return NULL;
}

static void test_wake_ends_the_spin(void **state)
{
	(void)state;
	struct qpg__loop l;
	struct wake_source s = {{0}, 0};
	struct probe p = {0};
	int fd = source_loop(&l, &s.src, 2000ull * 1000 * 1000, &p);
	l.on_wake = count_source_wake;
	struct waker w = {&l, 0};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, wake_later, &w), 0);
	atomic_store(&w.go, 1);
	while (s.wakes == 0)
		assert_true(qpg__loop_run_once(&l, -1) >= 0);
	pthread_join(t, NULL);
	assert_int_equal(s.wakes, 1);
	/* The spin ended early: not halved, as a spin that ran out is. */
	assert_true(l.spin_ns == l.spin_max_ns);
	assert_int_equal(s.src.arms, 0); /* and no arm: the eventfd is ready */
	source_loop_end(&l, &p, fd);
}

/* The flush hook (rdma: the turn's frames go out, one SEND a connection)
 * runs at the start of every turn, for what was gathered outside one, and
 * after the turn's work; and it makes the turn look at no fd, as a deferred
 * call would (a ready fd waits for the turn that looks). */
static int flushes, flush_polls[4];

static void count_flush(struct qpg__loop *l)
{
	struct source *s = l->owner;
	if (flushes < 4)
		flush_polls[flushes] = s->polls;
	flushes++;
}

static void test_flush_starts_and_ends_each_turn(void **state)
{
	(void)state;
	struct qpg__loop l;
	struct source src = {.busy_left = 1000};
	struct probe p = {0};
	int fd = source_loop(&l, &src, 50 * 1000, &p);
	l.flush = count_flush;
	flushes = 0;
	ready(fd);
	assert_true(qpg__loop_run_once(&l, -1) >= 1);
	assert_int_equal(flushes, 2);
	assert_int_equal(flush_polls[0], 0); /* before the turn's poll */
	assert_int_equal(flush_polls[1], 1); /* after it */
	assert_int_equal(p.calls, 0);	     /* the ready fd was not looked at */
	assert_true(qpg__loop_run_once(&l, -1) >= 1);
	assert_int_equal(flushes, 4);
	l.flush = NULL;
	source_loop_end(&l, &p, fd);
}

static void test_deferred_io_runs_without_an_event(void **state)
{
	struct qpg__loop l;
	struct probe p = {0};
	assert_int_equal(qpg__loop_init(&l, 0), 0);
	int fd = probe_add(&l, &p);
	qpg__loop_defer(&l, &p.io);
	qpg__loop_defer(&l, &p.io); /* twice is once */
	/* A timeout of 10 s: returning at once shows a deferred call does not
	 * wait for an event that will not come. */
	run_expect(&l, 10000, 1, &p, 1);
	assert_int_equal(p.zero_event_calls, 1);
	run_expect(&l, 0, 0, &p, 1);
	close(fd);
	qpg__loop_fini(&l);
}

static void test_deferring_again_waits_for_the_next_batch(void **state)
{
	struct qpg__loop l;
	struct probe p = {.defer_again = 2};
	assert_int_equal(qpg__loop_init(&l, 0), 0);
	int fd = probe_add(&l, &p);
	qpg__loop_defer(&l, &p.io);
	for (int k = 1; k <= 3; k++) /* once per batch */
		run_expect(&l, 0, 1, &p, k);
	run_expect(&l, 0, 0, &p, 3);
	close(fd);
	qpg__loop_fini(&l);
}

static void test_deleted_io_is_not_called(void **state)
{
	struct qpg__loop l;
	struct probe a = {0}, b = {0}, c = {0};
	assert_int_equal(qpg__loop_init(&l, 0), 0);
	int fa = probe_add(&l, &a), fb = probe_add(&l, &b), fc = probe_add(&l, &c);
	/* Deleted while waiting to be deferred. */
	qpg__loop_defer(&l, &a.io);
	qpg__loop_del(&l, &a.io);
	/* Deleted by another deferred call of the same batch: whichever of
	 * b and c runs first deletes the other. */
	b.victim = &c.io;
	c.victim = &b.io;
	qpg__loop_defer(&l, &b.io);
	qpg__loop_defer(&l, &c.io);
	assert_int_equal(qpg__loop_run_once(&l, 0), 1);
	assert_int_equal(a.calls, 0);
	assert_int_equal(b.calls + c.calls, 1);
	close(fa);
	close(fb);
	close(fc);
	qpg__loop_fini(&l);
}

/* Producers hand over work (under a lock, as the KV pool's inbox), wake
 * the loop, and wait for their item to be taken before the next: every
 * wake matters. The loop sleeps with no timer, so a lost wake leaves an
 * item behind for good and the loop's wait runs out. */
enum { PRODUCERS = 4, ITEMS = 5000 };
struct inbox {
	pthread_mutex_t lock;
	long queued[PRODUCERS], taken[PRODUCERS];
	atomic_long writes_avoided;
	atomic_bool stop;
	struct qpg__loop loop;
};
struct producer {
	struct inbox *in;
	int id;
};

static void take_all(struct qpg__loop *l)
{
	struct inbox *in = qpg__container_of(l, struct inbox, loop);
	pthread_mutex_lock(&in->lock);
	for (int i = 0; i < PRODUCERS; i++) {
		in->taken[i] += in->queued[i];
		in->queued[i] = 0;
	}
	pthread_mutex_unlock(&in->lock);
}

static void *produce(void *arg)
{
	struct producer *pr = arg;
	struct inbox *in = pr->in;
	for (long i = 0; i < ITEMS && !atomic_load(&in->stop); i++) {
		pthread_mutex_lock(&in->lock);
		in->queued[pr->id]++;
		pthread_mutex_unlock(&in->lock);
		if (atomic_load(&in->loop.wake_pending))
			atomic_fetch_add(&in->writes_avoided, 1);
		qpg__loop_wake(&in->loop);
		for (bool done = false; !done && !atomic_load(&in->stop);) {
			pthread_mutex_lock(&in->lock);
			done = in->taken[pr->id] > i;
			pthread_mutex_unlock(&in->lock);
		}
	}
	return NULL;
}

static long total_taken(struct inbox *in)
{
	long n = 0;
	pthread_mutex_lock(&in->lock);
	for (int i = 0; i < PRODUCERS; i++)
		n += in->taken[i];
	pthread_mutex_unlock(&in->lock);
	return n;
}

static void test_coalesced_wakes_lose_no_work(void **state)
{
	struct inbox in = {.lock = PTHREAD_MUTEX_INITIALIZER};
	assert_int_equal(qpg__loop_init(&in.loop, 0), 0);
	in.loop.on_wake = take_all;
	pthread_t t[PRODUCERS];
	struct producer pr[PRODUCERS];
	for (int i = 0; i < PRODUCERS; i++) {
		pr[i] = (struct producer){&in, i};
		assert_int_equal(pthread_create(&t[i], NULL, produce, &pr[i]), 0);
	}
	long want = (long)PRODUCERS * ITEMS;
	int lost = 0;
	while (total_taken(&in) < want)
		if (qpg__loop_run_once(&in.loop, 2000) == 0) { /* 2 s and no wake */
			lost = 1;
			break;
		}
	atomic_store(&in.stop, true);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	print_message("  %ld of %ld items taken, %ld wakes coalesced (no write)\n",
		      total_taken(&in), want, atomic_load(&in.writes_avoided));
	assert_int_equal(lost, 0);
	qpg__loop_fini(&in.loop);
}

/* A wake_soon from inside one of the loop's own callbacks (a KV worker
 * that submits its next request from its done callback) runs on_wake at
 * the end of that batch, with nothing written to the eventfd; one from
 * another thread still writes it, and so does qpg__loop_wake always (it
 * is what a signal handler may call). */
struct self_waker {
	struct qpg__io io;
	struct qpg__loop *loop;
	int wakes;
	bool signal_safe; /* wake as a signal handler must: qpg__loop_wake */
};

static void wakes_its_loop(struct qpg__io *io, uint32_t events)
{
	(void)events;
	struct self_waker *w = qpg__container_of(io, struct self_waker, io);
	uint64_t v;
	assert_int_equal(read(io->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	if (w->signal_safe)
		qpg__loop_wake(w->loop);
	else
		qpg__loop_wake_soon(w->loop);
}

static void count_wake(struct qpg__loop *l)
{
	((struct self_waker *)l->owner)->wakes++;
}

static uint64_t wake_fd_count(struct qpg__loop *l)
{
	uint64_t v = 0;
	if (read(l->wake.fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	uint64_t back = v; /* put it back: the loop reads it itself */
	assert_int_equal(write(l->wake.fd, &back, sizeof(back)), (ssize_t)sizeof(back));
	return v;
}

static void test_wake_soon_from_own_callback_writes_nothing(void **state)
{
	(void)state;
	struct qpg__loop l;
	struct self_waker w = {.loop = &l};
	assert_int_equal(qpg__loop_init(&l, 0), 0);
	l.owner = &w;
	l.on_wake = count_wake;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(qpg__loop_add(&l, &w.io, fd, EPOLLIN, wakes_its_loop), 0);
	ready(fd);
	/* The callback and, after it in the same turn, on_wake. */
	assert_int_equal(qpg__loop_run_once(&l, 1000), 2);
	assert_int_equal(w.wakes, 1);
	assert_int_equal(wake_fd_count(&l), 0);
	assert_false(atomic_load(&l.wake_pending));
	/* From outside a turn (as another thread): written, taken next turn. */
	qpg__loop_wake_soon(&l);
	assert_int_equal(wake_fd_count(&l), 1);
	assert_int_equal(qpg__loop_run_once(&l, 1000), 1);
	assert_int_equal(w.wakes, 2);
	assert_int_equal(wake_fd_count(&l), 0);
	/* qpg__loop_wake, even from a callback (a signal handler can run
	 * there), only writes the eventfd: it never touches the loop's lists. */
	w.signal_safe = true;
	ready(fd);
	assert_int_equal(qpg__loop_run_once(&l, 1000), 1);
	assert_int_equal(w.wakes, 2);
	assert_int_equal(wake_fd_count(&l), 1);
	assert_int_equal(qpg__loop_run_once(&l, 1000), 1);
	assert_int_equal(w.wakes, 3);
	qpg__loop_del(&l, &w.io);
	close(fd);
	qpg__loop_fini(&l);
}

/* Test clocks: each read of the wall clock moves it on by fake_step ns;
 * the thread has had fake_on_core percent of that time on its core. */
static uint64_t fake_now, fake_step, fake_on_core;
static uint64_t fake_clock(void)
{
	fake_now += fake_step;
	return fake_now;
}
static uint64_t fake_cpu_clock(void)
{
	return fake_now / 100 * fake_on_core;
}

/* A tcp-like loop (no poll source: it spins on its fds) with a 200 us
 * window, idle, and its turns waiting 1 ms. A spin during which the
 * thread was off its core (1 ms of wall time per read, 1% of it on its
 * core) makes the next 16 sleeps skip spinning, then 32 after another such
 * spin; then the window is back. A spin that ran long on its core (all
 * of that time on it: slow polls, as under emulation) does not count, and
 * forgets the backoff. */
static void test_fd_spin_backs_off_when_off_core(void **state)
{
	(void)state;
	struct qpg__loop l;
	assert_int_equal(qpg__loop_init(&l, 0), 0);
	l.spin_fds = true;
	l.spin_max_ns = l.spin_ns = 200 * 1000;
	l.clock_ns = fake_clock;
	l.cpu_ns = fake_cpu_clock;
	fake_step = 1000000;
	fake_on_core = 1;
	assert_int_equal(qpg__loop_run_once(&l, 1), 0);
	assert_int_equal(l.spin_skip, 16);
	assert_int_equal(l.spin_ns, 0);
	for (int i = 0; i < 15; i++)
		assert_int_equal(qpg__loop_run_once(&l, 1), 0);
	assert_int_equal(l.spin_skip, 1);
	assert_int_equal(l.spin_ns, 0); /* still none: 16 sleeps without a spin */
	assert_int_equal(qpg__loop_run_once(&l, 1), 0);
	assert_int_equal(l.spin_skip, 0);
	assert_int_equal(l.spin_ns, 200 * 1000);	/* the next sleep tries again */
	assert_int_equal(qpg__loop_run_once(&l, 1), 0); /* and is preempted again */
	assert_int_equal(l.spin_skip, 32);
	while (l.spin_skip)
		assert_int_equal(qpg__loop_run_once(&l, 1), 0);
	fake_on_core = 100; /* long, but on its core */
	assert_int_equal(qpg__loop_run_once(&l, 1), 0);
	assert_int_equal(l.spin_skip, 0);
	assert_int_equal(l.spin_backoff, 0);
	qpg__loop_fini(&l);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_wake_soon_from_own_callback_writes_nothing),
	      cmocka_unit_test(test_coalesced_wakes_lose_no_work),
	      cmocka_unit_test(test_deferred_io_runs_without_an_event),
	      cmocka_unit_test(test_deferring_again_waits_for_the_next_batch),
	      cmocka_unit_test(test_deleted_io_is_not_called),
	      cmocka_unit_test(test_busy_poll_source_still_serves_fds),
	      cmocka_unit_test(test_fd_spin_backs_off_when_off_core),
	      cmocka_unit_test(test_idle_poll_source_arms_then_sleeps),
	      cmocka_unit_test(test_wake_ends_the_spin),
	      cmocka_unit_test(test_flush_starts_and_ends_each_turn))

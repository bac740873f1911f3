/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate/kv_call.h: a completion queue with an eventfd, so that a
 * binding's pool threads hand completions over without its runtime. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "qpgate/kv_call.h"

struct qpg_kv_cq {
	pthread_mutex_t lock;
	struct qpg_kv_cq_entry *e;
	size_t head, n, cap; /* a ring */
	int fd;
	int signalled; /* the eventfd holds a count not yet read */
};

struct qpg_kv_cq *qpg_kv_cq_new(void)
{
	struct qpg_kv_cq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->cap = 256;
	q->e = calloc(q->cap, sizeof(*q->e));
	if (q->fd < 0 || !q->e) {
		if (q->fd >= 0)
			close(q->fd);
		free(q->e);
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	return q;
}

void qpg_kv_cq_done(void *arg, uint64_t token, int status, uint32_t value_len, void *data)
{
	struct qpg_kv_cq *q = arg;
	pthread_mutex_lock(&q->lock);
	if (q->n == q->cap) { /* grow: completions are never dropped */
		struct qpg_kv_cq_entry *e = malloc(2 * q->cap * sizeof(*e));
		if (!e) {
			/* No memory for the record: the request is lost to the
			 * reader; its data at least is not leaked. */
			pthread_mutex_unlock(&q->lock);
			free(data);
			return;
		}
		for (size_t i = 0; i < q->n; i++)
			e[i] = q->e[(q->head + i) % q->cap];
		free(q->e);
		q->e = e;
		q->head = 0;
		q->cap *= 2;
	}
	q->e[(q->head + q->n++) % q->cap] = (struct qpg_kv_cq_entry){token, status, value_len, data};
	int wake = !q->signalled;
	q->signalled = 1;
	pthread_mutex_unlock(&q->lock);
	if (wake) {
		uint64_t one = 1;
		while (write(q->fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
}

int qpg_kv_cq_fd(const struct qpg_kv_cq *q)
{
	return q->fd;
}

int qpg_kv_cq_poll(struct qpg_kv_cq *q, struct qpg_kv_cq_entry *out, int max)
{
	int k = 0;
	pthread_mutex_lock(&q->lock);
	while (k < max && q->n) {
		out[k++] = q->e[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
	}
	if (q->n == 0 && q->signalled) {
		uint64_t v;
		while (read(q->fd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
		q->signalled = 0;
	}
	pthread_mutex_unlock(&q->lock);
	return k;
}

int qpg_kv_cq_wait(struct qpg_kv_cq *q, int timeout_ms)
{
	struct pollfd p = {.fd = q->fd, .events = POLLIN};
	int rc;
	while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	return rc > 0;
}

void qpg_kv_cq_free(struct qpg_kv_cq *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->e[(q->head + i) % q->cap].data);
	close(q->fd);
	free(q->e);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kv's values and files: a PUT's value read whole from its file or
 * standard input (bounded by the largest value), a GET's written only once
 * all of it has arrived and been checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_cmd.h"
#include "kvdata.h"

/* All of FD into *OUT (at most MAX bytes). 0, or -errno (-EFBIG: larger). */
static int read_all(int fd, uint32_t max, uint8_t **out, uint32_t *len)
{
	size_t cap = 65536, n = 0;
	uint8_t *b = malloc(cap);
	while (b) {
		if (n == cap) {
			if (cap > max) {
				free(b);
				return -EFBIG;
			}
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb)
				break;
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			free(b);
			return e;
		}
		if (r == 0) {
			if (n > max) {
				free(b);
				return -EFBIG;
			}
			*out = b;
			*len = (uint32_t)n;
			return 0;
		}
		n += (size_t)r;
	}
	free(b);
	return -ENOMEM;
}

int kv_cmd_put_value(const struct cmd *c, uint32_t max, uint8_t **value, uint32_t *len)
{
	if (!c->file) {
		*value = malloc(c->size ? c->size : 1);
		if (!*value)
			return 2;
		kv_value_fill(*value, c->seed, c->size);
		*len = c->size;
		return 0;
	}
	bool in = !strcmp(c->file, "-");
	int fd = in ? STDIN_FILENO : open(c->file, O_RDONLY | O_CLOEXEC);
	int rc = fd < 0 ? -errno : read_all(fd, max, value, len);
	if (!in && fd >= 0)
		close(fd);
	if (rc == -EFBIG)
		fprintf(stderr, "qpgate-kv: %s: larger than a value may be (%u bytes)\n",
			in ? "standard input" : c->file, max);
	else if (rc)
		fprintf(stderr, "qpgate-kv: %s: %s\n", in ? "standard input" : c->file,
			strerror(-rc));
	return rc ? 2 : 0;
}

int kv_cmd_write_value(const struct cmd *c, const uint8_t *v, uint32_t len)
{
	int fd =
	    c->file ? open(c->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : STDOUT_FILENO;
	size_t done = 0;
	while (fd >= 0 && done < len) {
		ssize_t w = write(fd, v + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		done += (size_t)w;
	}
	int e = done == len ? 0 : errno;
	if (c->file && fd >= 0 && close(fd) && !e)
		e = errno;
	if (fd < 0 || e) {
		fprintf(stderr, "qpgate-kv: %s: %s\n", c->file ? c->file : "standard output",
			strerror(fd < 0 ? errno : e));
		return 2;
	}
	return 0;
}

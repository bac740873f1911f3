/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kv's commands: what the command line asks (put, get, del, exists,
 * bad), parsed (kv_cmd_parse.c), their values read from and written to
 * files (kv_cmd_file.c), and run one after the other against a KV target
 * (kv_cmd_run.c). */
#ifndef QPG_TOOLS_KV_CMD_H
#define QPG_TOOLS_KV_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "qpgate/kv_target.h"

enum cmd_op { CMD_PUT, CMD_GET, CMD_DEL, CMD_BAD, CMD_EXISTS };

struct cmd {
	enum cmd_op op;
	const char *key;
	uint32_t size; /* synthetic put; get: expected (with seed) */
	uint32_t seed;
	bool verify;
	const char *file; /* put: its source; get: its destination (NULL: stdout) */
	char **keys;	  /* exists: its keys */
	unsigned nkeys;
};

/* Where the commands go: one server's pool, or a cluster's members. */
struct target {
	struct qpg_kv_target *kv;
	struct qpg_kv_pool *pool; /* --test-abuse: the one server's, to report on */
	uint64_t view_rev;	  /* --test-view-rev: a lagging client's view */
	uint32_t ttl_ms;	  /* --ttl: each PUT's time to live */
	bool reg;		  /* --register: synthetic GETs into a registered buffer */
};

/* ARGV's ARGC command words into OUT (room for ARGC): the count, or -1 for
 * a command line that is not one (the caller prints the usage). */
int kv_cmds_parse(int argc, char **argv, bool synthetic, struct cmd *out);

/* Runs N commands in order against T until one fails past a status (a file,
 * or the connection). Returns the worst: 0 ok, 1 an error status or a
 * mismatch, 2 a file, 3 the connection failed. ABUSE: --test-abuse's mode
 * for each GET. */
int kv_cmds_run(const struct target *t, const struct cmd *cmds, int n, uint8_t abuse);

/* A PUT's value: generated (synthetic) or read from its file, at most MAX
 * bytes. 0, or 2 (said on standard error). */
int kv_cmd_put_value(const struct cmd *c, uint32_t max, uint8_t **value, uint32_t *len);
/* A GET's whole value to its file (created only now) or standard output. 0,
 * or 2 (said). */
int kv_cmd_write_value(const struct cmd *c, const uint8_t *v, uint32_t len);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kv: run KV commands against a qpgate server, in order, through
 * the pooled KV client (one connection).
 *
 *   qpgate-kv [client flags] HOST SERVERNAME COMMAND...
 *     put KEY FILE        store FILE's bytes (-: standard input)
 *     get KEY [-o FILE]   write the value to standard output, or to FILE
 *     del KEY
 *     exists KEY...       which of up to 256 keys are stored (one round trip;
 *                         its keys run to the next command word)
 *   With --synthetic, for tests, values are generated instead:
 *     put KEY SIZE SEED   store SIZE bytes generated from SEED
 *     get KEY [SIZE SEED] fetch; with SIZE SEED, verify every byte
 *     bad                 send a request with an unknown operation
 *
 * A value is written out only once all of it has arrived and checked: a
 * GET that fails writes nothing (and -o FILE is not created).
 * GETs leave it to the server whether a value comes by RDMA READ of a window
 * it grants (large values) or is sent; --one-sided or --two-sided insist.
 * --test-abuse MODE misuses each grant (past-end, other-qp, write, expired,
 * after-release, or a GET that releases a grant never given: bogus-release)
 * and reports whether the server let any misuse through.
 *
 * One line per command on standard error ("GET k: ok, 4096 bytes in 1
 * chunk, ..."); standard output carries values only. Exit status: 0 all ok,
 * 1 a command got an error status or a mismatch, 2 usage or a file that
 * cannot be read or written, 3 the connection failed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "etcd_opts.h"
#include "kv_testing.h"
#include "kvdata.h"
#include "opts.h"
#include "qpgate/kv_call.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_cluster.h"

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

/* One request in flight at a time; its callbacks run on the pool thread. */
struct pending {
	struct qpg_kv_request req;
	const struct cmd *cmd;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint32_t value_len;
	int chunks;
	uint64_t fnv;
	bool mismatch;
	uint8_t *value; /* a GET's value as it arrives (real bytes, not synthetic) */
	uint32_t value_cap;
	bool too_big;
};

static void on_chunk(struct qpg_kv_request *r, const uint8_t *data, uint32_t len, uint32_t off,
		     uint32_t total)
{
	struct pending *p = r->user;
	p->chunks++;
	p->fnv = kv_fnv_step(p->fnv, data, len);
	if (p->cmd->op == CMD_GET && !p->cmd->verify) {
		if (!p->value && total > 0) {
			p->value = malloc(total);
			p->value_cap = p->value ? total : 0;
		}
		if ((uint64_t)off + len > p->value_cap)
			p->too_big = true;
		else if (len)
			memcpy(p->value + off, data, len);
	}
	for (uint32_t i = 0; p->cmd->verify && i < len; i++)
		if (data[i] != kv_value_byte(p->cmd->seed, off + i))
			p->mismatch = true;
}

static void on_done(struct qpg_kv_request *r, int status, uint32_t value_len)
{
	struct pending *p = r->user;
	pthread_mutex_lock(&p->lock);
	p->status = status;
	p->value_len = value_len;
	p->done = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

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

/* A PUT's value: generated (synthetic) or read from its file. 0, or 2. */
static int put_value(const struct cmd *c, uint32_t max, uint8_t **value, uint32_t *len)
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

/* Write a GET's whole value to its file (created only now) or stdout. */
static int write_value(const struct cmd *c, const uint8_t *v, uint32_t len)
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

/* Where the commands go: one server's pool, or a cluster's members. */
struct target {
	struct qpg_kv_target *kv;
	struct qpg_kv_pool *pool; /* --test-abuse: the one server's, to report on */
	uint64_t view_rev;	  /* --test-view-rev: a lagging client's view */
	uint32_t ttl_ms;	  /* --ttl: each PUT's time to live */
	bool reg;		  /* --register: synthetic GETs into a registered buffer */
};

/* GETs READ straight into registered memory so far (qpg_kv_register). */
static uint64_t zero_copy_gets(const struct target *t)
{
	struct qpg_kv_target_stats s;
	uint64_t n = 0;
	if (qpg_kv_target_stats(t->kv, &s) == 0) {
		for (unsigned i = 0; i < s.n; i++)
			n += s.m[i].zero_copy;
		qpg_kv_target_stats_free(&s);
	}
	return n;
}

/* EXISTS of C's keys: "EXISTS a b c: 2 of 3 stored, prefix 2 (110)". 0 when
 * every key is stored, 1 when one is not (as a GET's miss), 3 when the
 * connection failed. */
static int run_exists(const struct target *t, const struct cmd *c)
{
	struct qpg_kv_key keys[QPG_KV_EXISTS_MAX];
	unsigned n = c->nkeys;
	for (unsigned i = 0; i < n; i++)
		keys[i] =
		    (struct qpg_kv_key){.key = c->keys[i], .len = (uint16_t)strlen(c->keys[i])};
	char names[84]; /* the keys as given, cut at 80 bytes */
	size_t at = 0;
	for (unsigned i = 0; i < n && at < 80; i++)
		at += (size_t)snprintf(names + at, 81 - at, "%s%s", i ? " " : "", c->keys[i]);
	names[at < 80 ? at : 80] = 0;
	if (at >= 80)
		strcpy(names + 77, "...");
	uint8_t bits[QPG_KV_EXISTS_BITMAP];
	uint32_t prefix = 0;
	int st = qpg_kv_call_exists_wait(t->kv, keys, n, bits, &prefix);
	if (st < 0) {
		struct qpg_kv_target_info info;
		qpg_kv_target_info(t->kv, &info);
		fprintf(stderr, "EXISTS %s: connection failed: %s\n", names, info.last_error);
		return 3;
	}
	if (st != QPG_KV_OK) {
		fprintf(stderr, "EXISTS %s: %s\n", names, qpg_kv_status_name((uint8_t)st));
		return 1;
	}
	char map[QPG_KV_EXISTS_MAX + 1];
	unsigned stored = 0;
	for (unsigned i = 0; i < n; i++) {
		map[i] = (bits[i / 8] >> (i % 8) & 1) ? '1' : '0';
		stored += map[i] == '1';
	}
	map[n] = 0;
	fprintf(stderr, "EXISTS %s: %u of %u stored, prefix %u (%s)\n", names, stored, n, prefix,
		map);
	return stored == n ? 0 : 1;
}

/* Returns 0 ok, 1 an error status or mismatch, 2 a file, 3 the connection failed. */
static int run_cmd(const struct target *t, const struct cmd *c, struct pending *p, uint8_t abuse)
{
	static const char *const names[] = {"PUT", "GET", "DEL", "BAD"};
	if (c->op == CMD_EXISTS)
		return run_exists(t, c);
	uint8_t *value = NULL;
	uint32_t value_len = 0;
	if (c->op == CMD_PUT && put_value(c, QPG_KV_MAX_VALUE, &value, &value_len))
		return 2;
	p->cmd = c;
	p->done = p->mismatch = p->too_big = false;
	p->value = NULL;
	p->value_cap = 0;
	p->chunks = 0;
	p->fnv = KV_FNV_INIT;
	p->req = (struct qpg_kv_request){
	    .op = c->op == CMD_PUT   ? QPG_KV_PUT
		  : c->op == CMD_DEL ? QPG_KV_DEL
				     : QPG_KV_GET,
	    .key = c->key,
	    .key_len = (uint16_t)strlen(c->key),
	    .value = value,
	    .value_len = value_len,
	    .ttl_ms = c->op == CMD_PUT ? t->ttl_ms : 0,
	    .chunk = on_chunk,
	    .done = on_done,
	    .user = p,
	};
	qpg__kv_request_hooks(&p->req, c->op == CMD_BAD, c->op == CMD_GET ? abuse : 0);
	p->req.view_rev = t->view_rev;
	/* --register: a synthetic GET lands in a buffer registered for it. */
	uint8_t *into = NULL;
	uint64_t zc0 = 0;
	int rc = 0;
	if (t->reg && c->op == CMD_GET && c->verify && c->size) {
		into = aligned_alloc(4096, ((size_t)c->size + 4095) & ~(size_t)4095);
		rc = into ? qpg_kv_register(t->kv, into, c->size) : -ENOMEM;
		if (rc) {
			fprintf(stderr, "GET %s: cannot register %u bytes: %s\n", c->key, c->size,
				strerror(-rc));
			free(into);
			return 3;
		}
		p->req.into = into;
		p->req.into_cap = c->size;
		zc0 = zero_copy_gets(t);
	}
	rc = qpg_kv_target_submit(t->kv, &p->req);
	pthread_mutex_lock(&p->lock);
	while (rc == 0 && !p->done)
		pthread_cond_wait(&p->cv, &p->lock);
	pthread_mutex_unlock(&p->lock);
	free(value);
	bool in_place = false;
	if (into) {
		in_place = zero_copy_gets(t) > zc0;
		int urc = qpg_kv_unregister(t->kv, into);
		if (urc)
			fprintf(stderr, "GET %s: unregister: %s\n", c->key, strerror(-urc));
		free(into);
	}
	if (rc || p->status < 0) {
		struct qpg_kv_target_info info;
		qpg_kv_target_info(t->kv, &info);
		fprintf(stderr, "%s %s: connection failed: %s\n", names[c->op], c->key,
			info.last_error);
		free(p->value);
		return 3;
	}
	bool ok = p->status == QPG_KV_OK;
	fprintf(stderr, "%s %s: %s", names[c->op], c->op == CMD_BAD ? "(unknown op)" : c->key,
		ok ? "ok" : qpg_kv_status_name((uint8_t)p->status));
	if (c->op == CMD_PUT && ok)
		fprintf(stderr, ", %u bytes", value_len);
	if (c->op == CMD_GET && !ok) /* how much of a failed value reached us */
		fprintf(stderr, ", %d chunk%s delivered", p->chunks, p->chunks == 1 ? "" : "s");
	int wrc = 0;
	if (c->op == CMD_GET && ok) {
		fprintf(stderr, ", %u bytes in %d chunk%s, fnv64 %016llx", p->value_len, p->chunks,
			p->chunks == 1 ? "" : "s", (unsigned long long)p->fnv);
		if (into)
			fprintf(stderr, ", %s", in_place ? "read in place (zero copy)" : "copied");
		if (c->verify) {
			bool bad = p->mismatch || p->value_len != c->size;
			fprintf(stderr, ", %s", bad ? "MISMATCH" : "verified");
			ok = !bad;
		} else if (p->too_big || (p->value_len && !p->value)) {
			fprintf(stderr, ", NOT written (%s)",
				p->too_big ? "more bytes than announced" : "out of memory");
			ok = false;
		} else {
			wrc = write_value(c, p->value, p->value_len);
		}
	}
	fprintf(stderr, "\n");
	free(p->value);
	p->value = NULL;
	if (c->op == CMD_BAD) /* the server must call it malformed */
		return p->status == QPG_KV_MALFORMED ? 0 : 1;
	return wrc ? wrc : ok ? 0 : 1;
}

static int parse_cmds(int argc, char **argv, bool synthetic, struct cmd *out)
{
	int n = 0;
	for (int i = 0; i < argc;) {
		struct cmd c = {0};
		const char *w = argv[i++];
		if (!synthetic && i < argc && !strcmp(w, "put")) {
			c.op = CMD_PUT;
			c.key = argv[i++];
			if (i >= argc || strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			c.file = argv[i++];
		} else if (!synthetic && i < argc && !strcmp(w, "get")) {
			c.op = CMD_GET;
			c.key = argv[i++];
			if (strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			if (i + 1 < argc && !strcmp(argv[i], "-o")) {
				c.file = argv[i + 1];
				i += 2;
			}
		} else if (i < argc && !strcmp(w, "exists")) {
			/* KEY...: up to the next command word; each key 1..250
			 * bytes, 256 at most */
			static const char *const words[] = {"put", "get", "del", "exists", "bad"};
			c.op = CMD_EXISTS;
			c.keys = &argv[i];
			c.key = argv[i];
			for (; i < argc; i++) {
				bool word = false;
				for (size_t j = 0; j < sizeof(words) / sizeof(words[0]); j++)
					word |= !strcmp(argv[i], words[j]);
				if (word)
					break;
				size_t len = strlen(argv[i]);
				if (len == 0 || len > QPG_KV_MAX_KEY ||
				    ++c.nkeys > QPG_KV_EXISTS_MAX)
					return -1;
			}
			if (c.nkeys == 0)
				return -1;
		} else if (!synthetic && !strcmp(w, "bad")) {
			return -1;
		} else if (!strcmp(w, "bad")) {
			c.op = CMD_BAD;
			c.key = "k";
		} else if (i < argc &&
			   (!strcmp(w, "put") || !strcmp(w, "get") || !strcmp(w, "del"))) {
			c.op = w[0] == 'p' ? CMD_PUT : w[0] == 'g' ? CMD_GET : CMD_DEL;
			c.key = argv[i++];
			if (strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			bool sized = c.op == CMD_PUT || (c.op == CMD_GET && i + 1 < argc &&
							 argv[i][0] >= '0' && argv[i][0] <= '9');
			if (sized) {
				if (i + 1 >= argc)
					return -1;
				c.size =
				    (uint32_t)qpg_cli_size(argv[i++], 0, QPG_KV_MAX_VALUE, "SIZE");
				c.seed = (uint32_t)qpg_cli_int(argv[i++], 0, UINT32_MAX, "SEED");
				c.verify = c.op == CMD_GET;
			}
		} else {
			return -1;
		}
		out[n++] = c;
	}
	return n;
}

static void parse_abuse(const char *s, void *dst)
{
	static const char *const names[] = {"none",    "past-end",	"other-qp",
					    "write",   "after-release", "wrong-digest",
					    "expired", "bogus-release"};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(s, names[i])) {
			*(int *)dst = i;
			return;
		}
	fprintf(stderr, "error: --test-abuse is past-end, other-qp, write, after-release, "
			"wrong-digest, expired or bogus-release\n");
	exit(2);
}

/* After a misuse through another connection, wait (bounded) for the server
 * to kill that connection, and report what the pool saw. */
static void report_abuse(struct qpg_kv_pool *pool, int abuse)
{
	struct qpg_kv_pool_info info;
	for (int i = 0; i < 100; i++) {
		qpg_kv_pool_info(pool, &info);
		if (abuse != QPG_KV_ABUSE_OTHER_QP || info.connected < info.conns)
			break;
		struct timespec ts = {0, 100000000};
		nanosleep(&ts, NULL);
	}
	printf("abuse: %llu misuse(s) of a grant succeeded; %u of %u connections up; last "
	       "error: %s\n",
	       qpg__kv_pool_abuse_succeeded(pool), info.connected, info.conns,
	       info.last_error[0] ? info.last_error : "none");
}

/* --stats: the caller's tenant on each server (qpg_kv_target_tenant).
 * 0, or 3 when no server answered. */
static int print_tenant(struct qpg_kv_target *kv)
{
	struct qpg_kv_tenant_stat st[64];
	int failure;
	int n = qpg_kv_target_tenant(kv, st, 64, &failure);
	if (n <= 0) {
		fprintf(stderr, "qpgate-kv: --stats: no server answered: %s\n",
			n < 0	      ? qpg_strerror(n)
			: failure < 0 ? qpg_strerror(failure)
				      : qpg_kv_status_name((uint8_t)failure));
		return 3;
	}
	for (int i = 0; i < n; i++) {
		char quota[48] = "no quota";
		if (st[i].quota)
			snprintf(quota, sizeof(quota), "%.1f%% of its %llu-byte quota",
				 100.0 * (double)st[i].used / (double)st[i].quota,
				 (unsigned long long)st[i].quota);
		printf("TENANT %s%s (server %d of %d): %llu keys, %llu bytes held, %s; "
		       "%llu hits, %llu misses, %llu evictions, %llu PUTs refused over its "
		       "limits\n",
		       st[i].name, st[i].listed ? "" : " (an identity of its own)", i + 1, n,
		       (unsigned long long)st[i].keys, (unsigned long long)st[i].used, quota,
		       (unsigned long long)st[i].hits, (unsigned long long)st[i].misses,
		       (unsigned long long)st[i].evictions, (unsigned long long)st[i].refused);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct qpg_kv_pool_opts po;
	qpg_kv_pool_opts_default(&po);
	po.threads = po.conns = 1;
	int abuse = QPG_KV_ABUSE_NONE;
	bool one = false, two = false, synthetic = false;
	struct qpg_cluster_opts etcd = {0};
	struct target t = {0};
	const char *wait_file = NULL;
	bool stats = false;
	const struct qpg_opt client[] = {QPG_OPTS_CLIENT(&po.client), QPG_OPT_END};
	const struct qpg_opt own[] = {
	    {"max-msg", 's', OPT_U32, &po.client.max_msg, 512, 1 << 20, "BYTES",
	     "largest message (default 8192)"},
	    {"one-sided", 0, OPT_FLAG, &one, 0, 0, NULL, "GETs by RDMA READ of a granted window"},
	    {"register", 0, OPT_FLAG, &t.reg, 0, 0, NULL,
	     "--synthetic GETs into a buffer registered with the pool (qpg_kv_register): a "
	     "one-sided GET READs straight into it"},
	    {"two-sided", 0, OPT_FLAG, &two, 0, 0, NULL, "GETs sent in messages"},
	    {"synthetic", 0, OPT_FLAG, &synthetic, 0, 0, NULL,
	     "for tests: put KEY SIZE SEED, get KEY [SIZE SEED] (verify), bad"},
	    {"test-abuse", 0, OPT_CALL, &abuse, 0, 0, "MODE",
	     "test hook: past-end|other-qp|write|after-release|wrong-digest|expired|bogus-release",
	     parse_abuse},
	    QPG_OPTS_ETCD(&etcd, "send each key to its owner in a cluster, from etcd (then no "
				 "HOST SERVERNAME)"),
	    {"stats", 0, OPT_FLAG, &stats, 0, 0, NULL,
	     "after the commands (or alone), the caller's tenant on each server: its keys, "
	     "bytes against its quota, hits, misses, evictions"},
	    {"test-wait-file", 0, OPT_STR, &wait_file, 0, 0, "FILE",
	     "test hook: connect, then wait (60 s at most) until FILE exists before the commands"},
	    {"ttl", 0, OPT_U32, &t.ttl_ms, 1, 4294967295.0, "MS",
	     "each PUT's time to live: the server drops the value MS after storing it"},
	    {"test-view-rev", 0, OPT_LONG, &t.view_rev, 0, 9.2e18, "REV",
	     "test hook: every request claims a cluster view of this revision (a lagging client)"},
	    QPG_OPT_END};
	const struct qpg_opt *const tables[] = {client, own, NULL};
	const char *synopsis =
	    "qpgate-kv [options] HOST SERVERNAME COMMAND...\n"
	    "qpgate-kv [options] --stats HOST SERVERNAME (the caller's tenant, also after "
	    "commands)\n"
	    "qpgate-kv --cluster URL --cluster-name NAME [options] COMMAND...\n\n"
	    "Commands, run in order:\n"
	    "  put KEY FILE|-                store FILE's bytes (-: standard input)\n"
	    "  get KEY [-o FILE]             the value to standard output, or to FILE\n"
	    "  del KEY                       delete it\n"
	    "  exists KEY...                 which of up to 256 keys are stored, in one round\n"
	    "                                trip (exit 1 if one is not)\n"
	    "  --synthetic, for tests:       put KEY SIZE SEED, get KEY [SIZE SEED], bad";
	int optind = qpg_opts_parse(argc, argv, tables, synopsis, -1);
	if (one || two)
		po.get_mode = one ? QPG_KV_GET_ONE_SIDED : QPG_KV_GET_TWO_SIDED;
	if (abuse != QPG_KV_ABUSE_NONE)
		po.get_mode = QPG_KV_GET_ONE_SIDED;
	struct cmd *cmds = calloc((size_t)argc, sizeof(*cmds));
	int npos = etcd.endpoints ? 0 : 2; /* HOST SERVERNAME, unless a cluster names them */
	int ncmds = cmds && argc - optind >= npos + 1
			? parse_cmds(argc - optind - npos, argv + optind + npos, synthetic, cmds)
		    : cmds && stats && argc - optind == npos ? 0
							     : -1;
	if (etcd.endpoints && !etcd.name) {
		fprintf(stderr, "error: --cluster needs --cluster-name NAME\n");
		free(cmds);
		return 2;
	}
	if (ncmds < 0 || (ncmds == 0 && !stats)) {
		fprintf(stderr, "usage: %s\n", synopsis);
		free(cmds);
		return 2;
	}
	if (abuse == QPG_KV_ABUSE_OTHER_QP)
		po.conns = 2; /* one thread: the GET's grant, tried on the other */
	signal(SIGPIPE, SIG_IGN);
	char err[512];
	int crc;
	if (etcd.endpoints) {
		struct qpg_kv_cluster_opts co;
		qpg_kv_cluster_opts_default(&co);
		co.etcd = etcd;
		co.etcd.quiet = true;
		co.pool = po;
		co.pool.connect_attempts = 2;
		co.pool.request_timeout_ms = QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS;
		struct qpg_kv_cluster *c = NULL;
		crc = qpg_kv_cluster_create(&c, &co, err, sizeof(err));
		t.kv = qpg_kv_cluster_target(c);
	} else {
		po.client.host = argv[optind];
		po.client.servername = argv[optind + 1];
		crc = qpg_kv_pool_create(&t.pool, &po, err, sizeof(err));
		t.kv = qpg_kv_pool_target(t.pool);
	}
	if (crc) {
		fprintf(stderr, "qpgate-kv: %s\n", err);
		free(cmds);
		return 3;
	}
	for (int i = 0; wait_file && access(wait_file, F_OK) && i < 6000; i++)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	struct pending p = {0};
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cv, NULL);
	int rc = 0;
	for (int i = 0; i < ncmds && rc < 2; i++) {
		int r = run_cmd(&t, &cmds[i], &p, (uint8_t)abuse);
		rc = r > rc ? r : rc;
	}
	if (abuse != QPG_KV_ABUSE_NONE && t.pool)
		report_abuse(t.pool, abuse);
	if (stats && rc < 2) {
		int r = print_tenant(t.kv);
		rc = r > rc ? r : rc;
	}
	qpg_kv_target_destroy(t.kv);
	free(cmds);
	return rc;
}

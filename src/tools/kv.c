/* qpgate-kv: run KV commands against a qpgate server, in order, on one
 * secure connection.
 *
 *   qpgate-kv [client flags] HOST SERVERNAME COMMAND...
 *     put KEY SIZE SEED   store SIZE bytes generated from SEED
 *     get KEY [SIZE SEED] fetch; with SIZE SEED, verify every byte
 *     del KEY
 *     bad                 send a request with an unknown operation
 *
 * One line per command ("PUT k: ok, 4096 bytes in 1 chunk"). Exit status:
 * 0 all ok, 1 a command got an error status or a mismatch, 2 usage,
 * 3 the connection failed. PUT chunks are pipelined up to --credits. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qpgate/client.h"
#include "qpgate/kv.h"

enum cmd_op { CMD_PUT, CMD_GET, CMD_DEL, CMD_BAD };

struct cmd {
	enum cmd_op op;
	const char *key;
	uint32_t size; /* put; get: expected (with seed) */
	uint32_t seed;
	bool verify;
};

struct tool {
	struct cmd *cmds;
	int ncmds, cur;
	struct qpg_client_conn *conn;
	uint32_t max_msg;
	uint16_t credits;
	int outstanding;
	bool done, failed_any, conn_failed;
	/* the command in progress */
	uint32_t req_id;
	uint32_t sent_off;  /* put: bytes sent */
	uint32_t acked_off; /* put: bytes acknowledged */
	uint8_t status;
	uint8_t *value; /* get: reassembly */
	uint32_t value_len, got;
	int chunks;
};

/* Every byte depends on the seed and its offset: a misplaced chunk shows. */
static uint8_t pattern(uint32_t seed, uint32_t i)
{
	uint32_t x = seed * 2654435761u + i * 40503u;
	return (uint8_t)(x ^ (x >> 13) ^ (i >> 8));
}

static uint64_t fnv64(const uint8_t *p, uint32_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static int send_req(struct tool *t, uint8_t op, const char *key, uint32_t value_len, uint32_t off,
		    uint32_t chunk_len, uint32_t seed)
{
	uint8_t buf[QPG_KV_HDR_LEN + QPG_KV_MAX_KEY + 65536];
	struct qpg_kv_req r = {.op = op,
			       .key_len = (uint16_t)strlen(key),
			       .req_id = t->req_id,
			       .value_len = value_len,
			       .offset = off,
			       .key = (const uint8_t *)key};
	int n = qpg_kv_encode_req(buf, sizeof(buf), &r);
	if (n < 0 || (size_t)n + chunk_len > sizeof(buf))
		return -EMSGSIZE;
	for (uint32_t i = 0; i < chunk_len; i++)
		buf[n + i] = pattern(seed, off + i);
	int rc = qpg_client_send(t->conn, QPG_FRAME_KV_REQ, buf, (uint32_t)n + chunk_len);
	if (rc == 0)
		t->outstanding++;
	return rc;
}

static uint32_t chunk_room(const struct tool *t, const struct cmd *c)
{
	uint32_t room = t->max_msg - QPG_KV_HDR_LEN - (uint32_t)strlen(c->key);
	return room > 65536 ? 65536 : room;
}

/* PUT: keep up to --credits chunks in flight. */
static void put_pump(struct tool *t, const struct cmd *c)
{
	while (t->outstanding < t->credits && t->status == QPG_KV_OK &&
	       (t->sent_off < c->size || (c->size == 0 && t->chunks == 0))) {
		uint32_t n = c->size - t->sent_off;
		if (n > chunk_room(t, c))
			n = chunk_room(t, c);
		if (send_req(t, QPG_KV_PUT, c->key, c->size, t->sent_off, n, c->seed))
			return;
		t->sent_off += n;
		t->chunks++;
	}
}

static void start(struct tool *t)
{
	if (t->cur >= t->ncmds) {
		t->done = true;
		qpg_client_close(t->conn);
		return;
	}
	struct cmd *c = &t->cmds[t->cur];
	t->req_id++;
	t->sent_off = t->acked_off = t->got = t->value_len = 0;
	t->chunks = 0;
	t->status = QPG_KV_OK;
	free(t->value);
	t->value = NULL;
	switch (c->op) {
	case CMD_PUT:
		put_pump(t, c);
		break;
	case CMD_GET:
		send_req(t, QPG_KV_GET, c->key, 0, 0, 0, 0);
		break;
	case CMD_DEL:
		send_req(t, QPG_KV_DEL, c->key, 0, 0, 0, 0);
		break;
	case CMD_BAD: {
		uint8_t raw[QPG_KV_HDR_LEN + 1] = {9, 0, 0, 1, 0, 0, 0, 0};
		raw[7] = (uint8_t)t->req_id;
		raw[QPG_KV_HDR_LEN] = 'k';
		if (qpg_client_send(t->conn, QPG_FRAME_KV_REQ, raw, sizeof(raw)) == 0)
			t->outstanding++;
		break;
	}
	}
}

static void finish(struct tool *t, const struct cmd *c)
{
	static const char *const names[] = {"PUT", "GET", "DEL", "BAD"};
	bool ok = t->status == QPG_KV_OK;
	printf("%s %s: %s", names[c->op], c->op == CMD_BAD ? "(unknown op)" : c->key,
	       ok ? "ok" : qpg_kv_status_name(t->status));
	if (c->op == CMD_PUT && ok)
		printf(", %u bytes in %d chunk%s", c->size, t->chunks, t->chunks == 1 ? "" : "s");
	if (c->op == CMD_GET && ok) {
		printf(", %u bytes in %d chunk%s, fnv64 %016llx", t->value_len, t->chunks,
		       t->chunks == 1 ? "" : "s",
		       (unsigned long long)fnv64(t->value, t->value_len));
		if (c->verify) {
			uint32_t bad = t->value_len == c->size ? 0 : 1;
			for (uint32_t i = 0; !bad && i < t->value_len; i++)
				bad = t->value[i] != pattern(c->seed, i);
			printf(", %s", bad ? "MISMATCH" : "verified");
			ok = !bad;
		}
	}
	printf("\n");
	fflush(stdout);
	if (!ok && c->op != CMD_BAD)
		t->failed_any = true;
	if (c->op == CMD_BAD && t->status != QPG_KV_MALFORMED)
		t->failed_any = true; /* the server must call it malformed */
	t->cur++;
	start(t);
}

static void on_established(struct qpg_client_conn *c, void *user)
{
	struct tool *t = user;
	struct qpg_conn_info ci;
	qpg_client_conn_info(c, &ci);
	t->max_msg = ci.max_msg;
	t->credits = ci.credits;
	start(t);
}

static void on_reply(struct qpg_client_conn *cc, void *user, uint8_t type, const uint8_t *p,
		     uint32_t len)
{
	struct tool *t = user;
	struct cmd *c = &t->cmds[t->cur];
	struct qpg_kv_reply r;
	if (type != QPG_FRAME_KV_REPLY || qpg_kv_decode_reply(p, len, &r) ||
	    r.req_id != t->req_id) {
		fprintf(stderr, "qpgate-kv: malformed or unexpected reply\n");
		t->failed_any = true;
		qpg_client_close(cc);
		return;
	}
	if (c->op == CMD_PUT) {
		t->outstanding--;
		if (r.status != QPG_KV_OK && t->status == QPG_KV_OK)
			t->status = r.status;
		if (r.status == QPG_KV_OK)
			t->acked_off = r.offset;
		put_pump(t, c);
		if (t->outstanding == 0)
			finish(t, c);
		return;
	}
	if (c->op == CMD_GET && r.status == QPG_KV_OK) {
		if (!t->value) {
			t->value_len = r.value_len;
			t->value = malloc(r.value_len ? r.value_len : 1);
			if (!t->value) {
				qpg_client_close(cc);
				return;
			}
		}
		if (r.value_len != t->value_len || r.offset != t->got) {
			fprintf(stderr, "qpgate-kv: GET chunk out of order\n");
			t->failed_any = true;
			qpg_client_close(cc);
			return;
		}
		memcpy(t->value + r.offset, r.chunk, r.chunk_len);
		t->got += r.chunk_len;
		t->chunks++;
		if (t->got < t->value_len)
			return; /* more chunks follow */
	}
	t->outstanding--;
	t->status = r.status;
	finish(t, c);
}

static void on_closed(struct qpg_client_conn *c, void *user, enum qpg_err_class err,
		      const char *why)
{
	struct tool *t = user;
	if (err != QPG_ERR_NONE) {
		fprintf(stderr, "qpgate-kv: connection failed (%s): %s\n   -> %s\n",
			qpg_err_class_name(err), why, qpg_err_class_hint(err));
		t->conn_failed = true;
	}
	t->done = true;
}

static int parse_cmds(int argc, char **argv, struct cmd *out)
{
	int n = 0;
	for (int i = 0; i < argc;) {
		struct cmd c = {0};
		const char *w = argv[i++];
		if (!strcmp(w, "bad")) {
			c.op = CMD_BAD;
			c.key = "k";
		} else if (i < argc &&
			   (!strcmp(w, "put") || !strcmp(w, "get") || !strcmp(w, "del"))) {
			c.op = w[0] == 'p' ? CMD_PUT : w[0] == 'g' ? CMD_GET : CMD_DEL;
			c.key = argv[i++];
			if (strlen(c.key) > QPG_KV_MAX_KEY + 10)
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

int main(int argc, char **argv)
{
	struct qpg_client_opts co;
	qpg_client_opts_default(&co);
	co.service = QPG_SERVICE_KV;
	co.credits = 8;
	co.max_msg = 8192;
	static const struct option opts[] = {
	    QPG_CLI_CLIENT_LONGOPTS,
	    {"max-msg", 1, 0, 's'},
	    {"help", 0, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "+" QPG_CLI_CLIENT_SHORTOPTS "s:h", opts, NULL)) !=
	       -1) {
		if (qpg_cli_client_opt(ch, optarg, &co))
			continue;
		if (ch == 's') {
			co.max_msg = (uint32_t)qpg_cli_int(optarg, 512, 65536, "--max-msg");
			continue;
		}
		fprintf(ch == 'h' ? stdout : stderr,
			"usage: qpgate-kv [client flags] [-s MAX_MSG] HOST SERVERNAME COMMAND...\n"
			"  put KEY SIZE SEED | get KEY [SIZE SEED] | del KEY | "
			"bad\n" QPG_CLI_CLIENT_HELP);
		return ch == 'h' ? 0 : 2;
	}
	if (argc - optind < 3) {
		fprintf(stderr, "usage: qpgate-kv [flags] HOST SERVERNAME COMMAND...\n");
		return 2;
	}
	co.host = argv[optind];
	co.servername = argv[optind + 1];
	struct cmd *cmds = calloc((size_t)argc, sizeof(*cmds));
	struct tool t = {.cmds = cmds};
	t.ncmds = cmds ? parse_cmds(argc - optind - 2, argv + optind + 2, cmds) : -1;
	if (t.ncmds <= 0) {
		fprintf(stderr,
			"qpgate-kv: commands are: put KEY SIZE SEED | get KEY [SIZE SEED] | "
			"del KEY | bad\n");
		free(cmds);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	static const struct qpg_client_cbs cbs = {
	    .established = on_established, .reply = on_reply, .closed = on_closed};
	char err[512];
	struct qpg_client *cl;
	if (qpg_client_create(&cl, &co, &cbs, err, sizeof(err))) {
		fprintf(stderr, "qpgate-kv: error: %s\n", err);
		free(cmds);
		return 3;
	}
	if (qpg_client_connect(cl, &t, &t.conn) < 0) {
		fprintf(stderr, "qpgate-kv: cannot connect\n");
		qpg_client_destroy(cl);
		free(cmds);
		return 3;
	}
	for (int i = 0; i < 600000 && !t.done; i++) /* at most 10 minutes */
		qpg_client_run(cl, 1);
	for (int k = 0; k < 200 && qpg_client_conn_count(cl); k++)
		qpg_client_run(cl, 10);
	qpg_client_destroy(cl);
	free(t.value);
	free(cmds);
	if (t.conn_failed || t.cur < t.ncmds)
		return 3;
	return t.failed_any ? 1 : 0;
}

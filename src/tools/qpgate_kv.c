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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "etcd_opts.h"
#include "kv_cmd.h"
#include "kv_testing.h"
#include "opts.h"
#include "qpgate/kv_call.h"
#include "qpgate/kv_client.h"
#include "qpgate/kv_cluster.h"

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

/* What the command line asks for, beside the target's own flags. */
struct kv_args {
	struct qpg_kv_pool_opts po;
	struct qpg_cluster_opts etcd;
	int abuse;
	bool stats;
	const char *wait_file;
	struct cmd *cmds;
	int ncmds;
};

/* Parses ARGV into A and T's flags, its commands into A->cmds. 0, or the
 * exit status (A->cmds freed). */
static int parse_args(struct kv_args *a, struct target *t, int argc, char **argv)
{
	struct qpg_kv_pool_opts *po = &a->po;
	qpg_kv_pool_opts_default(po);
	po->threads = po->conns = 1;
	a->abuse = QPG_KV_ABUSE_NONE;
	bool one = false, two = false, synthetic = false;
	const struct qpg_opt client[] = {QPG_OPTS_CLIENT(&po->client), QPG_OPT_END};
	const struct qpg_opt own[] = {
	    {"max-msg", 's', OPT_U32, &po->client.max_msg, 512, 1 << 20, "BYTES",
	     "largest message (default 8192)"},
	    {"one-sided", 0, OPT_FLAG, &one, 0, 0, NULL, "GETs by RDMA READ of a granted window"},
	    {"register", 0, OPT_FLAG, &t->reg, 0, 0, NULL,
	     "--synthetic GETs into a buffer registered with the pool (qpg_kv_register): a "
	     "one-sided GET READs straight into it"},
	    {"two-sided", 0, OPT_FLAG, &two, 0, 0, NULL, "GETs sent in messages"},
	    {"synthetic", 0, OPT_FLAG, &synthetic, 0, 0, NULL,
	     "for tests: put KEY SIZE SEED, get KEY [SIZE SEED] (verify), bad"},
	    {"test-abuse", 0, OPT_CALL, &a->abuse, 0, 0, "MODE",
	     "test hook: past-end|other-qp|write|after-release|wrong-digest|expired|bogus-release",
	     parse_abuse},
	    QPG_OPTS_ETCD(&a->etcd, "send each key to its owner in a cluster, from etcd (then no "
				    "HOST SERVERNAME)"),
	    {"stats", 0, OPT_FLAG, &a->stats, 0, 0, NULL,
	     "after the commands (or alone), the caller's tenant on each server: its keys, "
	     "bytes against its quota, hits, misses, evictions"},
	    {"test-wait-file", 0, OPT_STR, &a->wait_file, 0, 0, "FILE",
	     "test hook: connect, then wait (60 s at most) until FILE exists before the commands"},
	    {"ttl", 0, OPT_U32, &t->ttl_ms, 1, 4294967295.0, "MS",
	     "each PUT's time to live: the server drops the value MS after storing it"},
	    {"test-view-rev", 0, OPT_LONG, &t->view_rev, 0, 9.2e18, "REV",
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
		po->get_mode = one ? QPG_KV_GET_ONE_SIDED : QPG_KV_GET_TWO_SIDED;
	if (a->abuse != QPG_KV_ABUSE_NONE)
		po->get_mode = QPG_KV_GET_ONE_SIDED;
	if (a->abuse == QPG_KV_ABUSE_OTHER_QP)
		po->conns = 2; /* one thread: the GET's grant, tried on the other */
	a->cmds = calloc((size_t)argc, sizeof(*a->cmds));
	int npos = a->etcd.endpoints ? 0 : 2; /* HOST SERVERNAME, unless a cluster names them */
	a->ncmds =
	    a->cmds && argc - optind >= npos + 1
		? kv_cmds_parse(argc - optind - npos, argv + optind + npos, synthetic, a->cmds)
	    : a->cmds && a->stats && argc - optind == npos ? 0
							   : -1;
	int rc = 0;
	if (a->etcd.endpoints && !a->etcd.name) {
		fprintf(stderr, "error: --cluster needs --cluster-name NAME\n");
		rc = 2;
	} else if (a->ncmds < 0 || (a->ncmds == 0 && !a->stats)) {
		fprintf(stderr, "usage: %s\n", synopsis);
		rc = 2;
	} else if (!a->etcd.endpoints) {
		po->client.host = argv[optind];
		po->client.servername = argv[optind + 1];
	}
	if (rc) {
		free(a->cmds);
		a->cmds = NULL;
	}
	return rc;
}

/* T's pool, or the cluster's target. 0, or -errno with the reason in ERR. */
static int open_target(const struct kv_args *a, struct target *t, char *err, size_t err_len)
{
	int rc;
	if (a->etcd.endpoints) {
		struct qpg_kv_cluster_opts co;
		qpg_kv_cluster_opts_default(&co);
		co.etcd = a->etcd;
		co.etcd.quiet = true;
		co.pool = a->po;
		co.pool.connect_attempts = 2;
		co.pool.request_timeout_ms = QPG_KV_CLUSTER_REQUEST_TIMEOUT_MS;
		struct qpg_kv_cluster *c = NULL;
		rc = qpg_kv_cluster_create(&c, &co, err, err_len);
		t->kv = qpg_kv_cluster_target(c);
	} else {
		rc = qpg_kv_pool_create(&t->pool, &a->po, err, err_len);
		t->kv = qpg_kv_pool_target(t->pool);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct kv_args a = {0};
	struct target t = {0};
	int rc = parse_args(&a, &t, argc, argv);
	if (rc)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	char err[512];
	if (open_target(&a, &t, err, sizeof(err))) {
		fprintf(stderr, "qpgate-kv: %s\n", err);
		free(a.cmds);
		return 3;
	}
	for (int i = 0; a.wait_file && access(a.wait_file, F_OK) && i < 6000; i++)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	rc = kv_cmds_run(&t, a.cmds, a.ncmds, (uint8_t)a.abuse);
	if (a.abuse != QPG_KV_ABUSE_NONE && t.pool)
		report_abuse(t.pool, a.abuse);
	if (a.stats && rc < 2) {
		int r = print_tenant(t.kv);
		rc = r > rc ? r : rc;
	}
	qpg_kv_target_destroy(t.kv);
	free(a.cmds);
	return rc;
}

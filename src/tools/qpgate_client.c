/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-client: connect over TLS-bootstrapped RC QPs (or TCP), echo
 * messages, verify every byte, and report setup phases and latency. With -c
 * it opens many connections at once from one event loop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client_testing.h"
#include "cluster_pick.h"
#include "load.h"
#include "opts.h"
#include "qpgate/wire.h"

/* --test-bad-hello MODE: how a test client breaks its own HELLO. */
static void parse_bad_hello(const char *arg, void *dst)
{
	static const char *const modes[] = {"",		 "version", "psn",   "qpn",
					    "truncated", "length",  "stall", "gid"};
	*(uint8_t *)dst =
	    (uint8_t)qpg_cli_pick(arg, modes, sizeof(modes) / sizeof(modes[0]), "--test-bad-hello");
}

int main(int argc, char **argv)
{
	struct qpg_client_opts o;
	struct load_opts lo;
	uint8_t mutation = 0; /* --test-bad-hello */
	bool silent = false;  /* --test-silent */
	qpg_client_opts_default(&o);
	load_opts_default(&lo);
	const char *expect = NULL;
	const struct qpg_opt client[] = {QPG_OPTS_CLIENT(&o), QPG_OPT_END};
	const struct qpg_opt own[] = {
	    QPG_OPTS_LOAD(&lo),
	    {"ready-file", 0, OPT_STR, &lo.ready_file, 0, 0, "F", "create F once all are up"},
	    {"release-file", 0, OPT_STR, &lo.release_file, 0, 0, "F", "end --hold once F exists"},
	    {"expect-error", 0, OPT_STR, &expect, 0, 0, "CLASS",
	     "succeed only if every connection fails with CLASS"},
	    {"verbose", 'v', OPT_FLAG, &lo.verbose, 0, 0, NULL, "a line per connection"},
	    {"test-pause-at", 0, OPT_INT, &lo.pause_at, 0, 1000000000, "K",
	     "test hook: conn 0 waits before message K ..."},
	    {"test-resume-file", 0, OPT_STR, &lo.resume_file, 0, 0, "F", "... until F exists"},
	    {"test-corrupt-tag-at", 0, OPT_INT, &lo.corrupt_at, 0, 1000000000, "K",
	     "test hook: a wrong tag on message K"},
	    {"test-oversize-at", 0, OPT_INT, &lo.oversize_at, 0, 1000000000, "K",
	     "test hook: message K over the agreed size"},
	    {"test-bad-hello", 0, OPT_CALL, &mutation, 0, 0, "MODE",
	     "test hook: version|psn|qpn|truncated|length|stall|gid", parse_bad_hello},
	    {"test-silent", 0, OPT_FLAG, &silent, 0, 0, NULL,
	     "test hook: no keepalive frames, not even as each QP comes up"},
	    QPG_OPT_END};
	struct cluster_pick pick = {0};
	bool clustered;
	int optind =
	    cluster_pick_parse(&pick, argc, argv, client, own, "qpgate-client", &clustered);
	if (clustered) {
		if (cluster_pick(&pick, &o, "qpgate-client"))
			return 1;
	} else {
		o.host = argv[optind];
		o.servername = argv[optind + 1];
	}
	if (!load_opts_fit(&o, &lo, "qpgate-client"))
		return 2;
	if (lo.corrupt_at >= 0 && o.transport == QPG_KIND_TCP) {
		fprintf(stderr,
			"qpgate-client: error: --test-corrupt-tag-at: frames over tcp carry "
			"no tag (the TLS records they travel in authenticate them); use "
			"--transport rdma\n");
		return 2;
	}
	load_size_client(&o, &lo);
	lo.prime = o.tls_resume;
	signal(SIGPIPE, SIG_IGN);

	char err[512];
	struct qpg_client *cl;
	if (qpg_client_create(&cl, &o, &load_callbacks, err, sizeof(err))) {
		fprintf(stderr, "qpgate-client: error: %s\n", err);
		return 1;
	}
	qpg__client_test_mutation(cl, mutation);
	if (silent)
		qpg__client_test_silent(cl);
	struct load_result *r = malloc(sizeof(*r));
	if (!r || load_run(cl, &lo, r)) {
		fprintf(stderr, "qpgate-client: out of memory\n");
		return 1;
	}
	qpg_client_destroy(cl);
	load_print(r, &lo);

	int rc = load_ok(r, &lo) ? 0 : 1;
	if (expect) {
		rc = 2;
		for (int e = 0; e < QPG_ERR_COUNT; e++)
			if (strcmp(expect, qpg_err_class_name((enum qpg_err_class)e)) == 0) {
				bool all = r->fail_by_class[e] == lo.nconns;
				printf(" expected every connection to fail with %s: %s\n", expect,
				       all ? "yes" : "NO");
				rc = all ? 0 : 1;
			}
		if (rc == 2)
			fprintf(stderr, "error: unknown error class '%s'\n", expect);
	}
	free(r);
	return rc;
}

/* qpgate-client: connect over TLS-bootstrapped RC QPs (or TCP), echo
 * messages, verify every byte, and report setup phases and latency. With -c
 * it opens many connections at once from one event loop. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client_testing.h"
#include "load.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: qpgate-client [options] HOST SERVERNAME\n" QPG_CLI_CLIENT_HELP
		   "  -c, --conns N         concurrent connections (default 1)\n"
		   "  -n, --iters N         messages per connection (default 100)\n"
		   "  -s, --size BYTES      message size (default 64)\n"
		   "      --timeout MS      give up on the whole run after MS (default 120000)\n"
		   "      --window N        handshakes in progress at once (default 64)\n"
		   "      --hold MS         once all are connected, wait MS before traffic\n"
		   "      --ready-file F    create F once all connections are up\n"
		   "      --release-file F  end --hold as soon as F exists\n"
		   "      --expect-error CLASS  succeed only if every connection fails with CLASS\n"
		   "  -v, --verbose\n"
		   "test hooks: --test-pause-at K --test-resume-file F (conn 0 waits before "
		   "message K until F exists), --test-corrupt-tag-at K, --test-oversize-at K, "
		   "--test-bad-hello "
		   "version|psn|qpn|truncated|length|stall|gid\n");
}

int main(int argc, char **argv)
{
	struct qpg_client_opts o;
	struct load_opts lo;
	uint8_t mutation = 0; /* --test-bad-hello */
	qpg_client_opts_default(&o);
	load_opts_default(&lo);
	const char *expect = NULL;
	enum {
		O_TIMEOUT = 256,
		O_HOLD,
		O_EXPECT,
		O_CORRUPT,
		O_OVERSIZE,
		O_PAUSE,
		O_RESUME,
		O_BADHELLO,
		O_WINDOW,
		O_READY,
		O_RELEASE
	};
	static const struct option opts[] = {
	    QPG_CLI_CLIENT_LONGOPTS,
	    {"conns", 1, 0, 'c'},
	    {"iters", 1, 0, 'n'},
	    {"size", 1, 0, 's'},
	    {"timeout", 1, 0, O_TIMEOUT},
	    {"hold", 1, 0, O_HOLD},
	    {"expect-error", 1, 0, O_EXPECT},
	    {"test-corrupt-tag-at", 1, 0, O_CORRUPT},
	    {"test-oversize-at", 1, 0, O_OVERSIZE},
	    {"test-pause-at", 1, 0, O_PAUSE},
	    {"test-resume-file", 1, 0, O_RESUME},
	    {"test-bad-hello", 1, 0, O_BADHELLO},
	    {"window", 1, 0, O_WINDOW},
	    {"ready-file", 1, 0, O_READY},
	    {"release-file", 1, 0, O_RELEASE},
	    {"verbose", 0, 0, 'v'},
	    {"help", 0, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, QPG_CLI_CLIENT_SHORTOPTS "c:n:s:vh", opts, NULL)) !=
	       -1) {
		if (qpg_cli_client_opt(ch, optarg, &o))
			continue;
		switch (ch) {
		case 'c':
			lo.nconns = (int)qpg_cli_int(optarg, 1, 1000000, "--conns");
			break;
		case 'n':
			lo.msgs = qpg_cli_int(optarg, 0, 1000000000, "--iters");
			break;
		case 's':
			lo.size = (uint32_t)qpg_cli_int(optarg, 1, QPG_WIRE_MAX_MSG, "--size");
			break;
		case O_TIMEOUT:
			lo.timeout_ms = qpg_cli_int(optarg, 1, 86400000, "--timeout");
			break;
		case O_HOLD:
			lo.hold_ms = qpg_cli_int(optarg, 0, 86400000, "--hold");
			break;
		case O_EXPECT:
			expect = optarg;
			break;
		case O_OVERSIZE:
			lo.oversize_at =
			    (int)qpg_cli_int(optarg, 0, 1000000000, "--test-oversize-at");
			break;
		case O_PAUSE:
			lo.pause_at = (int)qpg_cli_int(optarg, 0, 1000000000, "--test-pause-at");
			break;
		case O_RESUME:
			lo.resume_file = optarg;
			break;
		case O_CORRUPT:
			lo.corrupt_at =
			    (int)qpg_cli_int(optarg, 0, 1000000000, "--test-corrupt-tag-at");
			break;
		case O_WINDOW:
			lo.window = qpg_cli_int(optarg, 1, 1000000, "--window");
			break;
		case O_RELEASE:
			lo.release_file = optarg;
			break;
		case O_READY:
			lo.ready_file = optarg;
			break;
		case O_BADHELLO: {
			static const char *const modes[] = {"",		 "version", "psn",   "qpn",
							    "truncated", "length",  "stall", "gid"};
			mutation = 0;
			for (unsigned k = 1; k < sizeof(modes) / sizeof(modes[0]); k++)
				if (strcmp(optarg, modes[k]) == 0)
					mutation = (uint8_t)k;
			if (!mutation) {
				fprintf(stderr, "error: unknown --test-bad-hello mode '%s'\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'v':
			lo.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	o.host = argv[optind];
	o.servername = argv[optind + 1];
	load_size_client(&o, &lo);
	signal(SIGPIPE, SIG_IGN);

	char err[512];
	struct qpg_client *cl;
	if (qpg_client_create(&cl, &o, &load_callbacks, err, sizeof(err))) {
		fprintf(stderr, "qpgate-client: error: %s\n", err);
		return 1;
	}
	qpg__client_test_mutation(cl, mutation);
	struct load_result *r = malloc(sizeof(*r));
	if (!r || load_run(cl, &lo, r)) {
		fprintf(stderr, "qpgate-client: out of memory\n");
		return 1;
	}
	qpg_client_destroy(cl);
	load_print(r, lo.size);

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

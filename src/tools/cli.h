/* Small helpers the command-line tools share. */
#ifndef QPG_CLI_H
#define QPG_CLI_H

#include <stdint.h>

#include "qpgate/client.h"

/* Parse ARG as an integer in [MIN, MAX] or exit(2) naming FLAG. */
long long qpg_cli_int(const char *arg, long long min, long long max, const char *flag);
double qpg_cli_double(const char *arg, double min, double max, const char *flag);
/* A byte count with an optional K, M or G suffix (powers of 1024). */
unsigned long long qpg_cli_size(const char *arg, unsigned long long min, unsigned long long max,
				const char *flag);
/* "rdma" | "tcp", or exit(2). */
int qpg_cli_transport(const char *arg);

/* Flags every client-side tool takes (TLS, transport, device), perftest's
 * letters where they exist. Tools put these in their option table and hand
 * each option to qpg_cli_client_opt first. */
enum {
	QPG_OPT_CA = 1000,
	QPG_OPT_CERT,
	QPG_OPT_KEY,
	QPG_OPT_TRANSPORT,
	QPG_OPT_NOAUTH,
	QPG_OPT_HTO,
	QPG_OPT_CREDITS,
	QPG_OPT_QP_TIMEOUT,
};
#define QPG_CLI_CLIENT_LONGOPTS                                                                    \
	{"port", 1, 0, 'p'}, {"ca", 1, 0, QPG_OPT_CA}, {"cert", 1, 0, QPG_OPT_CERT},               \
	    {"key", 1, 0, QPG_OPT_KEY}, {"transport", 1, 0, QPG_OPT_TRANSPORT},                    \
	    {"ib-dev", 1, 0, 'd'}, {"ib-port", 1, 0, 'i'}, {"gid-index", 1, 0, 'x'},               \
	    {"no-auth", 0, 0, QPG_OPT_NOAUTH}, {"handshake-timeout", 1, 0, QPG_OPT_HTO},           \
	    {"credits", 1, 0, QPG_OPT_CREDITS},                                                    \
	{                                                                                          \
		"qp-timeout", 1, 0, QPG_OPT_QP_TIMEOUT                                             \
	}
#define QPG_CLI_CLIENT_SHORTOPTS "p:d:i:x:"
#define QPG_CLI_CLIENT_HELP                                                                        \
	"  -p, --port N          server port (default 7471)\n"                                     \
	"      --ca FILE         CA that signed the server certificate\n"                          \
	"      --cert FILE --key FILE   client certificate for mutual TLS\n"                       \
	"      --transport rdma|tcp  (default rdma)\n"                                             \
	"  -d, --ib-dev DEV  -i, --ib-port N  -x, --gid-index N\n"                                 \
	"      --no-auth         turn per-message authentication off (to measure its cost)\n"      \
	"      --handshake-timeout MS  per connection (default 10000)\n"                           \
	"      --credits N       requests in flight per connection (default 1)\n"                  \
	"      --qp-timeout N    RC ACK timeout 4.096 us * 2^N, 7 tries (default 18 = 1.07 s)\n"

/* Returns 1 when CH was one of the shared flags (and applies it to O). */
int qpg_cli_client_opt(int ch, const char *arg, struct qpg_client_opts *o);

#endif

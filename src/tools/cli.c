#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "qpgate/qpgate.h"

long long qpg_cli_int(const char *arg, long long min, long long max, const char *flag)
{
	char *end;
	errno = 0;
	long long v = strtoll(arg, &end, 0);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "error: %s wants a number from %lld to %lld, not '%s'\n", flag, min,
			max, arg);
		exit(2);
	}
	return v;
}

int qpg_cli_transport(const char *arg)
{
	int t = qpg_transport_parse(arg);
	if (t < 0) {
		fprintf(stderr, "error: --transport is 'rdma' or 'tcp', not '%s'\n", arg);
		exit(2);
	}
	return t;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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

double qpg_cli_double(const char *arg, double min, double max, const char *flag)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "error: %s wants a number from %g to %g, not '%s'\n", flag, min,
			max, arg);
		exit(2);
	}
	return v;
}

unsigned long long qpg_cli_size(const char *arg, unsigned long long min, unsigned long long max,
				const char *flag)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	else if (*end == 'T' || *end == 't')
		shift = 40;
	if (shift)
		end++;
	if (errno || end == arg || *end || arg[0] == '-' || (v << shift) >> shift != v ||
	    (v << shift) < min || (v << shift) > max) {
		fprintf(
		    stderr,
		    "error: %s wants a size from %llu to %llu bytes (K/M/G/T allowed), not '%s'\n",
		    flag, min, max, arg);
		exit(2);
	}
	return v << shift;
}

unsigned qpg_cli_pick(const char *arg, const char *const *names, unsigned n, const char *flag)
{
	unsigned choices = 0;
	for (unsigned i = 0; i < n; i++)
		if (names[i] && names[i][0]) {
			if (strcmp(arg, names[i]) == 0)
				return i;
			choices++;
		}
	fprintf(stderr, "error: %s is ", flag);
	for (unsigned i = 0, seen = 0; i < n; i++)
		if (names[i] && names[i][0]) {
			const char *sep = ++seen == 1 ? "" : seen == choices ? " or " : ", ";
			fprintf(stderr, "%s'%s'", sep, names[i]);
		}
	fprintf(stderr, ", not '%s'\n", arg);
	exit(2);
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

long qpg_cli_raise_nofile(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) != 0)
		return -1;
	if (r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r) != 0)
			getrlimit(RLIMIT_NOFILE, &r);
	}
	return r.rlim_cur == RLIM_INFINITY ? -1 : (long)r.rlim_cur;
}

void qpg_cli_note_map_count(const char *prog, int transport, long clients, int per_client,
			    const char *flag)
{
	long lim = qpg_map_count_limit(), now = qpg_map_count();
	if (transport != QPG_KIND_RDMA || lim < 0 || now < 0 || now + clients * per_client <= lim)
		return;
	long want = 1;
	while (want < 2 * (now + clients * per_client))
		want *= 2;
	fprintf(stderr,
		"%s: note: %s %ld may need %ld memory mappings (Soft-RoCE maps %d per client's QP), "
		"more than vm.max_map_count %ld: past about %ld clients, their QPs fail; raise it "
		"(sysctl -w vm.max_map_count=%ld)\n",
		prog, flag, clients, now + clients * per_client, per_client, lim,
		(lim - now) / per_client, want);
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include "exhaust.h"

#include "qpgate/qpgate.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static const char *const names[EXH_COUNT] = {
    [EXH_NONE] = "none",
    [EXH_FDS] = "fds",
    [EXH_PORTS] = "port numbers",
    [EXH_MEMLOCK] = "memlock",
    [EXH_QPS] = "QPs",
    [EXH_MAPS] = "memory mappings",
    [EXH_CQ] = "CQ entries",
    [EXH_RAM] = "RAM",
    [EXH_ADMISSION] = "server admission limit",
    [EXH_CPU] = "CPU time (handshake deadline)",
    [EXH_UNKNOWN] = "unknown",
};

const char *exhausted_name(enum exhausted_resource r)
{
	return (unsigned)r < EXH_COUNT ? names[r] : "?";
}

/* A failure text's symptom, checked most specific first: the errno strings
 * the kernel and libibverbs give for each resource. */
static const struct {
	const char *needle, *also; /* both must occur (also may be NULL) */
	enum exhausted_resource what;
} rules[] = {
    {"Too many open files", NULL, EXH_FDS},
    {"Cannot assign requested address", NULL, EXH_PORTS},
    {"locked memory", NULL, EXH_MEMLOCK},
    {"memlock", NULL, EXH_MEMLOCK},
    {"CQ overrun", NULL, EXH_CQ},
    {"CQ is full", NULL, EXH_CQ},
    {"vm.max_map_count", NULL, EXH_MAPS}, /* qpg_strerror(-QPG_EMAPCOUNT) */
    {"data path", "Cannot allocate memory", EXH_QPS}, /* creating the QP */
    {"data path", "No space left", EXH_QPS},
    {"Cannot allocate memory", NULL, EXH_RAM},
    /* The kernel gave up on a TCP connection (retransmissions, keepalive):
     * on one host, its CPUs were too busy to answer in time. */
    {"Connection timed out", NULL, EXH_CPU},
    {"Out of memory", NULL, EXH_RAM},
    {"at its limit", NULL, EXH_ADMISSION},
    {"server full", NULL, EXH_ADMISSION},
    {"too many", "handshake", EXH_ADMISSION},
};

/* Case matters: these are the exact strings of strerror and of our
 * messages, and "CQ" must not match a "cq_depth_max=" counter. */
static enum exhausted_resource match(const char *text)
{
	if (strstr(text, "stats: ")) /* the server's closing counters */
		return EXH_UNKNOWN;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (strstr(text, rules[i].needle) &&
		    (!rules[i].also || strstr(text, rules[i].also)))
			return rules[i].what;
	return EXH_UNKNOWN;
}

static void limit_value(enum exhausted_resource r, char *buf, size_t len)
{
	struct rlimit rl;
	unsigned lo = 0, hi = 0;
	FILE *f;
	switch (r) {
	case EXH_FDS:
		/* The tools raise their soft limit to the hard one. */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
			snprintf(buf, len, "RLIMIT_NOFILE %llu", (unsigned long long)rl.rlim_max);
		break;
	case EXH_MEMLOCK:
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
			if (rl.rlim_cur == RLIM_INFINITY)
				snprintf(buf, len, "RLIMIT_MEMLOCK unlimited");
			else
				snprintf(buf, len, "RLIMIT_MEMLOCK %llu KiB",
					 (unsigned long long)rl.rlim_cur / 1024);
		}
		break;
	case EXH_PORTS:
		f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
		if (f && fscanf(f, "%u %u", &lo, &hi) == 2)
			snprintf(buf, len, "ip_local_port_range %u-%u, %u ports per source address",
				 lo, hi, hi - lo + 1);
		if (f)
			fclose(f);
		break;
	case EXH_MAPS:
		snprintf(buf, len, "vm.max_map_count %ld", qpg_map_count_limit());
		break;
	case EXH_RAM:
		f = fopen("/proc/meminfo", "r");
		if (f && fscanf(f, "MemTotal: %u kB", &lo) == 1)
			snprintf(buf, len, "MemTotal %u MiB", lo / 1024);
		if (f)
			fclose(f);
		break;
	default:
		break;
	}
}

/* The first line of the server's log (its first 8 MiB) that names a
 * resource; *COUNT is how many lines did. */
static enum exhausted_resource scan_log(const char *path, long from, char *line_out, size_t len,
					unsigned long *count)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	if (f && from > 0 && fseek(f, from, SEEK_SET) != 0) {
		fclose(f);
		f = NULL;
	}
	enum exhausted_resource first = EXH_NONE;
	char line[1024];
	size_t read = 0;
	*count = 0;
	if (!f)
		return EXH_NONE;
	while (read < (8u << 20) && fgets(line, sizeof(line), f)) {
		read += strlen(line);
		enum exhausted_resource r = match(line);
		if (r == EXH_UNKNOWN || r == EXH_ADMISSION)
			continue; /* the client's side says which limit refused it */
		if (first == EXH_NONE) {
			first = r;
			line[strcspn(line, "\n")] = 0;
			snprintf(line_out, len, "server: %s", line);
		}
		if (r == first)
			(*count)++;
	}
	fclose(f);
	return first;
}

void exhaust_classify(const struct exhaust_input *in, struct exhausted *out)
{
	memset(out, 0, sizeof(*out));
	json_t *conns = json_object_get(json_object_get(in->perf, "results"), "connections");
	json_t *fails = json_object_get(conns, "failures");
	json_t *examples = json_object_get(conns, "failure_examples");
	const char *k;
	json_t *v;
	long nfail = 0, timeouts = 0;
	json_object_foreach(fails, k, v)
	{
		nfail += (long)json_integer_value(v);
		if (strcmp(k, "timeout") == 0)
			timeouts = (long)json_integer_value(v);
	}
	if (in->server_killed) {
		out->what = EXH_RAM;
		snprintf(out->evidence, sizeof(out->evidence),
			 "the server died of SIGKILL (the OOM killer?)");
		limit_value(EXH_RAM, out->value, sizeof(out->value));
		return;
	}
	if (nfail == 0)
		return;
	/* A resource named by the server's log comes first: what the server
	 * ran out of shows on the client only as a timeout or a close. */
	unsigned long n;
	enum exhausted_resource r =
	    scan_log(in->server_log, in->server_log_from, out->evidence, sizeof(out->evidence), &n);
	if (r != EXH_NONE) {
		out->what = r;
		limit_value(r, out->value, sizeof(out->value));
		if (!out->value[0])
			snprintf(out->value, sizeof(out->value), "%lu server log lines", n);
		return;
	}
	/* Then the client's own reasons, most frequent class first. */
	const char *best = NULL;
	long best_n = -1;
	json_object_foreach(examples, k, v)
	{
		long c = (long)json_integer_value(json_object_get(fails, k));
		enum exhausted_resource m = match(json_string_value(v) ? json_string_value(v) : "");
		if (m != EXH_UNKNOWN && c > best_n) {
			best = json_string_value(v);
			best_n = c;
			r = m;
		}
	}
	if (best) {
		out->what = r;
		snprintf(out->evidence, sizeof(out->evidence), "client: %s", best);
		limit_value(r, out->value, sizeof(out->value));
		if (!out->value[0])
			snprintf(out->value, sizeof(out->value), "%ld of the failures", best_n);
		return;
	}
	if (timeouts > 0) {
		out->what = EXH_CPU;
		snprintf(out->value, sizeof(out->value), "%ld handshakes past their deadline",
			 timeouts);
		const char *ex = json_string_value(json_object_get(examples, "timeout"));
		snprintf(out->evidence, sizeof(out->evidence), "client: %s", ex ? ex : "timeout");
		return;
	}
	out->what = EXH_UNKNOWN;
	json_object_foreach(examples, k, v)
	{
		snprintf(out->evidence, sizeof(out->evidence), "client: %s: %s", k,
			 json_string_value(v) ? json_string_value(v) : "");
		break;
	}
}

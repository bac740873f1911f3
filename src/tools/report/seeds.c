/* SPDX-License-Identifier: BSD-2-Clause */
/* seeds.h: the seed prototype's figures from their data file. */
#include "seeds.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the file is: the environment's, the installed one, the source's. */
static void find(char *out, size_t len)
{
	const char *env = getenv("QPGATE_DATADIR");
	if (env && *env) {
		snprintf(out, len, "%s/seed-runs.json", env);
		return;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		snprintf(out, len, "%s/../share/qpgate/seed-runs.json", dirname(exe));
		if (access(out, R_OK) == 0)
			return;
	}
	snprintf(out, len, "%s/seed-runs.json", QPG_SOURCE_DATADIR);
}

int seed_runs_load(struct seed_runs *s, const char *path, char *err, size_t err_len)
{
	char where[PATH_MAX + 32];
	if (path)
		snprintf(where, sizeof(where), "%s", path);
	else
		find(where, sizeof(where));
	json_error_t je;
	json_t *root = json_load_file(where, 0, &je);
	if (!root) {
		snprintf(err, err_len, "cannot read the seed figures in %s: %s (set QPGATE_DATADIR)",
			 where, je.text);
		return -ENOENT;
	}
	memset(s, 0, sizeof(*s));
	const char *source = NULL, *res = NULL;
	json_t *runs = NULL;
	int rc = json_unpack_ex(root, &je, 0, "{s:s, s:s, s:i, s:i, s:o}", "source", &source,
				"resources_per_client", &res, "largest_at_100", &s->largest_at_100,
				"practical_limit", &s->practical_limit, "runs", &runs);
	if (rc == 0 && (!json_is_array(runs) || json_array_size(runs) == 0 ||
			json_array_size(runs) > SEED_RUNS_MAX)) {
		snprintf(je.text, sizeof(je.text), "'runs' is not a list of 1 to %d runs",
			 SEED_RUNS_MAX);
		rc = -1;
	}
	size_t i;
	json_t *r;
	json_array_foreach(rc == 0 ? runs : NULL, i, r)
	{
		int c = 0, k = 0;
		if (json_unpack_ex(r, &je, 0, "{s:i, s:i}", "clients", &c, "connected", &k) ||
		    c <= 0 || k < 0 || k > c) {
			snprintf(je.text, sizeof(je.text), "run %zu is not {clients, connected} with "
					 "0 <= connected <= clients", i + 1);
			rc = -1;
			break;
		}
		s->run[s->n].clients = c;
		s->run[s->n].connected = k;
		s->n++;
	}
	if (rc == 0) {
		snprintf(s->source, sizeof(s->source), "%s", source);
		snprintf(s->resources, sizeof(s->resources), "%s", res);
	} else {
		snprintf(err, err_len, "the seed figures in %s: %s", where, je.text);
	}
	json_decref(root);
	return rc ? -EINVAL : 0;
}

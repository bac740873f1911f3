/* SPDX-License-Identifier: BSD-2-Clause */
#include "jsondoc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qpgate/version.h"

json_t *qpg_json_doc(const char *tool, json_t *parameters, json_t *results)
{
	if (!json_is_object(parameters) || !json_is_object(results)) {
		json_decref(parameters);
		json_decref(results);
		return NULL;
	}
	time_t now = time(NULL);
	char date[32];
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	return json_pack("{s:i, s:s, s:s, s:s, s:o, s:o}", "schema_version",
			 QPG_JSON_SCHEMA_VERSION, "tool", tool, "version", QPG_VERSION, "date",
			 date, "parameters", parameters, "results", results);
}

static int fail(char *why, size_t len, const char *path, const char *what)
{
	snprintf(why, len, "%s: %s", path[0] ? path : "(top)", what);
	return -EINVAL;
}

/* A string that is all number ("12", "0.5", "1e3"): a number kept as text. */
static bool looks_numeric(const char *s)
{
	if (!*s)
		return false;
	char *end;
	strtod(s, &end);
	return *end == '\0';
}

static int check_values(const json_t *v, const char *path, char *why, size_t len)
{
	char sub[256];
	if (json_is_string(v))
		return looks_numeric(json_string_value(v))
			   ? fail(why, len, path, "a number written as a string")
			   : 0;
	if (json_is_object(v)) {
		const char *k;
		const json_t *x;
		json_object_foreach((json_t *)v, k, x)
		{
			snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", k);
			int rc = check_values(x, sub, why, len);
			if (rc)
				return rc;
		}
	}
	if (json_is_array(v)) {
		size_t i;
		const json_t *x;
		json_array_foreach((json_t *)v, i, x)
		{
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			int rc = check_values(x, sub, why, len);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int qpg_json_check(const json_t *doc, char *why, size_t why_len)
{
	static const char *const keys[] = {"schema_version", "tool",	   "version",
					   "date",	     "parameters", "results"};
	if (!json_is_object(doc))
		return fail(why, why_len, "", "not a JSON object");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!json_object_get(doc, keys[i]))
			return fail(why, why_len, keys[i], "missing");
	if (json_object_size(doc) != sizeof(keys) / sizeof(keys[0]))
		return fail(why, why_len, "",
			    "a key besides schema_version, tool, version, date, "
			    "parameters and results");
	const json_t *sv = json_object_get(doc, "schema_version");
	if (!json_is_integer(sv) || json_integer_value(sv) != QPG_JSON_SCHEMA_VERSION)
		return fail(why, why_len, "schema_version", "not the integer 1");
	const json_t *tool = json_object_get(doc, "tool");
	if (!json_is_string(tool) || !json_string_length(tool))
		return fail(why, why_len, "tool", "not a name");
	unsigned a, b, c;
	char tail;
	const json_t *ver = json_object_get(doc, "version");
	if (!json_is_string(ver) ||
	    sscanf(json_string_value(ver), "%u.%u.%u%c", &a, &b, &c, &tail) != 3)
		return fail(why, why_len, "version", "not MAJOR.MINOR.PATCH");
	const json_t *date = json_object_get(doc, "date");
	struct tm tm;
	const char *end = json_is_string(date)
			      ? strptime(json_string_value(date), "%Y-%m-%dT%H:%M:%SZ", &tm)
			      : NULL;
	if (!end || *end)
		return fail(why, why_len, "date", "not UTC ISO 8601 (2026-11-23T15:50:00Z)");
	if (!json_is_object(json_object_get(doc, "parameters")))
		return fail(why, why_len, "parameters", "not an object");
	if (!json_is_object(json_object_get(doc, "results")))
		return fail(why, why_len, "results", "not an object");
	return check_values(doc, "", why, why_len);
}

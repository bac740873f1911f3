/* SPDX-License-Identifier: BSD-2-Clause */
/* json_check FILE...: each file has the one JSON shape of qpgate's tools
 * (src/tools/cli/jsondoc.h, docs/json.md). Prints why not; exit 1 if any. */
#include <stdio.h>

#include "jsondoc.h"

int main(int argc, char **argv)
{
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		json_error_t e;
		json_t *doc = json_load_file(argv[i], 0, &e);
		char why[512];
		if (!doc) {
			printf("%s: not JSON: %s (line %d)\n", argv[i], e.text, e.line);
			bad = 1;
		} else if (qpg_json_check(doc, why, sizeof(why))) {
			printf("%s: %s\n", argv[i], why);
			bad = 1;
		} else {
			printf("%s: schema %d ok\n", argv[i], QPG_JSON_SCHEMA_VERSION);
		}
		json_decref(doc);
	}
	return argc < 2 ? 2 : bad;
}

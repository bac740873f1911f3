/* SPDX-License-Identifier: BSD-2-Clause */
/* The one JSON shape (docs/json.md): what qpg_json_doc makes passes
 * qpg_json_check, and each way of breaking it is caught. */
#include <string.h>

#include "jsondoc.h"
#include "qpgate/version.h"
#include "unit.h"

static json_t *good(void)
{
	return qpg_json_doc("qpgate-perf", json_pack("{s:i, s:s}", "clients", 10, "host", "::1"),
			    json_pack("{s:{s:f, s:[i, i]}}", "data", "msgs_per_s", 1234.5, "runs", 1,
				      2));
}

static void expect_bad(json_t *doc, const char *path)
{
	char why[256] = "";
	assert_int_equal(qpg_json_check(doc, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, path));
	json_decref(doc);
}

static void made_documents_pass(void **state)
{
	json_t *doc = good();
	char why[256] = "";
	assert_int_equal(qpg_json_check(doc, why, sizeof(why)), 0);
	assert_int_equal(json_integer_value(json_object_get(doc, "schema_version")), 1);
	assert_string_equal(json_string_value(json_object_get(doc, "version")), QPG_VERSION);
	json_decref(doc);
}

static void each_break_is_caught(void **state)
{
	json_t *d = good();
	json_object_del(d, "results");
	expect_bad(d, "results: missing");
	d = good();
	json_object_set_new(d, "test_info", json_object());
	expect_bad(d, "a key besides");
	d = good();
	json_object_set_new(d, "schema_version", json_string("1"));
	expect_bad(d, "schema_version");
	d = good();
	json_object_set_new(d, "version", json_string("0.1"));
	expect_bad(d, "version");
	d = good();
	json_object_set_new(d, "date", json_string("yesterday"));
	expect_bad(d, "date");
	d = good();
	json_object_set_new(d, "results", json_array());
	expect_bad(d, "results: not an object");
	d = good();
	json_object_set_new(json_object_get(json_object_get(d, "results"), "data"), "p50_us",
			    json_string("12.5"));
	expect_bad(d, "results.data.p50_us: a number written as a string");
	d = good();
	json_array_append_new(json_object_get(json_object_get(json_object_get(d, "results"), "data"),
					      "runs"),
			      json_string("3"));
	expect_bad(d, "results.data.runs[2]");
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(made_documents_pass),
	      cmocka_unit_test(each_break_is_caught))

/* SPDX-License-Identifier: BSD-2-Clause */
/* The one shape of every JSON file qpgate's tools and benches write
 * (docs/json.md):
 *   {"schema_version": 1, "tool": "qpgate-perf", "version": "0.1.0",
 *    "date": "2026-11-23T15:50:00Z", "parameters": {...}, "results": {...}}
 * Numbers are JSON numbers, never strings. */
#ifndef QPG_JSONDOC_H
#define QPG_JSONDOC_H

#include <jansson.h>
#include <stddef.h>

#define QPG_JSON_SCHEMA_VERSION 1

/* A document for TOOL, dated now; takes PARAMETERS and RESULTS (objects).
 * NULL if either is NULL or out of memory. */
json_t *qpg_json_doc(const char *tool, json_t *parameters, json_t *results);
/* 0 if DOC has the shape, else -EINVAL and the first problem (with its
 * path, e.g. "results.data.msgs_per_s") in WHY. */
int qpg_json_check(const json_t *doc, char *why, size_t why_len);

#endif

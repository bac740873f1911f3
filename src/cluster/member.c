/* SPDX-License-Identifier: BSD-2-Clause */
/* A member's entry in etcd, as JSON (docs/protocol.md, "Cluster
 * membership"). Whatever etcd holds is input from outside: every field is
 * checked for its type and range before a view takes the entry. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qpgate/cluster.h"

static const char *const state_names[] = {"warming", "active", "draining"};

const char *qpg_member_state_name(enum qpg_member_state s)
{
	return (unsigned)s < 3 ? state_names[s] : "?";
}

static bool host_ok(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > QPG_CLUSTER_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == ':' || c == '_'))
			return false;
	}
	return true;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static bool unhex(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		char b[3] = {s[2 * i], s[2 * i + 1], 0};
		char *end;
		v = (unsigned)strtoul(b, &end, 16);
		if (*end || !((b[0] >= '0' && b[0] <= '9') || (b[0] >= 'a' && b[0] <= 'f')) ||
		    !((b[1] >= '0' && b[1] <= '9') || (b[1] >= 'a' && b[1] <= 'f')))
			return false;
		out[i] = (uint8_t)v;
	}
	return true;
}

static bool valid(const struct qpg_cluster_member *m)
{
	return qpg_cluster_name_ok(m->id) && host_ok(m->host) && host_ok(m->tls_name) &&
	       m->port != 0 && (unsigned)m->state <= QPG_MEMBER_DRAINING && m->weight >= 1 &&
	       m->weight <= QPG_CLUSTER_WEIGHT_MAX;
}

int qpg_cluster_member_to_json(const struct qpg_cluster_member *m, char *buf, size_t len)
{
	if (!valid(m))
		return -EINVAL;
	char spki[65], inc[17];
	hex(m->spki_sha256, 32, spki);
	snprintf(inc, sizeof(inc), "%016" PRIx64, m->incarnation);
	json_t *j = json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:s}", "v",
			      1, "id", m->id, "host", m->host, "port", (json_int_t)m->port,
			      "transport", m->tcp ? "tcp" : "rdma", "tls_name", m->tls_name,
			      "incarnation", inc, "state", qpg_member_state_name(m->state),
			      "weight", (json_int_t)m->weight, "clients", (json_int_t)m->clients,
			      "max_clients", (json_int_t)m->max_clients, "spki_sha256", spki);
	if (!j)
		return -ENOMEM;
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	int rc = n < len && n <= QPG_CLUSTER_ENTRY_MAX ? (int)n : -ENOSPC;
	if (rc > 0)
		memcpy(buf, s, n + 1);
	free(s);
	return rc;
}

#define BAD(...)                                                                                   \
	do {                                                                                       \
		snprintf(why, why_len, __VA_ARGS__);                                               \
		goto bad;                                                                          \
	} while (0)

static const char *str_field(json_t *j, const char *name, size_t max)
{
	const char *s = json_string_value(json_object_get(j, name));
	return s && strlen(s) <= max ? s : NULL;
}

static bool u32_field(json_t *j, const char *name, uint64_t lo, uint64_t hi, uint32_t *out)
{
	json_t *v = json_object_get(j, name);
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
	    json_integer_value(v) > (json_int_t)hi)
		return false;
	*out = (uint32_t)json_integer_value(v);
	return true;
}

int qpg_cluster_member_from_json(struct qpg_cluster_member *m, const char *json, size_t len,
				 char *why, size_t why_len)
{
	memset(m, 0, sizeof(*m));
	json_t *j = NULL;
	if (len == 0 || len > QPG_CLUSTER_ENTRY_MAX)
		BAD("entry of %zu bytes (at most %d)", len, QPG_CLUSTER_ENTRY_MAX);
	json_error_t je;
	j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j))
		BAD("not a JSON object: %s", j ? "another type" : je.text);
	json_t *v = json_object_get(j, "v");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		BAD("entry version is not 1");
	const char *s;
	if (!(s = str_field(j, "id", QPG_CLUSTER_ID_MAX)) || !qpg_cluster_name_ok(s))
		BAD("bad or missing id");
	strcpy(m->id, s);
	if (!(s = str_field(j, "host", QPG_CLUSTER_HOST_MAX)) || !host_ok(s))
		BAD("bad or missing host");
	strcpy(m->host, s);
	if (!(s = str_field(j, "tls_name", QPG_CLUSTER_HOST_MAX)) || !host_ok(s))
		BAD("bad or missing tls_name");
	strcpy(m->tls_name, s);
	uint32_t port;
	if (!u32_field(j, "port", 1, 65535, &port))
		BAD("bad or missing port");
	m->port = (uint16_t)port;
	if (!(s = str_field(j, "transport", 8)) || (strcmp(s, "tcp") && strcmp(s, "rdma")))
		BAD("transport is not 'rdma' or 'tcp'");
	m->tcp = strcmp(s, "tcp") == 0;
	if (!(s = str_field(j, "incarnation", 16)) || strlen(s) != 16)
		BAD("bad or missing incarnation");
	char *end;
	m->incarnation = strtoull(s, &end, 16);
	if (*end)
		BAD("bad incarnation");
	if (!(s = str_field(j, "state", 16)))
		BAD("missing state");
	unsigned st;
	for (st = 0; st < 3 && strcmp(s, state_names[st]); st++)
		;
	if (st == 3)
		BAD("state '%s' is not warming, active or draining", s);
	m->state = (enum qpg_member_state)st;
	if (!u32_field(j, "weight", 1, QPG_CLUSTER_WEIGHT_MAX, &m->weight))
		BAD("weight is not 1 to %d", QPG_CLUSTER_WEIGHT_MAX);
	if (!u32_field(j, "clients", 0, UINT32_MAX, &m->clients) ||
	    !u32_field(j, "max_clients", 0, UINT32_MAX, &m->max_clients))
		BAD("bad or missing load");
	if (!(s = str_field(j, "spki_sha256", 64)) || !unhex(s, m->spki_sha256, 32))
		BAD("spki_sha256 is not 64 lower-case hex digits");
	json_decref(j);
	return 0;
bad:
	json_decref(j);
	return -EINVAL;
}

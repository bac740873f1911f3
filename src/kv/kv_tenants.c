/* SPDX-License-Identifier: BSD-2-Clause */
/* The tenants file and the admission of each session by its certificate.
 *
 *	{"default": "shared",
 *	 "tenants": [
 *	   {"name": "llama-8b", "identities": ["spiffe://lab/llama-8b"],
 *	    "quota": "2G", "max_value": "64M", "max_keys": 100000},
 *	   {"name": "shared"}]}
 *
 * Sizes are a number of bytes, or a string with K, M, G or T (powers of
 * 1024). Anything the file does not define is an error, so a typo never
 * silently lifts a limit. */
#include "kv_tenants.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_service.h"
#include "kv_store.h"
#include "qpgate/kv.h"
#include "qpgate/kv_server.h"

#define NAME_MAX_LEN 64 /* a listed tenant's name: a metrics label */

/* What one reading of the file says, before it is applied. */
struct parsed {
	struct qpg__kv_ident *ids;
	size_t nids;
	struct tenant_def {
		const char *name;
		size_t quota, max_keys;
		uint32_t max_value;
	} * defs;
	size_t ndefs;
	const char *fallback;
	json_t *root; /* owns the strings */
};

static void parsed_free(struct parsed *p)
{
	free(p->ids);
	free(p->defs);
	json_decref(p->root);
}

static bool name_ok(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > NAME_MAX_LEN)
		return false;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("._:@/-", *c)))
			return false;
	return true;
}

/* A size: a whole number of bytes, or a string like "64M". */
static bool size_of(const json_t *v, uint64_t max, uint64_t *out)
{
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		if (n <= 0 || (uint64_t)n > max)
			return false;
		*out = (uint64_t)n;
		return true;
	}
	const char *s = json_string_value(v);
	if (!s || *s < '0' || *s > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	static const char units[] = "KMGT";
	const char *u = *end ? strchr(units, *end) : NULL;
	if (errno || n == 0 || (*end && (!u || end[1])))
		return false;
	unsigned shift = u ? 10u * (unsigned)(u - units + 1) : 0;
	if (n > max >> shift)
		return false;
	*out = (uint64_t)n << shift;
	return true;
}

static int by_identity(const void *a, const void *b)
{
	return strcmp(((const struct qpg__kv_ident *)a)->identity,
		      ((const struct qpg__kv_ident *)b)->identity);
}

#define fail(...)                                                                                  \
	do {                                                                                       \
		snprintf(err, err_len, __VA_ARGS__);                                               \
		return -EINVAL;                                                                    \
	} while (0)

/* One entry of "tenants", as definition I; its identities appended. */
static int parse_tenant(struct parsed *p, size_t i, json_t *t, char *err, size_t err_len)
{
	struct tenant_def *d = &p->defs[i];
	const char *key;
	json_t *v;
	if (!json_is_object(t))
		fail("tenants[%zu] is not an object", i);
	json_object_foreach(t, key, v)
	{
		uint64_t n;
		if (!strcmp(key, "name")) {
			d->name = json_string_value(v);
			if (!d->name || !name_ok(d->name))
				fail("tenants[%zu].name: 1 to %d letters, digits or ._:@/-", i,
				     NAME_MAX_LEN);
		} else if (!strcmp(key, "quota")) {
			if (!size_of(v, QPG__KVS_MAX_CAPACITY, &n))
				fail("tenants[%zu].quota: a size from 1 byte to 1T, like \"2G\"",
				     i);
			d->quota = n;
		} else if (!strcmp(key, "max_value")) {
			if (!size_of(v, QPG_KV_MAX_VALUE, &n))
				fail("tenants[%zu].max_value: a size up to 256M", i);
			d->max_value = (uint32_t)n;
		} else if (!strcmp(key, "max_keys")) {
			if (!json_is_integer(v) || json_integer_value(v) <= 0)
				fail("tenants[%zu].max_keys: a whole number above 0", i);
			d->max_keys = (size_t)json_integer_value(v);
		} else if (!strcmp(key, "identities")) {
			if (!json_is_array(v))
				fail("tenants[%zu].identities: an array of strings", i);
			size_t j;
			json_t *id;
			json_array_foreach(v, j, id)
			{
				const char *s = json_string_value(id);
				size_t len = s ? strlen(s) : 0;
				if (!len || len >= QPG__KV_TENANT_NAME)
					fail("tenants[%zu].identities[%zu]: a string of 1 to %d "
					     "bytes",
					     i, j, QPG__KV_TENANT_NAME - 1);
				p->ids[p->nids].identity = (char *)s;
				p->ids[p->nids++].def = i;
			}
		} else {
			fail("tenants[%zu]: unknown field \"%s\" (name, identities, quota, "
			     "max_value, max_keys)",
			     i, key);
		}
	}
	if (!d->name)
		fail("tenants[%zu] has no name", i);
	for (size_t j = 0; j < i; j++)
		if (!strcmp(p->defs[j].name, d->name))
			fail("tenant \"%s\" is defined twice", d->name);
	return 0;
}

static size_t count_ids(json_t *tenants)
{
	size_t n = 0, i;
	json_t *t;
	json_array_foreach(tenants, i, t) n += json_array_size(json_object_get(t, "identities"));
	return n;
}

static int parse(const char *path, struct parsed *p, char *err, size_t err_len)
{
	memset(p, 0, sizeof(*p));
	json_error_t je;
	p->root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!p->root)
		fail("%s:%d: %s", path, je.line, je.text);
	json_t *tenants = json_object_get(p->root, "tenants");
	const char *key;
	json_t *v;
	json_object_foreach(p->root, key, v) if (strcmp(key, "tenants") && strcmp(key, "default"))
	    fail("unknown field \"%s\" (tenants, default)", key);
	size_t nt = json_array_size(tenants);
	if (!json_is_array(tenants) || nt == 0 || nt >= QPG__KV_TENANTS_MAX)
		fail("\"tenants\" must be an array of 1 to %d tenants", QPG__KV_TENANTS_MAX - 1);
	p->defs = calloc(nt, sizeof(*p->defs));
	p->ids = calloc(count_ids(tenants) + 1, sizeof(*p->ids));
	if (!p->defs || !p->ids)
		fail("out of memory");
	p->ndefs = nt;
	size_t i;
	json_t *t;
	json_array_foreach(tenants, i, t)
	{
		int rc = parse_tenant(p, i, t, err, err_len);
		if (rc)
			return rc;
	}
	qsort(p->ids, p->nids, sizeof(*p->ids), by_identity);
	for (i = 1; i < p->nids; i++)
		if (!strcmp(p->ids[i - 1].identity, p->ids[i].identity))
			fail("identity \"%s\" is given to two tenants", p->ids[i].identity);
	json_t *fb = json_object_get(p->root, "default");
	if (fb) {
		p->fallback = json_string_value(fb);
		bool known = false;
		for (i = 0; p->fallback && i < nt; i++)
			known |= !strcmp(p->defs[i].name, p->fallback);
		if (!known)
			fail("\"default\" must name one of the tenants");
	}
	return 0;
}

/* Make the store's tenants match P and swap P's identities in. */
static int apply(struct qpg__kv_tenancy *tn, struct qpg__kv_store *s, struct parsed *p, char *err,
		 size_t err_len)
{
	struct qpg__kv_tenant **made = calloc(p->ndefs, sizeof(*made));
	if (!made)
		fail("out of memory");
	for (size_t i = 0; i < p->ndefs; i++)
		if (!(made[i] = qpg__kv_tenant_get(s, p->defs[i].name))) {
			free(made);
			fail("the store holds %d tenants, its most", QPG__KV_TENANTS_MAX);
		}
	/* Identities point at their tenants, and own copies of their names. */
	struct qpg__kv_ident *ids = calloc(p->nids + 1, sizeof(*ids));
	for (size_t i = 0; ids && i < p->nids; i++) {
		ids[i].tenant = made[p->ids[i].def];
		if (!(ids[i].identity = strdup(p->ids[i].identity))) {
			while (i--)
				free(ids[i].identity);
			free(ids);
			ids = NULL;
		}
	}
	if (!ids) {
		free(made);
		fail("out of memory");
	}
	/* A listed tenant the file dropped keeps its values but no room: a
	 * quota of one byte refuses its PUTs and makes it the first victim. */
	for (unsigned i = 1; i < QPG__KV_TENANTS_MAX; i++) {
		struct qpg__kv_tenant *t = qpg__kv_tenant_at(s, i);
		if (!t)
			break;
		bool kept = false;
		for (size_t j = 0; j < p->ndefs && !kept; j++)
			kept = made[j] == t;
		if (t->listed && !kept)
			qpg__kv_tenant_limits(s, t, 1, 0, 0, false);
	}
	struct qpg__kv_tenant *fallback = NULL;
	for (size_t i = 0; i < p->ndefs; i++) {
		qpg__kv_tenant_limits(s, made[i], p->defs[i].quota, p->defs[i].max_keys,
				      p->defs[i].max_value, true);
		if (p->fallback && !strcmp(p->fallback, p->defs[i].name))
			fallback = made[i];
	}
	free(made);
	pthread_mutex_lock(&tn->lock);
	struct qpg__kv_ident *old = tn->ids;
	size_t nold = tn->nids;
	tn->ids = ids;
	tn->nids = p->nids;
	tn->fallback = fallback;
	pthread_mutex_unlock(&tn->lock);
	for (size_t i = 0; i < nold; i++)
		free(old[i].identity);
	free(old);
	return 0;
}

int qpg__kv_tenancy_init(struct qpg__kv_tenancy *tn, struct qpg__kv_store *s, const char *path,
			 uint8_t from, char *err, size_t err_len)
{
	memset(tn, 0, sizeof(*tn));
	if (from > QPG_KV_TENANT_SAN_EMAIL) {
		snprintf(err, err_len, "unknown tenant identity kind %u", from);
		return -EINVAL;
	}
	pthread_mutex_init(&tn->lock, NULL);
	tn->from = from;
	if (!path)
		return 0;
	if (!(tn->path = strdup(path))) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	return qpg__kv_tenancy_reload(tn, s, err, err_len);
}

int qpg__kv_tenancy_reload(struct qpg__kv_tenancy *tn, struct qpg__kv_store *s, char *err,
			   size_t err_len)
{
	if (!tn->path) {
		snprintf(err, err_len, "no tenants file (--kv-tenants) to read again");
		return -ENOENT;
	}
	struct parsed p;
	int rc = parse(tn->path, &p, err, err_len);
	if (rc == 0)
		rc = apply(tn, s, &p, err, err_len);
	parsed_free(&p);
	return rc;
}

void qpg__kv_tenancy_fini(struct qpg__kv_tenancy *tn)
{
	for (size_t i = 0; i < tn->nids; i++)
		free(tn->ids[i].identity);
	free(tn->ids);
	free(tn->path);
	pthread_mutex_destroy(&tn->lock);
	memset(tn, 0, sizeof(*tn));
}

static const char *kind_name(uint8_t from)
{
	static const char *const names[] = {"URI subjectAltName or CN", "URI subjectAltName",
					    "subject CN", "DNS subjectAltName",
					    "email subjectAltName"};
	return names[from];
}

/* The peer's identity of the configured kind (auto: a URI SAN, else the
 * CN): its length, or a negative errno from qpg_conn_peer_name. */
static int identity_of(struct qpg_conn *c, uint8_t from, char *out, size_t cap)
{
	static const enum qpg_peer_name kinds[] = {QPG_PEER_SAN_URI, QPG_PEER_SAN_URI, QPG_PEER_CN,
						   QPG_PEER_SAN_DNS, QPG_PEER_SAN_EMAIL};
	int rc = qpg_conn_peer_name(c, kinds[from], out, cap);
	if (rc == -ENOENT && from == QPG_KV_TENANT_AUTO)
		rc = qpg_conn_peer_name(c, QPG_PEER_CN, out, cap);
	return rc;
}

int qpg__kv_admit(struct qpg_conn *c, char *why, size_t why_len)
{
	struct qpg_kv_service *k = qpg_conn_service_ctx(c);
	struct qpg__kv_tenancy *tn = &k->tenancy;
	char id[QPG__KV_TENANT_NAME];
	int rc = identity_of(c, tn->from, id, sizeof(id));
	if (rc == -ENOTCONN && !tn->path)
		return 0; /* no client certificates here: the default tenant, shared */
	struct qpg__kv_tenant *t = NULL;
	pthread_mutex_lock(&tn->lock);
	if (rc >= 0 && tn->path) {
		struct qpg__kv_ident key = {.identity = id};
		const struct qpg__kv_ident *hit =
		    bsearch(&key, tn->ids, tn->nids, sizeof(*tn->ids), by_identity);
		t = hit ? hit->tenant : NULL;
	} else if (rc >= 0) {
		t = qpg__kv_tenant_get(&k->store, id); /* each identity a tenant of its own */
	}
	if (!t && tn->path && rc != -ENOTCONN)
		t = tn->fallback;
	pthread_mutex_unlock(&tn->lock);
	if (t) {
		qpg_conn_set_principal(c, t);
		return 0;
	}
	if (rc == -ENOTCONN)
		snprintf(why, why_len,
			 "this server gives each client certificate a tenant: "
			 "connect with --cert and --key");
	else if (rc == -ENOENT)
		snprintf(why, why_len, "the client certificate has no %s, which names its tenant",
			 kind_name(tn->from));
	else if (rc < 0)
		snprintf(why, why_len,
			 "the client certificate's %s is not a printable name of at most %d bytes",
			 kind_name(tn->from), QPG__KV_TENANT_NAME - 1);
	else if (tn->path)
		snprintf(why, why_len,
			 "identity \"%.100s\" has no tenant here: ask the operator "
			 "to add it to the tenants file",
			 id);
	else
		snprintf(why, why_len,
			 "the server holds %d tenants, its most: name them in a "
			 "tenants file (--kv-tenants)",
			 QPG__KV_TENANTS_MAX);
	return -EACCES;
}

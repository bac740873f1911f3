/* SPDX-License-Identifier: BSD-2-Clause */
/* etcd v3's JSON gateway over libcurl, parsed with jansson. */
#include "etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct body {
	char *p;
	size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;
	if (b->n + n > (4u << 20)) /* a member list, never more than this */
		return 0;
	char *q = realloc(b->p, b->n + n + 1);
	if (!q)
		return 0;
	memcpy(q + b->n, data, n);
	b->p = q;
	b->n += n;
	b->p[b->n] = 0;
	return n;
}

bool qpg_cluster_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > QPG_CLUSTER_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* The user's password, from its file: the first line, at most 255 bytes. */
static int read_password(struct qpg__etcd *e, const struct qpg_cluster_opts *o, char *err,
			 size_t len)
{
	FILE *f = fopen(o->password_file, "r");
	char pw[257] = "";
	if (!f) {
		snprintf(err, len, "cannot read the etcd password file %s: %s", o->password_file,
			 strerror(errno));
		return -1;
	}
	bool got = fgets(pw, sizeof(pw), f) != NULL;
	fclose(f);
	pw[strcspn(pw, "\r\n")] = 0;
	if (!got || !pw[0] || strlen(pw) > 255) {
		snprintf(err, len,
			 "the etcd password file %s holds no password on its first line "
			 "(or one over 255 bytes)",
			 o->password_file);
		OPENSSL_cleanse(pw, sizeof(pw));
		return -1;
	}
	e->user = strdup(o->user);
	e->password = strdup(pw);
	OPENSSL_cleanse(pw, sizeof(pw));
	return e->user && e->password ? 0 : -1;
}

int qpg__etcd_init(struct qpg__etcd *e, const struct qpg_cluster_opts *o, char *err, size_t len)
{
	memset(e, 0, sizeof(*e));
	static int global_done; /* curl_global_init is not thread-safe: first use is on main */
	if (!global_done) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		global_done = 1;
	}
	if (!o->endpoints || !*o->endpoints) {
		snprintf(err, len, "no etcd endpoint (--cluster URL[,URL...])");
		return -EINVAL;
	}
	if (!qpg_cluster_name_ok(o->name)) {
		snprintf(
		    err, len,
		    "the cluster name '%s' is not 1 to %d of A-Z a-z 0-9 . _ - (--cluster-name)",
		    o->name ? o->name : "", QPG_CLUSTER_NAME_MAX);
		return -EINVAL;
	}
	snprintf(e->prefix, sizeof(e->prefix), "/qpgate/%s/members/", o->name);
	char *list = strdup(o->endpoints), *save = NULL;
	if (!list)
		return -ENOMEM;
	bool plain = false;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool http = strncmp(t, "http://", 7) == 0, https = strncmp(t, "https://", 8) == 0;
		if ((!http && !https) || strlen(t) < 10 || strlen(t) > 255) {
			snprintf(err, len, "etcd endpoint '%s' is not an http:// or https:// URL",
				 t);
			goto fail;
		}
		if (e->n == QPG__ETCD_MAX_ENDPOINTS) {
			snprintf(err, len, "at most %d etcd endpoints", QPG__ETCD_MAX_ENDPOINTS);
			goto fail;
		}
		plain |= http;
		size_t tl = strlen(t);
		while (tl && t[tl - 1] == '/')
			t[--tl] = 0;
		e->endpoints[e->n++] = strdup(t);
	}
	free(list);
	list = NULL;
	if (!e->n) {
		snprintf(err, len, "no etcd endpoint in '%s'", o->endpoints);
		goto fail;
	}
	if (plain && !o->quiet)
		fprintf(stderr, "qpgate: warning: etcd over plain http:// (no TLS): for a lab on "
				"loopback only; use https:// with --cluster-ca/--cluster-cert/"
				"--cluster-key elsewhere\n");
	if (!o->user != !o->password_file) {
		snprintf(err, len,
			 "an etcd user needs both --cluster-user and --cluster-password-file");
		goto fail;
	}
	if (o->user && read_password(e, o, err, len))
		goto fail;
	e->ca = o->ca ? strdup(o->ca) : NULL;
	e->cert = o->cert ? strdup(o->cert) : NULL;
	e->key = o->key ? strdup(o->key) : NULL;
	e->timeout_ms = o->timeout_ms ? o->timeout_ms : 2000;
	e->curl = curl_easy_init();
	if (!e->curl) {
		snprintf(err, len, "cannot start libcurl");
		goto fail;
	}
	return 0;
fail:
	free(list);
	qpg__etcd_fini(e);
	return -EINVAL;
}

void qpg__etcd_fini(struct qpg__etcd *e)
{
	if (e->curl)
		curl_easy_cleanup(e->curl);
	for (unsigned i = 0; i < e->n; i++)
		free(e->endpoints[i]);
	free(e->ca);
	free(e->cert);
	free(e->key);
	free(e->user);
	if (e->password)
		OPENSSL_cleanse(e->password, strlen(e->password));
	free(e->password);
	free(e->token);
	memset(e, 0, sizeof(*e));
}

void *qpg__etcd_prepare(struct qpg__etcd *e, unsigned i, const char *path, const char *body,
			size_t (*write)(char *, size_t, size_t, void *), void *data,
			struct curl_slist **hdrs)
{
	CURL *c = e->curl;
	char url[512];
	snprintf(url, sizeof(url), "%s%s", e->endpoints[i], path);
	curl_easy_reset(c);
	*hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (e->token) {
		char h[600];
		snprintf(h, sizeof(h), "Authorization: %s", e->token);
		*hdrs = curl_slist_append(*hdrs, h);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, data);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e->ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, e->ca);
	if (e->cert)
		curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
	if (e->key)
		curl_easy_setopt(c, CURLOPT_SSLKEY, e->key);
	return c;
}

/* One POST to endpoint I. */
static int post(struct qpg__etcd *e, unsigned i, const char *path, const char *req, struct body *b,
		long *status, char *err, size_t len)
{
	struct curl_slist *h;
	CURL *c = qpg__etcd_prepare(e, i, path, req, on_body, b, &h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(e->timeout_ms / 2 + 1));
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		snprintf(err, len, "etcd at %s: %s", e->endpoints[i], curl_easy_strerror(rc));
		return -EHOSTUNREACH;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

/* TEXT to PATH on the endpoints in turn; *AUTH_FAILED when etcd said the
 * token is not (or no longer) good. */
static int call_text(struct qpg__etcd *e, const char *path, const char *text, json_t **resp,
		     bool *auth_failed, char *err, size_t len)
{
	*resp = NULL;
	*auth_failed = false;
	int rc = -EHOSTUNREACH;
	for (unsigned k = 0; k < e->n; k++) {
		unsigned i = (e->cur + k) % e->n;
		struct body b = {0};
		long status = 0;
		rc = post(e, i, path, text, &b, &status, err, len);
		if (rc) {
			free(b.p);
			continue;
		}
		e->cur = i;
		json_error_t je;
		json_t *j = b.p ? json_loadb(b.p, b.n, 0, &je) : NULL;
		if (status != 200 || !json_is_object(j)) {
			const char *msg = json_string_value(json_object_get(j, "message"));
			if (!msg)
				msg = json_string_value(json_object_get(j, "error"));
			snprintf(err, len, "etcd at %s%s: HTTP %ld%s%s", e->endpoints[i], path,
				 status, msg ? ": " : "", msg ? msg : "");
			*auth_failed = status == 401 || (msg && strstr(msg, "auth token"));
			json_decref(j);
			free(b.p);
			rc = -EPROTO;
			break;
		}
		free(b.p);
		*resp = j;
		rc = 0;
		break;
	}
	return rc;
}

int qpg__etcd_auth(struct qpg__etcd *e, char *err, size_t len)
{
	if (!e->user)
		return 0;
	free(e->token);
	e->token = NULL;
	json_t *req = json_pack("{s:s, s:s}", "name", e->user, "password", e->password);
	char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!text)
		return -ENOMEM;
	json_t *resp;
	bool af;
	int rc = call_text(e, "/v3/auth/authenticate", text, &resp, &af, err, len);
	OPENSSL_cleanse(text, strlen(text));
	free(text);
	if (rc) {
		if (rc == -EPROTO) {
			size_t n = strlen(err);
			snprintf(err + n, len - n, " (etcd user '%s': check its password file)",
				 e->user);
		}
		return rc;
	}
	const char *t = json_string_value(json_object_get(resp, "token"));
	e->token = t && strlen(t) < 512 ? strdup(t) : NULL;
	json_decref(resp);
	if (!e->token) {
		snprintf(err, len, "etcd gave user '%s' no token (is auth enabled?)", e->user);
		return -EPROTO;
	}
	return 0;
}

int qpg__etcd_call(struct qpg__etcd *e, const char *path, json_t *req, json_t **resp, char *err,
		   size_t len)
{
	*resp = NULL;
	char *text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!text)
		return -ENOMEM;
	bool auth_failed = false;
	int rc = e->user && !e->token ? qpg__etcd_auth(e, err, len) : 0;
	if (rc == 0)
		rc = call_text(e, path, text, resp, &auth_failed, err, len);
	/* A token etcd no longer knows (it expires when unused, and with a
	 * restart): a new one, and the call once more. */
	if (auth_failed && e->user && (rc = qpg__etcd_auth(e, err, len)) == 0)
		rc = call_text(e, path, text, resp, &auth_failed, err, len);
	free(text);
	return rc;
}

int64_t qpg__etcd_i64(const json_t *obj, const char *field, int64_t def)
{
	const json_t *v = json_object_get(obj, field);
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v)) {
		char *end;
		errno = 0;
		long long x = strtoll(json_string_value(v), &end, 10);
		if (!errno && *end == 0 && end != json_string_value(v))
			return x;
	}
	return def;
}

json_t *qpg__etcd_b64(const void *data, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (!out)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, data, (int)n);
	json_t *s = json_string(out);
	free(out);
	return s;
}

long qpg__etcd_unb64(const json_t *obj, const char *field, void *buf, size_t cap)
{
	const char *s = json_string_value(json_object_get(obj, field));
	if (!s)
		return 0; /* proto3 leaves an empty value out */
	size_t n = strlen(s);
	if (n % 4 || n / 4 * 3 > cap + 2)
		return -1;
	unsigned char *tmp = malloc(n / 4 * 3 + 1);
	if (!tmp)
		return -1;
	int got = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
	if (got < 0) {
		free(tmp);
		return -1;
	}
	/* EVP_DecodeBlock counts the padding as bytes. */
	for (size_t i = n; i > 0 && s[i - 1] == '='; i--)
		got--;
	if ((size_t)got > cap) {
		free(tmp);
		return -1;
	}
	memcpy(buf, tmp, (size_t)got);
	free(tmp);
	return got;
}

json_t *qpg__etcd_prefix_end(const char *key)
{
	size_t n = strlen(key);
	char end[256];
	if (n == 0 || n >= sizeof(end))
		return NULL;
	memcpy(end, key, n);
	end[n - 1]++;
	return qpg__etcd_b64(end, n);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* etcd v3 through its JSON gateway (etcd.c): one client per thread (a
 * libcurl handle is not shared), each call a POST of one JSON object to one
 * endpoint after another until one answers. Keys and values travel in
 * base64, int64 fields as strings (docs/cluster.md has the pitfalls). */
#ifndef QPG_CLUSTER_ETCD_H
#define QPG_CLUSTER_ETCD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qpgate/cluster.h"

#define QPG__ETCD_MAX_ENDPOINTS 8

struct qpg__etcd {
	void *curl; /* CURL * */
	char *endpoints[QPG__ETCD_MAX_ENDPOINTS];
	unsigned n, cur; /* endpoints; the one that answered last */
	char *ca, *cert, *key;
	char *user, *password; /* etcd's token auth (NULL: none) */
	char *token;	       /* the last token etcd gave USER (NULL: none yet) */
	unsigned timeout_ms;
	char prefix[96]; /* /qpgate/NAME/members/ */
};

/* Parse O (endpoints, name, TLS files). 0, or -EINVAL with the reason. */
int qpg__etcd_init(struct qpg__etcd *e, const struct qpg_cluster_opts *o, char *err, size_t len);
void qpg__etcd_fini(struct qpg__etcd *e);

/* POST REQ (stolen) to PATH ("/v3/kv/range"); *RESP gets the answer. 0,
 * -EHOSTUNREACH (no endpoint answered), -EPROTO (an answer that is not a
 * JSON object, or an HTTP error status; ERR says which). */
int qpg__etcd_call(struct qpg__etcd *e, const char *path, json_t *req, json_t **resp, char *err,
		   size_t len);

/* E's handle, set up to POST BODY to endpoint I's PATH with the JSON
 * header and the TLS files, the answer going to WRITE(DATA): the caller
 * adds its timeouts, performs, then frees *HDRS. Returns the CURL handle. */
struct curl_slist;
void *qpg__etcd_prepare(struct qpg__etcd *e, unsigned i, const char *path, const char *body,
			size_t (*write)(char *, size_t, size_t, void *), void *data,
			struct curl_slist **hdrs);

/* With a user: ask etcd for a token now (the watch does before each
 * stream). 0 without a user. */
int qpg__etcd_auth(struct qpg__etcd *e, char *err, size_t len);

/* An int64 field that etcd sends as a string (or a number); DEF if absent. */
int64_t qpg__etcd_i64(const json_t *obj, const char *field, int64_t def);
/* base64 of DATA as a new jansson string. */
json_t *qpg__etcd_b64(const void *data, size_t n);
/* Decode FIELD's base64 into BUF (at most CAP bytes): its length, or -1. */
long qpg__etcd_unb64(const json_t *obj, const char *field, void *buf, size_t cap);
/* The range_end that makes KEY a prefix (its last byte + 1). */
json_t *qpg__etcd_prefix_end(const char *key);

#endif

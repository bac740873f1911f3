/* SPDX-License-Identifier: BSD-2-Clause */
#include "qpgate/kv.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bytes.h"

int qpg_kv_encode_req(uint8_t *out, size_t cap, const struct qpg_kv_req *r)
{
	size_t ttl = r->flags & QPG_KV_F_TTL && r->op == QPG_KV_PUT ? QPG_KV_TTL_LEN : 0;
	if (cap < QPG_KV_REQ_HDR_LEN + (size_t)r->key_len + ttl)
		return -ENOSPC;
	out[0] = r->op;
	out[1] = r->flags;
	qpg__put16(out + 2, r->key_len);
	qpg__put32(out + 4, r->req_id);
	qpg__put32(out + 8, r->value_len);
	qpg__put32(out + 12, r->offset);
	qpg__put64(out + 16, r->view_rev);
	if (r->key_len) /* RELEASE has none (and a NULL key) */
		memcpy(out + QPG_KV_REQ_HDR_LEN, r->key, r->key_len);
	if (ttl)
		qpg__put32(out + QPG_KV_REQ_HDR_LEN + r->key_len, r->ttl_ms);
	return QPG_KV_REQ_HDR_LEN + r->key_len + (int)ttl;
}

int qpg_kv_encode_reply(uint8_t *out, size_t cap, const struct qpg_kv_reply *r)
{
	if (cap < QPG_KV_HDR_LEN)
		return -ENOSPC;
	out[0] = r->op;
	out[1] = r->status;
	out[2] = r->flags;
	out[3] = 0;
	qpg__put32(out + 4, r->req_id);
	qpg__put32(out + 8, r->value_len);
	qpg__put32(out + 12, r->offset);
	return QPG_KV_HDR_LEN;
}

static int bad(char *why, size_t why_len, int status, const char *text)
{
	snprintf(why, why_len, "%s", text);
	return status;
}

int qpg_kv_decode_req(const uint8_t *in, size_t len, struct qpg_kv_req *r, char *why,
		      size_t why_len)
{
	memset(r, 0, sizeof(*r));
	if (len < QPG_KV_REQ_HDR_LEN)
		return bad(why, why_len, QPG_KV_MALFORMED, "request shorter than its header");
	r->op = in[0];
	r->flags = in[1];
	r->key_len = qpg__get16(in + 2);
	r->req_id = qpg__get32(in + 4);
	r->value_len = qpg__get32(in + 8);
	r->offset = qpg__get32(in + 12);
	r->view_rev = qpg__get64(in + 16);
	if (r->view_rev > INT64_MAX)
		return bad(why, why_len, QPG_KV_MALFORMED, "view revision past etcd's range");
	if (r->op < QPG_KV_PUT || r->op > QPG_KV_OP_MAX)
		return bad(why, why_len, QPG_KV_MALFORMED, "unknown operation");
	uint8_t allowed = r->op == QPG_KV_GET
			      ? QPG_KV_F_ONE_SIDED | QPG_KV_F_GRANT_LARGE | QPG_KV_F_RELEASE
			  : r->op == QPG_KV_PUT && r->offset == 0 ? QPG_KV_F_TTL
								  : 0;
	if ((r->flags & ~allowed) ||
	    (r->flags & QPG_KV_F_ONE_SIDED && r->flags & QPG_KV_F_GRANT_LARGE))
		return bad(why, why_len, QPG_KV_MALFORMED, "reserved flags set");
	if (r->op == QPG_KV_RELEASE) {
		if (r->key_len || r->value_len || len != QPG_KV_REQ_HDR_LEN)
			return bad(why, why_len, QPG_KV_MALFORMED,
				   "RELEASE carries only a grant id");
		return 0;
	}
	if (r->op == QPG_KV_EXISTS) {
		/* No key of its own: the list is the rest, counted in value_len. */
		r->chunk = in + QPG_KV_REQ_HDR_LEN;
		r->chunk_len = (uint32_t)(len - QPG_KV_REQ_HDR_LEN);
		if (r->key_len || r->offset)
			return bad(why, why_len, QPG_KV_MALFORMED,
				   "EXISTS carries a key list, no key or offset");
		int n = qpg_kv_exists_count(r->chunk, r->chunk_len);
		if (n < 0 || (uint32_t)n != r->value_len)
			return bad(why, why_len, QPG_KV_MALFORMED,
				   "EXISTS key list malformed, or not value_len keys (1 to 256)");
		return 0;
	}
	if (r->key_len == 0)
		return bad(why, why_len, QPG_KV_MALFORMED, "empty key");
	if (r->key_len > QPG_KV_MAX_KEY)
		return bad(why, why_len, QPG_KV_KEY_TOO_LARGE, "key longer than 250 bytes");
	if (len < QPG_KV_REQ_HDR_LEN + (size_t)r->key_len)
		return bad(why, why_len, QPG_KV_MALFORMED, "key runs past the message");
	r->key = in + QPG_KV_REQ_HDR_LEN;
	size_t rest = len - QPG_KV_REQ_HDR_LEN - r->key_len;
	if (r->op != QPG_KV_PUT) {
		/* A GET's offset names the grant it releases, if it does; a STAT
		 * is a DEL's shape. */
		if (rest || r->value_len || (r->offset && !(r->flags & QPG_KV_F_RELEASE)))
			return bad(why, why_len, QPG_KV_MALFORMED,
				   "GET/DEL carry no value, length or offset");
		return 0;
	}
	/* A PUT chunk lies inside the value it belongs to, and every chunk
	 * but an empty value's carries bytes; a TTL leads the first. */
	r->chunk = in + QPG_KV_REQ_HDR_LEN + r->key_len;
	if (r->flags & QPG_KV_F_TTL) {
		if (rest < QPG_KV_TTL_LEN || qpg__get32(r->chunk) == 0)
			return bad(why, why_len, QPG_KV_MALFORMED, "PUT TTL missing or 0");
		r->ttl_ms = qpg__get32(r->chunk);
		r->chunk += QPG_KV_TTL_LEN;
		rest -= QPG_KV_TTL_LEN;
	}
	r->chunk_len = (uint32_t)rest;
	if (r->offset > r->value_len || rest > (size_t)(r->value_len - r->offset))
		return bad(why, why_len, QPG_KV_MALFORMED, "PUT chunk outside its value");
	if (rest == 0 && r->value_len != 0)
		return bad(why, why_len, QPG_KV_MALFORMED, "empty PUT chunk");
	return 0;
}

int qpg_kv_decode_reply(const uint8_t *in, size_t len, struct qpg_kv_reply *r)
{
	memset(r, 0, sizeof(*r));
	if (len < QPG_KV_HDR_LEN)
		return -EPROTO;
	r->op = in[0];
	r->status = in[1];
	r->flags = in[2];
	r->req_id = qpg__get32(in + 4);
	r->value_len = qpg__get32(in + 8);
	r->offset = qpg__get32(in + 12);
	r->chunk = in + QPG_KV_HDR_LEN;
	r->chunk_len = (uint32_t)(len - QPG_KV_HDR_LEN);
	/* op 0 only answers a request whose operation was unknown. */
	if ((r->flags & ~QPG_KV_R_GRANT) || in[3] != 0 || r->op > QPG_KV_OP_MAX ||
	    r->status > QPG_KV_STATUS_MAX || (r->op == 0 && r->status != QPG_KV_MALFORMED))
		return -EPROTO;
	if (r->op == QPG_KV_EXISTS && r->status == QPG_KV_OK) {
		/* The bitmap of value_len keys, nothing past the last; offset: the
		 * keys present from the first, which the bitmap must agree with. */
		uint32_t n = r->value_len;
		if (r->flags || n == 0 || n > QPG_KV_EXISTS_MAX || r->chunk_len != (n + 7) / 8 ||
		    ((n % 8) && (r->chunk[n / 8] >> (n % 8))))
			return -EPROTO;
		uint32_t prefix = 0;
		while (prefix < n && (r->chunk[prefix / 8] >> (prefix % 8) & 1))
			prefix++;
		return r->offset == prefix ? 0 : -EPROTO;
	}
	if (r->op == QPG_KV_STAT && r->status == QPG_KV_OK) { /* its record, whole */
		struct qpg_kv_tenant_stat st;
		return r->offset == 0 && r->chunk_len == r->value_len &&
			       qpg_kv_decode_stat(r->chunk, r->chunk_len, &st) == 0
			   ? 0
			   : -EPROTO;
	}
	if (r->flags & QPG_KV_R_GRANT) /* a successful one-sided GET, and only that */
		return r->op == QPG_KV_GET && r->status == QPG_KV_OK && r->offset == 0 &&
			       r->chunk_len == QPG_KV_GRANT_LEN
			   ? 0
			   : -EPROTO;
	if (r->status == QPG_KV_WRONG_OWNER) /* value_len:offset is a revision */
		return r->chunk_len == 0 ? 0 : -EPROTO;
	if (r->offset > r->value_len || r->chunk_len > r->value_len - r->offset)
		return -EPROTO;
	return 0;
}

int qpg_kv_encode_stat(uint8_t *out, size_t cap, const struct qpg_kv_tenant_stat *s)
{
	size_t n = strnlen(s->name, sizeof(s->name));
	if (n == 0 || n == sizeof(s->name))
		return -EINVAL;
	if (cap < QPG_KV_STAT_LEN + n)
		return -ENOSPC;
	const uint64_t v[] = {s->quota, s->used,   s->keys,	 s->max_keys,
			      s->hits,	s->misses, s->evictions, s->refused};
	for (unsigned i = 0; i < 8; i++)
		qpg__put64(out + 8 * i, v[i]);
	qpg__put32(out + 64, s->max_value);
	out[68] = s->listed ? 1 : 0;
	out[69] = (uint8_t)n;
	out[70] = out[71] = 0;
	memcpy(out + QPG_KV_STAT_LEN, s->name, n);
	return (int)(QPG_KV_STAT_LEN + n);
}

int qpg_kv_decode_stat(const uint8_t *in, size_t len, struct qpg_kv_tenant_stat *s)
{
	if (len < QPG_KV_STAT_LEN + 1 || in[68] > 1 || in[69] == 0 || in[70] || in[71] ||
	    len != QPG_KV_STAT_LEN + (size_t)in[69])
		return -EPROTO;
	for (size_t i = QPG_KV_STAT_LEN; i < len; i++)
		if (in[i] < 0x20 || in[i] > 0x7e)
			return -EPROTO;
	uint64_t *v[] = {&s->quota, &s->used,	&s->keys,      &s->max_keys,
			 &s->hits,  &s->misses, &s->evictions, &s->refused};
	for (unsigned i = 0; i < 8; i++)
		*v[i] = qpg__get64(in + 8 * i);
	s->max_value = qpg__get32(in + 64);
	s->listed = in[68];
	memcpy(s->name, in + QPG_KV_STAT_LEN, in[69]);
	s->name[in[69]] = '\0';
	return 0;
}

int qpg_kv_encode_grant(uint8_t *out, size_t cap, const struct qpg_kv_grant *g)
{
	if (cap < QPG_KV_GRANT_LEN)
		return -ENOSPC;
	qpg__put64(out, g->addr);
	qpg__put32(out + 8, g->rkey);
	qpg__put32(out + 12, g->grant_id);
	out[16] = g->digest_alg;
	memset(out + 17, 0, 3);
	memcpy(out + 20, g->digest, QPG_KV_DIGEST_LEN);
	return QPG_KV_GRANT_LEN;
}

int qpg_kv_decode_grant(const uint8_t *in, size_t len, struct qpg_kv_grant *g)
{
	/* A digest this client cannot compute, or reserved bytes set, is a
	 * grant it cannot check: refused, never READ. */
	if (len != QPG_KV_GRANT_LEN || in[16] == QPG_KV_DIGEST_AUTO || in[16] > QPG_KV_DIGEST_MAX ||
	    in[17] || in[18] || in[19])
		return -EPROTO;
	g->addr = qpg__get64(in);
	g->rkey = qpg__get32(in + 8);
	g->grant_id = qpg__get32(in + 12);
	g->digest_alg = in[16];
	memcpy(g->digest, in + 20, QPG_KV_DIGEST_LEN);
	return 0;
}

const char *qpg_kv_digest_name(uint8_t alg)
{
	static const char *const names[] = {"auto", "sha256", "sha512-256"};
	return alg <= QPG_KV_DIGEST_MAX ? names[alg] : NULL;
}

const char *qpg_kv_status_name(uint8_t status)
{
	static const char *const names[] = {"ok",
					    "not found",
					    "key too large",
					    "value too large",
					    "store full",
					    "malformed request",
					    "busy",
					    "one-sided access unsupported",
					    "wrong owner (the client's cluster view is behind)",
					    "unavailable",
					    "over the tenant's quota"};
	if (status == QPG_KV_CORRUPT)
		return "value does not match its digest";
	return status < sizeof(names) / sizeof(names[0]) ? names[status] : "unknown status";
}

int qpg_kv_exists_count(const uint8_t *list, size_t len)
{
	size_t pos = 0;
	int n = 0;
	while (pos < len) {
		uint8_t kl = list[pos];
		if (kl == 0 || kl > QPG_KV_MAX_KEY || len - pos - 1 < kl || ++n > QPG_KV_EXISTS_MAX)
			return -EINVAL;
		pos += 1u + kl;
	}
	return n ? n : -EINVAL;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV service's messages: fixed-layout, network byte order, carried as
 * the payload of QPG_FRAME_KV_REQ / QPG_FRAME_KV_REPLY data frames (so they
 * get the frame's version, sequence number and authentication tag).
 *
 * Request (24-byte header, then the key, then for PUT a chunk of the value;
 * EXISTS: no key, then its key list):
 *   0  u8  op         QPG_KV_PUT | QPG_KV_GET | QPG_KV_DEL | QPG_KV_RELEASE |
 *                     QPG_KV_EXISTS | QPG_KV_STAT
 *   1  u8  flags      GET: QPG_KV_F_ONE_SIDED or QPG_KV_F_GRANT_LARGE (not
 *                     both), and QPG_KV_F_RELEASE; a PUT's first chunk:
 *                     QPG_KV_F_TTL; others: 0
 *   2  u16 key_len    1..QPG_KV_MAX_KEY; RELEASE: 0
 *   4  u32 req_id     chosen by the client, echoed in every reply frame
 *   8  u32 value_len  PUT: the whole value's length; EXISTS: how many keys
 *                     its list holds (1..QPG_KV_EXISTS_MAX); others: 0
 *  12  u32 offset     PUT: where this chunk goes in the value;
 *                     RELEASE, or GET with QPG_KV_F_RELEASE: the grant id
 *                     released; other GETs and DEL: 0
 *  16  u64 view_rev   the etcd revision of the client's cluster view (0: the
 *                     client routes by no view); a clustered server answers
 *                     only from a view at least this new
 *
 * Reply (16-byte header, then for GET a chunk of the value or a grant):
 *   0  u8  op         as requested
 *   1  u8  status     enum qpg_kv_status
 *   2  u8  flags      QPG_KV_R_GRANT: the payload is a grant, not data
 *   3  u8  reserved   0
 *   4  u32 req_id
 *   8  u32 value_len  GET: the whole value's length
 *  12  u32 offset     GET: where this chunk sits in the value
 *  WRONG_OWNER: value_len and offset hold the server's view revision
 *  (high and low 32 bits): the client refreshes its view to at least that
 *
 * EXISTS asks whether each of up to QPG_KV_EXISTS_MAX keys is stored, in
 * one message: key_len 0, then the list, each key as a u8 length (1..250)
 * and its bytes. It reads nothing and pins nothing (no reference, no
 * eviction credit). Its OK reply has value_len = the number of keys, offset
 * = how many keys from the first are all stored (a prefix lookup's
 * answer), and a bitmap of (value_len + 7) / 8 bytes: bit i % 8 of byte
 * i / 8 is set when key i is stored (bits past the last key are 0). A
 * clustered server answers it only if it owns every key; else the whole
 * request gets WRONG_OWNER (or UNAVAILABLE).
 *
 * A PUT's first chunk (offset 0) with QPG_KV_F_TTL carries a u32 before
 * its part of the value: the value's time to live in milliseconds (1 and
 * up), from when it is committed. Past it the value is gone: a GET misses,
 * an EXISTS finds it absent, and eviction takes it first.
 *
 * Values larger than one frame travel as consecutive chunks in order; a
 * PUT's value is committed when its last chunk arrives, a GET is complete
 * when offset + chunk = value_len. Every chunk is its own authenticated
 * frame, so a client verifies each GET's value end to end.
 *
 * One-sided GET (QPG_KV_F_ONE_SIDED, RDMA only): the reply carries a grant
 * instead of data,
 *   0  u64 addr       where the value starts, for RDMA READ
 *   8  u32 rkey       of a read-only window over exactly the value,
 *                     bound to this connection's QP alone
 *  12  u32 grant_id   to RELEASE it with
 *  16  u8  digest_alg QPG_KV_DIGEST_SHA256 or QPG_KV_DIGEST_SHA512_256
 *  17  u8[3] reserved 0
 *  20  u8[32] digest  of the value, under digest_alg
 * The client READs the value, checks it against the digest (the grant came
 * in an authenticated frame, so a value changed on the way, or read from
 * the wrong place, does not match), then releases the grant: with its next
 * GET on the connection (QPG_KV_F_RELEASE, no reply of its own), or with a
 * RELEASE, which is answered. Either way the server invalidates the window
 * before the value's space can be reused. */
#ifndef QPGATE_KV_H
#define QPGATE_KV_H

#include <stddef.h>
#include <stdint.h>

#define QPG_KV_HDR_LEN	   16 /* a reply's header */
#define QPG_KV_REQ_HDR_LEN 24 /* a request's */
#define QPG_KV_MAX_KEY	   250
#define QPG_KV_MIN_MSG	   512	       /* frames must carry a header, the longest key and data */
#define QPG_KV_MAX_VALUE   (256u << 20) /* hard protocol limit; servers set lower */

/* The KV service's id in the HELLO and its frame types. */
#define QPG_SERVICE_KV	   2
#define QPG_FRAME_KV_REQ   3
#define QPG_FRAME_KV_REPLY 4

enum qpg_kv_op {
	QPG_KV_PUT = 1,
	QPG_KV_GET = 2,
	QPG_KV_DEL = 3,
	QPG_KV_RELEASE = 4,
	QPG_KV_EXISTS = 5,
	/* The caller's tenant on this server: its name, limits and figures.
	 * Its key is not looked up; it only routes the request in a cluster
	 * (the member that owns the key answers). */
	QPG_KV_STAT = 6,
	QPG_KV_OP_MAX = QPG_KV_STAT,
};
#define QPG_KV_EXISTS_MAX    256 /* keys in one EXISTS */
#define QPG_KV_EXISTS_BITMAP (QPG_KV_EXISTS_MAX / 8)

#define QPG_KV_F_ONE_SIDED 0x01 /* request flag, GET: grant a window to READ */
#define QPG_KV_F_GRANT_LARGE                                                                       \
	0x02 /* request flag, GET: grant one if the value is at                                    \
		least the server's threshold, else send it */
#define QPG_KV_F_RELEASE                                                                           \
	0x04		       /* request flag, GET: this GET also releases the                    \
				  grant whose id is in the offset field */
#define QPG_KV_F_TTL	  0x08 /* request flag, a PUT's first chunk: a u32 TTL (ms) leads it */
#define QPG_KV_TTL_LEN	  4
#define QPG_KV_R_GRANT	  0x01 /* reply flag: the payload is a grant */
#define QPG_KV_GRANT_LEN  52
#define QPG_KV_DIGEST_LEN 32

/* A grant's digest algorithm: the server's choice (qpg_kv_server_opts
 * .digest), the same for every value it holds. Both are 256-bit digests
 * of the SHA-2 family; SHA-512/256 runs on 64-bit words, so it is the
 * faster one on CPUs without SHA instructions. */
enum qpg_kv_digest {
	QPG_KV_DIGEST_AUTO = 0, /* server option only: the faster one on this host */
	QPG_KV_DIGEST_SHA256 = 1,
	QPG_KV_DIGEST_SHA512_256 = 2,
	QPG_KV_DIGEST_MAX = QPG_KV_DIGEST_SHA512_256,
};
/* "sha256", "sha512-256", "auto", or NULL for an unknown value. */
const char *qpg_kv_digest_name(uint8_t alg);

enum qpg_kv_status {
	QPG_KV_OK = 0,
	QPG_KV_NOT_FOUND = 1,
	QPG_KV_KEY_TOO_LARGE = 2,
	QPG_KV_VALUE_TOO_LARGE = 3,
	QPG_KV_STORE_FULL = 4,
	QPG_KV_MALFORMED = 5,
	QPG_KV_BUSY = 6,	/* another PUT of this connection is still streaming, or
			   every grant of this connection is still held */
	QPG_KV_UNSUPPORTED = 7, /* one-sided GET on a server or transport without it */
	/* A clustered server does not own the key in its view (at least as new
	 * as the request's): the reply carries its view revision. */
	QPG_KV_WRONG_OWNER = 8,
	/* A clustered server serves no key now: its lease is not known alive,
	 * or it could not catch up to the request's view. Client side too: the
	 * key's owner is suspect, or no member is active. */
	QPG_KV_UNAVAILABLE = 9,
	/* The value is larger than the client's tenant may hold (its quota, or
	 * its largest value), or the tenant's own values, all being read now,
	 * hold its quota. Another tenant's values are never evicted for it. */
	QPG_KV_OVER_QUOTA = 10,
	QPG_KV_STATUS_MAX = QPG_KV_OVER_QUOTA,
	/* Client side only: a one-sided value did not match its digest. */
	QPG_KV_CORRUPT = 100,
};

struct qpg_kv_grant {
	uint64_t addr;
	uint32_t rkey;
	uint32_t grant_id;
	uint8_t digest_alg; /* enum qpg_kv_digest, never AUTO */
	uint8_t digest[QPG_KV_DIGEST_LEN];
};

struct qpg_kv_req {
	uint8_t op;
	uint8_t flags;
	uint16_t key_len;
	uint32_t req_id;
	uint32_t value_len;
	uint32_t offset;
	uint64_t view_rev;
	const uint8_t *key;   /* points into the decoded buffer */
	const uint8_t *chunk; /* PUT: this frame's part of the value */
	uint32_t chunk_len;
	uint32_t ttl_ms; /* with QPG_KV_F_TTL: encoded after the key, decoded from there */
};

struct qpg_kv_reply {
	uint8_t op;
	uint8_t status;
	uint8_t flags;
	uint32_t req_id;
	uint32_t value_len;
	uint32_t offset;
	const uint8_t *chunk;
	uint32_t chunk_len;
};

/* Encoders write the header (and for requests the key, and a TTL) and
 * return the bytes written; the caller appends the chunk. -ENOSPC if CAP is
 * short. */
int qpg_kv_encode_req(uint8_t *out, size_t cap, const struct qpg_kv_req *r);
int qpg_kv_encode_reply(uint8_t *out, size_t cap, const struct qpg_kv_reply *r);

/* Decode and validate. Returns 0, or QPG_KV_MALFORMED / QPG_KV_KEY_TOO_LARGE
 * with a reason in WHY. Pointers in R point into IN. */
int qpg_kv_decode_req(const uint8_t *in, size_t len, struct qpg_kv_req *r, char *why,
		      size_t why_len);
int qpg_kv_decode_reply(const uint8_t *in, size_t len, struct qpg_kv_reply *r);

int qpg_kv_encode_grant(uint8_t *out, size_t cap, const struct qpg_kv_grant *g);
int qpg_kv_decode_grant(const uint8_t *in, size_t len, struct qpg_kv_grant *g);

const char *qpg_kv_status_name(uint8_t status);

/* A STAT answer (its OK reply's payload, in one frame: value_len is its
 * length, offset 0):
 *   0  u64 quota      bytes of store blocks the tenant may hold (0: none)
 *   8  u64 used       bytes of blocks it holds
 *  16  u64 keys       its keys stored
 *  24  u64 max_keys   (0: none)
 *  32  u64 hits       its GETs of a stored key
 *  40  u64 misses     and of an absent one
 *  48  u64 evictions  its keys evicted
 *  56  u64 refused    its PUTs refused over its own limits (over quota)
 *  64  u32 max_value  its largest value (0: the server's)
 *  68  u8  listed     1: a tenant the operator named (tenants file, or the
 *                     default tenant); 0: one of an identity of its own
 *  69  u8  name_len   1..255
 *  70  u8[2] reserved 0
 *  72  name           name_len bytes, printable ASCII */
#define QPG_KV_STAT_LEN 72
struct qpg_kv_tenant_stat {
	uint64_t quota, used, keys, max_keys, hits, misses, evictions, refused;
	uint32_t max_value;
	uint8_t listed;
	char name[256];
};
/* The bytes written, or -ENOSPC / -EINVAL (a name empty or too long). */
int qpg_kv_encode_stat(uint8_t *out, size_t cap, const struct qpg_kv_tenant_stat *s);
/* 0, or -EPROTO: LEN is not the record its name_len says, a reserved
 * byte is set, or the name is not printable. */
int qpg_kv_decode_stat(const uint8_t *in, size_t len, struct qpg_kv_tenant_stat *s);

/* EXISTS's key list (LEN bytes): how many keys it holds, 1 to
 * QPG_KV_EXISTS_MAX, or -EINVAL when it is anything but whole entries of a
 * u8 length (1..QPG_KV_MAX_KEY) and that many bytes. */
int qpg_kv_exists_count(const uint8_t *list, size_t len);
/* The key at *POS of a list qpg_kv_exists_count accepted, *POS moved past
 * it: its length, or 0 at the end. */
static inline uint8_t qpg_kv_exists_next(const uint8_t *list, size_t len, size_t *pos,
					 const uint8_t **key)
{
	if (*pos >= len)
		return 0;
	uint8_t n = list[*pos];
	*key = list + *pos + 1;
	*pos += 1u + n;
	return n;
}

#endif

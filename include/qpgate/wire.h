/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate wire formats. Fixed layout, versioned, network byte order, and
 * length-checked on receipt.
 *
 * Bootstrap (inside TLS):  header | body
 *   header (12 B): magic "QPGB" u32 | version u8 | type u8 | reserved u16 | body_len u32
 *   HELLO / ACCEPT body (48 B): see struct qpg_wire_params, then extra_qps
 *   entries (16 B each): qpn u32 | psn u32 | conn_id u64 (0 in HELLO)
 *   REJECT body: code u16 | text_len u16 | text[text_len <= QPG_WIRE_REJECT_TEXT_MAX]
 *
 * Data frames (RDMA SEND payload, or TLS stream for the tcp transport):
 *   version u8 | type u8 | flags u16 | len u32 | seq u64 | payload[len] | tag[16] if authenticated
 */
#ifndef QPGATE_WIRE_H
#define QPGATE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define QPG_WIRE_MAGIC		 0x51504742u /* "QPGB" */
#define QPG_WIRE_VERSION	 11
#define QPG_WIRE_HDR_LEN	 12
#define QPG_WIRE_PARAMS_LEN	 48
#define QPG_WIRE_REJECT_TEXT_MAX 200
#define QPG_WIRE_MAX_MSG	 (1u << 20) /* 1 MiB payload per frame */
#define QPG_WIRE_MAX_CREDITS	 1024
/* A session may bring up more QPs than the one its HELLO names: each adds
 * a 16-byte entry to the HELLO and to the ACCEPT (rdma only). */
#define QPG_WIRE_QP_ENTRY_LEN  16
#define QPG_WIRE_MAX_EXTRA_QPS 255
#define QPG_WIRE_MAX_BOOT_LEN                                                                      \
	(QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN + QPG_WIRE_MAX_EXTRA_QPS * QPG_WIRE_QP_ENTRY_LEN)

enum qpg_wire_type {
	QPG_WIRE_HELLO = 1,  /* client -> server */
	QPG_WIRE_ACCEPT = 2, /* server -> client */
	QPG_WIRE_REJECT = 3, /* server -> client, then close */
};

enum qpg_wire_transport {
	QPG_TRANSPORT_RDMA = 1,
	QPG_TRANSPORT_TCP = 2,
};

/* Service ids a HELLO names: 1 is the built-in echo; other services
 * (qpgate/service.h) bring their own id, 2..127 for qpgate's, 128..255
 * private. 0 names none. */
enum qpg_wire_service {
	QPG_SERVICE_ECHO = 1,
};

#define QPG_WIRE_FLAG_AUTH 0x01u
/* HELLO only: send a TLS resumption ticket before the answer. A client
 * that will not resume, or holds a fresh ticket, leaves it clear, and the
 * server seals none for it (docs/protocol.md, version 11). */
#define QPG_WIRE_FLAG_TICKET 0x02u

/* Why the server refused. Sent in REJECT, printed by the client. */
enum qpg_reject_code {
	QPG_REJECT_MALFORMED = 1,
	QPG_REJECT_VERSION = 2,
	QPG_REJECT_SERVER_FULL = 3,
	QPG_REJECT_BAD_PARAMS = 4,
	QPG_REJECT_TRANSPORT = 5,
	QPG_REJECT_SERVICE = 6,
	QPG_REJECT_AUTH_REQUIRED = 7,
	QPG_REJECT_RESOURCES = 8,
	QPG_REJECT_SHUTTING_DOWN = 9,
	/* The client's address holds its share of the server's QPs
	 * (--max-qps-per-peer). Not tried again: the QPs that fill it are
	 * often the client's own. */
	QPG_REJECT_ADDRESS_LIMIT = 10,
	/* The service does not admit the client's certificate identity (the KV
	 * service: no tenant for it). Not tried again. */
	QPG_REJECT_IDENTITY = 11,
};

struct qpg_wire_params {
	uint8_t transport;
	uint8_t flags;
	uint8_t service;
	uint8_t mtu; /* enum ibv_mtu, 1..5 */
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t port;
	uint8_t gid[16];
	uint32_t max_msg;   /* largest payload this side accepts */
	uint16_t credits;   /* requests in flight allowed */
	uint16_t extra_qps; /* QPs this session brings up besides this one (rdma) */
	uint64_t conn_id;   /* server-assigned, 0 in HELLO */
};

/* One of a session's extra QPs: the entries that follow the params. */
struct qpg_wire_qp {
	uint32_t qpn;
	uint32_t psn;
	uint64_t conn_id; /* server-assigned, 0 in HELLO */
};

struct qpg_wire_reject {
	uint16_t code;
	char text[QPG_WIRE_REJECT_TEXT_MAX + 1];
};

/* Encoders return the bytes written, or -ENOSPC (-EINVAL: more extra QPs
 * than the wire allows). encode_params writes P->extra_qps entries from
 * EXTRA (which may be NULL when there are none). */
int qpg_wire_encode_params(uint8_t *out, size_t cap, uint8_t type, const struct qpg_wire_params *p,
			   const struct qpg_wire_qp *extra);
int qpg_wire_encode_reject(uint8_t *out, size_t cap, uint16_t code, const char *text);

/* Looks at a bootstrap header. Returns the full message length once the
 * header is valid (the caller then waits for that many bytes), 0 when more
 * bytes are needed for the header, or a negative errno:
 *   -EPROTO  bad magic, type or length;  -EPROTONOSUPPORT  unknown version.
 * *version is set whenever the magic matched, so a reply can name it. */
int qpg_wire_peek(const uint8_t *in, size_t len, uint8_t *type, uint8_t *version);

/* Decode a complete HELLO or ACCEPT and validate every field. On error, a
 * short human reason is written to why. */
int qpg_wire_decode_params(const uint8_t *in, size_t len, struct qpg_wire_params *p, char *why,
			   size_t why_len);
/* Entry I (0 .. extra_qps - 1) of a message qpg_wire_decode_params has
 * accepted (which validated every entry). */
void qpg_wire_decode_qp(const uint8_t *in, unsigned i, struct qpg_wire_qp *q);
int qpg_wire_decode_reject(const uint8_t *in, size_t len, struct qpg_wire_reject *r);
const char *qpg_reject_code_name(uint16_t code);

/* ---- data frames ---- */
#define QPG_FRAME_HDR_LEN 16
#define QPG_FRAME_TAG_LEN 16

/* Frame types: echo's; a service defines its own from 3 up. */
enum qpg_frame_type {
	QPG_FRAME_ECHO_REQ = 1,
	QPG_FRAME_ECHO_REPLY = 2,
};

/* Frame flags. MORE: this reply is not the request's last (a value streamed
 * in chunks); the request still holds its credit. KEEPALIVE: an empty frame
 * (type 0, no payload) that says "still here": it takes no credit, has no
 * reply, and the service never sees it (a client sends one as each QP comes
 * up, and when it has been quiet). */
#define QPG_FRAME_FLAG_MORE	 0x0001u
#define QPG_FRAME_FLAG_KEEPALIVE 0x0002u
#define QPG_FRAME_FLAGS_KNOWN	 (QPG_FRAME_FLAG_MORE | QPG_FRAME_FLAG_KEEPALIVE)

struct qpg_frame_hdr {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t len;
	uint64_t seq;
};

void qpg_frame_hdr_encode(uint8_t *out, const struct qpg_frame_hdr *h);
/* Checks version and that len fits in AVAIL bytes with the tag if any.
 * Returns 0 or -EPROTO / -EMSGSIZE. */
int qpg_frame_hdr_decode(const uint8_t *in, size_t avail, int with_tag, uint32_t max_len,
			 struct qpg_frame_hdr *h);
static inline size_t qpg_frame_len(uint32_t payload, int with_tag)
{
	return QPG_FRAME_HDR_LEN + payload + (with_tag ? QPG_FRAME_TAG_LEN : 0);
}
/* An rdma message (one SEND) of LEN bytes holds one or more whole frames
 * back to back, and nothing else. Checks every frame's header as
 * qpg_frame_hdr_decode does and that the last ends at LEN; sets *FRAMES.
 * Returns 0 or -EPROTO / -EMSGSIZE. Tags and sequence numbers are the
 * receiver's to check, frame by frame. */
int qpg_message_check(const uint8_t *in, size_t len, int with_tag, uint32_t max_len,
		      unsigned *frames);

#endif

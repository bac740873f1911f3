/* SPDX-License-Identifier: BSD-2-Clause */
#include "qpgate/wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bytes.h"

static void encode_hdr(uint8_t *out, uint8_t type, uint32_t body_len)
{
	qpg__put32(out, QPG_WIRE_MAGIC);
	out[4] = QPG_WIRE_VERSION;
	out[5] = type;
	qpg__put16(out + 6, 0);
	qpg__put32(out + 8, body_len);
}

int qpg_wire_encode_params(uint8_t *out, size_t cap, uint8_t type, const struct qpg_wire_params *p,
			   const struct qpg_wire_qp *extra)
{
	if (p->extra_qps > QPG_WIRE_MAX_EXTRA_QPS || (p->extra_qps && !extra))
		return -EINVAL;
	uint32_t body = QPG_WIRE_PARAMS_LEN + (uint32_t)p->extra_qps * QPG_WIRE_QP_ENTRY_LEN;
	if (cap < QPG_WIRE_HDR_LEN + body)
		return -ENOSPC;
	encode_hdr(out, type, body);
	uint8_t *b = out + QPG_WIRE_HDR_LEN;
	b[0] = p->transport;
	b[1] = p->flags;
	b[2] = p->service;
	b[3] = p->mtu;
	qpg__put32(b + 4, p->qpn);
	qpg__put32(b + 8, p->psn);
	qpg__put16(b + 12, p->lid);
	b[14] = p->port;
	b[15] = 0;
	memcpy(b + 16, p->gid, 16);
	qpg__put32(b + 32, p->max_msg);
	qpg__put16(b + 36, p->credits);
	qpg__put16(b + 38, p->extra_qps);
	qpg__put64(b + 40, p->conn_id);
	for (unsigned i = 0; i < p->extra_qps; i++) {
		uint8_t *e = b + QPG_WIRE_PARAMS_LEN + i * QPG_WIRE_QP_ENTRY_LEN;
		qpg__put32(e, extra[i].qpn);
		qpg__put32(e + 4, extra[i].psn);
		qpg__put64(e + 8, extra[i].conn_id);
	}
	return (int)(QPG_WIRE_HDR_LEN + body);
}

void qpg_wire_decode_qp(const uint8_t *in, unsigned i, struct qpg_wire_qp *q)
{
	const uint8_t *e = in + QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN + i * QPG_WIRE_QP_ENTRY_LEN;
	q->qpn = qpg__get32(e);
	q->psn = qpg__get32(e + 4);
	q->conn_id = qpg__get64(e + 8);
}

int qpg_wire_encode_reject(uint8_t *out, size_t cap, uint16_t code, const char *text)
{
	size_t n = strnlen(text, QPG_WIRE_REJECT_TEXT_MAX);
	if (cap < QPG_WIRE_HDR_LEN + 4 + n)
		return -ENOSPC;
	encode_hdr(out, QPG_WIRE_REJECT, (uint32_t)(4 + n));
	qpg__put16(out + QPG_WIRE_HDR_LEN, code);
	qpg__put16(out + QPG_WIRE_HDR_LEN + 2, (uint16_t)n);
	memcpy(out + QPG_WIRE_HDR_LEN + 4, text, n);
	return (int)(QPG_WIRE_HDR_LEN + 4 + n);
}

int qpg_wire_peek(const uint8_t *in, size_t len, uint8_t *type, uint8_t *version)
{
	/* Judge the magic as soon as its bytes arrive, so garbage is refused
	 * without waiting for a full header that may never come. */
	for (size_t i = 0; i < len && i < 4; i++)
		if (in[i] != (uint8_t)(QPG_WIRE_MAGIC >> (24 - 8 * i)))
			return -EPROTO;
	if (len < QPG_WIRE_HDR_LEN)
		return 0;
	*version = in[4];
	if (in[4] != QPG_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	*type = in[5];
	if (qpg__get16(in + 6) != 0) /* reserved */
		return -EPROTO;
	uint32_t body = qpg__get32(in + 8);
	switch (in[5]) {
	case QPG_WIRE_HELLO:
	case QPG_WIRE_ACCEPT:
		/* The params, then whole QP entries. Whether their number
		 * matches extra_qps is the decoder's check. */
		if (body < QPG_WIRE_PARAMS_LEN || body > QPG_WIRE_MAX_BOOT_LEN - QPG_WIRE_HDR_LEN ||
		    (body - QPG_WIRE_PARAMS_LEN) % QPG_WIRE_QP_ENTRY_LEN)
			return -EPROTO;
		break;
	case QPG_WIRE_REJECT:
		if (body < 4 || body > 4 + QPG_WIRE_REJECT_TEXT_MAX)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	return (int)(QPG_WIRE_HDR_LEN + body);
}

static int fail(char *why, size_t why_len, const char *msg, int rc)
{
	if (why && why_len)
		snprintf(why, why_len, "%s", msg);
	return rc;
}

int qpg_wire_decode_params(const uint8_t *in, size_t len, struct qpg_wire_params *p, char *why,
			   size_t why_len)
{
	uint8_t type, version;
	int need = qpg_wire_peek(in, len, &type, &version);
	if (need == -EPROTONOSUPPORT)
		return fail(why, why_len, "unsupported protocol version", need);
	if (need <= 0 || (size_t)need != len || (type != QPG_WIRE_HELLO && type != QPG_WIRE_ACCEPT))
		return fail(why, why_len, "malformed bootstrap message", -EPROTO);
	const uint8_t *b = in + QPG_WIRE_HDR_LEN;
	memset(p, 0, sizeof(*p));
	p->transport = b[0];
	p->flags = b[1];
	p->service = b[2];
	p->mtu = b[3];
	p->qpn = qpg__get32(b + 4);
	p->psn = qpg__get32(b + 8);
	p->lid = qpg__get16(b + 12);
	p->port = b[14];
	memcpy(p->gid, b + 16, 16);
	p->max_msg = qpg__get32(b + 32);
	p->credits = qpg__get16(b + 36);
	p->extra_qps = qpg__get16(b + 38);
	p->conn_id = qpg__get64(b + 40);

	if (b[15] != 0)
		return fail(why, why_len, "reserved fields must be zero", -EINVAL);
	if (len != QPG_WIRE_HDR_LEN + QPG_WIRE_PARAMS_LEN +
		       (size_t)p->extra_qps * QPG_WIRE_QP_ENTRY_LEN)
		return fail(why, why_len, "length does not match the number of extra QPs", -EPROTO);
	if (p->flags & ~(QPG_WIRE_FLAG_AUTH | (type == QPG_WIRE_HELLO ? QPG_WIRE_FLAG_TICKET : 0)))
		return fail(why, why_len, "unknown flags", -EINVAL);
	/* Which services exist is the server's business (REJECT "service
	 * not offered"); 0 names none. */
	if (p->service == 0)
		return fail(why, why_len, "no service named", -EINVAL);
	if (p->max_msg == 0 || p->max_msg > QPG_WIRE_MAX_MSG)
		return fail(why, why_len, "max message size out of range (1..1 MiB)", -EINVAL);
	if (p->credits == 0 || p->credits > QPG_WIRE_MAX_CREDITS)
		return fail(why, why_len, "credits out of range (1..1024)", -EINVAL);
	switch (p->transport) {
	case QPG_TRANSPORT_RDMA: {
		static const uint8_t zero[16];
		if (p->psn > 0xffffff)
			return fail(why, why_len, "PSN out of range (24 bits)", -EINVAL);
		if (p->qpn <= 1 || p->qpn > 0xffffff)
			return fail(why, why_len, "QPN out of range (2..0xffffff)", -EINVAL);
		if (p->mtu < 1 || p->mtu > 5)
			return fail(why, why_len, "MTU out of range", -EINVAL);
		if (memcmp(p->gid, zero, 16) == 0 && p->lid == 0)
			return fail(why, why_len, "neither GID nor LID given", -EINVAL);
		/* Multicast GIDs (ff00::/8) can never name an RC peer. */
		if (p->gid[0] == 0xff)
			return fail(why, why_len, "multicast GID", -EINVAL);
		if (p->port == 0)
			return fail(why, why_len, "port 0", -EINVAL);
		for (unsigned i = 0; i < p->extra_qps; i++) {
			struct qpg_wire_qp q;
			qpg_wire_decode_qp(in, i, &q);
			if (q.psn > 0xffffff)
				return fail(why, why_len, "extra QP: PSN out of range (24 bits)",
					    -EINVAL);
			if (q.qpn <= 1 || q.qpn > 0xffffff)
				return fail(why, why_len, "extra QP: QPN out of range (2..0xffffff)",
					    -EINVAL);
			if ((type == QPG_WIRE_HELLO) != (q.conn_id == 0))
				return fail(why, why_len,
					    type == QPG_WIRE_HELLO ? "extra QP: conn_id set in HELLO"
								   : "extra QP: no conn_id",
					    -EINVAL);
		}
		break;
	}
	case QPG_TRANSPORT_TCP:
		if (p->qpn || p->psn || p->lid || p->mtu)
			return fail(why, why_len, "verbs fields set on the tcp transport", -EINVAL);
		if (p->extra_qps)
			return fail(why, why_len,
				    "extra QPs on the tcp transport (one connection per session)",
				    -EINVAL);
		break;
	default:
		return fail(why, why_len, "unknown transport", -EINVAL);
	}
	return 0;
}

int qpg_wire_decode_reject(const uint8_t *in, size_t len, struct qpg_wire_reject *r)
{
	uint8_t type, version;
	int need = qpg_wire_peek(in, len, &type, &version);
	if (need <= 0 || (size_t)need != len || type != QPG_WIRE_REJECT)
		return need < 0 ? need : -EPROTO;
	const uint8_t *b = in + QPG_WIRE_HDR_LEN;
	uint16_t n = qpg__get16(b + 2);
	if ((size_t)4 + n != len - QPG_WIRE_HDR_LEN)
		return -EPROTO;
	r->code = qpg__get16(b);
	/* Text from the network is shown to a person: keep it printable. */
	for (uint16_t i = 0; i < n; i++)
		r->text[i] = (b[4 + i] >= 0x20 && b[4 + i] < 0x7f) ? (char)b[4 + i] : '?';
	r->text[n] = 0;
	return 0;
}

const char *qpg_reject_code_name(uint16_t code)
{
	switch (code) {
	case QPG_REJECT_MALFORMED:
		return "malformed bootstrap";
	case QPG_REJECT_VERSION:
		return "version mismatch";
	case QPG_REJECT_SERVER_FULL:
		return "server full";
	case QPG_REJECT_BAD_PARAMS:
		return "invalid parameters";
	case QPG_REJECT_TRANSPORT:
		return "transport mismatch";
	case QPG_REJECT_SERVICE:
		return "service not offered";
	case QPG_REJECT_AUTH_REQUIRED:
		return "authentication required";
	case QPG_REJECT_RESOURCES:
		return "server out of resources";
	case QPG_REJECT_SHUTTING_DOWN:
		return "server shutting down";
	case QPG_REJECT_ADDRESS_LIMIT:
		return "address limit";
	case QPG_REJECT_IDENTITY:
		return "identity not admitted";
	default:
		return "unknown";
	}
}

void qpg_frame_hdr_encode(uint8_t *out, const struct qpg_frame_hdr *h)
{
	out[0] = h->version;
	out[1] = h->type;
	qpg__put16(out + 2, h->flags);
	qpg__put32(out + 4, h->len);
	qpg__put64(out + 8, h->seq);
}

int qpg_frame_hdr_decode(const uint8_t *in, size_t avail, int with_tag, uint32_t max_len,
			 struct qpg_frame_hdr *h)
{
	if (avail < QPG_FRAME_HDR_LEN)
		return -EPROTO;
	h->version = in[0];
	h->type = in[1];
	h->flags = qpg__get16(in + 2);
	h->len = qpg__get32(in + 4);
	h->seq = qpg__get64(in + 8);
	if (h->version != QPG_WIRE_VERSION)
		return -EPROTO;
	if (h->len > max_len)
		return -EMSGSIZE;
	if (qpg_frame_len(h->len, with_tag) > avail)
		return -EPROTO;
	return 0;
}

int qpg_message_check(const uint8_t *in, size_t len, int with_tag, uint32_t max_len,
		      unsigned *frames)
{
	unsigned n = 0;
	size_t off = 0;
	do {
		struct qpg_frame_hdr h;
		int rc = qpg_frame_hdr_decode(in + off, len - off, with_tag, max_len, &h);
		if (rc)
			return rc;
		off += qpg_frame_len(h.len, with_tag);
		n++;
	} while (off < len);
	*frames = n;
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "auth.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* Each key is K (AES-128, 16 bytes) || R (Poly1305, 16 bytes). */
static const uint8_t k1[32] = {1,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
			       16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31},
		     k2[32] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}, s1[4] = {9},
		     s2[4] = {8};

/* The wire format pinned (docs/protocol.md, "The tag"): Poly1305-AES, key
 * K = k1[0..16), R = k1[16..32), pad S = AES-128(K, salt s1 || seq 7
 * big-endian || 0^32), over the frame (bytes 0..99). Computed
 * independently, with Python's cryptography package:
 *   S = AES(K) in ECB over bytes([9,0,0,0]) + (7).to_bytes(8, "big") + bytes(4)
 *   Poly1305.generate_tag(R + S, bytes(range(100))) */
static const uint8_t kat_tag[16] = {0x39, 0x49, 0x7a, 0x97, 0x67, 0x48, 0x48, 0xdf,
				    0xb3, 0xab, 0x4f, 0xc7, 0xcb, 0x61, 0x69, 0xf1};

static void test_tag_verifies_and_binds_seq_and_bytes(void **state)
{
	struct qpg__auth tx, rx;
	assert_int_equal(qpg__auth_init_raw(&tx, k1, s1, k2, s2), 0);
	assert_int_equal(qpg__auth_init_raw(&rx, k2, s2, k1, s1), 0);
	uint8_t msg[100], tag[16];
	for (int i = 0; i < 100; i++)
		msg[i] = (uint8_t)i;
	assert_int_equal(qpg__auth_tag(&tx.tx, 7, msg, sizeof(msg), tag), 0);
	assert_memory_equal(tag, kat_tag, 16);
	assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), 0);
	/* another sequence number: a replay or reorder */
	assert_int_equal(qpg__auth_verify(&rx.rx, 8, msg, sizeof(msg), tag), -EBADMSG);
	/* any flipped bit in the message */
	for (int i = 0; i < 100; i += 13) {
		msg[i] ^= 1;
		assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
		msg[i] ^= 1;
	}
	tag[15] ^= 1;
	assert_int_equal(qpg__auth_verify(&rx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
	/* the other direction's key does not verify */
	tag[15] ^= 1;
	assert_int_equal(qpg__auth_verify(&tx.rx, 7, msg, sizeof(msg), tag), -EBADMSG);
	qpg__auth_free(&tx);
	qpg__auth_free(&rx);
	qpg__auth_free(&rx);
}

/* A TLS 1.3 session between two in-memory ends, with a throwaway P-256
 * certificate. */
static void tls_pair(SSL **cli, SSL **srv)
{
	EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x = X509_new();
	assert_non_null(pk);
	assert_non_null(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"test", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	assert_true(X509_sign(x, pk, EVP_sha256()) > 0);
	SSL_CTX *sc = SSL_CTX_new(TLS_server_method()), *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(sc, TLS1_3_VERSION);
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	assert_int_equal(SSL_CTX_use_certificate(sc, x), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(sc, pk), 1);
	*cli = SSL_new(cc);
	*srv = SSL_new(sc);
	BIO *a, *b;
	assert_int_equal(BIO_new_bio_pair(&a, 0, &b, 0), 1);
	SSL_set_bio(*cli, a, a);
	SSL_set_bio(*srv, b, b);
	SSL_set_connect_state(*cli);
	SSL_set_accept_state(*srv);
	int rc = 0, rs = 0;
	for (int i = 0; i < 100 && (rc != 1 || rs != 1); i++) {
		rc = SSL_do_handshake(*cli);
		rs = SSL_do_handshake(*srv);
	}
	assert_int_equal(rc, 1);
	assert_int_equal(rs, 1);
	SSL_CTX_free(sc);
	SSL_CTX_free(cc);
	X509_free(x);
	EVP_PKEY_free(pk);
}

/* QP I of a session over SSL: its own QP from the exporter, the others
 * from the session's secret in SESS. */
static void qp_keys(struct qpg__auth *a, SSL *ssl, struct qpg__auth_session *sess, int is_server,
		    uint32_t i)
{
	if (i == 0)
		assert_int_equal(qpg__auth_init_from_tls(a, ssl, is_server, 1), 0);
	else
		assert_int_equal(qpg__auth_init_member(a, sess, is_server, 1, i), 0);
}

/* The QPs of one session (docs/protocol.md): each has keys of its own, so
 * their sequence numbers, which all start at 0, never share a nonce under
 * one key. QP i's client and server agree; no other QP's keys verify its
 * tags. */
static void test_session_qps_have_their_own_keys(void **state)
{
	SSL *c, *s;
	tls_pair(&c, &s);
	enum { N = 4 };
	struct qpg__auth ca[N], sa[N];
	struct qpg__auth_session cs, ss;
	assert_int_equal(qpg__auth_session_init(&cs, c), 0);
	assert_int_equal(qpg__auth_session_init(&ss, s), 0);
	for (uint32_t i = 0; i < N; i++) {
		qp_keys(&ca[i], c, &cs, 0, i);
		qp_keys(&sa[i], s, &ss, 1, i);
	}
	qpg__auth_session_free(&cs);
	qpg__auth_session_free(&ss);
	uint8_t msg[64] = {1, 2, 3}, tag[16];
	for (int i = 0; i < N; i++) {
		assert_int_equal(qpg__auth_tag(&ca[i].tx, 0, msg, sizeof(msg), tag), 0);
		for (int j = 0; j < N; j++)
			assert_int_equal(qpg__auth_verify(&sa[j].rx, 0, msg, sizeof(msg), tag),
					 i == j ? 0 : -EBADMSG);
		assert_int_equal(qpg__auth_tag(&sa[i].tx, 0, msg, sizeof(msg), tag), 0);
		for (int j = 0; j < N; j++)
			assert_int_equal(qpg__auth_verify(&ca[j].rx, 0, msg, sizeof(msg), tag),
					 i == j ? 0 : -EBADMSG);
	}
	for (int i = 0; i < N; i++) {
		qpg__auth_free(&ca[i]);
		qpg__auth_free(&sa[i]);
	}
	SSL_free(c);
	SSL_free(s);
}

/* A member's keys are docs/protocol.md's: HKDF-Expand (SHA-256) of the
 * 32 bytes exported under "EXPORTER-qpgate-session-qps-v1", with info
 * "qpgate qp keys" and the QP's index (4 bytes, big-endian), through
 * OpenSSL's HKDF and none of auth.c's derivation. Both a short frame
 * (nettle) and a long one (OpenSSL's Poly1305, made on first use) agree. */
static void test_member_keys_are_hkdf_expand(void **state)
{
	SSL *c, *s;
	tls_pair(&c, &s);
	static const char label[] = "EXPORTER-qpgate-session-qps-v1";
	uint8_t secret[32], km[72], info[18] = "qpgate qp keys";
	assert_int_equal(
	    SSL_export_keying_material(c, secret, sizeof(secret), label, strlen(label), NULL, 0, 0),
	    1);
	info[14] = 0, info[15] = 0, info[16] = 0x01, info[17] = 0x02; /* QP 258 */
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kx = EVP_KDF_CTX_new(kdf);
	int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
	OSSL_PARAM p[] = {
	    OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0),
	    OSSL_PARAM_construct_int("mode", &mode),
	    OSSL_PARAM_construct_octet_string("key", secret, sizeof(secret)),
	    OSSL_PARAM_construct_octet_string("info", info, sizeof(info)),
	    OSSL_PARAM_construct_end(),
	};
	assert_int_equal(EVP_KDF_derive(kx, km, sizeof(km), p), 1);
	EVP_KDF_CTX_free(kx);
	EVP_KDF_free(kdf);
	struct qpg__auth want, got;
	/* The client's tx is the first (client to server) block. */
	assert_int_equal(qpg__auth_init_raw(&want, km, km + 32, km + 36, km + 68), 0);
	struct qpg__auth_session sess;
	assert_int_equal(qpg__auth_session_init(&sess, c), 0);
	assert_int_equal(qpg__auth_init_member(&got, &sess, 0, 1, 258), 0);
	qpg__auth_session_free(&sess);
	static uint8_t msg[4096];
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7);
	static const size_t lens[] = {64, QPG__AUTH_SHORT + 1, sizeof(msg)};
	for (int i = 0; i < 3; i++) {
		uint8_t t1[16], t2[16];
		assert_int_equal(qpg__auth_tag(&want.tx, 5, msg, lens[i], t1), 0);
		assert_int_equal(qpg__auth_tag(&got.tx, 5, msg, lens[i], t2), 0);
		assert_memory_equal(t1, t2, 16);
		assert_int_equal(qpg__auth_tag(&want.rx, 9, msg, lens[i], t1), 0);
		assert_int_equal(qpg__auth_tag(&got.rx, 9, msg, lens[i], t2), 0);
		assert_memory_equal(t1, t2, 16);
	}
	qpg__auth_free(&want);
	qpg__auth_free(&got);
	SSL_free(c);
	SSL_free(s);
}

/* Poly1305-AES of MSG under k1, s1, SEQ, through EVP's own AES-128-ECB
 * and Poly1305, none of auth.c. */
static void evp_tag(uint64_t seq, const uint8_t *msg, int len, uint8_t tag[16])
{
	uint8_t in[16] = {0}, key[32];
	memcpy(in, s1, 4);
	for (int i = 0; i < 8; i++)
		in[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int outl;
	assert_non_null(x);
	assert_int_equal(EVP_EncryptInit_ex(x, EVP_aes_128_ecb(), NULL, k1, NULL), 1);
	assert_int_equal(EVP_CIPHER_CTX_set_padding(x, 0), 1);
	assert_int_equal(EVP_EncryptUpdate(x, key + 16, &outl, in, 16), 1);
	EVP_CIPHER_CTX_free(x);
	memcpy(key, k1 + 16, 16);
	size_t n = 0;
	assert_int_equal(EVP_Q_mac(NULL, "POLY1305", NULL, NULL, NULL, key, 32, msg, (size_t)len,
				   tag, 16, &n) != NULL,
			 1);
	assert_int_equal(n, 16);
}

/* EVP's POLY1305 is RFC 8439's Poly1305 (section 2.5.2's vector). */
static void test_poly1305_is_rfc8439(void **state)
{
	static const uint8_t key[32] = {0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33,
					0x7f, 0x44, 0x52, 0xfe, 0x42, 0xd5, 0x06, 0xa8,
					0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d, 0xb2, 0xfd,
					0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49, 0xf5, 0x1b};
	static const uint8_t want[16] = {0xa8, 0x06, 0x1d, 0xc1, 0x30, 0x51, 0x36, 0xc6,
					 0xc2, 0x2b, 0x8b, 0xaf, 0x0c, 0x01, 0x27, 0xa9};
	static const char msg[] = "Cryptographic Forum Research Group";
	uint8_t tag[16];
	size_t n = 0;
	assert_non_null(EVP_Q_mac(NULL, "POLY1305", NULL, NULL, NULL, key, 32, (const uint8_t *)msg,
				  strlen(msg), tag, 16, &n));
	assert_memory_equal(tag, want, 16);
}

/* In order, on a jump back or forward, and across the sequence numbers'
 * wrap, every tag is the one computed outside auth.c for that sequence:
 * all 8 bytes of the sequence number are in it. */
static void test_tags_match_evp(void **state)
{
	/* clang-format off */
	static const uint64_t seqs[] = {
	    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 4, 10, 11, 12, 1000, 1001, 999, 0x0102030405060708ull,
	    ~0ull - 2, ~0ull - 1, ~0ull, 0, 1, 2};
	/* clang-format on */
	struct qpg__auth a;
	assert_int_equal(qpg__auth_init_raw(&a, k1, s1, k2, s2), 0);
	uint8_t msg[80], tag[16], want[16];
	for (int i = 0; i < 80; i++)
		msg[i] = (uint8_t)(i * 7);
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		msg[0] = (uint8_t)i;
		assert_int_equal(qpg__auth_tag(&a.tx, seqs[i], msg, sizeof(msg), tag), 0);
		evp_tag(seqs[i], msg, sizeof(msg), want);
		assert_memory_equal(tag, want, 16);
	}
	qpg__auth_free(&a);
}

/* Both implementations (nettle's up to QPG__AUTH_SHORT bytes, EVP_MAC's
 * above) give EVP's tag at every length around the switch and at the
 * lengths frames have (empty to 64 KiB, off 16-byte blocks too), and each
 * refuses a tag moved to the next sequence number. */
static void test_every_length_matches_evp(void **state)
{
	/* clang-format off */
	static const size_t lens[] = {
	    0, 1, 15, 16, 17, 31, 32, 33, 80, 96, 255, 256, QPG__AUTH_SHORT - 17,
	    QPG__AUTH_SHORT - 1, QPG__AUTH_SHORT, QPG__AUTH_SHORT + 1, QPG__AUTH_SHORT + 16,
	    1000, 4096 + 32, 65536 + 16};
	/* clang-format on */
	enum { MAX = 65536 + 16 };
	uint8_t *msg = malloc(MAX);
	assert_non_null(msg);
	for (size_t i = 0; i < MAX; i++)
		msg[i] = (uint8_t)(i * 13 + (i >> 8));
	struct qpg__auth a, b;
	assert_int_equal(qpg__auth_init_raw(&a, k1, s1, k2, s2), 0);
	assert_int_equal(qpg__auth_init_raw(&b, k2, s2, k1, s1), 0);
	uint8_t tag[16], want[16];
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint64_t seq = 0x1111111111111111ull * i;
		assert_int_equal(qpg__auth_tag(&a.tx, seq, msg, lens[i], tag), 0);
		evp_tag(seq, msg, (int)lens[i], want);
		assert_memory_equal(tag, want, 16);
		assert_int_equal(qpg__auth_verify(&b.rx, seq, msg, lens[i], tag), 0);
		assert_int_equal(qpg__auth_verify(&b.rx, seq + 1, msg, lens[i], tag), -EBADMSG);
	}
	qpg__auth_free(&a);
	qpg__auth_free(&b);
	free(msg);
}

/* A frame sent by reference is tagged in two pieces (its head, then its
 * value from where it lies): at every length, on either side of the 512-byte
 * switch, and at every cut (block edges and off them), the tag is the one
 * over the whole frame, so the receiver, which checks one piece, accepts
 * it; and one changed byte of the second piece changes it. */
static void test_tag_in_two_pieces_is_the_whole_frames(void **state)
{
	static const size_t lens[] = {1, 17, 48, 511, 512, 513, 4096 + 32, 16384 + 32};
	enum { MAX = 16384 + 32 };
	uint8_t *msg = malloc(MAX);
	assert_non_null(msg);
	for (size_t i = 0; i < MAX; i++)
		msg[i] = (uint8_t)(i * 7 + (i >> 9));
	struct qpg__auth a;
	assert_int_equal(qpg__auth_init_raw(&a, k1, s1, k2, s2), 0);
	uint8_t whole[16], split[16];
	unsigned checked = 0;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		assert_int_equal(qpg__auth_tag(&a.tx, 42 + i, msg, len, whole), 0);
		const size_t cuts[] = {0, 1, 15, 16, 32, 33, len / 2, len - 1, len};
		for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
			size_t cut = cuts[k] > len ? len : cuts[k];
			assert_int_equal(
			    qpg__auth_tag2(&a.tx, 42 + i, msg, cut, msg + cut, len - cut, split),
			    0);
			assert_memory_equal(split, whole, 16);
			checked++;
		}
		if (len > 33) {
			msg[len - 1] ^= 1;
			assert_int_equal(
			    qpg__auth_tag2(&a.tx, 42 + i, msg, 32, msg + 32, len - 32, split), 0);
			assert_memory_not_equal(split, whole, 16);
			msg[len - 1] ^= 1;
		}
	}
	assert_int_equal(checked, 8 * 9);
	qpg__auth_free(&a);
	free(msg);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_tag_verifies_and_binds_seq_and_bytes),
	      cmocka_unit_test(test_session_qps_have_their_own_keys),
	      cmocka_unit_test(test_member_keys_are_hkdf_expand),
	      cmocka_unit_test(test_poly1305_is_rfc8439), cmocka_unit_test(test_tags_match_evp),
	      cmocka_unit_test(test_every_length_matches_evp),
	      cmocka_unit_test(test_tag_in_two_pieces_is_the_whole_frames))

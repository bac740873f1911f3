/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <string.h>

#include "unit.h"

#include "auth.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static const uint8_t k1[16] = {1}, k2[16] = {2}, s1[4] = {9}, s2[4] = {8};

/* The wire format pinned (docs/protocol.md, "The tag"): AES-128-GCM with an
 * empty plaintext (GMAC), key k1, nonce = salt s1 || seq 7 big-endian, the
 * frame as associated data (bytes 0..99). Computed independently, with
 * Python's cryptography package:
 *   AESGCM(bytes([1]+[0]*15)).encrypt(bytes([9,0,0,0]) +
 *       (7).to_bytes(8, "big"), b"", bytes(range(100))) */
static const uint8_t kat_tag[16] = {0x2f, 0x9c, 0x59, 0xf7, 0x93, 0xb0, 0x2a, 0x61,
				    0x61, 0xbb, 0xa2, 0x1b, 0x15, 0xd7, 0x3f, 0x05};

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

/* The QPs of one session (docs/protocol.md): each exports keys of its own,
 * so their sequence numbers, which all start at 0, never share a nonce
 * under one key. QP i's client and server agree; no other QP's keys
 * verify its tags. */
static void test_session_qps_have_their_own_keys(void **state)
{
	SSL *c, *s;
	tls_pair(&c, &s);
	enum { N = 3 };
	struct qpg__auth ca[N], sa[N];
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(qpg__auth_init_from_tls(&ca[i], c, 0, 1, i), 0);
		assert_int_equal(qpg__auth_init_from_tls(&sa[i], s, 1, 1, i), 0);
	}
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

/* GMAC of MSG under k1, nonce s1 || SEQ, through EVP's own AES-128-GCM. */
static void evp_gmac(uint64_t seq, const uint8_t *msg, int len, uint8_t tag[16])
{
	uint8_t iv[12];
	memcpy(iv, s1, 4);
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int outl;
	assert_non_null(x);
	assert_int_equal(EVP_EncryptInit_ex(x, EVP_aes_128_gcm(), NULL, k1, iv), 1);
	assert_int_equal(EVP_EncryptUpdate(x, NULL, &outl, msg, len), 1);
	assert_int_equal(EVP_EncryptFinal_ex(x, tag, &outl), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(x);
}

/* In order, on a jump back or forward, and across the sequence numbers'
 * wrap, every tag is the one EVP's GCM makes for that nonce: all 8 bytes
 * of the sequence number are in it. */
static void test_tags_match_evp_gcm(void **state)
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
		evp_gmac(seqs[i], msg, sizeof(msg), want);
		assert_memory_equal(tag, want, 16);
	}
	qpg__auth_free(&a);
}

/* A mask prepared ahead changes no tag: prepared for the sequence that is
 * then tagged or verified, for another one (not used), twice, or prepared
 * and then a different sequence tagged first; each tag is still EVP's. */
static void test_prepared_masks_change_no_tag(void **state)
{
	/* {sequence to prepare, sequence to tag} */
	static const uint64_t steps[][2] = {
	    {0, 0}, {1, 1}, {2, 2}, {5, 3},	    {5, 5}, {7, 6}, {7, 7},
	    {9, 9}, {9, 8}, {9, 9}, {~0ull, ~0ull}, {0, 1}, {0, 0}, {0x0102030405060708ull, 0}};
	struct qpg__auth a;
	assert_int_equal(qpg__auth_init_raw(&a, k1, s1, k2, s2), 0);
	uint8_t msg[80], tag[16], want[16];
	for (int i = 0; i < 80; i++)
		msg[i] = (uint8_t)(i * 5);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		msg[1] = (uint8_t)i;
		qpg__auth_prepare(&a.tx, steps[i][0]);
		if (i % 3 == 0)
			qpg__auth_prepare(&a.tx, steps[i][0]); /* twice: still one mask */
		assert_int_equal(qpg__auth_tag(&a.tx, steps[i][1], msg, sizeof(msg), tag), 0);
		evp_gmac(steps[i][1], msg, sizeof(msg), want);
		assert_memory_equal(tag, want, 16);
		/* The receiving side, prepared the same way, accepts it, and
		 * still refuses it under another sequence number. */
		struct qpg__auth b;
		assert_int_equal(qpg__auth_init_raw(&b, k2, s2, k1, s1), 0);
		qpg__auth_prepare(&b.rx, steps[i][0]);
		assert_int_equal(qpg__auth_verify(&b.rx, steps[i][1], msg, sizeof(msg), tag), 0);
		qpg__auth_prepare(&b.rx, steps[i][1]);
		assert_int_equal(qpg__auth_verify(&b.rx, steps[i][1] + 1, msg, sizeof(msg), tag),
				 -EBADMSG);
		qpg__auth_free(&b);
	}
	qpg__auth_free(&a);
}

QPG_UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_tag_verifies_and_binds_seq_and_bytes),
	      cmocka_unit_test(test_session_qps_have_their_own_keys),
	      cmocka_unit_test(test_tags_match_evp_gcm),
	      cmocka_unit_test(test_prepared_masks_change_no_tag))

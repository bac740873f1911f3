/* SPDX-License-Identifier: BSD-2-Clause */
/* SipHash-2-4 (Aumasson and Bernstein, 2012), as in the authors' reference
 * implementation: 2 compression rounds per 8-byte word, 4 finalisation
 * rounds, 64-bit output. Streaming over two pieces, so a (tenant, key)
 * pair is hashed without being joined first. */
#include "khash.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <string.h>

static uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

struct sip {
	uint64_t v0, v1, v2, v3;
	uint64_t tail; /* bytes not yet a whole word, little-endian */
	unsigned ntail;
	size_t len;
};

static void rounds(struct sip *s, int n)
{
	for (int i = 0; i < n; i++) {
		s->v0 += s->v1;
		s->v1 = rotl(s->v1, 13) ^ s->v0;
		s->v0 = rotl(s->v0, 32);
		s->v2 += s->v3;
		s->v3 = rotl(s->v3, 16) ^ s->v2;
		s->v0 += s->v3;
		s->v3 = rotl(s->v3, 21) ^ s->v0;
		s->v2 += s->v1;
		s->v1 = rotl(s->v1, 17) ^ s->v2;
		s->v2 = rotl(s->v2, 32);
	}
}

static void word(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	rounds(s, 2);
	s->v0 ^= m;
}

static void update(struct sip *s, const uint8_t *p, size_t n)
{
	s->len += n;
	while (n && s->ntail) { /* finish a word a previous piece began */
		s->tail |= (uint64_t)*p++ << (8 * s->ntail);
		n--;
		if (++s->ntail == 8) {
			word(s, s->tail);
			s->tail = 0;
			s->ntail = 0;
		}
	}
	for (; n >= 8; p += 8, n -= 8)
		word(s, le64(p));
	for (; n; n--)
		s->tail |= (uint64_t)*p++ << (8 * s->ntail++);
}

uint64_t qpg__khash2(const struct qpg__khash *h, const void *a, size_t na, const void *b, size_t nb)
{
	struct sip s = {.v0 = h->k0 ^ 0x736f6d6570736575ull,
			.v1 = h->k1 ^ 0x646f72616e646f6dull,
			.v2 = h->k0 ^ 0x6c7967656e657261ull,
			.v3 = h->k1 ^ 0x7465646279746573ull};
	update(&s, a, na);
	if (nb)
		update(&s, b, nb);
	word(&s, s.tail | (uint64_t)s.len << 56);
	s.v2 ^= 0xff;
	rounds(&s, 4);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

uint64_t qpg__khash(const struct qpg__khash *h, const void *data, size_t n)
{
	return qpg__khash2(h, data, n, NULL, 0);
}

int qpg__khash_init(struct qpg__khash *h)
{
	uint8_t key[16];
	memset(h, 0, sizeof(*h));
	if (RAND_bytes(key, sizeof(key)) != 1)
		return -EIO;
	qpg__khash_init_key(h, key);
	OPENSSL_cleanse(key, sizeof(key));
	return 0;
}

int qpg__khash_init_key(struct qpg__khash *h, const uint8_t key[16])
{
	h->k0 = le64(key);
	h->k1 = le64(key + 8);
	return 0;
}

void qpg__khash_fini(struct qpg__khash *h)
{
	OPENSSL_cleanse(h, sizeof(*h));
}

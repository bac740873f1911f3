/* SPDX-License-Identifier: BSD-2-Clause */
/* The digests of one-sided values (enum qpg_kv_digest): OpenSSL's SHA-256
 * and SHA-512/256, fetched once and shared by threads (a fetched EVP_MD is
 * immutable), and the server's automatic choice between them. */
#ifndef QPG_KV_DIGEST_H
#define QPG_KV_DIGEST_H

#include <openssl/evp.h>
#include <stdint.h>

#include "qpgate/kv.h"

struct qpg__kv_digests {
	EVP_MD *md[QPG_KV_DIGEST_MAX + 1]; /* by enum qpg_kv_digest; [AUTO] is NULL */
};

/* 0, or -ENOSYS when this OpenSSL lacks one of them. */
int qpg__kv_digests_fetch(struct qpg__kv_digests *d);
void qpg__kv_digests_free(struct qpg__kv_digests *d);
/* The digest, or NULL for AUTO or an unknown value. */
static inline const EVP_MD *qpg__kv_digest_md(const struct qpg__kv_digests *d, uint8_t alg)
{
	return alg <= QPG_KV_DIGEST_MAX ? d->md[alg] : NULL;
}
/* QPG_KV_DIGEST_AUTO: whichever of the two digests 64 KiB faster on this
 * host (best of several rounds each; a tie, SHA-256). SHA instructions
 * make SHA-256 the faster; without them SHA-512/256 is (64-bit words).
 * Takes a few milliseconds, once, when the service is created. */
uint8_t qpg__kv_digest_pick(const struct qpg__kv_digests *d);

#endif

/*
 * api/auth.h - who is asking, and how fast a team may write (auth.c): the
 * bearer token, its constant-time comparison, the table of token digests
 * and the per-team write budget. These are pure (unit tests and fuzz
 * targets call them); the API's own callers (ctf_api_authenticate,
 * ctf_api_spend) are in internal.h.
 */
#ifndef CTF_API_AUTH_H
#define CTF_API_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <kop/err.h>

#include "api/routes.h"


#define CTF_API_TOKEN_MAX 512         /* bearer tokens; longer ones match nothing */

/*
 * ctf_api_bearer extracts the token of an "Authorization: Bearer <token>"
 * header value (NULL: no header) into out (CTF_API_TOKEN_MAX + 1 bytes).
 * False when the header is missing, of another scheme, or the token empty,
 * too long or holding spaces or control bytes.
 */
bool ctf_api_bearer(const char *header, char *out, size_t size);

/*
 * ctf_api_token_equal compares a presented token with an expected one in
 * time independent of their contents and lengths (both are hashed with
 * SHA-256, then compared with CRYPTO_memcmp). An empty expected token
 * equals nothing.
 */
bool ctf_api_token_equal(const char *presented, const unsigned char *expected, size_t expected_len);

/*
 * ctf_token_table: the API's tokens (the admin's and every team's), kept
 * as SHA-256 digests, built once per change of the token Secrets so that a
 * request hashes the token it presents once and compares digests only.
 * Opaque; not thread-safe (the API guards it). The raw tokens are not kept.
 */
typedef struct ctf_token_table ctf_token_table;

/*
 * ctf_token_table_build decodes the admin Secret's data.token and every
 * data[team] of the teams Secret (either Secret NULL: none) into *out
 * (owned: ctf_token_table_free). A key that is not a team name, or a value
 * that is empty or not base64, matches nothing. KOP_ENOMEM only.
 */
KOP_NODISCARD kop_err ctf_token_table_build(const json_t *admin_secret, const json_t *teams_secret,
                                            ctf_token_table **out);

/*
 * ctf_token_table_match finds whose token presented is: the keys its
 * digest indexes (one or two at any number of teams) compared with it in
 * constant time. Sets *admin, or the team into team (CTF_TEAM_SIZE bytes;
 * the admin wins when a team holds the same token). False when nobody's.
 */
bool ctf_token_table_match(const ctf_token_table *t, const char *presented, bool *admin,
                           char *team);

/* ctf_token_table_free cleanses and frees t. NULL is ok. */
void ctf_token_table_free(ctf_token_table *t);

/*
 * ctf_bucket: one team's write budget, a token bucket of `burst` writes
 * refilled at `per_minute`. Plain value type; zero it to start full.
 */
typedef struct ctf_bucket {
    double tokens;
    int64_t last_ms; /* 0: never used (full) */
} ctf_bucket;

/*
 * ctf_bucket_take spends one write at now_ms (a monotonic clock). True
 * when allowed; else false and *retry_after_s (>= 1) says when the next
 * write will be.
 */
bool ctf_bucket_take(ctf_bucket *b, int burst, int per_minute, int64_t now_ms,
                     int *retry_after_s);

/* ctf_bucket_full tells whether b has refilled to burst at now_ms (it can be forgotten). */
bool ctf_bucket_full(const ctf_bucket *b, int burst, int per_minute, int64_t now_ms);

#endif /* CTF_API_AUTH_H */

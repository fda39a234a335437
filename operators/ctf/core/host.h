/*
 * core/host.h - the host name of an instance's exposure in the gateway mode
 * (host.c): "<id>.<domain>", where <id> is an unguessable, stable label
 * derived with HMAC-SHA256 from the team, the challenge and the exposure
 * under a key only the operator holds (a Secret, like the flag key).
 *
 * Unguessable: without the key nobody can compute a team's id, and the
 * gateway answers only the ids of routes that exist, so knowing the gateway
 * and the domain is not enough to reach another team's instance. Stable: the
 * same team, challenge, exposure and key give the same id across stops,
 * starts and operator restarts, so a team's exploit scripts keep working.
 *
 * The id is CTF_HOST_ID_LEN characters of lowercase base32 (RFC 4648's
 * alphabet a-z, 2-7, no padding): the first 80 bits of the HMAC. Why 80:
 * the ids are guessed online, one TLS handshake per guess; at 10^5 guesses a
 * second for 48 hours against 10^4 live ids (2,000 teams, 5 exposures
 * each), the chance to hit any one is 1.7e10 * 1e4 / 2^80 = 1.4e-10, and
 * two of 10^4 ids collide with a chance of about 4e-17. Sixteen characters
 * stay short enough to read out and type. The id is a valid DNS-1123 label;
 * it may start with a digit, so it is no DNS-1035 label (no Service name on
 * its own).
 *
 * Pure: no network, no cluster, no clock. Ownership: inputs are borrowed;
 * results are written into caller buffers.
 */
#ifndef CTF_CORE_HOST_H
#define CTF_CORE_HOST_H

#include <stddef.h>

#include <kop/err.h>

/* Characters of an id (80 bits, 5 per base32 character) and its buffer size. */
#define CTF_HOST_ID_LEN  16
#define CTF_HOST_ID_SIZE (CTF_HOST_ID_LEN + 1)
/* The shortest key accepted, in bytes: an id is no harder to guess than its key. */
#define CTF_HOST_KEY_MIN 16
/* The domain separation tag that starts every HMAC message (see ctf_host_id). */
#define CTF_HOST_TAG "kopc-host-v1"

/*
 * ctf_host_parts: what an id is derived from. Borrowed strings, all
 * required and non-empty.
 */
typedef struct ctf_host_parts {
    const char *team;         /* spec.team of the Challenge */
    const char *challenge_ns; /* the namespace of the ChallengeDefinition */
    const char *challenge;    /* the ChallengeDefinition's name */
    const char *exposure;     /* the name of the expose[] entry */
} ctf_host_parts;

/*
 * ctf_host_id writes the id of parts' exposure into out (size >=
 * CTF_HOST_ID_SIZE): the lowercase base32 of the first 80 bits of
 * HMAC-SHA256(key, CTF_HOST_TAG "\0" team "\0" challenge_ns "\0" challenge
 * "\0" exposure). The NUL separators make the message unambiguous (no part
 * can contain one), and the tag keeps these HMACs apart from the flag's even
 * under the same key. KOP_EINVAL (explained in st) when a part is NULL or
 * empty, the key is shorter than CTF_HOST_KEY_MIN bytes, or out is too
 * small; KOP_ENOMEM when OpenSSL fails.
 */
KOP_NODISCARD kop_err ctf_host_id(const unsigned char *key, size_t key_len,
                                  const ctf_host_parts *parts, char *out, size_t size,
                                  kop_status *st);

/*
 * ctf_host_name writes "<id>.<domain>" into out (size >= the host's length
 * + 1; CTF_HOST_SIZE of core/names.h always fits a valid one), the host a
 * participant connects to (the TLS SNI, or the HTTP Host). KOP_EINVAL
 * (explained in st) when id is not a valid DNS-1123 label, domain is not a
 * valid DNS-1123 subdomain, the host would exceed 253 characters, or out is
 * too small.
 */
KOP_NODISCARD kop_err ctf_host_name(const char *id, const char *domain, char *out, size_t size,
                                    kop_status *st);

#endif /* CTF_CORE_HOST_H */

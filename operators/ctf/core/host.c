/*
 * host.c - the unguessable, stable host of an instance's exposure in the
 * gateway mode (see host.h for the scheme and why 80 bits): an HMAC-SHA256
 * of the team, the challenge and the exposure under the operator's key,
 * cut to 80 bits and written as lowercase base32, then "<id>.<domain>".
 *
 * Invariant: an id is exactly CTF_HOST_ID_LEN characters of [a-z2-7], so it
 * is always a valid DNS-1123 label, whatever the inputs were.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <kop/meta.h>

#include "core/host.h"

/* The HMAC bytes an id encodes: 80 bits, 16 base32 characters of 5 bits. */
#define ID_BYTES (CTF_HOST_ID_LEN * 5 / 8)

/* A part of the message may be at most this long (a Kubernetes name is 253). */
#define PART_MAX 1024

static const char BASE32[] = "abcdefghijklmnopqrstuvwxyz234567";

/* nonempty: a string that is set and not "". */
static int nonempty(const char *s) { return s && *s; }

/*
 * base32_lower writes the n * 8 / 5 characters of the lowercase RFC 4648
 * base32 of in[0..n) (n a multiple of 5: no padding) and a NUL into out.
 */
static void base32_lower(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 5) {
        /* Five bytes are forty bits, eight characters of five bits each. */
        uint64_t group = 0;
        for (size_t j = 0; j < 5; j++)
            group = group << 8 | in[i + j];
        for (int shift = 35; shift >= 0; shift -= 5)
            out[o++] = BASE32[(group >> shift) & 31];
    }
    out[o] = '\0';
}

/*
 * append_part copies part and its NUL separator into msg at *len, which
 * has room for cap bytes in all.
 */
static void append_part(unsigned char *msg, size_t *len, size_t cap, const char *part)
{
    size_t n = strlen(part) + 1; /* with its NUL, the separator */
    if (*len + n > cap)
        return; /* cannot happen: the caller sized msg from the parts */
    memcpy(msg + *len, part, n);
    *len += n;
}

kop_err ctf_host_id(const unsigned char *key, size_t key_len, const ctf_host_parts *parts,
                    char *out, size_t size, kop_status *st)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    unsigned char *msg = NULL;
    kop_err err = KOP_EINVAL;

    if (!out || size < CTF_HOST_ID_SIZE) {
        kop_status_setf(st, 0, NULL, "The buffer for a host id is too small.");
        goto out;
    }
    out[0] = '\0';
    if (!parts || !nonempty(parts->team) || !nonempty(parts->challenge_ns) ||
        !nonempty(parts->challenge) || !nonempty(parts->exposure)) {
        kop_status_setf(st, 0, NULL,
                        "A host id needs the team, the challenge's namespace and name, and the "
                        "exposure.");
        goto out;
    }
    if (!key || key_len < CTF_HOST_KEY_MIN || key_len > (size_t)INT32_MAX) {
        kop_status_setf(st, 0, NULL, "The host key must hold at least %d bytes.",
                        CTF_HOST_KEY_MIN);
        goto out;
    }
    const char *fields[] = {CTF_HOST_TAG, parts->team, parts->challenge_ns, parts->challenge,
                            parts->exposure};
    size_t cap = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        size_t n = strlen(fields[i]);
        if (n > PART_MAX) {
            kop_status_setf(st, 0, NULL, "A part of the host id is longer than %d bytes.",
                            PART_MAX);
            goto out;
        }
        cap += n + 1;
    }
    err = KOP_ENOMEM;
    msg = malloc(cap);
    if (!msg)
        goto out;
    size_t len = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        append_part(msg, &len, cap, fields[i]);
    len--; /* the last part ends the message: no separator after it */
    if (!HMAC(EVP_sha256(), key, (int)key_len, msg, len, md, &md_len) || md_len < ID_BYTES) {
        kop_status_setf(st, 0, NULL, "Computing the host id failed.");
        goto out;
    }
    base32_lower(md, ID_BYTES, out);
    err = KOP_OK;
out:
    OPENSSL_cleanse(md, sizeof md);
    free(msg);
    return err;
}

kop_err ctf_host_name(const char *id, const char *domain, char *out, size_t size, kop_status *st)
{
    if (!out || size == 0) {
        kop_status_setf(st, 0, NULL, "No buffer for the host name.");
        return KOP_EINVAL;
    }
    out[0] = '\0';
    if (!id || !kop_meta_is_valid_dns1123_label(id)) {
        kop_status_setf(st, 0, NULL, "The host id is not a DNS label.");
        return KOP_EINVAL;
    }
    if (!domain || !kop_meta_is_valid_dns1123_subdomain(domain)) {
        kop_status_setf(st, 0, NULL, "The gateway domain \"%s\" is not a DNS name.",
                        domain ? domain : "");
        return KOP_EINVAL;
    }
    size_t n = strlen(id) + 1 + strlen(domain);
    if (n > KOP_META_DNS1123_SUBDOMAIN_MAX || n + 1 > size) {
        kop_status_setf(st, 0, NULL, "The host name would be %zu characters long.", n);
        return KOP_EINVAL;
    }
    snprintf(out, size, "%s.%s", id, domain);
    return KOP_OK;
}

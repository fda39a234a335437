/*
 * flag.c - a team's flag: static, or derived with HMAC-SHA256 from a key the
 * definition names, so a CTF platform that holds the key can check a team's
 * flag without storing it (see flag.h). The flag is a secret: only
 * ctf_flag computes it, only the builder's Secret carries it.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/definition.h"
#include "core/flag.h"
#include "core/json.h"

#define KEY_DEFAULT    "key"
#define PREFIX_DEFAULT "flag{"
#define SUFFIX_DEFAULT "}"
#define FLAG_HEX_LEN   32 /* hex digits of the HMAC in a dynamic flag */

/* ---- the flag ----------------------------------------------------------- */

bool ctf_flag_secret_ref(const json_t *def, const char **name, const char **key)
{
    const json_t *dyn = ctf_get2(json_object_get(def, "spec"), "flag", "dynamic");
    if (!json_is_object(dyn))
        return false;
    const char *k = ctf_str2(dyn, "secretRef", "key");
    if (name)
        *name = ctf_str2(dyn, "secretRef", "name");
    if (key)
        *key = ctf_nonempty(k) ? k : KEY_DEFAULT;
    return true;
}

kop_err ctf_secret_value(const json_t *secret, const char *key, unsigned char **out, size_t *len)
{
    const char *in = json_string_value(json_object_get(json_object_get(secret, "data"), key));
    *out = NULL;
    *len = 0;
    if (!in)
        return KOP_ENOTFOUND;
    size_t n = strlen(in);
    if (n > INT_MAX / 2)
        return KOP_EPARSE;
    unsigned char *buf = malloc(n / 4 * 3 + 4);
    if (!buf)
        return KOP_ENOMEM;
    int got = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)n);
    if (got < 0) {
        free(buf);
        return KOP_EPARSE;
    }
    while (n > 0 && in[n - 1] == '=') { /* EVP_DecodeBlock counts padding as bytes */
        got--;
        n--;
    }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return KOP_OK;
}

/* dyn_affixes reads a dynamic flag's prefix and suffix (their defaults when unset). */
static void dyn_affixes(const json_t *dyn, const char **prefix, const char **suffix)
{
    const json_t *p = json_object_get(dyn, "prefix"), *s = json_object_get(dyn, "suffix");
    *prefix = json_is_string(p) ? json_string_value(p) : PREFIX_DEFAULT;
    *suffix = json_is_string(s) ? json_string_value(s) : SUFFIX_DEFAULT;
}

/*
 * hmac_hex writes the first FLAG_HEX_LEN hex digits of
 * HMAC-SHA256(key, "def:team") and a NUL into hex. msg is scratch of
 * msg_size bytes. False when the message does not fit or OpenSSL fails.
 */
static bool hmac_hex(const unsigned char *key, size_t key_len, const char *definition,
                     const char *team, char *msg, size_t msg_size, char hex[FLAG_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int n = snprintf(msg, msg_size, "%s:%s", definition, team);
    bool ok = n > 0 && (size_t)n < msg_size &&
              HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, (size_t)n, md,
                   &mdlen) &&
              mdlen >= FLAG_HEX_LEN / 2;
    for (size_t i = 0; ok && i < FLAG_HEX_LEN / 2; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[ok ? FLAG_HEX_LEN : 0] = '\0';
    OPENSSL_cleanse(md, sizeof md);
    return ok;
}

/* dynamic_flag computes prefix + hex(HMAC-SHA256(key, "def:team"))[0:32] + suffix. */
static kop_err dynamic_flag(const json_t *dyn, const char *definition, const char *team,
                            const unsigned char *key, size_t key_len, char **out, kop_status *st)
{
    const char *prefix, *suffix;
    char hex[FLAG_HEX_LEN + 1];
    char *msg = NULL;
    kop_err err = KOP_ENOMEM;

    dyn_affixes(dyn, &prefix, &suffix);
    if (!ctf_nonempty(definition) || !ctf_nonempty(team)) {
        kop_status_setf(st, 0, NULL, "A dynamic flag needs the definition and the team.");
        return KOP_EINVAL;
    }
    if (!key || key_len == 0 || key_len > (size_t)INT32_MAX) {
        kop_status_setf(st, 0, NULL, "The HMAC key of the dynamic flag is empty.");
        return KOP_EINVAL;
    }
    size_t msg_size = strlen(definition) + 1 + strlen(team) + 1;
    msg = malloc(msg_size);
    if (!msg || !hmac_hex(key, key_len, definition, team, msg, msg_size, hex))
        goto out;

    size_t size = strlen(prefix) + FLAG_HEX_LEN + strlen(suffix) + 1;
    char *flag = malloc(size);
    if (!flag)
        goto out;
    snprintf(flag, size, "%s%s%s", prefix, hex, suffix);
    *out = flag;
    err = KOP_OK;
out:
    OPENSSL_cleanse(hex, sizeof hex);
    free(msg);
    if (err == KOP_ENOMEM)
        kop_status_setf(st, 0, NULL, "Computing the dynamic flag failed.");
    return err;
}

kop_err ctf_flag(const json_t *def, const char *definition_name, const char *team,
                 const unsigned char *key, size_t key_len, char **out, kop_status *st)
{
    const json_t *flag = json_object_get(json_object_get(def, "spec"), "flag");
    const json_t *stat = json_object_get(flag, "static");
    const json_t *dyn = json_object_get(flag, "dynamic");

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!json_is_object(json_object_get(def, "spec")))
        return ctf_invalid(st, "The definition has no spec.");
    if (json_is_string(stat)) {
        *out = strdup(json_string_value(stat));
        return *out ? KOP_OK : KOP_ENOMEM;
    }
    if (json_is_object(dyn))
        return dynamic_flag(dyn, definition_name, team, key, key_len, out, st);
    return KOP_OK; /* no flag: the challenge prints its own */
}

/*
 * ctf_flag_owner: a dynamic flag is prefix + 32 hex digits + suffix, so a
 * submission is first cut into those three parts; one of another length or
 * with other affixes is nobody's flag. Then each team's 32 digits are
 * computed into one stack buffer and compared with CRYPTO_memcmp, and the
 * match (if any) is remembered without leaving the loop.
 */
kop_err ctf_flag_owner(const json_t *def, const char *definition_name, const char *const *teams,
                       size_t n, const char *submission, const unsigned char *key, size_t key_len,
                       size_t *owner, kop_status *st)
{
    const json_t *dyn = ctf_get2(json_object_get(def, "spec"), "flag", "dynamic");
    const char *prefix, *suffix;
    char msg[512], hex[FLAG_HEX_LEN + 1];
    kop_err err = KOP_OK;

    if (!owner || !submission || (n && !teams))
        return KOP_EINVAL;
    *owner = CTF_FLAG_NO_OWNER;
    if (!json_is_object(dyn))
        return KOP_OK; /* static or none: the same for everyone, never attributed */
    if (!ctf_nonempty(definition_name) || !key || key_len == 0 || key_len > (size_t)INT32_MAX) {
        kop_status_setf(st, 0, NULL, "The HMAC key of the dynamic flag is empty.");
        return KOP_EINVAL;
    }
    dyn_affixes(dyn, &prefix, &suffix);
    size_t pl = strlen(prefix), sl = strlen(suffix), len = strlen(submission);
    if (len != pl + FLAG_HEX_LEN + sl || memcmp(submission, prefix, pl) != 0 ||
        memcmp(submission + pl + FLAG_HEX_LEN, suffix, sl) != 0)
        return KOP_OK;
    const char *digits = submission + pl;
    for (size_t i = 0; i < n; i++) {
        if (!ctf_nonempty(teams[i]))
            continue;
        if (!hmac_hex(key, key_len, definition_name, teams[i], msg, sizeof msg, hex)) {
            err = KOP_ENOMEM; /* a name over 500 bytes is no DNS name: only OpenSSL fails here */
            kop_status_setf(st, 0, NULL, "Computing the dynamic flag failed.");
            break;
        }
        bool same = CRYPTO_memcmp(hex, digits, FLAG_HEX_LEN) == 0;
        *owner = same ? i : *owner;
    }
    OPENSSL_cleanse(hex, sizeof hex);
    if (err)
        *owner = CTF_FLAG_NO_OWNER;
    return err;
}

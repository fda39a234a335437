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

/* dynamic_flag computes prefix + hex(HMAC-SHA256(key, "def:team"))[0:32] + suffix. */
static kop_err dynamic_flag(const json_t *dyn, const char *definition, const char *team,
                            const unsigned char *key, size_t key_len, char **out, kop_status *st)
{
    const json_t *p = json_object_get(dyn, "prefix"), *s = json_object_get(dyn, "suffix");
    const char *prefix = json_is_string(p) ? json_string_value(p) : PREFIX_DEFAULT;
    const char *suffix = json_is_string(s) ? json_string_value(s) : SUFFIX_DEFAULT;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char *msg = NULL;
    kop_err err = KOP_ENOMEM;

    if (!ctf_nonempty(definition) || !ctf_nonempty(team)) {
        kop_status_setf(st, 0, NULL, "A dynamic flag needs the definition and the team.");
        return KOP_EINVAL;
    }
    if (!key || key_len == 0 || key_len > (size_t)INT32_MAX) {
        kop_status_setf(st, 0, NULL, "The HMAC key of the dynamic flag is empty.");
        return KOP_EINVAL;
    }
    size_t msg_len = strlen(definition) + 1 + strlen(team);
    msg = malloc(msg_len + 1);
    if (!msg)
        goto out;
    snprintf(msg, msg_len + 1, "%s:%s", definition, team);
    if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, msg_len, md, &mdlen) ||
        mdlen < FLAG_HEX_LEN / 2)
        goto out;

    size_t size = strlen(prefix) + FLAG_HEX_LEN + strlen(suffix) + 1;
    char *flag = malloc(size);
    if (!flag)
        goto out;
    size_t n = (size_t)snprintf(flag, size, "%s", prefix);
    for (size_t i = 0; i < FLAG_HEX_LEN / 2; i++, n += 2)
        snprintf(flag + n, size - n, "%02x", md[i]);
    snprintf(flag + n, size - n, "%s", suffix);
    *out = flag;
    err = KOP_OK;
out:
    OPENSSL_cleanse(md, sizeof md);
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

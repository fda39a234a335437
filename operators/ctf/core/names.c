/*
 * names.c - the names an instance's objects get, deterministically, from
 * the Challenge (its namespace, the Ingress hosts) or a warm instance's id
 * (its namespace), the name of the Challenge the API creates for a team,
 * the labels that tie them back to it, and the name checks the rest of the
 * core shares (see names.h).
 *
 * Deterministic names are what make creating twice the same as creating
 * once: a second request, a retry or a restarted operator computes the same
 * names and finds the same objects.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/json.h"
#include "core/names.h"

#define HOST_HASH_LEN 10

/*
 * sha256_hex writes the first n (even, <= 64) hex digits of SHA-256 over the
 * parts, each followed by a NUL byte.
 */
kop_err ctf_sha256_hex(char *hex, size_t n, const char *const *parts, size_t count)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; ok && i < count; i++)
        ok = EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1);
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return KOP_ENOMEM;
    for (size_t i = 0; i < n / 2; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[n] = '\0';
    return KOP_OK;
}

/* is_dns1035_label: a DNS-1123 label that starts with a letter (Service names). */
bool ctf_is_dns1035_label(const char *s)
{
    return kop_meta_is_valid_dns1123_label(s) && s[0] >= 'a' && s[0] <= 'z';
}

/* is_svc_port_name: an IANA_SVC_NAME, at most 15 of [a-z0-9-] with a letter, no "--". */
bool ctf_is_svc_port_name(const char *s)
{
    size_t n = strlen(s);
    bool letter = false;
    if (n == 0 || n > 15 || !kop_meta_is_valid_dns1123_label(s) || strstr(s, "--"))
        return false;
    for (size_t i = 0; i < n; i++)
        letter = letter || (s[i] >= 'a' && s[i] <= 'z');
    return letter;
}

/* ---- names -------------------------------------------------------------- */

kop_err ctf_instance_namespace(const char *challenge_ns, const char *definition, const char *team,
                               char *out, size_t size)
{
    char part[CTF_NAMESPACE_DEF_MAX + 1];
    char hex[CTF_NAMESPACE_HASH_LEN + 1];
    size_t n = 0;

    if (out && size)
        out[0] = '\0';
    if (!out || size < CTF_NAMESPACE_SIZE || !ctf_nonempty(challenge_ns) ||
        !ctf_nonempty(definition) || !ctf_nonempty(team))
        return KOP_EINVAL;

    /* The definition, lower-cased, runs of other characters as one '-', cut. */
    for (const char *p = definition; *p && n < CTF_NAMESPACE_DEF_MAX; p++) {
        char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (alnum)
            part[n++] = c;
        else if (n > 0 && part[n - 1] != '-')
            part[n++] = '-';
    }
    while (n > 0 && part[n - 1] == '-')
        n--;
    part[n] = '\0';

    const char *parts[] = {challenge_ns, definition, team};
    kop_err err = ctf_sha256_hex(hex, CTF_NAMESPACE_HASH_LEN, parts, CTF_LEN(parts));
    if (err)
        return err;
    snprintf(out, size, "ctf-%s%s%s", part, n ? "-" : "", hex);
    return KOP_OK;
}

kop_err ctf_ingress_host(const ctf_config *cfg, const char *expose, const char *ns, char *out,
                         size_t size)
{
    char full[2 * CTF_HOST_SIZE], hex[HOST_HASH_LEN + 1];
    int keep;

    if (out && size)
        out[0] = '\0';
    if (!cfg || !ctf_nonempty(cfg->ingress_domain) || !ctf_nonempty(expose) || !ctf_nonempty(ns) ||
        !out || strlen(expose) + strlen(ns) >= CTF_HOST_SIZE)
        return KOP_EINVAL;
    snprintf(full, sizeof full, "%s-%s", expose, ns);
    hex[0] = '\0';
    keep = (int)strlen(full);
    if (keep > KOP_META_DNS1123_LABEL_MAX) {
        /* Too long for one label: keep the start, then a hash of the whole. */
        const char *parts[] = {expose, ns};
        kop_err err = ctf_sha256_hex(hex, HOST_HASH_LEN, parts, CTF_LEN(parts));
        if (err)
            return err;
        keep = KOP_META_DNS1123_LABEL_MAX - HOST_HASH_LEN - 1;
        while (keep > 0 && full[keep - 1] == '-')
            keep--;
    }
    int w =
        snprintf(out, size, "%.*s%s%s.%s", keep, full, hex[0] ? "-" : "", hex, cfg->ingress_domain);
    if (w < 0 || (size_t)w >= size || (size_t)w > KOP_META_DNS1123_SUBDOMAIN_MAX) {
        out[0] = '\0';
        return KOP_EINVAL;
    }
    return KOP_OK;
}

kop_err ctf_pool_namespace(const char *def_ns, const char *definition, const char *id, char *out,
                           size_t size)
{
    char team[8 + CTF_POOL_ID_LEN];
    if (out && size)
        out[0] = '\0';
    if (!id || strlen(id) != CTF_POOL_ID_LEN || strspn(id, "0123456789abcdef") != CTF_POOL_ID_LEN)
        return KOP_EINVAL;
    snprintf(team, sizeof team, "pool:%s", id);
    return ctf_instance_namespace(def_ns, definition, team, out, size);
}

kop_err ctf_challenge_name(const char *team, const char *challenge, char *out, size_t size)
{
    const char *parts[] = {challenge, team, NULL};
    if (!team || !challenge)
        return KOP_EINVAL;
    return kop_meta_dns1123_label(out, size, NULL, parts);
}

/* ---- labels ------------------------------------------------------------- */

kop_err ctf_instance_labels(const json_t *challenge, json_t **out, kop_status *st)
{
    const json_t *spec = json_object_get(challenge, "spec");
    const char *fields[][2] = {
        {"metadata.name", kop_meta_name(challenge)},
        {"metadata.namespace", kop_meta_namespace(challenge)},
        {"spec.definition", json_string_value(json_object_get(spec, "definition"))},
        {"spec.team", json_string_value(json_object_get(spec, "team"))},
    };

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < CTF_LEN(fields); i++) {
        if (!ctf_nonempty(fields[i][1]) || !kop_meta_is_valid_label_value(fields[i][1])) {
            kop_status_setf(st, 0, "InvalidChallenge",
                            "The challenge's %s is missing or longer than 63 characters.",
                            fields[i][0]);
            return KOP_EINVAL;
        }
    }
    *out = json_pack("{s:s, s:s, s:s, s:s, s:s}", CTF_LABEL_MANAGED_BY, CTF_MANAGED_BY,
                     CTF_LABEL_TEAM, fields[3][1], CTF_LABEL_DEFINITION, fields[2][1],
                     CTF_LABEL_CHALLENGE, fields[0][1], CTF_LABEL_CHALLENGE_NS, fields[1][1]);
    return *out ? KOP_OK : KOP_ENOMEM;
}

/*
 * meta_names.c - DNS-1123 names (see kop/meta.h): made from a prefix and
 * parts, and checked.
 *
 * Generated names must be deterministic (creating twice is creating once)
 * and valid whatever the parts hold. A name is the parts normalized and
 * joined when that loses nothing and fits; otherwise what fits of them is
 * kept beside a SHA-256 of the original parts, so inputs that normalize
 * or truncate alike still get different names (short of a hash collision).
 *
 * The syntax checks here (name part, subdomain) are also what
 * meta_conditions.c checks a condition type with (meta_internal.h).
 */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "kop/meta.h"
#include "kop_internal.h"
#include "meta_internal.h"

/* ---- syntax ------------------------------------------------------------- */

/*
 * kop__meta_is_name_part matches a qualified name's name part, without a
 * length limit: ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$ on s[0..n).
 */
bool kop__meta_is_name_part(const char *s, size_t n)
{
    if (n == 0 || !kop__is_alnum(s[0]) || !kop__is_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++) {
        if (!kop__is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    }
    return true;
}

/* kop__meta_is_subdomain matches DNS-1123 subdomain syntax on s[0..n), no length limit. */
bool kop__meta_is_subdomain(const char *s, size_t n)
{
    if (n == 0)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!kop__is_lower_alnum(s[i]) && s[i] != '-')
                return false;
            continue;
        }
        /* s[start..i) is one label: non-empty, alphanumeric at both ends. */
        if (i == start || !kop__is_lower_alnum(s[start]) || !kop__is_lower_alnum(s[i - 1]))
            return false;
        start = i + 1;
    }
    return true;
}


/* ---- generated names ---------------------------------------------------- */

/*
 * name_builder accumulates the readable part of a generated name. It counts
 * every character it is given but stores at most max, so the caller learns
 * that the name was too long without holding the whole of it.
 */
struct name_builder {
    char buf[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    size_t len; /* characters given; those past max are not stored */
    size_t max;
};

static void nb_put(struct name_builder *nb, char c)
{
    if (nb->len < nb->max)
        nb->buf[nb->len] = c;
    nb->len++;
}

/*
 * component_is_exact tells whether normalizing s gives s back: non-empty,
 * only allowed characters, separators single and inside. Parts may not
 * contain '-' (it is the joiner); the prefix may.
 */
static bool component_is_exact(const char *s, bool subdomain, bool is_prefix)
{
    size_t n = strlen(s);
    if (n == 0 || !kop__is_lower_alnum(s[0]) || !kop__is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i < n; i++) {
        bool sep = (s[i] == '-' && is_prefix) || (s[i] == '.' && subdomain);
        if (!kop__is_lower_alnum(s[i]) && !sep)
            return false;
        if (sep && !kop__is_lower_alnum(s[i - 1]))
            return false; /* two separators in a row */
    }
    return true;
}

/*
 * add_component appends s normalized: lower-cased, other characters become
 * separators, a run of separators collapses to one ('.' if the run holds a
 * '.' and subdomain is set, else '-'), none at either end.
 */
static void add_component(struct name_builder *nb, const char *s, bool subdomain)
{
    bool emitted = false;
    char pending = 0;
    for (; *s; s++) {
        char c = *s;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (kop__is_lower_alnum(c)) {
            if (!emitted && nb->len > 0)
                nb_put(nb, '-'); /* the joiner */
            else if (pending && emitted)
                nb_put(nb, pending);
            nb_put(nb, c);
            emitted = true;
            pending = 0;
        } else if (c == '.' && subdomain) {
            pending = '.';
        } else if (pending != '.') {
            pending = '-';
        }
    }
}

/* hash_components writes KOP_META_NAME_HASH_LEN hex digits of SHA-256 over the components. */
static kop_err hash_components(char hex[KOP_META_NAME_HASH_LEN + 1], const char *prefix,
                               const char *const *parts)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    if (ok && prefix && *prefix)
        ok = EVP_DigestUpdate(ctx, prefix, strlen(prefix) + 1);
    for (size_t i = 0; ok && parts && parts[i]; i++)
        ok = EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1);
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return KOP_ENOMEM;
    for (int i = 0; i < KOP_META_NAME_HASH_LEN / 2; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return KOP_OK;
}

static kop_err make_name(char *out, size_t size, size_t max, bool subdomain, const char *prefix,
                         const char *const *parts)
{
    struct name_builder nb = {.len = 0, .max = max};
    bool exact = true;

    if (!out || size < max + 1)
        return KOP_EINVAL;
    out[0] = '\0';
    if (prefix && *prefix) {
        exact = component_is_exact(prefix, subdomain, true);
        add_component(&nb, prefix, subdomain);
    }
    for (size_t i = 0; parts && parts[i]; i++) {
        exact = exact && component_is_exact(parts[i], subdomain, false);
        add_component(&nb, parts[i], subdomain);
    }
    if (exact && nb.len > 0 && nb.len <= max) {
        memcpy(out, nb.buf, nb.len);
        out[nb.len] = '\0';
        return KOP_OK;
    }

    /* Information was lost: keep what fits beside "-<hash>" and add the hash. */
    char hex[KOP_META_NAME_HASH_LEN + 1];
    kop_err err = hash_components(hex, prefix, parts);
    if (err)
        return err;
    size_t keep = nb.len < max - KOP_META_NAME_HASH_LEN - 1 ? nb.len
                                                            : max - KOP_META_NAME_HASH_LEN - 1;
    while (keep > 0 && !kop__is_lower_alnum(nb.buf[keep - 1]))
        keep--;
    memcpy(out, nb.buf, keep);
    snprintf(out + keep, size - keep, "%s%s", keep ? "-" : "", hex);
    return KOP_OK;
}

kop_err kop_meta_dns1123_label(char *out, size_t size, const char *prefix,
                               const char *const *parts)
{
    return make_name(out, size, KOP_META_DNS1123_LABEL_MAX, false, prefix, parts);
}

kop_err kop_meta_dns1123_subdomain(char *out, size_t size, const char *prefix,
                                   const char *const *parts)
{
    return make_name(out, size, KOP_META_DNS1123_SUBDOMAIN_MAX, true, prefix, parts);
}

bool kop_meta_is_valid_dns1123_label(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    return n <= KOP_META_DNS1123_LABEL_MAX && kop__meta_is_subdomain(s, n) && !strchr(s, '.');
}

bool kop_meta_is_valid_dns1123_subdomain(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    return n <= KOP_META_DNS1123_SUBDOMAIN_MAX && kop__meta_is_subdomain(s, n);
}

bool kop_meta_is_valid_label_value(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    return n == 0 || (n <= KOP_META_LABEL_VALUE_MAX && kop__meta_is_name_part(s, n));
}

bool kop_meta_is_valid_label_key(const char *s)
{
    if (!s)
        return false;
    const char *slash = strchr(s, '/');
    const char *name = slash ? slash + 1 : s;
    size_t n = strlen(name);
    if (n > KOP_META_LABEL_VALUE_MAX || !kop__meta_is_name_part(name, n))
        return false;
    if (!slash)
        return true;
    size_t plen = (size_t)(slash - s);
    return plen <= KOP_META_DNS1123_SUBDOMAIN_MAX && kop__meta_is_subdomain(s, plen);
}

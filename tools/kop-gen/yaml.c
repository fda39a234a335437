/*
 * yaml.c - a CRD's YAML as a jansson tree, for crd.c.
 *
 * A CRD is small (kilobytes, rarely a megabyte), read once per run, and
 * may come from anywhere: so the conversion is simple and bounded rather
 * than fast. The text is checked to be UTF-8 without NUL before libfyaml
 * sees it (its 0.7 releases can loop on malformed UTF-8 after a directive),
 * nodes are counted with aliases expanded (an alias bomb stops at
 * KOPGEN_NODES_MAX) and nesting stops at four times KOPGEN_DEPTH_MAX (a
 * schema's object and its "properties" mapping are two levels, items and
 * the field another two).
 *
 * Scalars follow the YAML 1.2 core schema, as the apiserver's YAML decoder
 * does: a plain null, ~ or empty value is null; true/false are booleans;
 * decimal, 0x and 0o integers and floats (with .inf/.nan refused: JSON has
 * none) are numbers; any quoted scalar is a string.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "kopgen.h"

struct conv {
    const char *origin;
    size_t nodes;
    kop_status *st;
};

/* utf8_ok returns the offset of the first byte that is NUL or not UTF-8, or len. */
static size_t utf8_ok(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i], n, lo = 0x80, hi = 0xbf;
        if (c == 0)
            return i;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3;
        else
            return i;
        if (n >= len - i)
            return i;
        /* The second byte's range rules out overlongs, surrogates and > U+10FFFF. */
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        else if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        for (unsigned k = 1; k <= n; k++) {
            unsigned b = s[i + k];
            if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xbfu))
                return i;
        }
        i += n + 1;
    }
    return len;
}

/* plain_scalar converts a plain (unquoted) scalar by the YAML 1.2 core schema. */
static json_t *plain_scalar(const char *s, size_t n)
{
    char buf[64];
    if (n == 0 || (n == 1 && s[0] == '~') ||
        (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4))))
        return json_null();
    if ((n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4))))
        return json_true();
    if ((n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5))))
        return json_false();
    if (n < sizeof buf && (s[0] == '-' || s[0] == '+' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) {
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *end;
        int base = 10;
        const char *digits = buf + (buf[0] == '-' || buf[0] == '+');
        if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'o'))
            base = digits[1] == 'x' ? 16 : 8;
        errno = 0;
        if (base == 10) {
            long long v = strtoll(buf, &end, 10);
            if (*end == '\0' && end != buf && errno == 0)
                return json_integer(v);
        } else if (digits[2] != '\0') {
            long long v = strtoll(digits + 2, &end, base);
            if (*end == '\0' && errno == 0)
                return json_integer(buf[0] == '-' ? -v : v);
        }
        errno = 0;
        double d = strtod(buf, &end);
        bool numeric = true; /* strtod also takes "inf", "nan" and hex floats: YAML does not */
        for (const char *p = buf; *p; p++)
            numeric = numeric && strchr("0123456789+-.eE", *p);
        if (numeric && *end == '\0' && end != buf && errno == 0 && isfinite(d))
            return json_real(d);
    }
    return json_stringn(s, n);
}

static kop_err convert(struct conv *c, struct fy_node *n, int depth, json_t **out);

/* mapping converts a YAML mapping; keys must be scalars, the last duplicate wins. */
static kop_err mapping(struct conv *c, struct fy_node *n, int depth, json_t **out)
{
    json_t *obj = json_object();
    kop_err err = obj ? KOP_OK : KOP_ENOMEM;
    void *it = NULL;
    struct fy_node_pair *pair;
    while (!err && (pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *k = fy_node_pair_key(pair);
        if (k && fy_node_is_alias(k))
            k = fy_node_resolve_alias(k);
        size_t klen = 0;
        const char *key = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &klen) : NULL;
        json_t *v = NULL;
        if (!key) {
            char *where = fy_node_get_path(n);
            kop_status_setf(c->st, 0, NULL, "%s: %s: a mapping key is not a scalar", c->origin,
                            where ? where : "?");
            free(where);
            err = KOP_EPARSE;
        } else if (memchr(key, '\0', klen)) {
            kop_status_setf(c->st, 0, NULL, "%s: a mapping key holds a NUL", c->origin);
            err = KOP_EPARSE;
        } else if (!(err = convert(c, fy_node_pair_value(pair), depth + 1, &v))) {
            char *ks = strndup(key, klen);
            if (!ks || json_object_set_new(obj, ks, v))
                err = KOP_ENOMEM;
            free(ks);
        }
    }
    if (err)
        json_decref(obj);
    else
        *out = obj;
    return err;
}

/* convert turns node n into *out (owned), counting nodes and depth. */
static kop_err convert(struct conv *c, struct fy_node *n, int depth, json_t **out)
{
    *out = NULL;
    if (n && fy_node_is_alias(n)) {
        n = fy_node_resolve_alias(n);
        if (!n) {
            kop_status_setf(c->st, 0, NULL, "%s: an alias names no anchor", c->origin);
            return KOP_EPARSE;
        }
    }
    if (++c->nodes > KOPGEN_NODES_MAX) {
        kop_status_setf(c->st, 0, NULL, "%s: more than %d YAML nodes (aliases expanded)",
                        c->origin, KOPGEN_NODES_MAX);
        return KOP_ETOOBIG;
    }
    if (depth > 4 * KOPGEN_DEPTH_MAX) {
        kop_status_setf(c->st, 0, NULL, "%s: nested deeper than %d", c->origin,
                        4 * KOPGEN_DEPTH_MAX);
        return KOP_ETOOBIG;
    }
    if (!n) {
        *out = json_null();
        return KOP_OK;
    }
    if (fy_node_is_mapping(n))
        return mapping(c, n, depth, out);
    if (fy_node_is_sequence(n)) {
        json_t *arr = json_array();
        void *it = NULL;
        struct fy_node *item;
        kop_err err = arr ? KOP_OK : KOP_ENOMEM;
        while (!err && (item = fy_node_sequence_iterate(n, &it))) {
            json_t *v = NULL;
            if (!(err = convert(c, item, depth + 1, &v)) && json_array_append_new(arr, v))
                err = KOP_ENOMEM;
        }
        if (err)
            json_decref(arr);
        else
            *out = arr;
        return err;
    }
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    if (!s) {
        s = "";
        len = 0;
    }
    *out = fy_node_get_style(n) == FYNS_PLAIN ? plain_scalar(s, len) : json_stringn(s, len);
    return *out ? KOP_OK : KOP_ENOMEM;
}

static void diag_discard(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
}

kop_err kopgen_yaml_to_json(const char *text, size_t len, const char *origin, json_t **out,
                            kop_status *st)
{
    struct conv c = {.origin = origin ? origin : "<input>", .st = st};
    struct fy_diag *diag = NULL;
    struct fy_document *doc = NULL;
    struct fy_diag_cfg dcfg;
    kop_err err = KOP_OK;

    *out = NULL;
    if (len > KOPGEN_INPUT_MAX) {
        kop_status_setf(st, 0, NULL, "%s: larger than %u bytes", c.origin, KOPGEN_INPUT_MAX);
        return KOP_ETOOBIG;
    }
    size_t bad = utf8_ok((const unsigned char *)text, len);
    if (bad < len) {
        kop_status_setf(st, 0, NULL, "%s: not UTF-8 text (%s at byte %zu)", c.origin,
                        text[bad] ? "malformed UTF-8" : "NUL", bad);
        return KOP_EPARSE;
    }
    /* Diagnostics are collected for the message, never printed. */
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_discard;
    dcfg.colorize = false;
    if (!(diag = fy_diag_create(&dcfg)))
        return KOP_ENOMEM;
    fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DISABLE_RECYCLING, .diag = diag};
    doc = fy_document_build_from_string(&pcfg, text, len);
    if (!doc || !fy_document_root(doc)) {
        void *it = NULL;
        struct fy_diag_error *de = fy_diag_errors_iterate(diag, &it);
        if (de)
            kop_status_setf(st, 0, NULL, "%s:%d:%d: invalid YAML: %s", c.origin, de->line,
                            de->column, de->msg ? de->msg : "syntax error");
        else
            kop_status_setf(st, 0, NULL, "%s: no YAML document", c.origin);
        err = KOP_EPARSE;
        goto out;
    }
    err = convert(&c, fy_document_root(doc), 0, out);
    if (err == KOP_ENOMEM)
        kop_status_setf(st, 0, NULL, "%s: out of memory", c.origin);
out:
    fy_document_destroy(doc);
    fy_diag_destroy(diag);
    return err;
}

/*
 * fuzz_json_patch.c - libFuzzer target for the JSON patch libkop builds:
 * kop_meta_finalizers_patch (the guarded finalizer patch the CTF operator
 * sends) together with kop_meta_add_finalizer / kop_meta_remove_finalizer,
 * on objects as the cache may hold them (any JSON).
 *
 * Input layout: byte 0 picks add (even) or remove (odd); the rest is
 * "<finalizer>\n<JSON document>".
 *
 * The target carries a small RFC 6902 applier (test, add, replace; JSON
 * Pointer with ~0/~1 escapes) standing in for the apiserver. Invariants,
 * abort() on violation:
 *  - add/remove report a change exactly when the object changed; after a
 *    reported add the finalizer is there once, after a remove it is gone
 *    and every other entry is kept, in order;
 *  - a built patch is an array of 1 or 2 operations, survives the trip
 *    through its wire form unchanged, and applied to the object as read
 *    gives exactly the edited object: nothing else changes;
 *  - applied to the object after someone else changed its finalizers (or,
 *    when it had none, anything), a guarded patch is refused: another
 *    controller's finalizer is never overwritten;
 *  - applied after a write of other fields (status), a patch guarded by the
 *    list still applies.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kop/meta.h"

#define OTHER "other.example.com/finalizer"

/* ---- a reference RFC 6902 applier ---------------------------------------- */

/* token copies the next JSON Pointer token of *p, unescaped, into a new string. */
static char *token(const char **p)
{
    const char *s = *p + 1, *end = strchr(s, '/');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
            *o++ = s[i + 1] == '0' ? '~' : '/';
            i++;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    *p = s + n;
    return out;
}

/* index_of reads an array index token ("-" is one past the end). */
static bool index_of(const char *t, size_t len, bool dash_ok, size_t *out)
{
    if (dash_ok && strcmp(t, "-") == 0) {
        *out = len;
        return true;
    }
    if (!t[0] || (t[0] == '0' && t[1]) || strspn(t, "0123456789") != strlen(t) || strlen(t) > 9)
        return false;
    *out = (size_t)strtoul(t, NULL, 10);
    return true;
}

/* locate walks ptr to the parent of its last token; *last is that token (owned). */
static json_t *locate(json_t *doc, const char *ptr, char **last)
{
    json_t *cur = doc;
    *last = NULL;
    if (ptr[0] != '/')
        return NULL;
    for (;;) {
        char *t = token(&ptr);
        if (!t)
            return NULL;
        if (!*ptr) {
            *last = t;
            return cur;
        }
        size_t i;
        json_t *next = json_is_object(cur) ? json_object_get(cur, t)
                       : json_is_array(cur) && index_of(t, json_array_size(cur), false, &i)
                           ? json_array_get(cur, i)
                           : NULL;
        free(t);
        if (!next)
            return NULL;
        cur = next;
    }
}

static json_t *get_at(json_t *doc, const char *ptr)
{
    char *last;
    json_t *parent = locate(doc, ptr, &last), *v = NULL;
    size_t i;
    if (parent && json_is_object(parent))
        v = json_object_get(parent, last);
    else if (parent && json_is_array(parent) && index_of(last, json_array_size(parent), false, &i))
        v = json_array_get(parent, i);
    free(last);
    return v;
}

/* op_apply applies one operation in place; false when it fails. */
static bool op_apply(json_t *doc, const json_t *op)
{
    const char *name = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    json_t *value = json_object_get(op, "value");
    if (!name || !path || !value)
        return false;
    if (strcmp(name, "test") == 0) {
        json_t *at = get_at(doc, path);
        return at && json_equal(at, value);
    }
    char *last;
    json_t *parent = locate(doc, path, &last);
    bool ok = false;
    size_t i;
    if (!parent) {
        ok = false;
    } else if (json_is_object(parent)) {
        bool exists = json_object_get(parent, last) != NULL;
        if (strcmp(name, "add") == 0 || (strcmp(name, "replace") == 0 && exists))
            ok = json_object_set(parent, last, value) == 0;
    } else if (json_is_array(parent)) {
        size_t n = json_array_size(parent);
        if (strcmp(name, "add") == 0 && index_of(last, n, true, &i) && i <= n)
            ok = json_array_insert(parent, i, value) == 0;
        else if (strcmp(name, "replace") == 0 && index_of(last, n, false, &i) && i < n)
            ok = json_array_set(parent, i, value) == 0;
    }
    free(last);
    return ok;
}

/* patch_apply applies patch to a copy of doc: the result (owned), or NULL when refused. */
static json_t *patch_apply(const json_t *doc, const json_t *patch)
{
    json_t *out = json_deep_copy(doc), *op;
    size_t i;
    json_array_foreach(patch, i, op)
    {
        if (!op_apply(out, op)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ---- the invariants --------------------------------------------------------- */

static json_t *finalizers_of(const json_t *obj)
{
    return json_object_get(json_object_get(obj, "metadata"), "finalizers");
}

static size_t count(const json_t *list, const char *f)
{
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(list, i, v)
        n += json_is_string(v) && strcmp(json_string_value(v), f) == 0;
    return n;
}

/* check_edit: what add or remove did to obj (was: before). */
static void check_edit(const json_t *was, const json_t *obj, bool add, bool changed, const char *f)
{
    FUZZ_CHECK(changed == !json_equal(was, obj));
    if (!changed)
        return;
    const json_t *before = finalizers_of(was), *after = finalizers_of(obj);
    FUZZ_CHECK(json_is_array(after));
    if (add) {
        FUZZ_CHECK(kop_meta_has_finalizer(obj, f) && count(after, f) == 1);
        FUZZ_CHECK(json_array_size(after) == json_array_size(before) + 1);
        return;
    }
    FUZZ_CHECK(!kop_meta_has_finalizer(obj, f));
    size_t j = 0, i;
    json_t *v;
    json_array_foreach(before, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), f) == 0)
            continue;
        FUZZ_CHECK(json_equal(v, json_array_get(after, j)));
        j++;
    }
    FUZZ_CHECK(j == json_array_size(after));
}

static void check_patch(const json_t *obj, const json_t *now, const json_t *patch)
{
    size_t n = json_array_size(patch);
    FUZZ_CHECK(json_is_array(patch) && n >= 1 && n <= 2);

    /* The wire form. */
    char *text = json_dumps(patch, JSON_COMPACT);
    FUZZ_CHECK(text);
    json_t *back = json_loads(text, 0, NULL);
    FUZZ_CHECK(back && json_equal(back, patch));
    json_decref(back);
    free(text);

    /* On the object as read: exactly the edit. */
    json_t *got = patch_apply(obj, patch);
    FUZZ_CHECK(got && json_equal(got, now));
    json_decref(got);

    /* After someone else's change: refused, when guarded. */
    bool guarded = n == 2;
    json_t *theirs = json_deep_copy(obj);
    json_t *list = finalizers_of(theirs);
    if (list)
        json_array_append_new(list, json_string(OTHER));
    else
        json_object_set_new(json_object_get(theirs, "metadata"), "finalizers",
                            json_pack("[s]", OTHER));
    json_object_set_new(json_object_get(theirs, "metadata"), "resourceVersion",
                        json_string("changed-by-them"));
    got = patch_apply(theirs, patch);
    FUZZ_CHECK(!guarded || got == NULL);
    json_decref(got);
    json_decref(theirs);

    /* After our own status write: still applies when guarded by the list. */
    if (finalizers_of(obj)) {
        json_t *ours = json_deep_copy(obj);
        json_object_set_new(ours, "status", json_pack("{s:s}", "currentStatus", "Running"));
        json_object_set_new(json_object_get(ours, "metadata"), "resourceVersion",
                            json_string("after-status"));
        got = patch_apply(ours, patch);
        FUZZ_CHECK(got && json_equal(finalizers_of(got), finalizers_of(now)));
        json_decref(got);
        json_decref(ours);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool add = (data[0] & 1) == 0;
    const char *rest = (const char *)data + 1;
    size_t len = size - 1;
    const char *nl = memchr(rest, '\n', len);
    if (!nl)
        return 0;
    char *f = strndup(rest, (size_t)(nl - rest));
    json_t *obj = json_loadb(nl + 1, len - (size_t)(nl + 1 - rest), JSON_DECODE_ANY, NULL);
    if (!f || !obj) {
        free(f);
        json_decref(obj);
        return 0;
    }
    json_t *now = json_deep_copy(obj);
    bool changed = add ? kop_meta_add_finalizer(now, f) : kop_meta_remove_finalizer(now, f);
    check_edit(obj, now, add, changed, f);

    json_t *patch = NULL;
    kop_err err = kop_meta_finalizers_patch(obj, finalizers_of(now), &patch);
    if (err == KOP_OK)
        check_patch(obj, now, patch);
    else
        FUZZ_CHECK(err == KOP_EINVAL && patch == NULL);
    json_decref(patch);
    json_decref(now);
    json_decref(obj);
    free(f);
    return 0;
}

/*
 * meta.c - object metadata helpers (see kop/meta.h): accessors, labels and
 * annotations, finalizers, object keys, and the one JSON serializer.
 *
 * Workload: every reconcile reads names and conditions, adds or removes a
 * finalizer, stamps owner references on what it creates, and sets one to
 * three conditions on the way out. Objects are small (a few KB), so the
 * helpers walk jansson trees directly; none allocates unless it changes
 * the object.
 *
 * Invariants (of every meta_*.c file): a helper that fails or reports "no
 * change" has not modified the object. Entries it replaces (an owner
 * reference, a condition) are rebuilt from a copy of the old entry, so
 * fields it does not know survive.
 *
 * The module's other concepts have their own files: meta_owner.c (owner
 * references), meta_conditions.c (conditions), meta_names.c (DNS-1123
 * names); meta_internal.h holds what they share.
 */
#include <stdio.h>
#include <string.h>

#include "kop/buf.h"
#include "kop/meta.h"
#include "kop_internal.h"
#include "meta_internal.h"

/* ---- small helpers ------------------------------------------------------ */

static const char *meta_string(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(kop__meta_of(obj), key));
}

json_t *kop__meta_child_object(json_t *parent, const char *key)
{
    if (!json_is_object(parent))
        return NULL;
    json_t *o = json_object_get(parent, key);
    if (o)
        return json_is_object(o) ? o : NULL;
    o = json_object();
    if (!o || json_object_set_new(parent, key, o) != 0)
        return NULL;
    return o;
}

/* ---- getters ------------------------------------------------------------ */

const char *kop_meta_name(const json_t *obj)
{
    return meta_string(obj, "name");
}

const char *kop_meta_namespace(const json_t *obj)
{
    return meta_string(obj, "namespace");
}

const char *kop_meta_uid(const json_t *obj)
{
    return meta_string(obj, "uid");
}

const char *kop_meta_resource_version(const json_t *obj)
{
    return meta_string(obj, "resourceVersion");
}

int64_t kop_meta_generation(const json_t *obj)
{
    return (int64_t)json_integer_value(json_object_get(kop__meta_of(obj), "generation"));
}

bool kop_meta_is_deleting(const json_t *obj)
{
    const json_t *ts = json_object_get(kop__meta_of(obj), "deletionTimestamp");
    return ts != NULL && !json_is_null(ts);
}

/* ---- labels and annotations -------------------------------------------- */

static const char *map_get(const json_t *obj, const char *map, const char *key)
{
    if (!key)
        return NULL;
    return json_string_value(json_object_get(json_object_get(kop__meta_of(obj), map), key));
}

/* map_set sets or (value NULL) removes metadata.<map>[key]. */
static bool map_set(json_t *obj, const char *map, const char *key, const char *value)
{
    if (!json_is_object(obj) || !key)
        return false;
    if (!value) {
        json_t *m = json_object_get(kop__meta_of(obj), map);
        return json_object_get(m, key) && json_object_del(m, key) == 0;
    }
    if (kop_streq(map_get(obj, map, key), value))
        return false;
    /* A key or value that is not UTF-8 cannot be stored: refuse it before
     * creating metadata or the map, so that obj stays as it was. */
    json_t *v = json_string(value), *k = json_string(key);
    json_t *meta = v && k ? kop__meta_child_object(obj, "metadata") : NULL;
    json_t *m = meta ? kop__meta_child_object(meta, map) : NULL;
    json_decref(k);
    if (!m) {
        json_decref(v);
        return false;
    }
    return json_object_set_new(m, key, v) == 0;
}

const char *kop_meta_label(const json_t *obj, const char *key)
{
    return map_get(obj, "labels", key);
}

bool kop_meta_set_label(json_t *obj, const char *key, const char *value)
{
    return map_set(obj, "labels", key, value);
}

const char *kop_meta_annotation(const json_t *obj, const char *key)
{
    return map_get(obj, "annotations", key);
}

bool kop_meta_set_annotation(json_t *obj, const char *key, const char *value)
{
    return map_set(obj, "annotations", key, value);
}

/* ---- finalizers --------------------------------------------------------- */

bool kop_meta_has_finalizer(const json_t *obj, const char *f)
{
    const json_t *arr = json_object_get(kop__meta_of(obj), "finalizers");
    size_t i;
    json_t *v;
    if (!f)
        return false;
    json_array_foreach(arr, i, v)
    {
        if (kop_streq(json_string_value(v), f))
            return true;
    }
    return false;
}

bool kop_meta_add_finalizer(json_t *obj, const char *f)
{
    if (!f || !json_is_object(obj) || kop_meta_has_finalizer(obj, f))
        return false;
    json_t *arr = json_object_get(json_object_get(obj, "metadata"), "finalizers");
    if (arr && !json_is_array(arr))
        return false;
    /* Made first: f that is not UTF-8 has no JSON string, and then nothing
     * may have changed (found by test/fuzz/fuzz_json_patch.c). */
    json_t *s = json_string(f);
    json_t *meta = s ? kop__meta_child_object(obj, "metadata") : NULL;
    if (meta && !arr) {
        arr = json_array();
        if (arr && json_object_set_new(meta, "finalizers", arr) != 0)
            arr = NULL;
    }
    if (!arr) {
        json_decref(s);
        return false;
    }
    return json_array_append_new(arr, s) == 0;
}

bool kop_meta_remove_finalizer(json_t *obj, const char *f)
{
    json_t *arr = json_object_get(kop__meta_of(obj), "finalizers");
    bool changed = false;
    if (!f || !json_is_array(arr))
        return false;
    for (size_t i = json_array_size(arr); i-- > 0;) {
        if (kop_streq(json_string_value(json_array_get(arr, i)), f)) {
            json_array_remove(arr, i);
            changed = true;
        }
    }
    return changed;
}

kop_err kop_meta_finalizers_patch(const json_t *obj, const json_t *finalizers, json_t **out)
{
    static const char path[] = "/metadata/finalizers";
    const json_t *meta = kop__meta_of(obj), *was = json_object_get(meta, "finalizers"), *v;
    const char *rv = meta_string(obj, "resourceVersion");
    size_t i;
    *out = NULL;
    if (!json_is_object(meta) || !json_is_array(finalizers))
        return KOP_EINVAL;
    json_array_foreach(finalizers, i, v)
    {
        if (!json_is_string(v))
            return KOP_EINVAL;
    }
    json_t *patch;
    if (was)
        /* The list as read must still be there: a finalizer added or
         * removed meanwhile by anyone makes the test, and the patch, fail. */
        patch = json_pack("[{s:s, s:s, s:O}, {s:s, s:s, s:O}]", "op", "test", "path", path, "value",
                          was, "op", "replace", "path", path, "value", finalizers);
    else if (rv)
        /* No list to test: the object itself must be unchanged, or an "add"
         * would replace a list someone created meanwhile. */
        patch = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:O}]", "op", "test", "path",
                          "/metadata/resourceVersion", "value", rv, "op", "add", "path", path,
                          "value", finalizers);
    else
        patch = json_pack("[{s:s, s:s, s:O}]", "op", "add", "path", path, "value", finalizers);
    if (!patch)
        return KOP_ENOMEM;
    *out = patch;
    return KOP_OK;
}


/* ---- object keys -------------------------------------------------------- */

kop_err kop_meta_key(char *out, size_t size, const char *ns, const char *name)
{
    if (!out || size == 0)
        return KOP_ETOOBIG;
    out[0] = '\0';
    if (!name || !*name)
        return KOP_EINVAL;
    int n = ns && *ns ? snprintf(out, size, "%s/%s", ns, name) : snprintf(out, size, "%s", name);
    if (n < 0 || (size_t)n >= size) {
        out[0] = '\0';
        return KOP_ETOOBIG;
    }
    return KOP_OK;
}

/* copy_part copies s[0..n) into out as a string. */
static kop_err copy_part(char *out, size_t size, const char *s, size_t n)
{
    if (!out || n >= size)
        return KOP_ETOOBIG;
    memcpy(out, s, n);
    out[n] = '\0';
    return KOP_OK;
}

kop_err kop_meta_split_key(const char *key, char *ns, size_t ns_size, char *name,
                           size_t name_size)
{
    if (ns && ns_size)
        ns[0] = '\0';
    if (name && name_size)
        name[0] = '\0';
    if (!key || !*key)
        return KOP_EINVAL;
    const char *slash = strchr(key, '/');
    if (!slash)
        return copy_part(name, name_size, key, strlen(key));
    if (slash == key || !slash[1] || strchr(slash + 1, '/'))
        return KOP_EINVAL;
    kop_err err = copy_part(ns, ns_size, key, (size_t)(slash - key));
    if (!err)
        err = copy_part(name, name_size, slash + 1, strlen(slash + 1));
    if (err && ns && ns_size)
        ns[0] = '\0';
    return err;
}

/* ---- serializing -------------------------------------------------------- */

#define DUMP_MAX ((size_t)1 << 30) /* nothing libkop serializes comes near */

struct dump_ctx {
    kop_buf text;
    bool failed; /* sticky: a piece that did not fit fails every later one */
};

static int dump_piece(const char *piece, size_t n, void *user)
{
    struct dump_ctx *c = user;
    if (!c->failed && kop_buf_append(&c->text, piece, n) != KOP_OK)
        c->failed = true;
    return c->failed ? -1 : 0;
}

char *kop_meta_dumps(const json_t *v, size_t flags)
{
    struct dump_ctx c = {.failed = false};
    char *out = NULL;
    if (!v)
        return NULL;
    kop_buf_init(&c.text, DUMP_MAX);
    if (json_dump_callback(v, dump_piece, &c, flags) == 0 && !c.failed)
        out = kop_buf_take(&c.text, NULL);
    kop_buf_fini(&c.text);
    return out;
}

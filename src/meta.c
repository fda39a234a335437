/*
 * meta.c - object metadata helpers (see kop/meta.h).
 *
 * Workload: every reconcile reads names and conditions, adds or removes a
 * finalizer, stamps owner references on what it creates, and sets one to
 * three conditions on the way out. Objects are small (a few KB), so the
 * helpers walk jansson trees directly; none allocates unless it changes
 * the object.
 *
 * Invariants: a helper that fails or reports "no change" has not modified
 * the object. Entries it replaces (an owner reference, a condition) are
 * rebuilt from a copy of the old entry, so fields it does not know survive.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "kop/buf.h"
#include "kop/meta.h"
#include "kop_internal.h"

/* ---- small helpers ------------------------------------------------------ */

static json_t *metadata(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

static const char *meta_string(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(metadata(obj), key));
}

/* str_eq compares two possibly NULL strings; NULL equals only NULL. */
/*
 * child_object returns parent[key] as an object, creating it when absent.
 * NULL when parent is not an object, parent[key] is something else, or
 * memory runs out.
 */
static json_t *child_object(json_t *parent, const char *key)
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

static const char *or_unknown(const char *s)
{
    return s ? s : "?";
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
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
    return (int64_t)json_integer_value(json_object_get(metadata(obj), "generation"));
}

bool kop_meta_is_deleting(const json_t *obj)
{
    const json_t *ts = json_object_get(metadata(obj), "deletionTimestamp");
    return ts != NULL && !json_is_null(ts);
}

/* ---- labels and annotations -------------------------------------------- */

static const char *map_get(const json_t *obj, const char *map, const char *key)
{
    if (!key)
        return NULL;
    return json_string_value(json_object_get(json_object_get(metadata(obj), map), key));
}

/* map_set sets or (value NULL) removes metadata.<map>[key]. */
static bool map_set(json_t *obj, const char *map, const char *key, const char *value)
{
    if (!json_is_object(obj) || !key)
        return false;
    if (!value) {
        json_t *m = json_object_get(metadata(obj), map);
        return json_object_get(m, key) && json_object_del(m, key) == 0;
    }
    if (kop_streq(map_get(obj, map, key), value))
        return false;
    /* A key or value that is not UTF-8 cannot be stored: refuse it before
     * creating metadata or the map, so that obj stays as it was. */
    json_t *v = json_string(value), *k = json_string(key);
    json_t *m = v && k ? child_object(child_object(obj, "metadata"), map) : NULL;
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
    const json_t *arr = json_object_get(metadata(obj), "finalizers");
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
    json_t *meta = s ? child_object(obj, "metadata") : NULL;
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
    json_t *arr = json_object_get(metadata(obj), "finalizers");
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
    const json_t *meta = metadata(obj), *was = json_object_get(meta, "finalizers"), *v;
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

/* ---- owner references --------------------------------------------------- */

/* same_group compares the API groups of two apiVersions ("apps/v1", "v1"). */
static bool same_group(const char *a, const char *b)
{
    if (!a || !b)
        return false;
    const char *sa = strchr(a, '/'), *sb = strchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
    return la == lb && strncmp(a, b, la) == 0;
}

/*
 * same_object tells whether an ownerReferences entry names the object
 * (group, kind, name), as controller-runtime's referSameObject does: the
 * version may differ, and a recreated owner with a new uid is the same.
 */
static bool same_object(const json_t *ref, const char *api_version, const char *kind,
                        const char *name)
{
    return same_group(json_string_value(json_object_get(ref, "apiVersion")), api_version) &&
           kop_streq(json_string_value(json_object_get(ref, "kind")), kind) &&
           kop_streq(json_string_value(json_object_get(ref, "name")), name);
}

json_t *kop_meta_controller_ref(const json_t *obj)
{
    const json_t *refs = json_object_get(metadata(obj), "ownerReferences");
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (json_is_true(json_object_get(ref, "controller")))
            return ref;
    }
    return NULL;
}

bool kop_meta_is_controlled_by(const json_t *obj, const char *owner_uid)
{
    const json_t *ref = kop_meta_controller_ref(obj);
    return ref && owner_uid && kop_streq(json_string_value(json_object_get(ref, "uid")), owner_uid);
}

kop_err kop_meta_set_controller_ref(json_t *child, const json_t *owner, kop_status *st)
{
    const char *api_version = json_string_value(json_object_get(owner, "apiVersion"));
    const char *kind = json_string_value(json_object_get(owner, "kind"));
    const char *name = kop_meta_name(owner), *uid = kop_meta_uid(owner);
    const char *owner_ns = kop_meta_namespace(owner), *child_ns = kop_meta_namespace(child);

    if (!json_is_object(child)) {
        kop_status_setf(st, 0, NULL, "controller reference: the child is not an object");
        return KOP_EINVAL;
    }
    if (!api_version || !*api_version || !kind || !*kind || !name || !*name || !uid || !*uid) {
        kop_status_setf(st, 0, NULL,
                        "controller reference: the owner needs apiVersion, kind, "
                        "metadata.name and metadata.uid");
        return KOP_EINVAL;
    }
    if (owner_ns && *owner_ns && child_ns && *child_ns && strcmp(owner_ns, child_ns) != 0) {
        kop_status_setf(st, 0, NULL,
                        "controller reference: %s %s/%s cannot own an object in namespace %s "
                        "(cross-namespace owner references are disallowed)",
                        kind, owner_ns, name, child_ns);
        return KOP_EINVAL;
    }
    json_t *refs = json_object_get(metadata(child), "ownerReferences");
    if (refs && !json_is_array(refs)) {
        kop_status_setf(st, 0, NULL, "controller reference: ownerReferences is not an array");
        return KOP_EINVAL;
    }
    const json_t *current = kop_meta_controller_ref(child);
    if (current && !same_object(current, api_version, kind, name)) {
        const char *child_name = kop_meta_name(child);
        kop_status_setf(st, 0, NULL, "%s is already controlled by %s %s (uid %s)",
                        child_name ? child_name : "the object",
                        or_unknown(json_string_value(json_object_get(current, "kind"))),
                        or_unknown(json_string_value(json_object_get(current, "name"))),
                        or_unknown(json_string_value(json_object_get(current, "uid"))));
        return KOP_EALREADYEXISTS;
    }

    /* Replace the entry naming this owner, keeping its unknown fields, or append. */
    size_t idx = json_array_size(refs), i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (same_object(ref, api_version, kind, name)) {
            idx = i;
            break;
        }
    }
    json_t *old = json_array_get(refs, idx);
    json_t *entry = old ? json_copy(old) : json_object();
    if (!entry || json_object_set_new(entry, "apiVersion", json_string(api_version)) ||
        json_object_set_new(entry, "kind", json_string(kind)) ||
        json_object_set_new(entry, "name", json_string(name)) ||
        json_object_set_new(entry, "uid", json_string(uid)) ||
        json_object_set_new(entry, "controller", json_true()) ||
        json_object_set_new(entry, "blockOwnerDeletion", json_true()))
        goto nomem;
    if (old && json_equal(old, entry)) {
        json_decref(entry);
        return KOP_OK;
    }
    if (!refs) {
        json_t *meta = child_object(child, "metadata");
        refs = json_array();
        if (!meta || !refs || json_object_set_new(meta, "ownerReferences", refs) != 0)
            goto nomem;
    }
    if ((old ? json_array_set_new(refs, idx, entry) : json_array_append_new(refs, entry)) != 0) {
        entry = NULL; /* the _new setters release their argument on failure */
        goto nomem;
    }
    return KOP_OK;
nomem:
    json_decref(entry);
    return KOP_ENOMEM;
}

/* ---- conditions --------------------------------------------------------- */

/*
 * is_name_part matches a qualified name's name part, without a length
 * limit: ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$ on s[0..n).
 */
static bool is_name_part(const char *s, size_t n)
{
    if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++) {
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    }
    return true;
}

/* is_subdomain matches DNS-1123 subdomain syntax on s[0..n), without a length limit. */
static bool is_subdomain(const char *s, size_t n)
{
    if (n == 0)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!is_lower_alnum(s[i]) && s[i] != '-')
                return false;
            continue;
        }
        /* s[start..i) is one label: non-empty, alphanumeric at both ends. */
        if (i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
            return false;
        start = i + 1;
    }
    return true;
}

/* is_condition_type matches metav1.Condition's type pattern: [subdomain/]name-part. */
static bool is_condition_type(const char *s)
{
    size_t n = strlen(s);
    const char *slash = strchr(s, '/');
    if (n > KOP_CONDITION_TYPE_MAX)
        return false;
    if (!slash)
        return is_name_part(s, n);
    size_t plen = (size_t)(slash - s);
    return is_subdomain(s, plen) && is_name_part(slash + 1, n - plen - 1);
}

/* is_reason matches ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (CamelCase). */
static bool is_reason(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > KOP_CONDITION_REASON_MAX)
        return false;
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++) {
        bool inner = is_alnum(s[i]) || s[i] == '_' || s[i] == ',' || s[i] == ':';
        if (!inner || (i == n - 1 && (s[i] == ',' || s[i] == ':')))
            return false;
    }
    return true;
}

static kop_err validate_condition(const json_t *status, const kop_condition *c, kop_status *st)
{
    if (!json_is_object(status) || !c) {
        kop_status_setf(st, 0, NULL, "condition: status is not an object");
        return KOP_EINVAL;
    }
    json_t *conds = json_object_get(status, "conditions");
    if (conds && !json_is_array(conds)) {
        kop_status_setf(st, 0, NULL, "condition: status.conditions is not an array");
        return KOP_EINVAL;
    }
    if (!c->type || !is_condition_type(c->type)) {
        kop_status_setf(st, 0, NULL, "condition: invalid type \"%s\": must be a qualified name",
                        c->type ? c->type : "");
        return KOP_EINVAL;
    }
    if (!c->status || (strcmp(c->status, KOP_CONDITION_TRUE) != 0 &&
                       strcmp(c->status, KOP_CONDITION_FALSE) != 0 &&
                       strcmp(c->status, KOP_CONDITION_UNKNOWN) != 0)) {
        kop_status_setf(st, 0, NULL,
                        "condition %s: invalid status \"%s\": must be True, False or Unknown",
                        c->type, c->status ? c->status : "");
        return KOP_EINVAL;
    }
    if (!c->reason || !is_reason(c->reason)) {
        kop_status_setf(st, 0, NULL,
                        "condition %s: invalid reason \"%.64s\": must be CamelCase "
                        "([A-Za-z][A-Za-z0-9_,:]*, at most 1024)",
                        c->type, c->reason ? c->reason : "");
        return KOP_EINVAL;
    }
    if (c->message && strlen(c->message) > KOP_CONDITION_MESSAGE_MAX) {
        kop_status_setf(st, 0, NULL, "condition %s: message longer than %d bytes", c->type,
                        KOP_CONDITION_MESSAGE_MAX);
        return KOP_EINVAL;
    }
    if (c->observed_generation < 0) {
        kop_status_setf(st, 0, NULL, "condition %s: negative observedGeneration", c->type);
        return KOP_EINVAL;
    }
    return KOP_OK;
}

/* find_condition returns the index of the condition of type in conds, or -1. */
static long find_condition(const json_t *conds, const char *type)
{
    size_t i;
    json_t *v;
    if (!type)
        return -1;
    json_array_foreach(conds, i, v)
    {
        if (kop_streq(json_string_value(json_object_get(v, "type")), type))
            return (long)i;
    }
    return -1;
}

/*
 * fill_condition writes c's fields into entry, in metav1's field order for a
 * new entry. lastTransitionTime becomes now when the status changes or the
 * entry has none. Non-zero when memory runs out.
 */
static int fill_condition(json_t *entry, const kop_condition *c, time_t now)
{
    const char *old_status = json_string_value(json_object_get(entry, "status"));
    bool transition = !kop_streq(old_status, c->status) ||
                      !json_is_string(json_object_get(entry, "lastTransitionTime"));
    int rc = json_object_set_new(entry, "type", json_string(c->type));
    rc |= json_object_set_new(entry, "status", json_string(c->status));
    if (c->observed_generation > 0)
        rc |= json_object_set_new(entry, "observedGeneration",
                                  json_integer((json_int_t)c->observed_generation));
    else
        json_object_del(entry, "observedGeneration");
    if (transition) {
        char ts[32];
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
        rc |= json_object_set_new(entry, "lastTransitionTime", json_string(ts));
    }
    rc |= json_object_set_new(entry, "reason", json_string(c->reason));
    rc |= json_object_set_new(entry, "message", json_string(c->message ? c->message : ""));
    return rc;
}

kop_err kop_meta_set_condition(json_t *status, const kop_condition *c, time_t now, bool *changed,
                               kop_status *st)
{
    if (changed)
        *changed = false;
    kop_err err = validate_condition(status, c, st);
    if (err)
        return err;
    json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, c->type);
    json_t *old = idx >= 0 ? json_array_get(conds, (size_t)idx) : NULL;
    /* A copy is edited and swapped in, so a failure leaves status as it was. */
    json_t *entry = json_is_object(old) ? json_copy(old) : json_object();
    if (!entry || fill_condition(entry, c, now) != 0)
        goto nomem;
    if (old && json_equal(old, entry)) {
        json_decref(entry);
        return KOP_OK;
    }
    if (!conds) {
        conds = json_array();
        if (!conds || json_object_set_new(status, "conditions", conds) != 0)
            goto nomem;
    }
    int rc = old ? json_array_set_new(conds, (size_t)idx, entry)
                 : json_array_append_new(conds, entry);
    entry = NULL; /* owned by conds now, or released by the failed setter */
    if (rc != 0)
        goto nomem;
    if (changed)
        *changed = true;
    return KOP_OK;
nomem:
    json_decref(entry);
    return KOP_ENOMEM;
}

json_t *kop_meta_find_condition(const json_t *status, const char *type)
{
    const json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, type);
    return idx >= 0 ? json_array_get(conds, (size_t)idx) : NULL;
}

const char *kop_meta_condition_status(const json_t *status, const char *type)
{
    return json_string_value(json_object_get(kop_meta_find_condition(status, type), "status"));
}

bool kop_meta_condition_is_true(const json_t *status, const char *type)
{
    return kop_streq(kop_meta_condition_status(status, type), KOP_CONDITION_TRUE);
}

bool kop_meta_remove_condition(json_t *status, const char *type)
{
    json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, type);
    return idx >= 0 && json_array_remove(conds, (size_t)idx) == 0;
}

/* ---- names -------------------------------------------------------------- */

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
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i < n; i++) {
        bool sep = (s[i] == '-' && is_prefix) || (s[i] == '.' && subdomain);
        if (!is_lower_alnum(s[i]) && !sep)
            return false;
        if (sep && !is_lower_alnum(s[i - 1]))
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
        if (is_lower_alnum(c)) {
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
    while (keep > 0 && !is_lower_alnum(nb.buf[keep - 1]))
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
    return n <= KOP_META_DNS1123_LABEL_MAX && is_subdomain(s, n) && !strchr(s, '.');
}

bool kop_meta_is_valid_dns1123_subdomain(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    return n <= KOP_META_DNS1123_SUBDOMAIN_MAX && is_subdomain(s, n);
}

bool kop_meta_is_valid_label_value(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    return n == 0 || (n <= KOP_META_LABEL_VALUE_MAX && is_name_part(s, n));
}

bool kop_meta_is_valid_label_key(const char *s)
{
    if (!s)
        return false;
    const char *slash = strchr(s, '/');
    const char *name = slash ? slash + 1 : s;
    size_t n = strlen(name);
    if (n > KOP_META_LABEL_VALUE_MAX || !is_name_part(name, n))
        return false;
    if (!slash)
        return true;
    size_t plen = (size_t)(slash - s);
    return plen <= KOP_META_DNS1123_SUBDOMAIN_MAX && is_subdomain(s, plen);
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

/*
 * meta_owner.c - owner references (see kop/meta.h): reading an object's
 * controller reference and stamping one on a child.
 *
 * The rules are the apiserver's and controller-runtime's: an object has at
 * most one controller; an owner is identified by group, kind and name (the
 * version may differ, and a recreated owner with a new uid is the same
 * owner), and an owner in a namespace cannot own an object in another. A
 * child already controlled by another owner is refused rather than taken
 * over, so two controllers never fight over one object.
 *
 * Invariant: as in meta.c, a failed or unchanged call leaves the child as it
 * was; the entry replaced keeps the fields this file does not know.
 */
#include <string.h>

#include "kop/meta.h"
#include "kop_internal.h"
#include "meta_internal.h"

/* or_unknown stands in "?" for a field a foreign reference left out. */
static const char *or_unknown(const char *s)
{
    return s ? s : "?";
}

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
    const json_t *refs = json_object_get(kop__meta_of(obj), "ownerReferences");
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
    json_t *refs = json_object_get(kop__meta_of(child), "ownerReferences");
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
        json_t *meta = kop__meta_child_object(child, "metadata");
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

/*
 * ctrlutil.c - finalizers kept on the server and owned children created or
 * updated in one call (kop/ctrlutil.h).
 *
 * Workload: every reconcile of every operator calls these, most often on
 * objects that are already as wanted. So the common path is a read (the
 * object the caller holds, or a cache) and a comparison, with no request
 * at all; a write happens only when something differs.
 *
 * Finalizers are written with the guarded JSON patch of
 * kop_meta_finalizers_patch: it applies only to the finalizer list as it
 * was read, so a finalizer someone else added or removed meanwhile is never
 * overwritten. A refused patch (409, or 422 from a failed "test") is
 * followed by a fresh read; when that read shows the list changed, the
 * patch is rebuilt and sent again, at most FINALIZER_ATTEMPTS times, and
 * when it shows nothing changed the refusal was real and is returned.
 *
 * Children are written with server-side apply; see the header for why.
 * Invariant: nothing here changes an object the caller passed in.
 *
 * The kop_reconcile_* calls at the end are those steps from inside a
 * reconcile: they only fill in what the request knows (caches, names,
 * resource) and add no behaviour of their own beyond observedGeneration.
 */
#include <stdio.h>
#include <string.h>

#include "kop/client.h"
#include "kop/ctrlutil.h"
#include "kop/informer.h"
#include "kop/meta.h"
#include "manager_internal.h"

#define FINALIZER_ATTEMPTS 5
#define DEFAULT_FIELD_MANAGER "kop"

const char *kop_op_result_name(kop_op_result r)
{
    switch (r) {
    case KOP_OP_UNCHANGED:
        return "unchanged";
    case KOP_OP_CREATED:
        return "created";
    case KOP_OP_UPDATED:
        return "updated";
    }
    return "unknown";
}

/* ---- kop_json_contains -------------------------------------------------- */

bool kop_json_contains(const json_t *have, const json_t *want)
{
    if (!want)
        return true;
    if (!have)
        return json_is_null(want);
    if (json_is_number(want) && json_is_number(have))
        return json_number_value(want) == json_number_value(have);
    if (json_typeof(want) != json_typeof(have))
        return false;
    if (json_is_object(want)) {
        const char *key;
        json_t *w;
        json_object_foreach((json_t *)want, key, w)
        {
            json_t *h = json_object_get(have, key);
            /* A null asks for the member to be absent (merge semantics). */
            if (json_is_null(w) ? h && !json_is_null(h) : !kop_json_contains(h, w))
                return false;
        }
        return true;
    }
    if (json_is_array(want)) {
        size_t n = json_array_size(want);
        if (json_array_size(have) != n)
            return false;
        for (size_t i = 0; i < n; i++)
            if (!kop_json_contains(json_array_get(have, i), json_array_get(want, i)))
                return false;
        return true;
    }
    return json_equal(have, want);
}

/* ---- finalizers --------------------------------------------------------- */

static bool finalizer_req_ok(const char *fn, const kop_finalizer_req *req, kop_status *st)
{
    if (req && req->resource && req->finalizer && req->finalizer[0] &&
        kop_meta_name(req->object))
        return true;
    kop_status_setf(st, 0, NULL, "%s: resource, object with a name, and finalizer are required",
                    fn);
    return false;
}

/* patch_finalizers sends the guarded patch that makes obj's list hold (add)
 * or lack (!add) the finalizer. */
static kop_err patch_finalizers(kop_client *c, const kop_finalizer_req *req, const json_t *obj,
                                bool add, kop_status *st)
{
    json_t *want = json_deep_copy(obj), *patch = NULL;
    kop_err err = want ? KOP_OK : KOP_ENOMEM;
    if (!err) {
        if (add)
            kop_meta_add_finalizer(want, req->finalizer);
        else
            kop_meta_remove_finalizer(want, req->finalizer);
        err = kop_meta_finalizers_patch(
            obj, json_object_get(json_object_get(want, "metadata"), "finalizers"), &patch);
    }
    if (!err)
        err = kop_patch_object(c,
                               &(kop_patch_req){.target = {req->resource, kop_meta_namespace(obj),
                                                           kop_meta_name(obj)},
                                                .type = KOP_PATCH_JSON,
                                                .patch = patch},
                               NULL, st);
    json_decref(patch);
    json_decref(want);
    return err;
}

/* same_finalizers tells whether a and b hold the same finalizer list. */
static bool same_finalizers(const json_t *a, const json_t *b)
{
    const json_t *fa = json_object_get(json_object_get(a, "metadata"), "finalizers");
    const json_t *fb = json_object_get(json_object_get(b, "metadata"), "finalizers");
    if (!fa || !fb) /* no list to compare: the object must be the same version */
        return !fa && !fb && kop_streq(kop_meta_resource_version(a), kop_meta_resource_version(b));
    return json_equal(fa, fb);
}

/*
 * set_finalizer is ensure (add) and remove (!add): the loop of compare,
 * patch, and on refusal read again. obj is the version compared with; a
 * fresh read replaces it.
 */
static kop_err set_finalizer(kop_client *c, const kop_finalizer_req *req, bool add,
                             kop_op_result *result, kop_status *st)
{
    kop_err err = KOP_OK;
    json_t *fresh = NULL;
    const json_t *obj = req->object;
    kop_op_result did = KOP_OP_UNCHANGED;

    kop_status_clear(st);
    for (int attempt = 0;; attempt++) {
        if (kop_meta_has_finalizer(obj, req->finalizer) == add)
            break; /* as wanted: no write */
        if (add && kop_meta_is_deleting(obj)) {
            kop_status_setf(st, 422, "Invalid",
                            "%s %s is being deleted: no new finalizer %s can be added",
                            req->resource->kind ? req->resource->kind : req->resource->resource,
                            kop_meta_name(obj), req->finalizer);
            err = KOP_EINVALID;
            break;
        }
        err = patch_finalizers(c, req, obj, add, st);
        if (!err) {
            did = KOP_OP_UPDATED;
            break;
        }
        if (err != KOP_ECONFLICT && err != KOP_EINVALID)
            break;
        if (attempt + 1 >= FINALIZER_ATTEMPTS)
            break;
        /* Refused: find out whether the list changed under us. */
        json_t *now = NULL;
        kop_status why = *st;
        kop_err gerr = kop_get(c, req->resource, kop_meta_namespace(req->object),
                               kop_meta_name(req->object), &now, st);
        if (gerr) {
            err = gerr;
            break;
        }
        if (same_finalizers(now, obj)) {
            /* Nothing changed: the refusal was about something else. */
            json_decref(now);
            *st = why;
            break;
        }
        json_decref(fresh);
        fresh = now;
        obj = fresh;
    }
    if (!add && err == KOP_ENOTFOUND) {
        /* Gone already: nothing is held back by our finalizer any more. */
        kop_status_clear(st);
        err = KOP_OK;
        did = KOP_OP_UNCHANGED;
    }
    json_decref(fresh);
    if (result)
        *result = err ? KOP_OP_UNCHANGED : did;
    return err;
}

kop_err kop_finalizer_ensure(kop_client *c, const kop_finalizer_req *req, kop_op_result *result,
                             kop_status *st)
{
    if (result)
        *result = KOP_OP_UNCHANGED;
    if (!c || !finalizer_req_ok("kop_finalizer_ensure", req, st))
        return KOP_EINVAL;
    return set_finalizer(c, req, true, result, st);
}

kop_err kop_finalizer_remove(kop_client *c, const kop_finalizer_req *req, kop_op_result *result,
                             kop_status *st)
{
    if (result)
        *result = KOP_OP_UNCHANGED;
    if (!c || !finalizer_req_ok("kop_finalizer_remove", req, st))
        return KOP_EINVAL;
    return set_finalizer(c, req, false, result, st);
}

/* ---- owned children ----------------------------------------------------- */

/* api_version writes r's apiVersion ("v1", "apps/v1") into out. */
static kop_err api_version(const kop_resource *r, char *out, size_t size)
{
    int n = r->group && r->group[0] ? snprintf(out, size, "%s/%s", r->group, r->version)
                                    : snprintf(out, size, "%s", r->version);
    return n > 0 && (size_t)n < size ? KOP_OK : KOP_EINVAL;
}

/*
 * wanted_child builds the apply body: a copy of the caller's object with
 * apiVersion, kind and namespace filled in where missing and owner set as
 * its controller. *out is owned.
 */
static kop_err wanted_child(const kop_child_req *req, json_t **out, kop_status *st)
{
    char av[320];
    json_t *want = json_deep_copy(req->object), *meta;
    kop_err err = want ? KOP_OK : KOP_ENOMEM;
    if (err)
        goto out;
    meta = json_object_get(want, "metadata");
    if (!json_is_object(meta) || !kop_meta_name(want)) {
        kop_status_setf(st, 0, NULL, "kop_create_or_update: the child has no metadata.name");
        err = KOP_EINVAL;
        goto out;
    }
    if (!json_object_get(want, "apiVersion")) {
        err = api_version(req->resource, av, sizeof av);
        if (!err && json_object_set_new(want, "apiVersion", json_string(av)))
            err = KOP_ENOMEM;
    }
    if (!err && !json_object_get(want, "kind")) {
        if (!req->resource->kind) {
            kop_status_setf(st, 0, NULL, "kop_create_or_update: no kind in the child or resource");
            err = KOP_EINVAL;
        } else if (json_object_set_new(want, "kind", json_string(req->resource->kind))) {
            err = KOP_ENOMEM;
        }
    }
    if (!err && req->resource->namespaced && !kop_meta_namespace(want)) {
        const char *ns = kop_meta_namespace(req->owner);
        if (!ns) {
            kop_status_setf(st, 0, NULL,
                            "kop_create_or_update: %s %s has no namespace, nor has its owner",
                            json_string_value(json_object_get(want, "kind")), kop_meta_name(want));
            err = KOP_EINVAL;
        } else if (json_object_set_new(meta, "namespace", json_string(ns))) {
            err = KOP_ENOMEM;
        }
    }
    if (!err && req->owner)
        err = kop_meta_set_controller_ref(want, req->owner, st);
out:
    if (err) {
        json_decref(want);
        want = NULL;
    }
    *out = want;
    return err;
}

/*
 * read_child reads the child as the server holds it: from the cache when
 * there is one, and from the apiserver when there is none or the cache
 * does not have it (a child just created may not have reached it yet).
 * *out is owned, NULL when the child does not exist.
 */
static kop_err read_child(kop_client *c, const kop_child_req *req, const json_t *want,
                          json_t **out, kop_status *st)
{
    const char *ns = kop_meta_namespace(want), *name = kop_meta_name(want);
    kop_err err = KOP_ENOTFOUND;
    *out = NULL;
    if (req->cache)
        err = kop_informer_dup(req->cache, ns, name, out);
    if (err == KOP_ENOTFOUND)
        err = kop_get(c, req->resource, ns, name, out, st);
    if (err == KOP_ENOTFOUND) {
        kop_status_clear(st);
        err = KOP_OK;
    }
    return err;
}

/*
 * owned_elsewhere tells whether have has a controller other than owner
 * (checked as kop_meta_set_controller_ref would, on a copy of its
 * metadata), explaining it in st.
 */
static bool owned_elsewhere(const json_t *have, const json_t *owner, kop_status *st)
{
    if (!owner || !kop_meta_controller_ref(have))
        return false;
    /* A probe with a copy of have's metadata, deep where the call edits it. */
    json_t *probe = json_object();
    json_t *meta = json_copy(json_object_get(have, "metadata"));
    bool other = false;
    if (probe && meta &&
        !json_object_set_new(meta, "ownerReferences",
                             json_deep_copy(json_object_get(meta, "ownerReferences"))) &&
        !json_object_set(probe, "metadata", meta)) {
        kop_status probe_st;
        other = kop_meta_set_controller_ref(probe, owner, &probe_st) == KOP_EALREADYEXISTS;
        if (other)
            *st = probe_st;
    }
    json_decref(meta);
    json_decref(probe);
    return other;
}

/* is_current tells whether have already is what want asks for. */
static bool is_current(const json_t *have, const json_t *want, const json_t *owner)
{
    if (owner && !kop_meta_is_controlled_by(have, kop_meta_uid(owner)))
        return false;
    /* Owner references are compared above by uid: others' entries beside
     * ours would fail an element-by-element comparison of the list. */
    json_t *cmp = json_copy((json_t *)want);
    json_t *meta = cmp ? json_copy(json_object_get(cmp, "metadata")) : NULL;
    bool same = false;
    if (meta) {
        json_object_del(meta, "ownerReferences");
        json_object_set(cmp, "metadata", meta);
        same = kop_json_contains(have, cmp);
    }
    json_decref(meta);
    json_decref(cmp);
    return same;
}

kop_err kop_create_or_update(kop_client *c, const kop_child_req *req, kop_op_result *result,
                             kop_status *st)
{
    kop_err err = KOP_OK;
    json_t *want = NULL, *have = NULL;
    kop_op_result did = KOP_OP_UNCHANGED;
    const char *fm = req && req->field_manager ? req->field_manager : DEFAULT_FIELD_MANAGER;

    kop_status_clear(st);
    if (!c || !req || !req->resource || !req->object) {
        kop_status_setf(st, 0, NULL, "kop_create_or_update: resource and object are required");
        err = KOP_EINVAL;
        goto out;
    }
    err = wanted_child(req, &want, st);
    if (!err)
        err = read_child(c, req, want, &have, st);
    if (err)
        goto out;
    if (have && owned_elsewhere(have, req->owner, st)) {
        err = KOP_EALREADYEXISTS;
        goto out;
    }
    if (have && is_current(have, want, req->owner))
        goto out;

    /* Missing or different: apply the whole intent (see the header for why). */
    err = kop_patch_object(c,
                           &(kop_patch_req){.target = {req->resource, kop_meta_namespace(want),
                                                       kop_meta_name(want)},
                                            .type = KOP_PATCH_APPLY,
                                            .patch = want,
                                            .opts = {.field_manager = fm, .force = true}},
                           NULL, st);
    if (!err)
        did = have ? KOP_OP_UPDATED : KOP_OP_CREATED;
out:
    json_decref(have);
    json_decref(want);
    if (result)
        *result = did;
    return err;
}

/* ---- inside a reconcile ------------------------------------------------- */

kop_err kop_reconcile_get(const kop_reconcile *req, kop_get_mode mode, json_t **out,
                          kop_status *st)
{
    json_t *obj = NULL;
    kop_err err;

    kop_status_clear(st);
    if (out)
        *out = NULL;
    if (!req || !req->cache || !out) {
        kop_status_setf(st, 0, NULL, "kop_reconcile_get: a request with a cache, and out");
        return KOP_EINVAL;
    }
    err = kop_informer_dup(req->cache, req->namespace, req->name, &obj);
    if (err == KOP_ENOTFOUND)
        return KOP_OK; /* gone: nothing to do */
    if (err) {
        kop_status_setf(st, 0, NULL, "reading %s/%s from the cache: %s", req->namespace,
                        req->name, kop_strerror(err));
        return err;
    }
    if (mode == KOP_GET_LIVE && kop_meta_is_deleting(obj)) {
        json_decref(obj); /* being deleted, and the caller has no cleanup to run */
        return KOP_OK;
    }
    *out = obj;
    return KOP_OK;
}

kop_err kop_reconcile_child(const kop_reconcile *req, const kop_resource *r, const json_t *owner,
                            const json_t *child, kop_op_result *result, kop_status *st)
{
    kop_op_result did = KOP_OP_UNCHANGED;
    kop_err err;

    kop_status_clear(st);
    if (result)
        *result = KOP_OP_UNCHANGED;
    if (!req || !r) {
        kop_status_setf(st, 0, NULL, "kop_reconcile_child: a request and a resource");
        return KOP_EINVAL;
    }
    if (!child) {
        kop_status_setf(st, 0, NULL, "kop_reconcile_child: no %s to write (out of memory?)",
                        r->kind ? r->kind : r->resource);
        return KOP_ENOMEM;
    }
    kop_child_req cr = {.resource = r,
                        .owner = owner,
                        .object = child,
                        .cache = kop_controller_owned_cache(req->controller, r),
                        .field_manager = kop__manager_name(req->manager)};
    err = kop_create_or_update(req->client, &cr, &did, st);
    if (!err && did != KOP_OP_UNCHANGED)
        kop_loggerv(req->log, 1, "child written", KOP_LOG_STR("kind", r->kind),
                    KOP_LOG_STR("child", kop_meta_name(child)),
                    KOP_LOG_STR("result", kop_op_result_name(did)));
    if (result)
        *result = did;
    return err;
}

kop_err kop_reconcile_status(const kop_reconcile *req, const json_t *obj, const json_t *status,
                             kop_op_result *result, kop_status *st)
{
    const kop_resource *r = req && req->cache ? kop_informer_resource(req->cache) : NULL;
    json_t *want = NULL;
    kop_err err = KOP_OK;

    kop_status_clear(st);
    if (result)
        *result = KOP_OP_UNCHANGED;
    if (!r || !kop_meta_name(obj)) {
        kop_status_setf(st, 0, NULL, "kop_reconcile_status: a request with a cache, and obj");
        return KOP_EINVAL;
    }
    /* A shallow copy: only a top-level member is added, nothing of status changes. */
    want = json_is_object(status) ? json_copy((json_t *)status) : NULL;
    if (!want) {
        kop_status_setf(st, 0, NULL, "kop_reconcile_status: no status object (out of memory?)");
        return status && !json_is_object(status) ? KOP_EINVAL : KOP_ENOMEM;
    }
    int64_t gen = kop_meta_generation(obj);
    if (gen > 0 && json_object_set_new(want, "observedGeneration", json_integer(gen))) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (kop_json_contains(json_object_get(obj, "status"), want))
        goto out; /* shown already: no write */
    err = kop_patch_status(req->client, r, obj, want, NULL, st);
    if (!err && result)
        *result = KOP_OP_UPDATED;
out:
    json_decref(want);
    return err;
}

kop_result kop_reconcile_end(const kop_reconcile *req, kop_err err, const kop_status *st)
{
    if (!err)
        return KOP_DONE;
    kop_logger_log(req ? req->log : NULL, KOP_LOG_ERROR, "reconcile failed",
                   KOP_LOG_STR("error", kop_strerror(err)),
                   KOP_LOG_STR("reason", st ? st->message : ""));
    return KOP_RETRY;
}

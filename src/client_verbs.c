/*
 * client_verbs.c - the REST client's verbs: get, list, create, update,
 * patch (with the status subresource), delete, and a raw GET by path. Each
 * builds its URL and body, sends one request through kop__client_do
 * (client.c: connections, credentials, retries), and parses the answer
 * into a jansson document the caller owns. Failures keep the apiserver's
 * Status in the caller's kop_status.
 *
 * The checks made here before anything is sent (a patch's shape, a field
 * manager for apply, a name for update) catch mistakes in the caller's
 * code rather than in the object: found here, they are named in the
 * caller's words and cost no round trip. Everything else is left to the
 * apiserver, which knows the resource's schema and this file does not.
 */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "client_request_internal.h"
#include "kop/meta.h"
#include "kop_internal.h"

/* ---- JSON in and out ---------------------------------------------------- */

/* parse_body parses a response body into *out (owned). */
static kop_err parse_body(const kop__response *resp, json_t **out, kop_status *st)
{
    json_error_t jerr;
    /* data is NULL when no byte came; json_loadb wants a pointer even for none. */
    *out = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, &jerr);
    if (!*out) {
        kop_status_setf(st, (int)resp->code, NULL, "response is not JSON: %s (line %d)", jerr.text,
                        jerr.line);
        return KOP_EPARSE;
    }
    return KOP_OK;
}

/*
 * call builds the URL, sends one request with an optional JSON body, and
 * parses the answer into *out when out is not NULL.
 */
/*
 * explain_status_404 rewrites the message of a 404 from a status write
 * when the resource has no status subresource: the apiserver then says the
 * object is "not found" while it exists, which sends people looking in the
 * wrong place.
 */
static void explain_status_404(kop_client *c, const kop_resource *r, const char *name,
                               kop_status *st)
{
    if (!st || !kop__discovery_lacks_status(c, r))
        return;
    kop_status_setf(st, 404, "NotFound",
                    "%s %s: resource %s in %s%s%s has no status subresource: add "
                    "\"subresources: {status: {}}\" to the CRD's version (404 from the status "
                    "write)",
                    r->kind ? r->kind : r->resource, name ? name : "", r->resource,
                    r->group && r->group[0] ? r->group : "", r->group && r->group[0] ? "/" : "",
                    r->version);
}

static kop_err call(kop_client *c, const char *method, const kop_resource *r, const char *ns,
                    const char *name, const char *subresource, const kop__query_param *params,
                    size_t nparams, const char *content_type, const json_t *body, json_t **out,
                    kop_status *st)
{
    kop_err err = KOP_OK;
    char *payload = NULL;
    kop_buf url;
    kop__response resp = {0};
    kop_buf_init(&url, KOP__URL_MAX);
    kop_buf_init(&resp.body, 0);

    if (out)
        *out = NULL;
    kop_status_clear(st);
    err =
        kop__url_build(&url, kop__client_server(c), r, ns, name, subresource, params, nparams, st);
    if (err)
        goto out;
    if (body) {
        /* kop_meta_dumps fails whole when memory runs out, where json_dumps
         * could hand back a torn document that might still parse. */
        payload = kop_meta_dumps(body, JSON_COMPACT);
        if (!payload) {
            err = KOP_ENOMEM;
            goto out;
        }
    }
    kop__request req = {
        .method = method,
        .url = kop_buf_str(&url),
        .content_type = content_type,
        .body = payload,
        .body_len = payload ? strlen(payload) : 0,
        /* Only a GET is sent again after a 5xx or a lost connection: a
         * write that got no answer may have been applied, and a second
         * POST would create twice. All verbs are retried after 429, which
         * the apiserver answers before acting (client.c: retryable). */
        .safe = strcmp(method, "GET") == 0,
    };
    err = kop__client_do(c, &req, &resp, st);
    if (err == KOP_ENOTFOUND && subresource && strcmp(subresource, "status") == 0)
        explain_status_404(c, r, name, st);
    if (!err && out)
        err = parse_body(&resp, out, st);
out:
    free(payload);
    kop_buf_fini(&url);
    kop_buf_fini(&resp.body);
    return err;
}

/* object_field borrows obj.metadata.<field> as a string, or NULL. */
static const char *object_field(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

/* write_params turns kop_write_opts into query parameters; returns the count. */
static size_t write_params(const kop_write_opts *o, kop__query_param *p)
{
    size_t n = 0;
    if (!o)
        return 0;
    if (o->field_manager)
        p[n++] = (kop__query_param){"fieldManager", o->field_manager};
    if (o->force)
        p[n++] = (kop__query_param){"force", "true"};
    if (o->dry_run)
        p[n++] = (kop__query_param){"dryRun", "All"};
    return n;
}

/* ---- verbs -------------------------------------------------------------- */

kop_err kop_get_path(kop_client *c, const char *path, json_t **out, kop_status *st)
{
    kop_err err = KOP_OK;
    kop_buf url;
    kop__response resp = {0};
    kop_buf_init(&url, KOP__URL_MAX);
    kop_buf_init(&resp.body, 0);

    *out = NULL;
    if (!path || path[0] != '/') {
        kop_status_setf(st, 0, NULL, "kop_get_path: path must start with '/'");
        err = KOP_EINVAL;
        goto out;
    }
    /* Kubeconfigs often write the server with a trailing '/', and path
     * starts with one: drop the server's so the URL has no "//". */
    const char *server = kop__client_server(c);
    size_t slen = strlen(server);
    while (slen > 0 && server[slen - 1] == '/')
        slen--;
    err = kop_buf_append(&url, server, slen);
    if (!err)
        err = kop_buf_appends(&url, path);
    if (err)
        goto out;
    kop__request req = {.method = "GET", .url = kop_buf_str(&url), .safe = true};
    err = kop__client_do(c, &req, &resp, st);
    if (err)
        goto out;
    json_error_t jerr;
    *out = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, &jerr);
    /* Raw paths may answer plain text (/healthz says "ok"): such a body is
     * handed back as a JSON string rather than failed as unparsable. */
    if (!*out)
        *out = json_stringn(resp.body.data ? resp.body.data : "", resp.body.len);
    if (!*out)
        err = KOP_ENOMEM;
out:
    kop_buf_fini(&url);
    kop_buf_fini(&resp.body);
    return err;
}

kop_err kop_get(kop_client *c, const kop_resource *r, const char *ns, const char *name,
                json_t **out, kop_status *st)
{
    /* Generic callers pass a namespace for every resource; a cluster-scoped
     * one has none in its URL, so it is dropped here once for all verbs. */
    return call(c, "GET", r, r->namespaced ? ns : NULL, name, NULL, NULL, 0, NULL, NULL, out, st);
}

kop_err kop_list(kop_client *c, const kop_resource *r, const char *ns, const kop_list_opts *opts,
                 json_t **out, kop_status *st)
{
    kop_list_opts o = opts ? *opts : (kop_list_opts){0};
    char limit[32] = "";
    if (o.limit > 0)
        snprintf(limit, sizeof limit, "%ld", o.limit);
    /* Parameters left NULL are left out of the URL (kop__url_build), so one
     * table serves every combination of options. */
    kop__query_param p[] = {
        {"labelSelector", o.label_selector},     {"fieldSelector", o.field_selector},
        {"limit", limit[0] ? limit : NULL},      {"continue", o.continue_token},
        {"resourceVersion", o.resource_version}, {"resourceVersionMatch", o.resource_version_match},
    };
    return call(c, "GET", r, r->namespaced ? ns : NULL, NULL, NULL, p, KOP_ARRAY_LEN(p), NULL, NULL,
                out, st);
}

kop_err kop_list_each(kop_client *c, const kop_list_req *req, char **resource_version_out,
                      kop_status *st)
{
    kop_err err = KOP_OK;
    json_t *page = NULL;
    char *cont = NULL;
    if (resource_version_out)
        *resource_version_out = NULL;
    if (!req || !req->resource || !req->fn) {
        kop_status_setf(st, 0, NULL, "kop_list_each: no resource or page function");
        return KOP_EINVAL;
    }
    const kop_resource *r = req->resource;
    const char *ns = req->namespace;
    kop_list_opts o = req->opts;
    if (o.limit <= 0)
        o.limit = 500; /* client-go's page size: one page is all that is held at a time */

    for (;;) {
        o.continue_token = cont;
        err = kop_list(c, r, ns, &o, &page, st);
        if (err)
            goto out;
        err = req->fn(page, req->user);
        if (err)
            goto out;
        /* Every page of a continued list comes from the first page's
         * snapshot; the version kept is the last page's, that snapshot's. */
        const char *rv = object_field(page, "resourceVersion");
        const char *next = object_field(page, "continue");
        if (resource_version_out && rv) {
            free(*resource_version_out);
            *resource_version_out = strdup(rv);
            if (!*resource_version_out) {
                err = KOP_ENOMEM;
                goto out;
            }
        }
        free(cont);
        cont = next && next[0] ? strdup(next) : NULL;
        json_decref(page);
        page = NULL;
        if (!cont)
            break;
        /* A continue token pins the snapshot; the version must not be sent. */
        o.resource_version = NULL;
        o.resource_version_match = NULL;
    }
out:
    /* A list that stopped part-way hands back no version: a watch from it
     * would never see what the unread pages held. */
    if (err && resource_version_out) {
        free(*resource_version_out);
        *resource_version_out = NULL;
    }
    json_decref(page);
    free(cont);
    return err;
}

/*
 * target_namespace picks the namespace of a write: ns, else the object's,
 * as kubectl does, so an object read from a namespace is written back to
 * the same one without the caller repeating it.
 */
static const char *target_namespace(const kop_resource *r, const char *ns, const json_t *obj)
{
    if (!r->namespaced)
        return NULL;
    if (ns && ns[0])
        return ns;
    return object_field(obj, "namespace");
}

/*
 * write_target checks a create or update request and finds the namespace and
 * name it goes to: the target's, else the object's. A target name that
 * differs from the object's is the caller's bug, said before sending.
 */
static kop_err write_target(const char *verb, const kop_write_req *req, const char **ns,
                            const char **name, kop_status *st)
{
    if (!req || !req->target.resource || !req->object) {
        kop_status_setf(st, 0, NULL, "%s: no resource or object to write", verb);
        return KOP_EINVAL;
    }
    const char *own = object_field(req->object, "name");
    if (req->target.name && (!own || strcmp(req->target.name, own) != 0)) {
        kop_status_setf(st, 0, NULL, "%s: target name %s is not the object's name %s", verb,
                        req->target.name, own ? own : "(none)");
        return KOP_EINVAL;
    }
    *ns = target_namespace(req->target.resource, req->target.namespace, req->object);
    *name = req->target.name ? req->target.name : own;
    return KOP_OK;
}

kop_err kop_create_object(kop_client *c, const kop_write_req *req, json_t **out, kop_status *st)
{
    const char *ns = NULL, *name = NULL;
    kop_err err = write_target("kop_create_object", req, &ns, &name, st);
    if (err)
        return err;
    kop__query_param p[3];
    size_t n = write_params(&req->opts, p);
    /* POST goes to the collection; the name travels in the body. */
    return call(c, "POST", req->target.resource, ns, NULL, NULL, p, n, "application/json",
                req->object, out, st);
}

kop_err kop_update_object(kop_client *c, const kop_write_req *req, json_t **out, kop_status *st)
{
    const char *ns = NULL, *name = NULL;
    kop_err err = write_target("kop_update_object", req, &ns, &name, st);
    if (err)
        return err;
    /* PUT goes to the object's own URL: without a name there is none. */
    if (!name) {
        kop_status_setf(st, 0, NULL, "kop_update_object: the object has no metadata.name");
        return KOP_EINVAL;
    }
    kop__query_param p[3];
    size_t n = write_params(&req->opts, p);
    return call(c, "PUT", req->target.resource, ns, name, req->opts.subresource, p, n,
                "application/json", req->object, out, st);
}

static const char *patch_content_type(kop_patch_type type)
{
    switch (type) {
    case KOP_PATCH_MERGE:
        return "application/merge-patch+json";
    case KOP_PATCH_JSON:
        return "application/json-patch+json";
    case KOP_PATCH_STRATEGIC:
        return "application/strategic-merge-patch+json";
    case KOP_PATCH_APPLY:
        return "application/apply-patch+yaml"; /* JSON is YAML */
    }
    return NULL;
}

kop_err kop_patch_object(kop_client *c, const kop_patch_req *req, json_t **out, kop_status *st)
{
    if (!req || !req->target.resource || !req->target.name) {
        kop_status_setf(st, 0, NULL, "kop_patch_object: no resource or name to patch");
        return KOP_EINVAL;
    }
    const kop_resource *r = req->target.resource;
    kop__query_param p[3];
    size_t n = write_params(&req->opts, p);
    const char *ct = patch_content_type(req->type);
    if (!ct || !req->patch) {
        kop_status_setf(st, 0, NULL, "kop_patch_object: unknown patch type %d or no patch",
                        (int)req->type);
        return KOP_EINVAL;
    }
    if (req->type == KOP_PATCH_APPLY && !req->opts.field_manager) {
        kop_status_setf(st, 0, NULL, "kop_patch_object: server-side apply needs a field manager");
        return KOP_EINVAL;
    }
    /* A JSON patch is a list of operations; the other kinds are partial
     * objects. The wrong shape is the caller's bug: say so before sending. */
    bool json_patch = req->type == KOP_PATCH_JSON;
    if (json_patch ? !json_is_array(req->patch) : !json_is_object(req->patch)) {
        kop_status_setf(st, 0, NULL, "kop_patch_object: a %s patch must be a JSON %s",
                        json_patch ? "JSON" : "merge/apply", json_patch ? "array" : "object");
        return KOP_EINVAL;
    }
    return call(c, "PATCH", r, r->namespaced ? req->target.namespace : NULL, req->target.name,
                req->opts.subresource, p, n, ct, req->patch, out, st);
}

kop_err kop_patch_status(kop_client *c, const kop_resource *r, const json_t *obj, json_t *status,
                         json_t **out, kop_status *st)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name || !status)
        return KOP_EINVAL;
    /* A merge patch of status alone, on the status subresource: it cannot
     * touch spec or metadata and carries no resourceVersion, so a writer of
     * other fields never makes it conflict; the last status written wins,
     * which suits a status computed from what was just observed. */
    json_t *patch = json_pack("{s:O}", "status", status);
    if (!patch)
        return KOP_ENOMEM;
    kop_patch_req req = {.target = {r, ns, name},
                         .type = KOP_PATCH_MERGE,
                         .patch = patch,
                         .opts = {.subresource = "status"}};
    kop_err err = kop_patch_object(c, &req, out, st);
    json_decref(patch);
    return err;
}

/*
 * delete_body builds the DeleteOptions document for opts (a new reference).
 * Options go in the body rather than the query because preconditions have
 * no query form; the body is sent even when it holds nothing else.
 */
static json_t *delete_body(const kop_delete_opts *o)
{
    static const char *const policies[] = {NULL, "Background", "Foreground", "Orphan"};
    json_t *body = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
    if (!body)
        return NULL;
    int bad = 0;
    if (o->propagation > KOP_PROPAGATION_DEFAULT && o->propagation <= KOP_PROPAGATION_ORPHAN)
        bad |=
            json_object_set_new(body, "propagationPolicy", json_string(policies[o->propagation]));
    if (o->precondition_uid || o->precondition_resource_version) {
        json_t *pre = json_object();
        if (o->precondition_uid)
            bad |= json_object_set_new(pre, "uid", json_string(o->precondition_uid));
        if (o->precondition_resource_version)
            bad |= json_object_set_new(pre, "resourceVersion",
                                       json_string(o->precondition_resource_version));
        bad |= json_object_set_new(body, "preconditions", pre);
    }
    /* 0 means "not set" (the object's own grace period), so "now" is asked
     * for with a negative value and sent as the apiserver's 0. */
    if (o->grace_period_seconds != 0)
        bad |= json_object_set_new(
            body, "gracePeriodSeconds",
            json_integer(o->grace_period_seconds < 0 ? 0 : o->grace_period_seconds));
    if (o->dry_run)
        bad |= json_object_set_new(body, "dryRun", json_pack("[s]", "All"));
    if (bad) {
        json_decref(body);
        return NULL;
    }
    return body;
}

kop_err kop_delete_object(kop_client *c, const kop_delete_req *req, json_t **out, kop_status *st)
{
    if (!req || !req->target.resource || !req->target.name) {
        kop_status_setf(st, 0, NULL, "kop_delete_object: no resource or name to delete");
        return KOP_EINVAL;
    }
    const kop_resource *r = req->target.resource;
    json_t *body = delete_body(&req->opts);
    if (!body)
        return KOP_ENOMEM;
    kop_err err = call(c, "DELETE", r, r->namespaced ? req->target.namespace : NULL,
                       req->target.name, NULL, NULL, 0, "application/json", body, out, st);
    json_decref(body);
    return err;
}


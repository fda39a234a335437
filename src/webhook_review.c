/*
 * webhook_review.c - AdmissionReview and ConversionReview: a request body in,
 * the answer out (kop/webhook.h for the semantics, webhook_internal.h for
 * the calls). No sockets here: webhook.c hands bodies in, the unit tests and
 * the fuzz target do the same.
 *
 * Everything here faces the apiserver's bytes, and through it whatever a
 * user put in an object, so nothing is trusted: the root, the request and
 * the uid must have their types (else KOP_EBADREQUEST, a 400), every other
 * field is read with a type check and defaults to "" or NULL, and the uid is
 * echoed only when it is a short string. A handler or converter that fails
 * is not a bad request: the review is answered (200) with the denial or the
 * Failure, which is what reaches kubectl.
 *
 * A mutating handler changes a copy of the object; kop__json_diff turns the
 * change into the JSON patch the apiserver applies (base64 in
 * response.patch, patchType JSONPatch). The diff recurses into objects and
 * replaces anything else whole: arrays are replaced rather than diffed, a
 * longer patch but never a wrong one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "kop/buf.h"
#include "webhook_internal.h"

#define POINTER_MAX (1u << 20) /* a JSON pointer in a patch */

/* ---- reading a review ---------------------------------------------------- */

/* str_or_empty returns the string member key of o, or "". */
static const char *str_or_empty(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/*
 * parse_review loads body as a review of kind want_kind whose apiVersion is
 * one of versions (NULL-terminated); *req is its request object (borrowed
 * from *root, owned). KOP_EBADREQUEST explained in st otherwise.
 */
static kop_err parse_review(const char *body, size_t len, const char *want_kind,
                            const char *const *versions, json_t **root, json_t **req,
                            kop_status *st)
{
    json_error_t jerr;
    *req = NULL;
    *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!*root) {
        kop_status_setf(st, 400, "BadRequest", "the body is not JSON: %s (at byte %d)", jerr.text,
                        jerr.position);
        return KOP_EBADREQUEST;
    }
    const char *kind = json_string_value(json_object_get(*root, "kind"));
    const char *api = json_string_value(json_object_get(*root, "apiVersion"));
    bool known = false;
    for (int i = 0; api && versions[i]; i++)
        known = known || strcmp(api, versions[i]) == 0;
    if (!json_is_object(*root) || !kop_streq(kind, want_kind) || !known) {
        kop_status_setf(st, 400, "BadRequest", "the body is not a %s (%s)", want_kind,
                        versions[0]);
        goto bad;
    }
    *req = json_object_get(*root, "request");
    const char *uid = json_string_value(json_object_get(*req, "uid"));
    if (!json_is_object(*req) || !uid || !uid[0] || strlen(uid) > KOP__WEBHOOK_UID_MAX) {
        kop_status_setf(st, 400, "BadRequest", "the %s has no request with a uid", want_kind);
        goto bad;
    }
    return KOP_OK;
bad:
    json_decref(*root);
    *root = NULL;
    *req = NULL;
    return KOP_EBADREQUEST;
}

/* dump_take serializes and frees v into *out (owned). */
static kop_err dump_take(json_t *v, char **out)
{
    *out = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return *out ? KOP_OK : KOP_ENOMEM;
}

/* ---- JSON patch by difference --------------------------------------------- */

/* push_op appends {"op", "path"[, "value"]} to ops. */
static kop_err push_op(json_t *ops, const char *op, const kop_buf *path, const json_t *value)
{
    json_t *o = json_pack("{s:s, s:s}", "op", op, "path", kop_buf_str(path));
    if (o && value && json_object_set_new(o, "value", json_deep_copy(value)) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o && json_array_append_new(ops, o) == 0 ? KOP_OK : KOP_ENOMEM;
}

/* push_key appends "/" and key escaped as RFC 6901 says (~ as ~0, / as ~1). */
static kop_err push_key(kop_buf *path, const char *key)
{
    kop_err err = kop_buf_append(path, "/", 1);
    for (const char *c = key; !err && *c; c++)
        err = *c == '~' ? kop_buf_append(path, "~0", 2)
              : *c == '/' ? kop_buf_append(path, "~1", 2)
                          : kop_buf_append(path, c, 1);
    return err;
}

/* diff_at adds to ops what turns a into b at path (both non-NULL). */
static kop_err diff_at(const json_t *a, const json_t *b, kop_buf *path, json_t *ops)
{
    if (json_equal(a, b))
        return KOP_OK;
    if (!json_is_object(a) || !json_is_object(b))
        return push_op(ops, "replace", path, b);
    kop_err err = KOP_OK;
    size_t at = path->len;
    const char *key;
    json_t *av, *bv;
    /* Removals first, then changes and additions: each op's path then
     * names the document as the ops before it left it. */
    json_object_foreach((json_t *)a, key, av) {
        if (json_object_get(b, key))
            continue;
        if ((err = push_key(path, key)) != KOP_OK || (err = push_op(ops, "remove", path, NULL)))
            return err;
        path->len = at;
        path->data[at] = '\0';
    }
    json_object_foreach((json_t *)b, key, bv) {
        if ((err = push_key(path, key)) != KOP_OK)
            return err;
        av = json_object_get(a, key);
        err = av ? diff_at(av, bv, path, ops) : push_op(ops, "add", path, bv);
        if (err)
            return err;
        path->len = at;
        path->data[at] = '\0';
    }
    return KOP_OK;
}

kop_err kop__json_diff(const json_t *from, const json_t *to, json_t **ops)
{
    kop_buf path;
    kop_buf_init(&path, POINTER_MAX);
    *ops = json_array();
    kop_err err = *ops ? kop_buf_append(&path, "", 0) : KOP_ENOMEM;
    if (!err && from && to)
        err = diff_at(from, to, &path, *ops);
    else if (!err && (from || to)) /* one side missing: the document itself */
        err = to ? push_op(*ops, "add", &path, to) : push_op(*ops, "remove", &path, NULL);
    kop_buf_fini(&path);
    if (err) {
        json_decref(*ops);
        *ops = NULL;
    }
    return err;
}

/* base64 returns the base64 text of s (owned), NULL on ENOMEM. */
static char *base64(const char *s, size_t n)
{
    if (n > (size_t)1 << 30)
        return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

/* ---- admission ------------------------------------------------------------ */

kop_err kop_admission_deny(kop_admission_response *resp, const char *fmt, ...)
{
    va_list ap;
    resp->status.code = 403;
    snprintf(resp->status.reason, sizeof resp->status.reason, "Forbidden");
    va_start(ap, fmt);
    vsnprintf(resp->status.message, sizeof resp->status.message, fmt, ap);
    va_end(ap);
    return KOP_EFORBIDDEN;
}

void kop_admission_warn(kop_admission_response *resp, const char *fmt, ...)
{
    va_list ap;
    if (resp->nwarnings < 0 || resp->nwarnings >= KOP_ADMISSION_MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    vsnprintf(resp->warnings[resp->nwarnings++], KOP_ADMISSION_WARNING_MAX, fmt, ap);
    va_end(ap);
}

/* view fills the handler's view of request rq; *copy is the object it may change (owned). */
static kop_err view(const json_t *rq, kop_admission_request *v, json_t **copy)
{
    const json_t *kind = json_object_get(rq, "kind"), *obj = json_object_get(rq, "object");
    const json_t *old = json_object_get(rq, "oldObject");
    *v = (kop_admission_request){
        .uid = str_or_empty(rq, "uid"),
        .operation = str_or_empty(rq, "operation"),
        .group = str_or_empty(kind, "group"),
        .version = str_or_empty(kind, "version"),
        .kind = str_or_empty(kind, "kind"),
        .resource = str_or_empty(json_object_get(rq, "resource"), "resource"),
        .subresource = str_or_empty(rq, "subResource"),
        .namespace = str_or_empty(rq, "namespace"),
        .name = str_or_empty(rq, "name"),
        .username = str_or_empty(json_object_get(rq, "userInfo"), "username"),
        .dry_run = json_is_true(json_object_get(rq, "dryRun")),
        .old_object = json_is_object(old) ? old : NULL,
        .request = rq,
    };
    *copy = json_is_object(obj) ? json_deep_copy(obj) : NULL;
    if (json_is_object(obj) && !*copy)
        return KOP_ENOMEM;
    v->object = *copy;
    return KOP_OK;
}

/* reason_of returns the metav1.StatusReason of an HTTP code ("" for others). */
static const char *reason_of(int code)
{
    switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 409: return "Conflict";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    default: return "";
    }
}

/*
 * denial builds response.status for a handler's error: the handler's code,
 * else the error's HTTP code, else 500 for a local failure (the handler
 * broke, the object was not judged); the reason follows the code unless
 * the handler named one.
 */
static json_t *denial(kop_err err, const kop_admission_response *r)
{
    int code = r->status.code >= 400 && r->status.code < 600 ? r->status.code
                                                             : kop_err_http_code(err);
    if (!code)
        code = 500;
    return json_pack("{s:s, s:s, s:i, s:s}", "status", "Failure", "reason",
                     r->status.reason[0] ? r->status.reason : reason_of(code), "code", code,
                     "message", r->status.message[0] ? r->status.message : kop_strerror(err));
}

/* answer adds the handler's decision, warnings and patch to resp. */
static kop_err answer(const kop_webhook_admission *h, kop_err verdict,
                      const kop_admission_response *r, const json_t *before, const json_t *after,
                      json_t *resp)
{
    kop_err err = KOP_OK;
    json_t *ops = NULL;
    char *text = NULL, *b64 = NULL;
    json_object_set_new(resp, "allowed", json_boolean(verdict == KOP_OK));
    if (verdict != KOP_OK && json_object_set_new(resp, "status", denial(verdict, r)) != 0)
        return KOP_ENOMEM;
    if (r->nwarnings > 0) {
        json_t *w = json_array();
        for (int i = 0; w && i < r->nwarnings && i < KOP_ADMISSION_MAX_WARNINGS; i++)
            json_array_append_new(w, json_stringn_nocheck(r->warnings[i],
                                                          strnlen(r->warnings[i],
                                                                  KOP_ADMISSION_WARNING_MAX)));
        if (json_object_set_new(resp, "warnings", w) != 0)
            return KOP_ENOMEM;
    }
    if (verdict != KOP_OK || !h->mutating || !before)
        return KOP_OK;
    if ((err = kop__json_diff(before, after, &ops)) != KOP_OK)
        goto out;
    if (json_array_size(ops) == 0)
        goto out; /* nothing changed: no patch */
    text = json_dumps(ops, JSON_COMPACT);
    b64 = text ? base64(text, strlen(text)) : NULL;
    if (!b64 || json_object_set_new(resp, "patchType", json_string("JSONPatch")) != 0 ||
        json_object_set_new(resp, "patch", json_string(b64)) != 0)
        err = KOP_ENOMEM;
out:
    json_decref(ops);
    free(text);
    free(b64);
    return err;
}

kop_err kop__admission_review(const kop_webhook_admission *h, const char *body, size_t len,
                              char **out, kop_status *st)
{
    static const char *const versions[] = {"admission.k8s.io/v1", "admission.k8s.io/v1beta1",
                                           NULL};
    json_t *root = NULL, *rq = NULL, *copy = NULL, *resp = NULL, *review = NULL;
    kop_admission_request v;
    kop_admission_response r;
    *out = NULL;
    kop_err err = parse_review(body, len, "AdmissionReview", versions, &root, &rq, st);
    if (err)
        return err;
    if ((err = view(rq, &v, &copy)) != KOP_OK)
        goto out;
    memset(&r, 0, sizeof r);
    kop_err verdict = h->handle(&v, &r, h->user);
    /* The answer repeats the request's apiVersion: a v1beta1 caller gets v1beta1. */
    resp = json_pack("{s:s}", "uid", v.uid);
    review = json_pack("{s:O, s:s}", "apiVersion", json_object_get(root, "apiVersion"), "kind",
                       "AdmissionReview");
    if (!resp || !review) {
        err = KOP_ENOMEM;
        goto out;
    }
    const json_t *before = json_object_get(rq, "object");
    if ((err = answer(h, verdict, &r, json_is_object(before) ? before : NULL, copy, resp)))
        goto out;
    json_object_set(review, "response", resp);
    err = dump_take(review, out);
    review = NULL;
out:
    json_decref(review);
    json_decref(resp);
    json_decref(copy);
    json_decref(root);
    return err;
}

/* ---- conversion ----------------------------------------------------------- */

/* split_api_version splits "group/version" ("v1" for the core group). */
static void split_api_version(const char *api, char *group, size_t gsz, const char **version)
{
    const char *slash = strrchr(api, '/');
    snprintf(group, gsz, "%.*s", slash ? (int)(slash - api) : 0, api);
    *version = slash ? slash + 1 : api;
}

/* convert_one converts obj (owned by the caller) to desired; st says why not. */
static kop_err convert_one(const kop_webhook_converter *cs, int n, json_t *obj,
                           const char *desired, kop_status *st)
{
    char from_group[256], to_group[256];
    const char *from_version, *to_version;
    const char *api = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (!json_is_object(obj) || !api || !kind) {
        kop_status_setf(st, 0, NULL, "an object without apiVersion and kind");
        return KOP_EINVAL;
    }
    split_api_version(api, from_group, sizeof from_group, &from_version);
    split_api_version(desired, to_group, sizeof to_group, &to_version);
    if (strcmp(from_group, to_group) != 0) {
        kop_status_setf(st, 0, NULL, "cannot convert %s from group %.100s to group %.100s", kind,
                        from_group, to_group);
        return KOP_EINVAL;
    }
    const kop_webhook_converter *c = NULL;
    for (int i = 0; i < n && !c; i++)
        if (strcmp(cs[i].group, from_group) == 0 && strcmp(cs[i].kind, kind) == 0)
            c = &cs[i];
    if (!c) {
        kop_status_setf(st, 0, NULL, "no converter for %.100s in group %.100s", kind, from_group);
        return KOP_EINVAL;
    }
    if (strcmp(from_version, to_version) != 0) {
        kop_err err = c->convert(obj, from_version, to_version, st, c->user);
        if (err) {
            if (!st->message[0])
                kop_status_setf(st, 0, NULL, "%s", kop_strerror(err));
            return err;
        }
    }
    return json_object_set_new(obj, "apiVersion", json_string(desired)) == 0 ? KOP_OK
                                                                             : KOP_ENOMEM;
}

kop_err kop__conversion_review(const kop_webhook_converter *cs, int n, const char *body,
                               size_t len, char **out, kop_status *st)
{
    static const char *const versions[] = {"apiextensions.k8s.io/v1", NULL};
    json_t *root = NULL, *rq = NULL, *converted = NULL, *resp = NULL;
    kop_status why;
    *out = NULL;
    kop_err err = parse_review(body, len, "ConversionReview", versions, &root, &rq, st);
    if (err)
        return err;
    const char *desired = json_string_value(json_object_get(rq, "desiredAPIVersion"));
    const json_t *objects = json_object_get(rq, "objects");
    if (!desired || !desired[0] || !json_is_array(objects) ||
        json_array_size(objects) > KOP__WEBHOOK_MAX_OBJECTS) {
        kop_status_setf(st, 400, "BadRequest",
                        "the ConversionReview needs desiredAPIVersion and at most %d objects",
                        KOP__WEBHOOK_MAX_OBJECTS);
        err = KOP_EBADREQUEST;
        goto out;
    }
    converted = json_array();
    resp = json_pack("{s:O}", "uid", json_object_get(rq, "uid"));
    if (!converted || !resp) {
        err = KOP_ENOMEM;
        goto out;
    }
    kop_status_clear(&why);
    kop_err failed = KOP_OK;
    size_t i;
    json_t *obj;
    json_array_foreach(objects, i, obj) {
        json_t *copy = json_deep_copy(obj);
        failed = copy ? convert_one(cs, n, copy, desired, &why) : KOP_ENOMEM;
        if (!failed && json_array_append_new(converted, copy) != 0)
            failed = KOP_ENOMEM;
        else if (failed)
            json_decref(copy);
        if (failed)
            break;
    }
    json_t *result =
        failed ? json_pack("{s:s, s:s+}", "status", "Failure", "message", "conversion failed: ",
                           why.message[0] ? why.message : kop_strerror(failed))
               : json_pack("{s:s}", "status", "Success");
    if (!result || json_object_set_new(resp, "result", result) != 0 ||
        (!failed && json_object_set(resp, "convertedObjects", converted) != 0)) {
        err = KOP_ENOMEM;
        goto out;
    }
    err = dump_take(json_pack("{s:s, s:s, s:O}", "apiVersion", "apiextensions.k8s.io/v1", "kind",
                              "ConversionReview", "response", resp),
                    out);
out:
    json_decref(resp);
    json_decref(converted);
    json_decref(root);
    return err;
}

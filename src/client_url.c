/*
 * client_url.c - request URLs: which path a resource lives at, and how
 * names and query values are escaped on the way there.
 *
 * The apiserver's paths, for a core and a grouped resource:
 *
 *   /api/v1/namespaces/{ns}/configmaps/{name}
 *   /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale
 *   /apis/rbac.authorization.k8s.io/v1/clusterroles/{name}
 *
 * Every piece that comes from a caller (namespace, name, subresource, and
 * the group, version and resource, which may come from discovery) must stay
 * one path segment. Go's router decodes "%2F" back to "/" before matching,
 * so escaping alone cannot keep "a/b" or ".." in its segment: such values
 * are refused outright, and everything else outside RFC 3986's unreserved set
 * is percent-encoded. Query values (label and field selectors, continue
 * tokens, resourceVersions) are encoded by the same rule, which Go's
 * url.ParseQuery reads back byte for byte ("+" is sent as %2B, never left to
 * mean a space).
 *
 * URLs are built in a scratch buffer capped at KOP__URL_MAX, so a huge name
 * fails with KOP_ETOOBIG instead of reaching libcurl or a proxy's limits.
 */
#include <string.h>

#include "client_internal.h"
#include "kop_internal.h"

/* How much of a rejected value an error message quotes. */
#define VALUE_EXCERPT_CHARS 64

static bool is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

kop_err kop__url_escape(kop_buf *out, const char *s, bool is_query)
{
    (void)is_query; /* one rule serves both; see kop__url_escape in the header */
    static const char hex[] = "0123456789ABCDEF";
    kop_err err = KOP_OK;
    const char *run = s; /* start of the unreserved bytes not yet copied */
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (is_unreserved(c))
            continue;
        char esc[3] = {'%', hex[c >> 4], hex[c & 0xF]};
        if ((err = kop_buf_append(out, run, (size_t)(p - run))) ||
            (err = kop_buf_append(out, esc, sizeof esc)))
            return err;
        run = p + 1;
    }
    return kop_buf_appends(out, run);
}

/*
 * check_segment accepts s as one path segment: not empty, not "." or "..",
 * no "/". what names it in the message.
 */
static kop_err check_segment(const char *what, const char *s, kop_status *st)
{
    const char *why = NULL;
    if (!s || !s[0])
        why = "must not be empty";
    else if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        why = "must not be \".\" or \"..\"";
    else if (strchr(s, '/'))
        why = "must not contain '/'";
    if (!why)
        return KOP_OK;
    char excerpt[VALUE_EXCERPT_CHARS + 1];
    kop__text_excerpt(excerpt, sizeof excerpt, s ? s : "", s ? strlen(s) : 0,
                      VALUE_EXCERPT_CHARS);
    kop_status_setf(st, 0, NULL, "invalid %s \"%s\": %s", what, excerpt, why);
    return KOP_EINVAL;
}

/* check_request validates everything before a byte is written. */
static kop_err check_request(const char *server, const kop_resource *r, const char *ns,
                             const char *name, const char *subresource, kop_status *st)
{
    kop_err err;
    if (!server || !server[0] || strspn(server, "/") == strlen(server)) {
        kop_status_setf(st, 0, NULL, "no server URL");
        return KOP_EINVAL;
    }
    if (strpbrk(server, "?#")) {
        kop_status_setf(st, 0, NULL, "server URL must not hold a query or fragment");
        return KOP_EINVAL;
    }
    if (!r) {
        kop_status_setf(st, 0, NULL, "no resource");
        return KOP_EINVAL;
    }
    if ((r->group && r->group[0] && (err = check_segment("group", r->group, st))) ||
        (err = check_segment("version", r->version, st)) ||
        (err = check_segment("resource", r->resource, st)))
        return err;

    bool has_ns = ns && ns[0];
    if (has_ns && !r->namespaced) {
        kop_status_setf(st, 0, NULL, "%s is cluster-scoped: no namespace may be given",
                        r->resource);
        return KOP_EINVAL;
    }
    if (has_ns && (err = check_segment("namespace", ns, st)))
        return err;
    if (name) {
        if ((err = check_segment("name", name, st)))
            return err;
        if (r->namespaced && !has_ns) {
            kop_status_setf(st, 0, NULL, "%s is namespaced: a namespace is needed to name one",
                            r->resource);
            return KOP_EINVAL;
        }
    }
    if (subresource) {
        if (!name) {
            kop_status_setf(st, 0, NULL, "subresource %s needs an object name",
                            subresource[0] ? subresource : "\"\"");
            return KOP_EINVAL;
        }
        if ((err = check_segment("subresource", subresource, st)))
            return err;
    }
    return KOP_OK;
}

/* append_path writes {server}/api[s]/... up to the subresource into u. */
static kop_err append_path(kop_buf *u, const char *server, const kop_resource *r, const char *ns,
                           const char *name, const char *subresource)
{
    kop_err err;
    size_t slen = strlen(server);
    while (slen > 0 && server[slen - 1] == '/')
        slen--; /* "https://h/prefix/" + "/api" must not give "//api" */
    if ((err = kop_buf_append(u, server, slen)))
        return err;

    if (r->group && r->group[0]) {
        if ((err = kop_buf_appends(u, "/apis/")) || (err = kop__url_escape(u, r->group, false)))
            return err;
    } else if ((err = kop_buf_appends(u, "/api"))) {
        return err;
    }
    if ((err = kop_buf_appends(u, "/")) || (err = kop__url_escape(u, r->version, false)))
        return err;
    if (ns && ns[0]) {
        if ((err = kop_buf_appends(u, "/namespaces/")) || (err = kop__url_escape(u, ns, false)))
            return err;
    }
    if ((err = kop_buf_appends(u, "/")) || (err = kop__url_escape(u, r->resource, false)))
        return err;
    if (name) {
        if ((err = kop_buf_appends(u, "/")) || (err = kop__url_escape(u, name, false)))
            return err;
    }
    if (subresource) {
        if ((err = kop_buf_appends(u, "/")) || (err = kop__url_escape(u, subresource, false)))
            return err;
    }
    return KOP_OK;
}

/* append_query writes "?k=v&k=v" for the params that have a value. */
static kop_err append_query(kop_buf *u, const kop__query_param *params, size_t nparams,
                            kop_status *st)
{
    kop_err err;
    char sep = '?';
    for (size_t i = 0; i < nparams; i++) {
        if (!params[i].key || !params[i].key[0]) {
            kop_status_setf(st, 0, NULL, "query parameter %zu has no name", i);
            return KOP_EINVAL;
        }
        if (!params[i].value)
            continue;
        if ((err = kop_buf_append(u, &sep, 1)) || (err = kop__url_escape(u, params[i].key, true)) ||
            (err = kop_buf_appends(u, "=")) || (err = kop__url_escape(u, params[i].value, true)))
            return err;
        sep = '&';
    }
    return KOP_OK;
}

kop_err kop__url_build(kop_buf *out, const char *server, const kop_resource *r, const char *ns,
                       const char *name, const char *subresource, const kop__query_param *params,
                       size_t nparams, kop_status *st)
{
    kop_buf u;
    kop_buf_init(&u, KOP__URL_MAX);
    kop_buf_reset(out);

    kop_err err = check_request(server, r, ns, name, subresource, st);
    if (err)
        goto out;
    err = append_path(&u, server, r, ns, name, subresource);
    if (!err)
        err = append_query(&u, params, nparams, st);
    if (!err)
        err = kop_buf_append(out, u.data, u.len);
    if (err == KOP_ETOOBIG)
        kop_status_setf(st, 0, NULL, "request URL for %s longer than %zu bytes", r->resource,
                        (size_t)KOP__URL_MAX < out->max ? (size_t)KOP__URL_MAX : out->max);
    else if (err == KOP_ENOMEM)
        kop_status_setf(st, 0, NULL, "out of memory building a request URL");
out:
    kop_buf_fini(&u);
    if (err)
        kop_buf_reset(out);
    return err;
}

/*
 * client_discovery.c - the REST mapping: from (apiVersion, kind) to the
 * resource that serves it, through the apiserver's discovery documents.
 *
 * One APIResourceList per group version is fetched on first use and cached
 * (GET /api/v1 or /apis/{group}/{version}). A kind missing from a cached
 * list triggers one refresh of that list, so a CRD installed after start-up
 * is found; a kind still missing is KOP_ENOTFOUND. Workload: a handful of
 * lookups per controller at start-up, so a linear scan of a list is fine.
 *
 * The kop_resource handed out borrows strings from the cached documents;
 * a refreshed document retires the old one instead of freeing it, so those
 * pointers stay valid until the client is freed.
 */
#include <stdio.h>
#include <string.h>

#include "client_request_internal.h"
#include "kop_internal.h"

void kop__discovery_init(kop__discovery *d)
{
    pthread_mutex_init(&d->lock, NULL);
    d->by_gv = json_object();
    d->retired = json_array();
}

void kop__discovery_fini(kop__discovery *d)
{
    json_decref(d->by_gv);
    json_decref(d->retired);
    pthread_mutex_destroy(&d->lock);
}

/* split_api_version splits "apps/v1" into group and version ("" and "v1" for "v1"). */
static kop_err split_api_version(const char *api_version, char *group, size_t gsize,
                                 char *version, size_t vsize, kop_status *st)
{
    const char *slash = strchr(api_version, '/');
    int n;
    if (slash) {
        n = snprintf(group, gsize, "%.*s", (int)(slash - api_version), api_version);
        if (n < 0 || (size_t)n >= gsize || n == 0)
            goto bad;
        n = snprintf(version, vsize, "%s", slash + 1);
    } else {
        group[0] = '\0';
        n = snprintf(version, vsize, "%s", api_version);
    }
    if (n <= 0 || (size_t)n >= vsize || strchr(version, '/'))
        goto bad;
    return KOP_OK;
bad:
    kop_status_setf(st, 0, NULL, "invalid apiVersion \"%s\"", api_version);
    return KOP_EINVAL;
}

/* fetch_list GETs the APIResourceList of one group version (a new reference). */
static kop_err fetch_list(kop_client *c, const char *group, const char *version, json_t **out,
                          kop_status *st)
{
    char path[512];
    int n = group[0] ? snprintf(path, sizeof path, "/apis/%s/%s", group, version)
                     : snprintf(path, sizeof path, "/api/%s", version);
    if (n < 0 || (size_t)n >= sizeof path)
        return KOP_EINVAL;
    kop_err err = kop_get_path(c, path, out, st);
    if (!err && !json_is_array(json_object_get(*out, "resources"))) {
        kop_status_setf(st, 200, NULL, "%s: not an APIResourceList", path);
        json_decref(*out);
        *out = NULL;
        err = KOP_EPARSE;
    }
    return err;
}

/* find_kind fills *out from entry if it serves kind (top-level resources only). */
static bool find_kind(json_t *entry, const char *kind, kop_resource *out)
{
    json_t *res;
    size_t i;
    json_array_foreach(json_object_get(entry, "resources"), i, res)
    {
        const char *name = json_string_value(json_object_get(res, "name"));
        const char *k = json_string_value(json_object_get(res, "kind"));
        if (!name || !k || strchr(name, '/') || strcmp(k, kind) != 0)
            continue;
        *out = (kop_resource){
            .group = json_string_value(json_object_get(entry, "group")),
            .version = json_string_value(json_object_get(entry, "version")),
            .resource = name,
            .kind = k,
            .namespaced = json_is_true(json_object_get(res, "namespaced")),
        };
        return true;
    }
    return false;
}

/* store caches list under gv, retiring any entry it replaces; steals list. */
static kop_err store(kop__discovery *d, const char *gv, const char *group, const char *version,
                     json_t *list, json_t **entry_out)
{
    json_t *entry = json_pack("{s:s, s:s, s:o}", "group", group, "version", version, "resources",
                              json_incref(json_object_get(list, "resources")));
    json_decref(list);
    if (!entry)
        return KOP_ENOMEM;
    pthread_mutex_lock(&d->lock);
    json_t *old = json_object_get(d->by_gv, gv);
    int bad = old ? json_array_append(d->retired, old) : 0;
    bad |= json_object_set(d->by_gv, gv, entry);
    pthread_mutex_unlock(&d->lock);
    *entry_out = entry; /* alive: the cache holds it */
    json_decref(entry);
    return bad ? KOP_ENOMEM : KOP_OK;
}

kop_err kop_client_resource_for_kind(kop_client *c, const char *api_version, const char *kind,
                                     kop_resource *out, kop_status *st)
{
    kop_err err = KOP_OK;
    char group[256], version[64];
    kop__discovery *d = kop__client_discovery(c);
    json_t *list = NULL, *entry = NULL;
    bool found = false;

    kop_status_clear(st);
    if (!api_version || !kind || !kind[0]) {
        kop_status_setf(st, 0, NULL, "resource_for_kind: apiVersion and kind are required");
        return KOP_EINVAL;
    }
    err = split_api_version(api_version, group, sizeof group, version, sizeof version, st);
    if (err)
        return err;

    pthread_mutex_lock(&d->lock);
    entry = json_object_get(d->by_gv, api_version);
    found = entry && find_kind(entry, kind, out);
    pthread_mutex_unlock(&d->lock);
    if (found)
        return KOP_OK;

    /* Not cached, or cached before the kind existed: fetch once more. */
    err = fetch_list(c, group, version, &list, st);
    if (err)
        return err;
    err = store(d, api_version, group, version, list, &entry);
    if (err)
        return err;
    pthread_mutex_lock(&d->lock);
    found = find_kind(entry, kind, out);
    pthread_mutex_unlock(&d->lock);
    if (!found) {
        kop_status_setf(st, 404, "NotFound", "no resource serves kind %s in %s", kind,
                        api_version);
        return KOP_ENOTFOUND;
    }
    return KOP_OK;
}

/* ---- checking a resource ------------------------------------------------ */

/* gv_text writes "group/version" ("v1" for core) into out. */
static void gv_text(const kop_resource *r, char *out, size_t size)
{
    if (r->group && r->group[0])
        snprintf(out, size, "%s/%s", r->group, r->version);
    else
        snprintf(out, size, "%s", r->version ? r->version : "");
}

/* find_name returns the entry of a cached list serving resource name, borrowed. */
static json_t *find_name(json_t *entry, const char *name)
{
    json_t *res;
    size_t i;
    json_array_foreach(json_object_get(entry, "resources"), i, res)
    {
        if (kop_streq(json_string_value(json_object_get(res, "name")), name))
            return res;
    }
    return NULL;
}

/*
 * served_list writes "plural (Kind), ..." of the top-level resources of
 * entry into out, for an error that suggests what was meant.
 */
static void served_list(json_t *entry, char *out, size_t size)
{
    json_t *res;
    size_t i, used = 0;
    out[0] = '\0';
    json_array_foreach(json_object_get(entry, "resources"), i, res)
    {
        const char *name = json_string_value(json_object_get(res, "name"));
        const char *kind = json_string_value(json_object_get(res, "kind"));
        if (!name || !kind || strchr(name, '/') || used >= size)
            continue;
        int n = snprintf(out + used, size - used, "%s%s (%s)", used ? ", " : "", name, kind);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used >= size && size > 4)
        memcpy(out + size - 4, "...", 4);
}

/*
 * lookup_gv finds r's group version in the cache, fetching it when missing
 * or when refresh is set, and returns it in *entry (borrowed from the
 * cache). *fetched, if not NULL, tells whether it was fetched just now.
 */
static kop_err lookup_gv(kop_client *c, const kop_resource *r, bool refresh, json_t **entry,
                         bool *fetched, kop_status *st)
{
    kop__discovery *d = kop__client_discovery(c);
    char gv[320];
    json_t *list = NULL;
    gv_text(r, gv, sizeof gv);
    pthread_mutex_lock(&d->lock);
    *entry = refresh ? NULL : json_object_get(d->by_gv, gv);
    pthread_mutex_unlock(&d->lock);
    if (fetched)
        *fetched = !*entry;
    if (*entry)
        return KOP_OK;
    kop_err err = fetch_list(c, r->group ? r->group : "", r->version, &list, st);
    if (!err)
        err = store(d, gv, r->group ? r->group : "", r->version, list, entry);
    return err;
}

kop_err kop__discovery_check(kop_client *c, const kop_resource *r, kop_status *st)
{
    char gv[320], served[512];
    json_t *entry = NULL, *res = NULL;
    kop_err err;

    kop_status_clear(st);
    if (!r || !r->version || !r->version[0] || !r->resource || !r->resource[0]) {
        kop_status_setf(st, 0, NULL, "a watched resource has no version or plural");
        return KOP_EINVAL;
    }
    gv_text(r, gv, sizeof gv);
    bool fetched = false;
    err = lookup_gv(c, r, false, &entry, &fetched, st);
    if (!err) {
        pthread_mutex_lock(&kop__client_discovery(c)->lock);
        res = find_name(entry, r->resource);
        pthread_mutex_unlock(&kop__client_discovery(c)->lock);
    }
    if (!err && !res && !fetched) /* cached before the CRD came: look once more */
        err = lookup_gv(c, r, true, &entry, NULL, st);
    if (!err && !res) {
        pthread_mutex_lock(&kop__client_discovery(c)->lock);
        res = find_name(entry, r->resource);
        if (!res)
            served_list(entry, served, sizeof served);
        pthread_mutex_unlock(&kop__client_discovery(c)->lock);
        if (!res) {
            kop_status_setf(st, 404, "NotFound",
                            "no resource %s in %s (kind %s): is the CRD installed, and is the "
                            "plural right? %s serves: %s",
                            r->resource, gv, r->kind ? r->kind : "?", gv,
                            served[0] ? served : "nothing");
            return KOP_ENOTFOUND;
        }
    }
    if (err == KOP_ENOTFOUND) {
        kop_status_setf(st, 404, "NotFound",
                        "no resource %s in %s (kind %s): is the CRD installed? The apiserver "
                        "serves no group version %s",
                        r->resource, gv, r->kind ? r->kind : "?", gv);
        return err;
    }
    if (err) {
        char why[KOP_STATUS_MESSAGE_MAX];
        snprintf(why, sizeof why, "%s", st ? st->message : "");
        kop_status_setf(st, st ? st->code : 0, NULL, "discovery of %s %s failed: %s",
                        gv, r->resource, why);
        return err;
    }

    /* The resource exists: its kind and scope must be what the code says. */
    const char *kind = json_string_value(json_object_get(res, "kind"));
    bool namespaced = json_is_true(json_object_get(res, "namespaced"));
    if (!kop_streq(kind, r->kind)) {
        kop_status_setf(st, 0, NULL,
                        "resource %s in %s serves kind %s, not %s: fix the kind of its "
                        "kop_resource (owner references are matched by kind)",
                        r->resource, gv, kind ? kind : "?", r->kind ? r->kind : "(none)");
        return KOP_EINVAL;
    }
    if (namespaced != r->namespaced) {
        kop_status_setf(st, 0, NULL,
                        "resource %s in %s (kind %s) is %s, but its kop_resource says %s",
                        r->resource, gv, kind, namespaced ? "namespaced" : "cluster-scoped",
                        r->namespaced ? "namespaced" : "cluster-scoped");
        return KOP_EINVAL;
    }
    return KOP_OK;
}

bool kop__discovery_lacks_status(kop_client *c, const kop_resource *r)
{
    char sub[256];
    json_t *entry = NULL;
    kop_status ignored;
    bool lacks = false;
    if (!r || !r->version || !r->resource ||
        snprintf(sub, sizeof sub, "%s/status", r->resource) >= (int)sizeof sub)
        return false;
    /* Fresh: a CRD changed since the cache was filled must not mislead. */
    if (lookup_gv(c, r, true, &entry, NULL, &ignored) != KOP_OK)
        return false;
    pthread_mutex_lock(&kop__client_discovery(c)->lock);
    lacks = find_name(entry, r->resource) && !find_name(entry, sub);
    pthread_mutex_unlock(&kop__client_discovery(c)->lock);
    return lacks;
}

/*
 * informer_store.c - the informer's cache of objects (see kop/informer.h):
 * what is cached, in what form, and the reads of it.
 *
 * The store maps "ns/name" to an entry holding the object as compact JSON
 * text (jansson trees cost about ten times their text), its
 * resourceVersion, the relist generation that last saw it, and the index
 * values it was filed under. The text starts with apiVersion, kind and
 * metadata, and the entry knows where metadata ends: the object an update
 * replaces is parsed for the handlers only as far as they read it
 * (kop_old_use), often just that head. Reads parse a copy; no caller ever
 * holds the cached text.
 *
 * What is cached is the transform's output: by default the object without
 * metadata.managedFields (a third of its bytes or more, read by no
 * controller). A watch without a custom transform has them cut from the
 * event's text before it is parsed (json_cut.c); the default transform
 * drops what a list or an uncut line still carries. metadata_only keeps
 * apiVersion, kind and metadata alone.
 *
 * Invariants: an entry's text parses (it is written with kop_meta_dumps,
 * which fails whole rather than tear); an entry replaced with the same
 * resourceVersion is left as it is and reported unchanged, so a relist
 * re-reading what the watch applied calls no handler; an entry is stamped
 * with the current relist generation only (kop_informer.gen), which is
 * what lets a relist's sweep tell the entries it did not see. A write
 * that runs out of memory half-way drops the entry rather than keep a torn
 * one, and reports the event not applied, so that it comes again
 * (informer_watch.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "informer_internal.h"
#include "kop/meta.h"
#include "kop_internal.h"

/* ---- what is cached: the transform ---------------------------------------- */

static json_t *default_transform(json_t *obj, void *user)
{
    (void)user;
    json_object_del(json_object_get(obj, "metadata"), "managedFields");
    return obj;
}

static json_t *metadata_only(json_t *obj)
{
    json_t *slim = json_pack("{s:O*, s:O*, s:O*}", "apiVersion", json_object_get(obj, "apiVersion"),
                             "kind", json_object_get(obj, "kind"), "metadata",
                             json_object_get(obj, "metadata"));
    json_decref(obj);
    return slim;
}

/*
 * kop__informer_prepare applies the transform to obj (taken): *out is what to cache, or
 * NULL when the object is not to be cached (no name, or the transform
 * dropped it). KOP_ENOMEM when slimming it to metadata ran out of memory:
 * the event was not applied, and must come again.
 */
kop_err kop__informer_prepare(kop_informer *inf, json_t *obj, json_t **out)
{
    *out = NULL;
    if (!json_is_object(obj) || !kop_meta_name(obj)) {
        json_decref(obj);
        return KOP_OK;
    }
    kop_transform_fn t = inf->opts.transform ? inf->opts.transform : default_transform;
    obj = t(obj, inf->opts.transform_user);
    if (obj && inf->opts.metadata_only && !(obj = metadata_only(obj)))
        return KOP_ENOMEM;
    *out = obj;
    return KOP_OK;
}

/* kop__informer_key_of writes "ns/name" (or "name") of obj into buf. */
bool kop__informer_key_of(const json_t *obj, char *buf, size_t size)
{
    return kop_meta_key(buf, size, kop_meta_namespace(obj), kop_meta_name(obj)) == KOP_OK;
}

/* ---- entries ------------------------------------------------------------ */

void kop__informer_entry_free(void *p)
{
    struct kop__informer_entry *e = p;
    if (!e)
        return;
    free(e->vals);
    free(e->json);
    free(e);
}

static bool is_head_key(const char *k)
{
    return strcmp(k, "metadata") == 0 || strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0;
}

/*
 * entry_text serializes obj with its head (apiVersion, kind, metadata)
 * first, as the head's text and the rest's joined: "{head}" + "{rest}"
 * becomes "{head,rest}", and *head_len is where the head's closing brace
 * was (0, and the text as it comes, for an object without a head or a
 * head too long to count). NULL when memory runs out.
 */
static char *entry_text(const json_t *obj, unsigned *head_len)
{
    json_t *head = json_object(), *rest = json_object(), *v;
    const char *k;
    char *h = NULL, *r = NULL, *out = NULL;
    bool ok = head && rest;
    *head_len = 0;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (ok && json_object_set(is_head_key(k) ? head : rest, k, v) != 0)
            ok = false;
    }
    if (ok && (h = kop_meta_dumps(head, JSON_COMPACT)) &&
        (r = kop_meta_dumps(rest, JSON_COMPACT))) {
        size_t hl = strlen(h) - 1, rl = strlen(r); /* h without its '}'; r is "{...}" */
        if (json_object_size(head) == 0 || hl >= UINT_MAX) {
            out = kop_meta_dumps(obj, JSON_COMPACT);
        } else if (json_object_size(rest) == 0) {
            out = h; /* the head is the whole object */
            h = NULL;
            *head_len = (unsigned)hl;
        } else if ((out = malloc(hl + rl + 1))) {
            memcpy(out, h, hl);
            out[hl] = ',';
            memcpy(out + hl + 1, r + 1, rl); /* r's text after '{', and its NUL */
            *head_len = (unsigned)hl;
        }
    }
    free(h);
    free(r);
    json_decref(head);
    json_decref(rest);
    return out;
}

/* new_entry serializes obj into a fresh entry. */
static struct kop__informer_entry *new_entry(const json_t *obj, unsigned gen)
{
    const char *rv = kop_meta_resource_version(obj);
    size_t rv_len = rv ? strlen(rv) : 0;
    struct kop__informer_entry *e = calloc(1, sizeof *e + rv_len + 1);
    if (!e)
        return NULL;
    memcpy(e->rv, rv ? rv : "", rv_len);
    e->json = entry_text(obj, &e->head_len);
    e->gen = gen;
    if (!e->json) {
        kop__informer_entry_free(e);
        return NULL;
    }
    return e;
}

/*
 * kop__informer_parse_entry parses a cached text (NULL: no memory). Entries are written
 * with kop_meta_dumps, never json_dumps, whose torn output under memory
 * failure once left an entry that no watch event could repair.
 */
json_t *kop__informer_parse_entry(const struct kop__informer_entry *e)
{
    return json_loads(e->json, 0, NULL);
}

/* parse_head parses only the head of a cached text: apiVersion, kind and metadata. */
static json_t *parse_head(const struct kop__informer_entry *e)
{
    char stack[2048];
    if (e->head_len == 0)
        return kop__informer_parse_entry(e);
    char *buf = e->head_len + 1 <= sizeof stack ? stack : malloc(e->head_len + 1);
    if (!buf)
        return NULL;
    memcpy(buf, e->json, e->head_len);
    buf[e->head_len] = '}';
    json_t *head = json_loadb(buf, e->head_len + 1, 0, NULL);
    if (buf != stack)
        free(buf);
    return head;
}

/* parse_old parses a replaced entry as far as the handlers read it (NULL for none). */
static json_t *parse_old(const struct kop__informer_entry *e, kop_old_use need)
{
    switch (need) {
    case KOP_OLD_FULL:
        return kop__informer_parse_entry(e);
    case KOP_OLD_METADATA:
        return parse_head(e);
    default:
        return NULL;
    }
}

/* ---- writes (informer thread only) ------------------------------------- */

/*
 * kop__informer_upsert puts obj (borrowed) into the store. *old_out gets the replaced
 * object parsed as far as need says (owned; NULL for KOP_OLD_UNUSED);
 * *changed is false when the cached version was already this one.
 */
kop_err kop__informer_upsert(kop_informer *inf, const json_t *obj, unsigned gen, kop_old_use need,
                      json_t **old_out, bool *existed, bool *changed)
{
    char key[512];
    kop_err err = KOP_OK;
    *old_out = NULL;
    *existed = *changed = false;
    /* Only the informer thread writes, and always with the generation of
     * the relist in progress or last done: the sweep relies on it. */
    KOP_ASSERT(gen == inf->gen);
    if (!kop__informer_key_of(obj, key, sizeof key))
        return KOP_EINVAL;
    pthread_rwlock_wrlock(&inf->lock);
    struct kop__informer_entry *cur = kop__map_get(&inf->store, key);
    const char *rv = kop_meta_resource_version(obj);
    if (cur) {
        *existed = true;
        cur->gen = gen;
        if (rv && strcmp(cur->rv, rv) == 0)
            goto out; /* a relist seeing what the watch already applied */
    }
    struct kop__informer_entry *e = new_entry(obj, gen);
    if (!e) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (cur) {
        *old_out = parse_old(cur, need);
        kop__informer_index_remove(inf, key, cur);
    }
    err = kop__informer_index_add(inf, key, obj, e);
    if (!err)
        err = kop__map_put(&inf->store, key, e, NULL);
    if (err) {
        /* Out of memory half-way: drop the object rather than keep a torn entry. */
        kop__informer_index_remove(inf, key, e);
        kop__informer_entry_free(e);
        kop__informer_entry_free(kop__map_remove(&inf->store, key));
        goto out;
    }
    kop__informer_entry_free(cur);
    *changed = true;
out:
    pthread_rwlock_unlock(&inf->lock);
    return err;
}

/* kop__informer_forget removes key; *last_out gets the cached object parsed (owned), if any. */
void kop__informer_forget(kop_informer *inf, const char *key, json_t **last_out)
{
    pthread_rwlock_wrlock(&inf->lock);
    struct kop__informer_entry *e = kop__map_remove(&inf->store, key);
    if (e) {
        kop__informer_index_remove(inf, key, e);
        if (last_out)
            *last_out = kop__informer_parse_entry(e);
    }
    kop__map_shrink(&inf->store); /* after a mass deletion the table follows */
    pthread_rwlock_unlock(&inf->lock);
    kop__informer_entry_free(e);
}

/* ---- reads -------------------------------------------------------------- */

/* dup_parsed parses the entry ns/name, whole or its head only. */
static kop_err dup_parsed(kop_informer *inf, const char *ns, const char *name, bool head,
                          json_t **out)
{
    char key[512];
    *out = NULL;
    if (kop_meta_key(key, sizeof key, inf->opts.resource.namespaced ? ns : NULL, name) != KOP_OK)
        return KOP_EINVAL;
    pthread_rwlock_rdlock(&inf->lock);
    struct kop__informer_entry *e = kop__map_get(&inf->store, key);
    if (e)
        *out = head ? parse_head(e) : kop__informer_parse_entry(e);
    pthread_rwlock_unlock(&inf->lock);
    if (!e)
        return KOP_ENOTFOUND;
    return *out ? KOP_OK : KOP_ENOMEM;
}

kop_err kop_informer_dup(kop_informer *inf, const char *ns, const char *name, json_t **out)
{
    return dup_parsed(inf, ns, name, false, out);
}

kop_err kop_informer_dup_metadata(kop_informer *inf, const char *ns, const char *name, json_t **out)
{
    return dup_parsed(inf, ns, name, true, out);
}

kop_err kop_informer_list(kop_informer *inf, const char *ns, json_t **out)
{
    if (ns && ns[0])
        return kop_informer_by_index(inf, KOP_INDEX_NAMESPACE, ns, out);
    kop_err err = KOP_OK;
    *out = json_array();
    if (!*out)
        return KOP_ENOMEM;
    pthread_rwlock_rdlock(&inf->lock);
    size_t pos = 0;
    const char *k;
    void *v;
    while (!err && kop__map_next(&inf->store, &pos, &k, &v)) {
        json_t *obj = kop__informer_parse_entry(v);
        err = obj && json_array_append_new(*out, obj) == 0 ? KOP_OK : KOP_ENOMEM;
    }
    pthread_rwlock_unlock(&inf->lock);
    if (err) {
        json_decref(*out);
        *out = NULL;
    }
    return err;
}

size_t kop_informer_len(kop_informer *inf)
{
    pthread_rwlock_rdlock(&inf->lock);
    size_t n = inf->store.len;
    pthread_rwlock_unlock(&inf->lock);
    return n;
}

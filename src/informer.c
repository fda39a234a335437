/*
 * informer.c - list + watch into a cache of compact JSON (see kop/informer.h).
 *
 * The thread's loop reads as client-go's reflector:
 *
 *     until stopped:
 *         if no version to resume from: list everything, replace the cache
 *         watch from the last version seen, applying each event
 *         on the stream's end: watch again at once (back off when it
 *             ended empty within a second)
 *         on 410 Gone: forget the version (relist; back off first when
 *             the version a relist just returned is gone)
 *         on any other failure: sleep a jittered backoff, then watch again
 *
 * The store maps "ns/name" to an entry holding the object as compact JSON
 * text (jansson trees cost about ten times their text), its
 * resourceVersion, and the index values it was filed under. The text
 * starts with apiVersion, kind and metadata, and the entry knows where
 * metadata ends: the object an update replaces is parsed for the handlers
 * only as far as they read it (kop_old_use), often just that head. A relist does
 * not build a second store: it stamps every entry it sees with the relist's
 * generation, updates those that changed, and afterwards deletes the
 * entries it did not see. At peak it holds the store plus one page.
 *
 * Locking: one rwlock guards the store and indexes. Handlers are called
 * with no lock held, on the informer thread, in event order.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/informer.h"
#include "kop/log.h"
#include "kop/meta.h"
#include "kop_internal.h"
#include "map_internal.h"

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#define BACKOFF_START_MS   800
#define BACKOFF_MAX_MS     30000
#define WATCH_MIN_S        300 /* watch timeouts are random in [5 min, 10 min) */
#define WATCH_SPREAD_S     300
#define MAX_HANDLERS       16
#define LIST_PAGE          500
#define SHORT_WATCH_NS     1000000000LL /* an empty watch shorter than this ended abnormally */
#define HEALTHY_WATCH_MS   60000        /* a watch open this long resets the backoff */

/*
 * entry: one cached object. Small on purpose, since there is one per object
 * (at 10,000 objects every 100 bytes here is a megabyte): the index values
 * live in one allocation (vals: the pointers, index after index, nvals[i]
 * of them for index i, then the strings), the resourceVersion in the entry
 * itself.
 */
struct entry {
    char *json;  /* compact serialized object, apiVersion, kind and metadata first */
    char **vals; /* index values; NULL when none */
    unsigned gen;
    unsigned head_len; /* json[0..head_len) + "}" is the head alone; 0: no head */
    unsigned char nvals[KOP_INFORMER_MAX_INDEXES]; /* each <= KOP_INDEX_MAX_VALUES */
    char rv[];   /* metadata.resourceVersion */
};

struct index {
    char *name;
    kop_index_fn fn;
    void *user;
    kop__map by_value; /* value -> kop__map* set of keys */
};

struct kop_informer {
    kop_client *client;
    kop_informer_opts opts;
    char *ns, *labels, *fields; /* owned copies of opts strings */

    kop_informer_handler handlers[MAX_HANDLERS];
    int nhandlers;

    pthread_rwlock_t lock; /* store and indexes */
    kop__map store;        /* key -> struct entry* */
    struct index indexes[KOP_INFORMER_MAX_INDEXES];
    int nindexes;
    unsigned gen;

    pthread_mutex_t mu; /* state below */
    pthread_cond_t cond;
    bool started, stopping, synced;
    kop_watch *watch; /* the open stream, for stop to cancel */
    pthread_t thread;

    char *rv; /* last version seen; NULL: list next (informer thread only) */
    kop_informer_stats stats;
};

static bool stopping_requested(kop_informer *inf);

/* ---- built-in indexes and transform ------------------------------------- */

static const json_t *meta_of(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

static const char *meta_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(meta_of(obj), field));
}

static size_t index_namespace(const json_t *obj, const char **values, size_t max, void *user)
{
    (void)user;
    const char *ns = meta_str(obj, "namespace");
    if (!ns || max == 0)
        return 0;
    values[0] = ns;
    return 1;
}

static size_t index_owner(const json_t *obj, const char **values, size_t max, void *user)
{
    (void)user;
    json_t *ref;
    size_t i;
    json_array_foreach(json_object_get(meta_of(obj), "ownerReferences"), i, ref)
    {
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        if (json_is_true(json_object_get(ref, "controller")) && uid && max > 0) {
            values[0] = uid;
            return 1;
        }
    }
    return 0;
}

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
 * prepare applies the transform to obj (taken): *out is what to cache, or
 * NULL when the object is not to be cached (no name, or the transform
 * dropped it). KOP_ENOMEM when slimming it to metadata ran out of memory:
 * the event was not applied, and must come again.
 */
static kop_err prepare(kop_informer *inf, json_t *obj, json_t **out)
{
    *out = NULL;
    if (!json_is_object(obj) || !meta_str(obj, "name")) {
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

/* key_of writes "ns/name" (or "name") of obj into buf. */
static bool key_of(const json_t *obj, char *buf, size_t size)
{
    return kop_meta_key(buf, size, meta_str(obj, "namespace"), meta_str(obj, "name")) == KOP_OK;
}

/* ---- lifecycle ---------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

static kop_err add_index_locked(kop_informer *inf, const char *name, kop_index_fn fn, void *user)
{
    if (inf->nindexes >= KOP_INFORMER_MAX_INDEXES)
        return KOP_ETOOBIG;
    for (int i = 0; i < inf->nindexes; i++)
        if (strcmp(inf->indexes[i].name, name) == 0)
            return KOP_EALREADYEXISTS;
    struct index *ix = &inf->indexes[inf->nindexes];
    ix->name = strdup(name);
    if (!ix->name)
        return KOP_ENOMEM;
    ix->fn = fn;
    ix->user = user;
    kop__map_init(&ix->by_value);
    inf->nindexes++;
    return KOP_OK;
}

kop_err kop_informer_new(kop_client *c, const kop_informer_opts *opts, kop_informer **out)
{
    kop_err err = KOP_OK;
    *out = NULL;
    if (!c || !opts || !opts->resource.resource || !opts->resource.version)
        return KOP_EINVAL;
    kop_informer *inf = calloc(1, sizeof *inf);
    if (!inf)
        return KOP_ENOMEM;
    inf->client = c;
    inf->opts = *opts;
    inf->ns = dup_or_null(opts->namespace);
    inf->labels = dup_or_null(opts->label_selector);
    inf->fields = dup_or_null(opts->field_selector);
    inf->opts.namespace = inf->ns;
    inf->opts.label_selector = inf->labels;
    inf->opts.field_selector = inf->fields;
    pthread_rwlock_init(&inf->lock, NULL);
    pthread_mutex_init(&inf->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&inf->cond, &ca);
    pthread_condattr_destroy(&ca);
    kop__map_init(&inf->store);
    if ((opts->namespace && opts->namespace[0] && !inf->ns) ||
        (opts->label_selector && opts->label_selector[0] && !inf->labels) ||
        (opts->field_selector && opts->field_selector[0] && !inf->fields)) {
        err = KOP_ENOMEM;
        goto out;
    }
    err = add_index_locked(inf, KOP_INDEX_NAMESPACE, index_namespace, NULL);
    if (!err)
        err = add_index_locked(inf, KOP_INDEX_OWNER, index_owner, NULL);
    if (err)
        goto out;
    *out = inf;
    inf = NULL;
out:
    kop_informer_free(inf);
    return err;
}

kop_err kop_informer_add_handler(kop_informer *inf, const kop_informer_handler *h)
{
    if (inf->started)
        return KOP_EINVAL;
    if (inf->nhandlers >= MAX_HANDLERS)
        return KOP_ETOOBIG;
    inf->handlers[inf->nhandlers++] = *h;
    return KOP_OK;
}

kop_err kop_informer_add_index(kop_informer *inf, const char *name, kop_index_fn fn, void *user)
{
    if (inf->started || !name || !fn)
        return KOP_EINVAL;
    return add_index_locked(inf, name, fn, user);
}

static void free_key_set(void *set)
{
    kop__map_fini(set, NULL);
    free(set);
}

static void free_entry(void *p)
{
    struct entry *e = p;
    if (!e)
        return;
    free(e->vals);
    free(e->json);
    free(e);
}

void kop_informer_free(kop_informer *inf)
{
    if (!inf)
        return;
    kop_informer_stop(inf);
    kop__map_fini(&inf->store, free_entry);
    for (int i = 0; i < inf->nindexes; i++) {
        kop__map_fini(&inf->indexes[i].by_value, free_key_set);
        free(inf->indexes[i].name);
    }
    pthread_rwlock_destroy(&inf->lock);
    pthread_mutex_destroy(&inf->mu);
    pthread_cond_destroy(&inf->cond);
    free(inf->rv);
    free(inf->ns);
    free(inf->labels);
    free(inf->fields);
    free(inf);
}

/* ---- store -------------------------------------------------------------- */

/* index_remove takes key out of every index under the values e was filed with. */
static void index_remove(kop_informer *inf, const char *key, struct entry *e)
{
    char **v = e->vals;
    for (int i = 0; i < inf->nindexes; i++) {
        for (size_t j = 0; j < e->nvals[i]; j++, v++) {
            kop__map *set = kop__map_get(&inf->indexes[i].by_value, *v);
            if (!set)
                continue;
            kop__map_remove(set, key);
            if (set->len == 0)
                free_key_set(kop__map_remove(&inf->indexes[i].by_value, *v));
        }
    }
}

/* index_add files key under obj's values in every index, recording them in e. */
static kop_err index_add(kop_informer *inf, const char *key, const json_t *obj, struct entry *e)
{
    /* First every value (borrowed from obj), to size the one allocation. */
    const char *vals[KOP_INFORMER_MAX_INDEXES * KOP_INDEX_MAX_VALUES];
    size_t counts[KOP_INFORMER_MAX_INDEXES], total = 0, bytes = 0;
    for (int i = 0; i < inf->nindexes; i++) {
        size_t n = inf->indexes[i].fn(obj, vals + total, KOP_INDEX_MAX_VALUES, inf->indexes[i].user);
        counts[i] = n > KOP_INDEX_MAX_VALUES ? KOP_INDEX_MAX_VALUES : n;
        for (size_t j = 0; j < counts[i]; j++)
            bytes += strlen(vals[total + j]) + 1;
        total += counts[i];
    }
    if (total == 0)
        return KOP_OK;
    e->vals = malloc(total * sizeof(char *) + bytes);
    if (!e->vals)
        return KOP_ENOMEM;
    char *text = (char *)(e->vals + total);
    for (size_t k = 0; k < total; k++) {
        size_t len = strlen(vals[k]) + 1;
        e->vals[k] = memcpy(text, vals[k], len);
        text += len;
    }
    /* Then file the key under each; nvals counts what is filed, for index_remove. */
    char **v = e->vals;
    for (int i = 0; i < inf->nindexes; i++) {
        for (size_t j = 0; j < counts[i]; j++, v++) {
            kop__map *set = kop__map_get(&inf->indexes[i].by_value, *v);
            if (!set) {
                set = calloc(1, sizeof *set);
                if (!set)
                    return KOP_ENOMEM;
                kop__map_init(set);
                if (kop__map_put(&inf->indexes[i].by_value, *v, set, NULL)) {
                    free(set);
                    return KOP_ENOMEM;
                }
            }
            if (kop__map_put(set, key, NULL, NULL))
                return KOP_ENOMEM;
            e->nvals[i] = (unsigned char)(j + 1);
        }
    }
    return KOP_OK;
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
static struct entry *new_entry(const json_t *obj, unsigned gen)
{
    const char *rv = meta_str(obj, "resourceVersion");
    size_t rv_len = rv ? strlen(rv) : 0;
    struct entry *e = calloc(1, sizeof *e + rv_len + 1);
    if (!e)
        return NULL;
    memcpy(e->rv, rv ? rv : "", rv_len);
    e->json = entry_text(obj, &e->head_len);
    e->gen = gen;
    if (!e->json) {
        free_entry(e);
        return NULL;
    }
    return e;
}

/*
 * parse_entry parses a cached text (NULL: no memory). Entries are written
 * with kop_meta_dumps, never json_dumps, whose torn output under memory
 * failure once left an entry that no watch event could repair.
 */
static json_t *parse_entry(const struct entry *e)
{
    return json_loads(e->json, 0, NULL);
}

/* parse_head parses only the head of a cached text: apiVersion, kind and metadata. */
static json_t *parse_head(const struct entry *e)
{
    char stack[2048];
    if (e->head_len == 0)
        return parse_entry(e);
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
static json_t *parse_old(const struct entry *e, kop_old_use need)
{
    switch (need) {
    case KOP_OLD_FULL:
        return parse_entry(e);
    case KOP_OLD_METADATA:
        return parse_head(e);
    default:
        return NULL;
    }
}

/*
 * upsert puts obj (borrowed) into the store. *old_out gets the replaced
 * object parsed as far as need says (owned; NULL for KOP_OLD_UNUSED);
 * *changed is false when the cached version was already this one.
 */
static kop_err upsert(kop_informer *inf, const json_t *obj, unsigned gen, kop_old_use need,
                      json_t **old_out, bool *existed, bool *changed)
{
    char key[512];
    kop_err err = KOP_OK;
    *old_out = NULL;
    *existed = *changed = false;
    if (!key_of(obj, key, sizeof key))
        return KOP_EINVAL;
    pthread_rwlock_wrlock(&inf->lock);
    struct entry *cur = kop__map_get(&inf->store, key);
    const char *rv = meta_str(obj, "resourceVersion");
    if (cur) {
        *existed = true;
        cur->gen = gen;
        if (rv && strcmp(cur->rv, rv) == 0)
            goto out; /* a relist seeing what the watch already applied */
    }
    struct entry *e = new_entry(obj, gen);
    if (!e) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (cur) {
        *old_out = parse_old(cur, need);
        index_remove(inf, key, cur);
    }
    err = index_add(inf, key, obj, e);
    if (!err)
        err = kop__map_put(&inf->store, key, e, NULL);
    if (err) {
        /* Out of memory half-way: drop the object rather than keep a torn entry. */
        index_remove(inf, key, e);
        free_entry(e);
        free_entry(kop__map_remove(&inf->store, key));
        goto out;
    }
    free_entry(cur);
    *changed = true;
out:
    pthread_rwlock_unlock(&inf->lock);
    return err;
}

/* forget removes key; *last_out gets the cached object parsed (owned), if any. */
static void forget(kop_informer *inf, const char *key, json_t **last_out)
{
    pthread_rwlock_wrlock(&inf->lock);
    struct entry *e = kop__map_remove(&inf->store, key);
    if (e) {
        index_remove(inf, key, e);
        if (last_out)
            *last_out = parse_entry(e);
    }
    kop__map_shrink(&inf->store); /* after a mass deletion the table follows */
    pthread_rwlock_unlock(&inf->lock);
    free_entry(e);
}

/* ---- handlers ----------------------------------------------------------- */

/* old_need: how much of a replaced object the update handlers read, the most of any. */
static kop_old_use old_need(const kop_informer *inf)
{
    kop_old_use need = KOP_OLD_UNUSED;
    for (int i = 0; i < inf->nhandlers; i++) {
        const kop_informer_handler *h = &inf->handlers[i];
        if (!h->on_update || h->old_use == KOP_OLD_UNUSED)
            continue;
        if (h->old_use != KOP_OLD_METADATA)
            return KOP_OLD_FULL; /* what it reads is not known: all of it */
        need = KOP_OLD_METADATA;
    }
    return need;
}

static void notify_add_or_update(kop_informer *inf, const json_t *old_obj, const json_t *obj,
                                 bool existed)
{
    for (int i = 0; i < inf->nhandlers; i++) {
        const kop_informer_handler *h = &inf->handlers[i];
        if (!existed && h->on_add)
            h->on_add(obj, h->user);
        else if (existed && h->on_update)
            h->on_update(old_obj ? old_obj : obj, obj, h->user);
    }
}

static void notify_delete(kop_informer *inf, const json_t *obj)
{
    for (int i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].on_delete)
            inf->handlers[i].on_delete(obj, inf->handlers[i].user);
}

/* apply_object caches obj (owned) and tells the handlers. */
static kop_err apply_object(kop_informer *inf, json_t *obj, unsigned gen)
{
    json_t *old = NULL;
    bool existed, changed;
    kop_err err = prepare(inf, obj, &obj);
    if (err || !obj)
        return err;
    err = upsert(inf, obj, gen, old_need(inf), &old, &existed, &changed);
    if (!err && changed)
        notify_add_or_update(inf, old, obj, existed);
    json_decref(old);
    json_decref(obj);
    return err;
}

/* apply_delete drops obj (owned) from the cache and tells the handlers. */
static kop_err apply_delete(kop_informer *inf, json_t *obj)
{
    char key[512];
    kop_err err = prepare(inf, obj, &obj);
    if (err || !obj)
        return err;
    if (key_of(obj, key, sizeof key)) {
        forget(inf, key, NULL);
        notify_delete(inf, obj);
    }
    json_decref(obj);
    return KOP_OK;
}

/* ---- list --------------------------------------------------------------- */

struct list_ctx {
    kop_informer *inf;
    unsigned gen;
};

static kop_err apply_page(json_t *page, void *user)
{
    struct list_ctx *ctx = user;
    json_t *item;
    size_t i;
    const char *api_version = json_string_value(json_object_get(page, "apiVersion"));
    const char *list_kind = json_string_value(json_object_get(page, "kind"));
    json_array_foreach(json_object_get(page, "items"), i, item)
    {
        if (stopping_requested(ctx->inf))
            return KOP_ECANCELED;
        /* Items of a list carry no apiVersion/kind: restore them so that
         * cached objects look the same whether they came from a list or a
         * watch (owner references and apply need them). The page is ours
         * and freed after this: items are changed in place, not copied. */
        json_t *obj = json_incref(item);
        if (!json_object_get(obj, "apiVersion") && api_version)
            json_object_set_new(obj, "apiVersion", json_string(api_version));
        if (!json_object_get(obj, "kind") && list_kind && ctx->inf->opts.resource.kind)
            json_object_set_new(obj, "kind", json_string(ctx->inf->opts.resource.kind));
        kop_err err = apply_object(ctx->inf, obj, ctx->gen);
        if (err)
            return err;
    }
    return KOP_OK;
}

/*
 * sweep deletes every entry a relist of generation gen did not see: the
 * keys are collected in one pass under the read lock, then forgotten one by
 * one (each delete is handed to the handlers without the lock held). Only
 * the informer's thread stamps entries, so none gets a newer stamp while
 * the sweep runs, and none is left behind with an older one.
 */
static void sweep(kop_informer *inf, unsigned gen)
{
    char **stale = NULL;
    size_t n = 0, cap = 0;
    bool complete = true; /* every stale key collected */
    pthread_rwlock_rdlock(&inf->lock);
    size_t pos = 0;
    const char *k;
    void *v;
    while (kop__map_next(&inf->store, &pos, &k, &v)) {
        if (((struct entry *)v)->gen == gen)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = realloc(stale, ncap * sizeof *stale);
            if (!grown) {
                complete = false; /* out of memory: the next relist sweeps the rest */
                break;
            }
            stale = grown;
            cap = ncap;
        }
        if (!(stale[n] = strdup(k))) {
            complete = false;
            break;
        }
        n++;
    }
    pthread_rwlock_unlock(&inf->lock);
    for (size_t i = 0; i < n; i++) {
        json_t *last = NULL;
        forget(inf, stale[i], &last);
        if (last)
            notify_delete(inf, last);
        json_decref(last);
        free(stale[i]);
    }
    free(stale);
    (void)complete;
#ifdef KOP_DEBUG
    pthread_rwlock_rdlock(&inf->lock);
    for (pos = 0; kop__map_next(&inf->store, &pos, &k, &v);)
        KOP_ASSERT(((struct entry *)v)->gen == gen || !complete); /* stamp-and-sweep held */
    pthread_rwlock_unlock(&inf->lock);
#endif
}

static kop_err relist(kop_informer *inf, kop_status *st)
{
    kop_list_opts lo = {
        .label_selector = inf->opts.label_selector,
        .field_selector = inf->opts.field_selector,
        .limit = LIST_PAGE,
    };
    struct list_ctx ctx = {.inf = inf, .gen = ++inf->gen};
    char *rv = NULL;
    kop_err err = kop_list_each(inf->client, &inf->opts.resource, inf->opts.namespace, &lo,
                                apply_page, &ctx, &rv, st);
    if (err) {
        free(rv);
        return err;
    }
    sweep(inf, ctx.gen);
#ifdef __GLIBC__
    /* Each page was parsed whole (a tree about ten times its text) and freed:
     * hand that memory back instead of keeping it as the process's RSS. */
    malloc_trim(0);
#endif
    free(inf->rv);
    inf->rv = rv;
    pthread_mutex_lock(&inf->mu);
    inf->stats.lists++;
    inf->synced = true;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->mu);
    return KOP_OK;
}

/* ---- watch -------------------------------------------------------------- */

/* version_of copies obj's resourceVersion (NULL: it has none, or no memory). */
static char *version_of(const json_t *obj)
{
    const char *rv = meta_str(obj, "resourceVersion");
    return rv && rv[0] ? strdup(rv) : NULL;
}

/* remember_version makes ver (taken) the version the next watch resumes after. */
static void remember_version(kop_informer *inf, char *ver)
{
    if (!ver)
        return;
    free(inf->rv);
    inf->rv = ver;
}

/* watch_once runs one watch stream to its end; returns why it ended. */
static kop_err watch_once(kop_informer *inf, bool *progressed, kop_status *st)
{
    kop_watch *w = NULL;
    kop_watch_opts wo = {
        .resource_version = inf->rv,
        .label_selector = inf->opts.label_selector,
        .field_selector = inf->opts.field_selector,
        .timeout_seconds = WATCH_MIN_S + (long)(kop__random() % WATCH_SPREAD_S),
        .allow_bookmarks = true,
        .drop_managed_fields = !inf->opts.transform, /* the default transform drops them */
    };
    kop_err err = kop_watch_open(inf->client, &inf->opts.resource, inf->opts.namespace, &wo, &w, st);
    if (err)
        return err;
    pthread_mutex_lock(&inf->mu);
    inf->stats.watches++;
    bool stop = inf->stopping;
    if (!stop)
        inf->watch = w;
    pthread_mutex_unlock(&inf->mu);
    if (stop) {
        kop_watch_free(w);
        return KOP_ECANCELED;
    }
    kop_watch_event ev;
    while ((err = kop_watch_next(w, &ev, st)) == KOP_OK) {
        *progressed = true;
        /*
         * The version advances only past an event that was applied: one
         * that fails (out of memory) ends the stream, and the next watch
         * resumes before it, so the event comes again rather than never.
         */
        char *ver = version_of(ev.object);
        json_t *obj = ev.object;
        ev.object = NULL; /* handed on */
        if (ev.type == KOP_WATCH_ADDED || ev.type == KOP_WATCH_MODIFIED)
            err = apply_object(inf, obj, inf->gen);
        else if (ev.type == KOP_WATCH_DELETED)
            err = apply_delete(inf, obj);
        else
            json_decref(obj); /* BOOKMARK: only its version matters */
        if (err)
            free(ver);
        else
            remember_version(inf, ver);
        pthread_mutex_lock(&inf->mu);
        inf->stats.events++;
        pthread_mutex_unlock(&inf->mu);
        if (err)
            break;
    }
    pthread_mutex_lock(&inf->mu);
    inf->watch = NULL;
    pthread_mutex_unlock(&inf->mu);
    kop_watch_free(w);
    return err;
}

/* ---- the loop ----------------------------------------------------------- */

static bool stopping_requested(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->stopping;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

/* sleep_backoff waits ms unless stopped first; returns false when stopped. */
static bool sleep_backoff(kop_informer *inf, long ms)
{
    struct timespec until = kop__time_after(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&inf->mu);
    while (!inf->stopping && pthread_cond_timedwait(&inf->cond, &inf->mu, &until) == 0)
        ;
    bool stopped = inf->stopping;
    pthread_mutex_unlock(&inf->mu);
    return !stopped;
}

/* next_backoff doubles *cur up to the cap and returns it with +-20% jitter. */
static long next_backoff(long *cur)
{
    long ms = *cur;
    *cur = ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms * 2;
    long spread = ms / 5;
    return ms - spread + (long)(kop__random() % (uint64_t)(2 * spread + 1));
}

static void count_error(kop_informer *inf, bool gone)
{
    pthread_mutex_lock(&inf->mu);
    if (gone)
        inf->stats.gone++;
    else
        inf->stats.errors++;
    pthread_mutex_unlock(&inf->mu);
}

/*
 * The backoff only resets once the server has proven healthy again: a watch
 * that delivered events or stayed open for HEALTHY_WATCH_MS. A successful
 * list alone does not reset it, or a server that answers every watch of a
 * fresh version with 410 (or ends every stream at once) would be relisted or
 * rewatched in a tight loop; client-go backs off in both cases too.
 */
static void *run(void *arg)
{
    kop_informer *inf = arg;
    long backoff = BACKOFF_START_MS;
    kop_status st;
    while (!stopping_requested(inf)) {
        kop_err err = KOP_OK;
        bool progressed = false, listed = false;
        kop_status_clear(&st);
        if (!inf->rv) {
            err = relist(inf, &st);
            listed = err == KOP_OK;
        }
        int64_t began = kop_mono_ns();
        if (err == KOP_OK)
            err = watch_once(inf, &progressed, &st);
        bool lasted = kop_mono_ns() - began >= (int64_t)HEALTHY_WATCH_MS * 1000000;
        if (progressed || lasted)
            backoff = BACKOFF_START_MS;
        if (err == KOP_ECANCELED)
            break;
        /* The server ended the watch (its timeout): resume at once. A stream
         * that ended empty as soon as it began is a server in trouble. */
        if (err == KOP_EEOF && (progressed || kop_mono_ns() - began >= SHORT_WATCH_NS))
            continue;
        if (err == KOP_EGONE || err == KOP_EEXPIRED) {
            count_error(inf, true);
            kop_logv(1, "informer: resourceVersion expired; relisting",
                     KOP_LOG_STR("resource", inf->opts.resource.resource),
                     KOP_LOG_STR("version", inf->rv));
            free(inf->rv);
            inf->rv = NULL; /* relist, at once unless the version just listed is gone */
            if (!listed || progressed)
                continue;
        } else {
            count_error(inf, false);
        }
        long wait_ms = next_backoff(&backoff);
        const char *what = inf->rv || listed ? "informer: watch failed" : "informer: list failed";
        kop_log(KOP_LOG_WARN, what, KOP_LOG_STR("resource", inf->opts.resource.resource),
                KOP_LOG_ERR(err), KOP_LOG_STR("detail", st.message),
                KOP_LOG_INT("retry_ms", wait_ms));
        if (!sleep_backoff(inf, wait_ms))
            break;
    }
    return NULL;
}

kop_err kop_informer_start(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    kop_err err = inf->started ? KOP_EINVAL : KOP_OK;
    if (!err && pthread_create(&inf->thread, NULL, run, inf) != 0)
        err = KOP_ENOMEM;
    if (!err)
        inf->started = true;
    pthread_mutex_unlock(&inf->mu);
    return err;
}

void kop_informer_stop(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool join = inf->started && !inf->stopping;
    inf->stopping = true;
    if (inf->watch)
        kop_watch_cancel(inf->watch);
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->mu);
    if (join)
        pthread_join(inf->thread, NULL);
}

bool kop_informer_wait_synced(kop_informer *inf, long timeout_ms)
{
    struct timespec until = kop__time_after(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&inf->mu);
    while (!inf->synced && !inf->stopping) {
        if (timeout_ms < 0)
            pthread_cond_wait(&inf->cond, &inf->mu);
        else if (pthread_cond_timedwait(&inf->cond, &inf->mu, &until) != 0)
            break;
    }
    bool synced = inf->synced;
    pthread_mutex_unlock(&inf->mu);
    return synced;
}

bool kop_informer_has_synced(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

void kop_informer_get_stats(kop_informer *inf, kop_informer_stats *out)
{
    pthread_mutex_lock(&inf->mu);
    *out = inf->stats;
    pthread_mutex_unlock(&inf->mu);
}

const kop_resource *kop_informer_resource(const kop_informer *inf)
{
    return &inf->opts.resource;
}

/* ---- reads -------------------------------------------------------------- */

kop_err kop_informer_get(kop_informer *inf, const char *ns, const char *name, json_t **out)
{
    return kop_informer_dup(inf, ns, name, out);
}

/* dup_parsed parses the entry ns/name, whole or its head only. */
static kop_err dup_parsed(kop_informer *inf, const char *ns, const char *name, bool head,
                          json_t **out)
{
    char key[512];
    *out = NULL;
    if (kop_meta_key(key, sizeof key, inf->opts.resource.namespaced ? ns : NULL, name) != KOP_OK)
        return KOP_EINVAL;
    pthread_rwlock_rdlock(&inf->lock);
    struct entry *e = kop__map_get(&inf->store, key);
    if (e)
        *out = head ? parse_head(e) : parse_entry(e);
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

/* append_key parses the entry under key into arr. Lock held by the caller. */
static kop_err append_key(kop_informer *inf, const char *key, json_t *arr)
{
    struct entry *e = kop__map_get(&inf->store, key);
    if (!e)
        return KOP_OK;
    json_t *obj = parse_entry(e);
    return obj && json_array_append_new(arr, obj) == 0 ? KOP_OK : KOP_ENOMEM;
}

kop_err kop_informer_by_index(kop_informer *inf, const char *index, const char *value,
                              json_t **out)
{
    kop_err err = KOP_EINVAL;
    *out = json_array();
    if (!*out)
        return KOP_ENOMEM;
    pthread_rwlock_rdlock(&inf->lock);
    for (int i = 0; i < inf->nindexes; i++) {
        if (strcmp(inf->indexes[i].name, index) != 0)
            continue;
        err = KOP_OK;
        kop__map *set = kop__map_get(&inf->indexes[i].by_value, value);
        size_t pos = 0;
        const char *k;
        void *v;
        while (!err && set && kop__map_next(set, &pos, &k, &v))
            err = append_key(inf, k, *out);
        break;
    }
    pthread_rwlock_unlock(&inf->lock);
    if (err) {
        json_decref(*out);
        *out = NULL;
    }
    return err;
}

/* find_index returns the index named name, or NULL. */
static struct index *find_index(kop_informer *inf, const char *name)
{
    for (int i = 0; i < inf->nindexes; i++)
        if (strcmp(inf->indexes[i].name, name) == 0)
            return &inf->indexes[i];
    return NULL;
}

/*
 * page_keys copies up to max keys of set (0: all) into out, each with its
 * entry's resourceVersion, beginning at slot *cursor modulo the set's
 * capacity and going round once at most: from there to the end of the
 * slots, then from the first slot back to where it began. *cursor ends
 * past the last slot read. Lock held by the caller.
 */
static kop_err page_keys(kop_informer *inf, const kop__map *set, size_t *cursor, size_t max,
                         json_t *out)
{
    size_t cap = set ? set->cap : 0, start = cap ? *cursor % cap : 0, pos = start, got = 0;
    bool wrapped = false;
    while (cap && (max == 0 || got < max)) {
        const char *k;
        void *v;
        if (!kop__map_next(set, &pos, &k, &v)) {
            if (wrapped)
                break;
            wrapped = true; /* the end of the slots: on from the first */
            pos = 0;
            continue;
        }
        if (wrapped && pos > start)
            break; /* slot pos - 1 was read in the first lap */
        struct entry *e = kop__map_get(&inf->store, k);
        if (!e)
            continue;
        if (json_object_set_new(out, k, json_string(e->rv)) != 0)
            return KOP_ENOMEM;
        got++;
    }
    *cursor = pos;
    return KOP_OK;
}

kop_err kop_informer_index_keys(kop_informer *inf, const char *index, const char *value,
                                kop_index_page *page, json_t **out)
{
    kop_index_page all = {0, 0, 0};
    kop_index_page *p = page ? page : &all;
    kop_err err = KOP_OK;
    *out = json_object();
    if (!*out)
        return KOP_ENOMEM;
    pthread_rwlock_rdlock(&inf->lock);
    struct index *ix = index ? find_index(inf, index) : NULL;
    if (!ix || !value) {
        err = KOP_EINVAL;
    } else {
        const kop__map *set = kop__map_get(&ix->by_value, value);
        p->total = set ? set->len : 0;
        err = page_keys(inf, set, &p->cursor, p->max, *out);
    }
    pthread_rwlock_unlock(&inf->lock);
    if (err) {
        json_decref(*out);
        *out = NULL;
    }
    return err;
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
        json_t *obj = parse_entry(v);
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

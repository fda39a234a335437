/*
 * kop/informer.h - list + watch one resource into a local cache, and tell
 * handlers what changed.
 *
 * An informer keeps a cache of every object of one resource (optionally one
 * namespace, selected by labels or fields) that follows the apiserver: it
 * lists (500 a page), then watches from the list's resourceVersion with
 * bookmarks, relists when the version is gone (410), and reconnects with a
 * jittered backoff (800 ms growing to 30 s) after any other failure; a
 * server that answers 410 to the version it just listed, or ends every
 * watch at once, is backed off from the same way, never looped on. Watches
 * end on the server after a random 5 to 10 minutes and are resumed from the
 * last version seen, so no change is missed.
 *
 * The cache stores each object as compact JSON text, not as a jansson tree
 * (about a tenth of the memory), and parses on read: reads hand back new
 * json_t objects the caller owns. Built-in indexes: by namespace and by the
 * UID of the controlling owner; custom indexes can be added before start.
 *
 * Handlers run on the informer's thread, after the cache has been updated,
 * with objects borrowed for the duration of the call. They should be quick:
 * the usual handler maps the object to a key and adds it to a work queue.
 *
 * Thread safety: reads may come from any thread at any time. Configuration
 * (handlers, indexes) must be done before kop_informer_start.
 */
#ifndef KOP_INFORMER_H
#define KOP_INFORMER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

typedef struct kop_informer kop_informer;

/* Names of the built-in indexes, for kop_informer_index. */
#define KOP_INDEX_NAMESPACE "namespace"
#define KOP_INDEX_OWNER     "owner-uid" /* UID of the controller ownerReference */

/* The most values one object may have in one index. */
#define KOP_INDEX_MAX_VALUES 16
/* The most indexes one informer may have, built-ins included. */
#define KOP_INFORMER_MAX_INDEXES 8

/*
 * kop_transform_fn takes ownership of obj and returns the object to cache
 * (obj itself, changed in place, or another; NULL drops it from the
 * informer as if it did not exist). The default drops metadata.managedFields.
 */
typedef json_t *(*kop_transform_fn)(json_t *obj, void *user);

/*
 * kop_index_fn writes up to max index values of obj into values (borrowed
 * from obj, valid during the call) and returns how many.
 */
typedef size_t (*kop_index_fn)(const json_t *obj, const char **values, size_t max, void *user);

typedef struct kop_informer_opts {
    kop_resource resource;        /* strings borrowed: must outlive the informer */
    const char *namespace;        /* NULL or "": all namespaces */
    const char *label_selector;
    const char *field_selector;
    bool metadata_only;           /* cache apiVersion, kind and metadata only */
    kop_transform_fn transform;   /* NULL: drop managedFields */
    void *transform_user;
} kop_informer_opts;

/*
 * What an on_update handler reads of the object an update replaced. The
 * cache keeps text, so the old object is parsed for the handlers on every
 * update, and only as far as the most demanding of them declares: a cache
 * whose handlers look at metadata alone (owner references, labels, the
 * generation) parses a few hundred bytes per update instead of the object.
 */
typedef enum kop_old_use {
    KOP_OLD_FULL = 0, /* the whole old object (the default) */
    KOP_OLD_METADATA, /* its apiVersion, kind and metadata; nothing else is there */
    KOP_OLD_UNUSED,   /* nothing: old_obj may be the new object */
} kop_old_use;

/* Handlers; any may be NULL. Objects are borrowed for the call. */
typedef struct kop_informer_handler {
    void (*on_add)(const json_t *obj, void *user);
    void (*on_update)(const json_t *old_obj, const json_t *new_obj, void *user);
    void (*on_delete)(const json_t *obj, void *user);
    void *user;
    kop_old_use old_use; /* what on_update reads of old_obj */
} kop_informer_handler;

/*
 * kop_informer_new makes an informer on c (borrowed; must outlive it).
 * Nothing is sent until kop_informer_start. *out is owned: kop_informer_free.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_new(kop_client *c, const kop_informer_opts *opts,
                                               kop_informer **out);

/* kop_informer_add_handler registers h (copied). Before start only. */
KOP_API KOP_NODISCARD kop_err kop_informer_add_handler(kop_informer *inf,
                                                       const kop_informer_handler *h);

/* kop_informer_add_index registers a custom index (name copied). Before start only. */
KOP_API KOP_NODISCARD kop_err kop_informer_add_index(kop_informer *inf, const char *name,
                                                     kop_index_fn fn, void *user);

/* kop_informer_start starts the list-watch thread. */
KOP_API KOP_NODISCARD kop_err kop_informer_start(kop_informer *inf);

/*
 * kop_informer_wait_synced blocks until the first list has been applied
 * (and its add handlers called), the informer stops, or timeout_ms passes
 * (< 0: no limit). Returns true when synced.
 */
KOP_API bool kop_informer_wait_synced(kop_informer *inf, long timeout_ms);

/* kop_informer_has_synced tells whether the first list has been applied. */
KOP_API bool kop_informer_has_synced(kop_informer *inf);

/* kop_informer_stop ends the watch and joins the thread. Idempotent. */
KOP_API void kop_informer_stop(kop_informer *inf);

/* kop_informer_free stops inf if needed and frees it. NULL is ok. */
KOP_API void kop_informer_free(kop_informer *inf);

/*
 * kop_informer_dup parses a copy of the cached object ns/name (ns ignored
 * for cluster-scoped resources) into *out (owned: the cache holds compact
 * JSON text, so nothing can be borrowed from it). KOP_ENOTFOUND if absent.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_dup(kop_informer *inf, const char *ns, const char *name,
                                               json_t **out);

/*
 * kop_informer_dup_metadata is kop_informer_dup for a reader of metadata
 * alone (does it exist, is it being deleted, its generation, labels or
 * owners): *out holds the object's apiVersion, kind and metadata, and
 * costs a parse of those only.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_dup_metadata(kop_informer *inf, const char *ns,
                                                        const char *name, json_t **out);

/*
 * kop_informer_list returns in *out (owned) a new array of the cached
 * objects in ns (NULL: all), in no particular order.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_list(kop_informer *inf, const char *ns, json_t **out);

/*
 * kop_informer_by_index returns in *out (owned) a new array of the objects
 * whose index `index` has `value`. KOP_EINVAL for an unknown index.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_by_index(kop_informer *inf, const char *index,
                                                    const char *value, json_t **out);

/*
 * kop_index_page: one call's window on the keys of an index value
 * (kop_informer_index_keys). Zero it to start at the beginning.
 */
typedef struct kop_index_page {
    size_t cursor; /* in: where to begin (any value: taken modulo the set); out: where the
                      next page begins. Keep it between calls to go round the set. */
    size_t max;    /* in: at most this many keys (0: every key) */
    size_t total;  /* out: how many objects have the value (the whole set, not the page) */
} kop_index_page;

/*
 * kop_informer_index_keys returns in *out (owned) a new object that maps
 * the key of each object whose index `index` has `value` to its
 * resourceVersion (a string), without parsing any object: the cost is a
 * string copy per key returned, not a parse of each cached object as with
 * kop_informer_by_index. Keys are "namespace/name" for a namespaced
 * resource and "name" for a cluster-scoped one; the object is then read
 * with kop_informer_dup or kop_informer_dup_metadata.
 *
 * page (may be NULL: every key, from the start) windows the set: at most
 * page->max keys, beginning at page->cursor, going round the set (in the
 * index's own order, which is stable while the set does not change) and
 * never returning a key twice in one call; page->cursor is then where the
 * next call should begin and page->total the set's size. A caller that
 * wants one suitable object among many (a free warm instance) reads a few
 * keys per call, and callers that keep the cursor start where the last one
 * stopped instead of all trying the same first key.
 *
 * The keys are a snapshot: an object may be gone or changed by the time it
 * is read. KOP_EINVAL for an unknown index, KOP_ENOMEM.
 */
KOP_API KOP_NODISCARD kop_err kop_informer_index_keys(kop_informer *inf, const char *index,
                                                      const char *value, kop_index_page *page,
                                                      json_t **out);

/* kop_informer_len returns the number of cached objects. */
KOP_API size_t kop_informer_len(kop_informer *inf);

/* kop_informer_resource returns the resource the informer watches (borrowed). */
KOP_API const kop_resource *kop_informer_resource(const kop_informer *inf);

/*
 * kop_informer_stats: counters for tests and metrics (read-only snapshot).
 * lists counts completed lists (the first included), watches the watch
 * streams opened, gone the 410s that forced a relist, errors the failed
 * attempts that were retried with backoff.
 */
typedef struct kop_informer_stats {
    unsigned long lists, watches, gone, errors, events;
} kop_informer_stats;

/* kop_informer_read_stats copies inf's counters into *out (caller storage). */
KOP_API void kop_informer_read_stats(kop_informer *inf, kop_informer_stats *out);

KOP_END_DECLS

#endif /* KOP_INFORMER_H */

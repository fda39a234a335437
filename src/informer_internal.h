/*
 * informer_internal.h - what the informer's files share; not installed.
 *
 * kop/informer.h is one module written in four files, one concept each:
 *
 *   informer.c        the handle: create, start, stop, sync, stats, and the
 *                     delivery of each change to the cache and the handlers
 *   informer_store.c  the cached objects: what is cached (the transform),
 *                     their compact text, insert/replace/remove, reads
 *   informer_index.c  indexers: the built-in ones, filing keys under index
 *                     values, lookups and paged key listings
 *   informer_watch.c  the informer's thread: list, watch, relist, backoff,
 *                     and the resourceVersion it resumes from
 *
 * Threads: one informer thread (kop__informer_run) writes the store and
 * the indexes, under lock taken for writing, and calls the handlers with
 * no lock held; readers (reconcilers, API handlers) take lock for reading.
 * The fields marked "informer thread only" need no lock at all.
 */
#ifndef KOP_INFORMER_INTERNAL_H
#define KOP_INFORMER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "kop/informer.h"
#include "map_internal.h"

#define KOP__INFORMER_MAX_HANDLERS 16

/*
 * kop__informer_entry: one cached object. Small on purpose, since there is
 * one per object (at 10,000 objects every 100 bytes here is a megabyte):
 * the index values live in one allocation (vals: the pointers, index after
 * index, nvals[i] of them for index i, then the strings), the
 * resourceVersion in the entry itself.
 */
struct kop__informer_entry {
    char *json;  /* compact serialized object, apiVersion, kind and metadata first */
    char **vals; /* index values; NULL when none */
    unsigned gen; /* the relist generation that last saw it (see informer_watch.c) */
    unsigned head_len; /* json[0..head_len) + "}" is the head alone; 0: no head */
    unsigned char nvals[KOP_INFORMER_MAX_INDEXES]; /* each <= KOP_INDEX_MAX_VALUES */
    char rv[];   /* metadata.resourceVersion */
};

/* kop__informer_index: one indexer and the keys it filed under each value. */
struct kop__informer_index {
    char *name;
    kop_index_fn fn;
    void *user;
    kop__map by_value; /* value -> kop__map* set of keys */
};

struct kop_informer {
    kop_client *client;
    kop_informer_opts opts;
    char *ns, *labels, *fields; /* owned copies of opts strings */

    /* Fixed once started: read without a lock by the informer thread. */
    kop_informer_handler handlers[KOP__INFORMER_MAX_HANDLERS];
    int nhandlers;

    pthread_rwlock_t lock; /* store and indexes */
    kop__map store;        /* key -> struct kop__informer_entry* */
    struct kop__informer_index indexes[KOP_INFORMER_MAX_INDEXES];
    int nindexes;
    unsigned gen; /* the latest relist's generation (informer thread only) */

    pthread_mutex_t mu; /* state below */
    pthread_cond_t cond;
    bool started, stopping, synced;
    kop_watch *watch; /* the open stream, for stop to cancel */
    pthread_t thread;

    char *rv; /* last version seen; NULL: list next (informer thread only) */
    kop_informer_stats stats;
};

/* ---- informer.c: the handle and delivery ---------------------------------- */

/* kop__informer_stopping tells whether kop_informer_stop has been called. */
bool kop__informer_stopping(kop_informer *inf);

/*
 * kop__informer_apply_object caches obj (taken), stamped with the relist
 * generation gen, and tells the handlers when it changed the cache.
 * KOP_ENOMEM: the event was not applied and must come again.
 */
kop_err kop__informer_apply_object(kop_informer *inf, json_t *obj, unsigned gen);

/* kop__informer_apply_delete drops obj (taken) from the cache and tells the handlers. */
kop_err kop__informer_apply_delete(kop_informer *inf, json_t *obj);

/* kop__informer_notify_delete hands obj (borrowed) to every on_delete handler. */
void kop__informer_notify_delete(kop_informer *inf, const json_t *obj);

/* ---- informer_store.c: the cached objects --------------------------------- */

/*
 * kop__informer_prepare applies the transform to obj (taken): *out is what
 * to cache (owned), or NULL when the object is not to be cached.
 */
kop_err kop__informer_prepare(kop_informer *inf, json_t *obj, json_t **out);

/* kop__informer_key_of writes "ns/name" (or "name") of obj into buf. */
bool kop__informer_key_of(const json_t *obj, char *buf, size_t size);

/*
 * kop__informer_upsert puts obj (borrowed) into the store, stamped gen.
 * *old_out gets the replaced object parsed as far as need says (owned);
 * *changed is false when the cached version was already this one.
 */
kop_err kop__informer_upsert(kop_informer *inf, const json_t *obj, unsigned gen, kop_old_use need,
                             json_t **old_out, bool *existed, bool *changed);

/* kop__informer_forget removes key; *last_out, if not NULL, gets the cached object (owned). */
void kop__informer_forget(kop_informer *inf, const char *key, json_t **last_out);

/* kop__informer_parse_entry parses a cached text (owned; NULL: no memory). */
json_t *kop__informer_parse_entry(const struct kop__informer_entry *e);

/* kop__informer_entry_free frees an entry (NULL is fine). */
void kop__informer_entry_free(void *e);

/* ---- informer_index.c: indexers ------------------------------------------- */

/* kop__informer_add_index registers an indexer (before start). */
kop_err kop__informer_add_index(kop_informer *inf, const char *name, kop_index_fn fn, void *user);

/* kop__informer_indexes_init registers the built-in namespace and owner indexes. */
kop_err kop__informer_indexes_init(kop_informer *inf);

/* kop__informer_indexes_fini frees every index and the key sets in it. */
void kop__informer_indexes_fini(kop_informer *inf);

/* kop__informer_index_add files key under obj's values in every index (write lock held). */
kop_err kop__informer_index_add(kop_informer *inf, const char *key, const json_t *obj,
                                struct kop__informer_entry *e);

/* kop__informer_index_remove takes key out of every index e was filed in (write lock held). */
void kop__informer_index_remove(kop_informer *inf, const char *key, struct kop__informer_entry *e);

/* ---- informer_watch.c: the thread ------------------------------------------ */

/* kop__informer_run is the informer thread's body: list, watch, relist until stopped. */
void *kop__informer_run(void *inf);

#endif /* KOP_INFORMER_INTERNAL_H */

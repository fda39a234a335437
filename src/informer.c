/*
 * informer.c - list + watch into a cache of compact JSON (see kop/informer.h):
 * the handle, its start and stop, and the delivery of each change to the
 * cache and then to the handlers.
 *
 * An informer is one thread (informer_watch.c) that lists a resource,
 * watches it from the version the list returned, and keeps a store of the
 * objects (informer_store.c) with indexes (informer_index.c); readers on
 * other threads look objects up in the store, and handlers registered
 * before start are told of every change. Built for controllers that keep
 * up to some 10,000 objects of a kind and reconcile on each change: the
 * cache is the read path of every reconcile and API request, so its
 * memory and lookup cost matter more than the cost of one event.
 *
 * Delivery (kop__informer_apply_object/_delete), for a list item or a
 * watch event alike: the transform, then the store and indexes under the
 * write lock, then the handlers with no lock held, on the informer thread,
 * in event order. A handler therefore finds the cache already changed by
 * the event it is told of, and may read it (kop_informer_dup) without
 * deadlock; it must not stop or free its own informer.
 *
 * Invariants: handlers and indexers are fixed before start (add_handler
 * and add_index refuse after it), so the thread reads them unlocked;
 * synced turns true once, after the first complete list, and never back;
 * stop joins the thread, after which nothing touches the informer but
 * its owner.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "informer_internal.h"
#include "kop_internal.h"

/* ---- lifecycle ---------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
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
    err = kop__informer_indexes_init(inf);
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
    if (inf->nhandlers >= KOP__INFORMER_MAX_HANDLERS)
        return KOP_ETOOBIG;
    inf->handlers[inf->nhandlers++] = *h;
    return KOP_OK;
}

kop_err kop_informer_add_index(kop_informer *inf, const char *name, kop_index_fn fn, void *user)
{
    if (inf->started || !name || !fn)
        return KOP_EINVAL;
    return kop__informer_add_index(inf, name, fn, user);
}

void kop_informer_free(kop_informer *inf)
{
    if (!inf)
        return;
    kop_informer_stop(inf);
    kop__map_fini(&inf->store, kop__informer_entry_free);
    kop__informer_indexes_fini(inf);
    pthread_rwlock_destroy(&inf->lock);
    pthread_mutex_destroy(&inf->mu);
    pthread_cond_destroy(&inf->cond);
    free(inf->rv);
    free(inf->ns);
    free(inf->labels);
    free(inf->fields);
    free(inf);
}

/* ---- delivery: cache first, then the handlers ------------------------------ */

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

void kop__informer_notify_delete(kop_informer *inf, const json_t *obj)
{
    for (int i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].on_delete)
            inf->handlers[i].on_delete(obj, inf->handlers[i].user);
}

/* kop__informer_apply_object caches obj (owned) and tells the handlers. */
kop_err kop__informer_apply_object(kop_informer *inf, json_t *obj, unsigned gen)
{
    json_t *old = NULL;
    bool existed, changed;
    kop_err err = kop__informer_prepare(inf, obj, &obj);
    if (err || !obj)
        return err;
    err = kop__informer_upsert(inf, obj, gen, old_need(inf), &old, &existed, &changed);
    if (!err && changed)
        notify_add_or_update(inf, old, obj, existed);
    json_decref(old);
    json_decref(obj);
    return err;
}

/* kop__informer_apply_delete drops obj (owned) from the cache and tells the handlers. */
kop_err kop__informer_apply_delete(kop_informer *inf, json_t *obj)
{
    char key[512];
    kop_err err = kop__informer_prepare(inf, obj, &obj);
    if (err || !obj)
        return err;
    if (kop__informer_key_of(obj, key, sizeof key)) {
        kop__informer_forget(inf, key, NULL);
        kop__informer_notify_delete(inf, obj);
    }
    json_decref(obj);
    return KOP_OK;
}

/* ---- start, stop, sync -------------------------------------------------- */

bool kop__informer_stopping(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->stopping;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

kop_err kop_informer_start(kop_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    kop_err err = inf->started ? KOP_EINVAL : KOP_OK;
    if (!err && pthread_create(&inf->thread, NULL, kop__informer_run, inf) != 0)
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
    /* Not from a handler: the informer thread cannot join itself. */
    KOP_ASSERT(!join || !pthread_equal(pthread_self(), inf->thread));
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

void kop_informer_read_stats(kop_informer *inf, kop_informer_stats *out)
{
    pthread_mutex_lock(&inf->mu);
    *out = inf->stats;
    pthread_mutex_unlock(&inf->mu);
}

const kop_resource *kop_informer_resource(const kop_informer *inf)
{
    return &inf->opts.resource;
}

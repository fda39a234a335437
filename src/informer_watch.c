/*
 * informer_watch.c - the informer's thread: list, watch, relist (see
 * kop/informer.h). The loop reads as client-go's reflector:
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
 * The resourceVersion (kop_informer.rv, read and written by this thread
 * only) is the whole of the informer's position in the resource's history:
 *
 *   - What is watched from: the list's resourceVersion after a relist,
 *     then the version of the last event applied (bookmarks included). An
 *     event that could not be applied (out of memory) ends the stream
 *     without advancing it, so the next watch resumes before that event
 *     and it comes again rather than never.
 *   - When a relist happens: only when there is no version, at start and
 *     after the apiserver answers 410 Gone (the version was compacted
 *     away). A stream that ends, or a watch that fails otherwise, resumes
 *     from the same version; a relist that fails leaves no version, so the
 *     next pass lists again.
 *   - What the cache holds after a relist: exactly the list's objects. A
 *     relist does not build a second store: it stamps every entry it sees
 *     with the relist's generation (unchanged ones keep their text and call
 *     no handler, changed ones are replaced and reported as updates), then
 *     sweeps the entries not stamped, reporting each as deleted (short of
 *     memory, what it could not sweep waits for the next relist). At peak
 *     it holds the store plus one page.
 *
 * Asserted (KOP_ASSERT): a relist starts only without a version; a watch
 * opens only after a complete list, one stream at a time; after a complete
 * sweep every entry carries the relist's generation; every write stamps
 * the current generation (informer_store.c).
 *
 * Backoff: 800 ms doubling to 30 s with +-20% jitter, reset only once the
 * server has proven healthy again (see kop__informer_run).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "informer_internal.h"
#include "kop/log.h"
#include "kop/meta.h"
#include "kop_internal.h"

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#define BACKOFF_START_MS   800
#define BACKOFF_MAX_MS     30000
#define WATCH_MIN_S        300 /* watch timeouts are random in [5 min, 10 min) */
#define WATCH_SPREAD_S     300
#define LIST_PAGE          500
#define SHORT_WATCH_NS     1000000000LL /* an empty watch shorter than this ended abnormally */
#define HEALTHY_WATCH_MS   60000        /* a watch open this long resets the backoff */

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
        if (kop__informer_stopping(ctx->inf))
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
        kop_err err = kop__informer_apply_object(ctx->inf, obj, ctx->gen);
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
        if (((struct kop__informer_entry *)v)->gen == gen)
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
        kop__informer_forget(inf, stale[i], &last);
        if (last)
            kop__informer_notify_delete(inf, last);
        json_decref(last);
        free(stale[i]);
    }
    free(stale);
    (void)complete;
#ifdef KOP_DEBUG
    pthread_rwlock_rdlock(&inf->lock);
    for (pos = 0; kop__map_next(&inf->store, &pos, &k, &v);)
        /* stamp-and-sweep held */
        KOP_ASSERT(((struct kop__informer_entry *)v)->gen == gen || !complete);
    pthread_rwlock_unlock(&inf->lock);
#endif
}

static kop_err relist(kop_informer *inf, kop_status *st)
{
    KOP_ASSERT(inf->rv == NULL); /* only when there is no version to resume from */
    kop_list_opts lo = {
        .label_selector = inf->opts.label_selector,
        .field_selector = inf->opts.field_selector,
        .limit = LIST_PAGE,
    };
    struct list_ctx ctx = {.inf = inf, .gen = ++inf->gen};
    char *rv = NULL;
    kop_err err = kop_list_each(inf->client,
                                &(kop_list_req){.resource = &inf->opts.resource,
                                                .namespace = inf->opts.namespace, .opts = lo,
                                                .fn = apply_page, .user = &ctx}, &rv, st);
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
    const char *rv = kop_meta_resource_version(obj);
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
    kop_err err =
        kop_watch_open(inf->client, &inf->opts.resource, inf->opts.namespace, &wo, &w, st);
    if (err)
        return err;
    pthread_mutex_lock(&inf->mu);
    /* A watch follows a complete list (nothing else makes the loop reach
     * it), and only one stream is open at a time. */
    KOP_ASSERT(inf->synced && inf->watch == NULL);
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
            err = kop__informer_apply_object(inf, obj, inf->gen);
        else if (ev.type == KOP_WATCH_DELETED)
            err = kop__informer_apply_delete(inf, obj);
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
void *kop__informer_run(void *arg)
{
    kop_informer *inf = arg;
    long backoff = BACKOFF_START_MS;
    kop_status st;
    while (!kop__informer_stopping(inf)) {
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

/*
 * workqueue.c - the work queue between event handlers and reconcile workers
 * (see kop/workqueue.h), with client-go's semantics: the handle, the
 * records, and the public operations. The module's other files are listed
 * in workqueue_internal.h.
 *
 * Workload: informer event handlers add keys at up to thousands per second,
 * mostly keys already queued (an object changes several times before a
 * worker gets to it); a handful of workers take them; failed reconciles come
 * back through add_rate_limited, requeue-after results through add_after.
 * So dedup and done are O(1); adds, raises and gets are O(log n) in the
 * keys queued (the ready heap, workqueue_ready.c), and the timer heap's
 * operations O(log n) in the keys held back (workqueue_delay.c).
 *
 * One record per key the queue knows about, in libkop's hash map
 * (map_internal.h), which borrows the key the record carries, so a key is
 * stored once; keys churn constantly, so the map is shrunk as records go.
 * The record carries all of the key's state, and lives while any of it is
 * set:
 *
 *   dirty       the key needs processing: it is queued, or it is in flight
 *               and will be queued again at done; prio is the priority it
 *               waits at (the highest it was added with since it became
 *               dirty);
 *   queued      it is in the ready heap at ready_pos, and in the age list;
 *               queued => dirty && !processing
 *   processing  a worker holds it (intrusive in-flight list);
 *   heap_pos    it waits in the add_after heap for ready_ns, to be added at
 *               wait_prio;
 *   requeues    rate-limited adds since the last forget (the backoff exponent).
 *
 * Invariants, asserted: a record is freed only when none of that state is
 * set, and never while queued; one in flight per key: a key handed out is
 * not queued again until done (done pushes it if it was added meanwhile);
 * no worker holds a key when the queue is freed. The number of records is
 * capped at opts.max_keys; adds beyond it are dropped, counted and
 * remembered (workqueue_dropped.c).
 *
 * One mutex guards everything. Three condition variables: ready (getters
 * wait for a queued key), timer (the timer thread waits for the earliest
 * heap time, on CLOCK_MONOTONIC) and drain (shutdown_drain waits for the
 * in-flight list to empty). Metric families have their own locks, taken
 * inside q->lock; the render-time collector takes q->lock inside the
 * registry's collect lock, and nothing here takes a registry lock while
 * holding q->lock, so there is no cycle.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/workqueue.h"
#include "kop_internal.h"
#include "map_internal.h"
#include "workqueue_internal.h"

/* ---- the record table --------------------------------------------------- */

static struct kop__wq_item *find(const kop_workqueue *q, const char *key)
{
    return key ? kop__map_get(&q->items, key) : NULL;
}

/*
 * reserve_ready grows the ready heap's array to hold n records, so that
 * queueing a record never allocates. False when memory runs out.
 */
static bool reserve_ready(kop_workqueue *q, size_t n)
{
    if (n <= q->cap_ready)
        return true;
    size_t cap = q->cap_ready ? q->cap_ready * 2 : 16;
    if (cap < n)
        cap = n;
    struct kop__wq_slot *r = realloc(q->ready, cap * sizeof *r);
    if (!r)
        return false;
    q->ready = r;
    q->cap_ready = cap;
    return true;
}

/*
 * kop__wq_lookup returns key's record, creating an idle one if needed. NULL if the
 * key cap is reached or memory runs out: the caller drops its add and counts
 * it.
 */
struct kop__wq_item *kop__wq_lookup(kop_workqueue *q, const char *key)
{
    struct kop__wq_item *it = kop__map_get(&q->items, key);
    if (it)
        return it;
    if (q->nitems >= q->opts.max_keys || !reserve_ready(q, q->nitems + 1))
        return NULL;
    size_t len = strlen(key);
    it = calloc(1, sizeof *it + len + 1);
    if (!it)
        return NULL;
    memcpy(it->key, key, len + 1);
    it->heap_pos = KOP__WQ_NOT_WAITING;
    if (kop__map_put(&q->items, it->key, it, NULL) != KOP_OK) {
        free(it);
        return NULL;
    }
    q->nitems++;
    return it;
}

/* kop__wq_release_if_idle frees it if nothing about it remains to remember, then gives its
 * room to the oldest dropped key. */
void kop__wq_release_if_idle(kop_workqueue *q, struct kop__wq_item *it)
{
    if (it->dirty || it->processing || it->heap_pos != KOP__WQ_NOT_WAITING || it->requeues > 0)
        return;
    KOP_ASSERT(!it->queued);
    void *was = kop__map_remove(&q->items, it->key);
    KOP_ASSERT(was == it);
    (void)was;
    q->nitems--;
    free(it);
    kop__map_shrink(&q->items);
    kop__wq_readmit_dropped(q);
}

/* ---- metrics ------------------------------------------------------------ */

/* collect computes the in-flight gauges at render time, as client-go's
 * updateUnfinishedWork does every 500 ms. */
static void collect(void *user)
{
    kop_workqueue *q = user;
    double total = 0, longest = 0;
    pthread_mutex_lock(&q->lock);
    int64_t now = kop_mono_ns();
    for (struct kop__wq_item *it = q->inflight; it; it = it->next_inflight) {
        double age = kop__wq_seconds(now - it->started_ns);
        total += age;
        if (age > longest)
            longest = age;
    }
    kop_metric_set(q->unfinished, q->lv, total);
    kop_metric_set(q->longest, q->lv, longest);
    pthread_mutex_unlock(&q->lock);
}

static kop_err register_metrics(kop_workqueue *q, kop_metrics *m)
{
    static const char *const labels[] = {"name", "controller", NULL};
    static const char *const depth_labels[] = {"name", "controller", "priority", NULL};
    double b[12];
    kop_err err;

    /* Both durations use ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s, as
     * controller-runtime's workqueue metrics provider (v0.24). */
    err = kop_metrics_exponential_buckets(10e-9, 10, 12, b);
    if (!err)
        err = kop_metrics_gauge(m, "workqueue_depth",
                                "Current depth of workqueue by workqueue and priority",
                                depth_labels, &q->depth);
    if (!err)
        err = kop_metrics_counter(m, "workqueue_adds_total",
                                  "Total number of adds handled by workqueue", labels, &q->adds);
    if (!err)
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){
                .name = "workqueue_queue_duration_seconds",
                .help = "How long in seconds an item stays in workqueue before being requested",
                .label_names = labels,
                .buckets = b,
                .nbuckets = 12},
            &q->latency);
    if (!err)
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){
                .name = "workqueue_work_duration_seconds",
                .help = "How long in seconds processing an item from workqueue takes.",
                .label_names = labels,
                .buckets = b,
                .nbuckets = 12},
            &q->work);
    if (!err)
        err = kop_metrics_gauge(
            m, "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            labels, &q->unfinished);
    if (!err)
        err = kop_metrics_gauge(
            m, "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels, &q->longest);
    if (!err)
        err = kop_metrics_counter(m, "workqueue_retries_total",
                                  "Total number of retries handled by workqueue", labels,
                                  &q->retries);
    if (!err)
        err = kop_metrics_counter(
            m, "kop_workqueue_dropped_total",
            "Adds dropped because the workqueue held its maximum number of distinct keys",
            labels, &q->dropped);
    if (err)
        return err;

    /* Every series exists from the start, at zero, as with client-go. */
    static const char *const named[] = {"-100", "0", "100"}; /* KOP_PRIORITY_LOW, NORMAL, HIGH */
    for (int i = 0; i < 3; i++) {
        const char *depth_lv[] = {q->name, q->name, named[i], NULL};
        kop_metric_touch(q->depth, depth_lv);
    }
    kop_metric_touch(q->adds, q->lv);
    kop_metric_touch(q->latency, q->lv);
    kop_metric_touch(q->work, q->lv);
    kop_metric_touch(q->unfinished, q->lv);
    kop_metric_touch(q->longest, q->lv);
    kop_metric_touch(q->retries, q->lv);
    return kop_metrics_add_collector(m, collect, q);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void apply_defaults(kop_workqueue_opts *o)
{
    if (o->qps == 0)
        o->qps = KOP_WORKQUEUE_DEFAULT_QPS;
    if (o->burst <= 0)
        o->burst = KOP_WORKQUEUE_DEFAULT_BURST;
    if (o->base_delay_ms <= 0)
        o->base_delay_ms = KOP_WORKQUEUE_DEFAULT_BASE_MS;
    if (o->max_delay_ms <= 0)
        o->max_delay_ms = KOP_WORKQUEUE_DEFAULT_MAX_MS;
    if (o->max_delay_ms < o->base_delay_ms)
        o->max_delay_ms = o->base_delay_ms;
    if (o->max_keys == 0)
        o->max_keys = KOP_WORKQUEUE_DEFAULT_MAX_KEYS;
    if (o->max_dropped == 0)
        o->max_dropped = KOP_WORKQUEUE_DEFAULT_MAX_DROPPED;
    if (o->starvation_limit == 0)
        o->starvation_limit = KOP_WORKQUEUE_DEFAULT_STARVATION_LIMIT;
}

kop_err kop_workqueue_new(const kop_workqueue_opts *opts, kop_workqueue **out)
{
    kop_err err = KOP_ENOMEM;
    kop_workqueue *q = NULL;
    pthread_condattr_t attr;

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (opts && opts->metrics && !opts->name)
        return KOP_EINVAL;
    q = calloc(1, sizeof *q);
    if (!q)
        return KOP_ENOMEM;
    if (opts)
        q->opts = *opts;
    apply_defaults(&q->opts);
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->ready_cond, NULL);
    pthread_cond_init(&q->timer_cond, &attr);
    pthread_cond_init(&q->drain_cond, NULL);
    pthread_condattr_destroy(&attr);
    q->tokens = q->opts.burst;
    q->refilled_ns = kop_mono_ns();

    q->name = strdup(q->opts.name ? q->opts.name : "");
    kop__map_init_borrowing(&q->items);
    kop__map_init_borrowing(&q->dropped_keys);
    if (!q->name)
        goto out;
    q->opts.name = q->name;
    q->lv[0] = q->lv[1] = q->name;
    if (q->opts.metrics) {
        err = register_metrics(q, q->opts.metrics);
        if (err)
            goto out;
    }
    if (pthread_create(&q->timer, NULL, kop__wq_timer_main, q) != 0) {
        err = KOP_EIO;
        goto out;
    }
    q->timer_started = true;
    *out = q;
    err = KOP_OK;
out:
    if (err)
        kop_workqueue_free(q);
    return err;
}

/* begin_shutdown stops adds, drops the timers and wakes every waiter. */
static void begin_shutdown(kop_workqueue *q)
{
    if (!q->shutting_down) {
        q->shutting_down = true;
        kop__wq_drop_timers(q);
    }
    pthread_cond_broadcast(&q->ready_cond);
    pthread_cond_broadcast(&q->timer_cond);
}

void kop_workqueue_free(kop_workqueue *q)
{
    if (!q)
        return;
    if (q->opts.metrics)
        kop_metrics_remove_collector(q->opts.metrics, collect, q); /* waits for a render */
    pthread_mutex_lock(&q->lock);
    begin_shutdown(q);
    pthread_mutex_unlock(&q->lock);
    if (q->timer_started)
        pthread_join(q->timer, NULL);
    KOP_ASSERT(q->ninflight == 0); /* workers must have returned */
    kop__map_fini(&q->items, free);
    kop__map_fini(&q->dropped_keys, free);
    free(q->heap);
    free(q->ready);
    free(q->name);
    pthread_cond_destroy(&q->ready_cond);
    pthread_cond_destroy(&q->timer_cond);
    pthread_cond_destroy(&q->drain_cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* ---- public operations -------------------------------------------------- */

enum add_kind { ADD_NOW, ADD_AFTER, ADD_RATE_LIMITED };

/*
 * add_key is every public add: key at prio, now, after after_ms, or
 * rate-limited; replace: in place of a replaceable held-back add, and
 * replaceable itself (kop_workqueue_add_opts.replace).
 */
static void add_key(kop_workqueue *q, const char *key, int prio, enum add_kind kind, long after_ms,
                    bool replace)
{
    if (!q || !key)
        return;
    pthread_mutex_lock(&q->lock);
    if (q->shutting_down)
        goto out;
    struct kop__wq_item *it = kop__wq_lookup(q, key);
    if (!it) {
        kop__wq_count_dropped(q, key, prio);
        goto out;
    }
    if (replace && it->heap_pos != KOP__WQ_NOT_WAITING && it->replaceable)
        kop__wq_unschedule_locked(q, it);
    switch (kind) {
    case ADD_NOW:
        kop__wq_add_locked(q, it, prio);
        break;
    case ADD_AFTER:
        kop__wq_add_after_locked(q, it, after_ms > 0 ? (int64_t)after_ms * 1000000 : 0, prio,
                                 replace);
        break;
    case ADD_RATE_LIMITED:
        kop__wq_add_rate_limited_locked(q, it, prio, replace);
        break;
    }
out:
    pthread_mutex_unlock(&q->lock);
}

void kop_workqueue_add_with(kop_workqueue *q, const char *key, const kop_workqueue_add_opts *opts)
{
    if (!opts)
        add_key(q, key, KOP_PRIORITY_NORMAL, ADD_NOW, 0, false);
    else if (opts->rate_limited)
        add_key(q, key, opts->priority, ADD_RATE_LIMITED, 0, opts->replace);
    else if (opts->after_ms > 0)
        add_key(q, key, opts->priority, ADD_AFTER, opts->after_ms, opts->replace);
    else
        add_key(q, key, opts->priority, ADD_NOW, 0, opts->replace);
}

void kop_workqueue_add(kop_workqueue *q, const char *key)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_NOW, 0, false);
}

void kop_workqueue_add_after(kop_workqueue *q, const char *key, long delay_ms)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_AFTER, delay_ms, false);
}

void kop_workqueue_add_rate_limited(kop_workqueue *q, const char *key)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_RATE_LIMITED, 0, false);
}

void kop_workqueue_forget(kop_workqueue *q, const char *key)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    struct kop__wq_item *it = find(q, key);
    if (it) {
        it->requeues = 0;
        kop__wq_release_if_idle(q, it);
    }
    pthread_mutex_unlock(&q->lock);
}

void kop_workqueue_drop_replaceable(kop_workqueue *q, const char *key)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    struct kop__wq_item *it = find(q, key);
    if (it && it->heap_pos != KOP__WQ_NOT_WAITING && it->replaceable) {
        kop__wq_unschedule_locked(q, it);
        kop__wq_release_if_idle(q, it);
    }
    pthread_mutex_unlock(&q->lock);
}

int kop_workqueue_num_requeues(kop_workqueue *q, const char *key)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->lock);
    struct kop__wq_item *it = find(q, key);
    int n = it ? it->requeues : 0;
    pthread_mutex_unlock(&q->lock);
    return n;
}

kop_err kop_workqueue_get_with_priority(kop_workqueue *q, char **key_out, int *priority_out)
{
    kop_err err = KOP_OK;
    if (!key_out)
        return KOP_EINVAL;
    *key_out = NULL;
    if (!q)
        return KOP_EINVAL;

    pthread_mutex_lock(&q->lock);
    while (q->nqueued == 0 && !q->shutting_down)
        pthread_cond_wait(&q->ready_cond, &q->lock);
    if (q->nqueued == 0) {
        err = KOP_ESHUTDOWN; /* shut down and nothing left to hand out */
        goto out;
    }
    /* Copy first, so that running out of memory leaves the queue as it was
     * (the starvation count included). */
    int skips = q->skips;
    struct kop__wq_item *it = kop__wq_next_out(q);
    char *copy = strdup(it->key);
    if (!copy) {
        q->skips = skips;
        err = KOP_ENOMEM;
        goto out;
    }
    kop__wq_unqueue(q, it);
    KOP_ASSERT(it->dirty && !it->processing);
    it->dirty = false;
    kop__wq_depth_add(q, it->prio, -1);
    it->processing = true;
    it->prev_inflight = NULL;
    it->next_inflight = q->inflight;
    if (q->inflight)
        q->inflight->prev_inflight = it;
    q->inflight = it;
    q->ninflight++;

    int64_t now = kop_mono_ns();
    it->started_ns = now;
    if (it->has_added)
        kop_metric_observe(q->latency, q->lv, kop__wq_seconds(now - it->added_ns));
    it->has_added = false;
    if (priority_out)
        *priority_out = it->prio;
    *key_out = copy;
out:
    pthread_mutex_unlock(&q->lock);
    return err;
}

kop_err kop_workqueue_get(kop_workqueue *q, char **key_out)
{
    return kop_workqueue_get_with_priority(q, key_out, NULL);
}

void kop_workqueue_done(kop_workqueue *q, const char *key)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    struct kop__wq_item *it = find(q, key);
    if (!it || !it->processing)
        goto out; /* not handed out: nothing to finish */
    /* One in flight: a key being processed is never also queued. */
    KOP_ASSERT(!it->queued && q->ninflight > 0);
    kop_metric_observe(q->work, q->lv, kop__wq_seconds(kop_mono_ns() - it->started_ns));
    it->processing = false;
    if (it->prev_inflight)
        it->prev_inflight->next_inflight = it->next_inflight;
    else
        q->inflight = it->next_inflight;
    if (it->next_inflight)
        it->next_inflight->prev_inflight = it->prev_inflight;
    it->prev_inflight = it->next_inflight = NULL;
    q->ninflight--;
    /* Added while processed: its turn now, at the highest priority it was
     * added with meanwhile. As in client-go this holds after shutdown too,
     * since the add was accepted before it. */
    if (it->dirty)
        kop__wq_push(q, it);
    if (q->ninflight == 0)
        pthread_cond_broadcast(&q->drain_cond);
    kop__wq_release_if_idle(q, it);
out:
    pthread_mutex_unlock(&q->lock);
}

size_t kop_workqueue_len(kop_workqueue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->lock);
    size_t n = q->nqueued;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void kop_workqueue_shutdown(kop_workqueue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    begin_shutdown(q);
    q->draining = false; /* ends a shutdown_drain that is waiting */
    pthread_cond_broadcast(&q->drain_cond);
    pthread_mutex_unlock(&q->lock);
}

void kop_workqueue_shutdown_drain(kop_workqueue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    begin_shutdown(q);
    q->draining = true;
    while (q->ninflight > 0 && q->draining)
        pthread_cond_wait(&q->drain_cond, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

bool kop_workqueue_shutting_down(kop_workqueue *q)
{
    if (!q)
        return true;
    pthread_mutex_lock(&q->lock);
    bool down = q->shutting_down;
    pthread_mutex_unlock(&q->lock);
    return down;
}

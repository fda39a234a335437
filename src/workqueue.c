/*
 * workqueue.c - the work queue between event handlers and reconcile workers
 * (see kop/workqueue.h), with client-go's semantics.
 *
 * Workload: informer event handlers add keys at up to thousands per second,
 * mostly keys already queued (an object changes several times before a
 * worker gets to it); a handful of workers take them; failed reconciles come
 * back through add_rate_limited, requeue-after results through add_after.
 * So dedup and done are O(1); adds, raises and gets are O(log n) in the
 * keys queued (the ready heap), and the timer heap's operations O(log n) in
 * the keys held back.
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
 * The ready heap is a binary max-heap on (prio, then the lower seq), both
 * copied into its array (struct slot) so that sifting touches no record:
 * seq numbers each entry into the queued state, so one priority is FIFO,
 * and a raise (a higher prio, same seq) is a sift up. Its array is reserved to
 * hold every record (lookup grows it before a record is made), so queueing
 * never allocates and cannot fail, also at done. The age list links the
 * queued keys in seq order (doubly, for O(1) removal): its head is the
 * oldest queued key, which starvation_limit hands out after that many keys
 * in a row went ahead of it (bounded share: low priorities get at least one
 * handout in starvation_limit + 1 while they wait, oldest first).
 *
 * The number of records is capped at opts.max_keys (default 1,000,000;
 * client-go has no cap): beyond it, adds of new keys are dropped and counted
 * in kop_workqueue_dropped_total, so a flood of distinct keys cannot take
 * all memory. The dropped keys themselves are remembered in a second,
 * capped set (map plus FIFO list, opts.max_dropped, default 4,096) and
 * queued again, oldest drop first, each time a record is released and makes
 * room. A controller's resync (every cached object enqueued again) cannot
 * do that for an object deleted meanwhile: no longer cached, its key would
 * be lost and its cleanup never run. A key that finds that set full too is
 * forgotten and counted (kop_workqueue_take_forgotten), which the controller
 * polls and answers with a resync: past both caps only live objects are
 * made good.
 *
 * One mutex guards everything. Three condition variables: ready (getters
 * wait for a queued key), timer (the timer thread waits for the earliest
 * heap time, on CLOCK_MONOTONIC) and drain (shutdown_drain waits for the
 * in-flight list to empty). Metric families have their own locks, taken
 * inside q->lock; the render-time collector takes q->lock inside the
 * registry's collect lock, and nothing here takes a registry lock while
 * holding q->lock, so there is no cycle.
 */
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/workqueue.h"
#include "kop_internal.h"
#include "map_internal.h"

#define NOT_WAITING SIZE_MAX

struct item {
    bool dirty;
    bool queued;
    bool processing;
    bool has_added;     /* added_ns is set */
    int requeues;
    int prio;           /* while dirty: the priority it waits at */
    int wait_prio;      /* while in the timer heap: the priority it is added at */
    size_t heap_pos;    /* index in q->heap, or NOT_WAITING */
    size_t ready_pos;   /* while queued: index in q->ready */
    int64_t ready_ns;   /* while waiting: when it is due */
    int64_t added_ns;   /* when it last became dirty: queue_duration starts */
    int64_t started_ns; /* while processing: work_duration starts */
    struct item *older, *newer; /* the age list of queued keys */
    struct item *prev_inflight, *next_inflight;
    char key[];
};

/*
 * An entry of the ready heap: the order's keys are copied into the array,
 * so that sifting compares within it and touches a record only to tell it
 * its new position.
 */
struct slot {
    uint64_t seq; /* when it was queued, in queue order */
    int prio;
    struct item *it;
};

/* A dropped key, remembered until there is room for it. */
struct dropped {
    int prio;
    struct dropped *next; /* FIFO, oldest drop first */
    char key[];
};

struct kop_workqueue {
    kop_workqueue_opts opts; /* defaults applied; opts.name points at name */
    char *name;

    pthread_mutex_t lock;
    pthread_cond_t ready_cond; /* a key was queued, or shutdown */
    pthread_cond_t timer_cond; /* the earliest heap time changed, or shutdown */
    pthread_cond_t drain_cond; /* the in-flight list emptied, or shutdown */
    pthread_t timer;
    bool timer_started;
    bool shutting_down;
    bool draining;

    kop__map items; /* key (borrowed from the record) -> struct item */
    size_t nitems;

    struct slot *ready;  /* max-heap on (prio, -seq) of queued keys */
    size_t cap_ready;    /* >= nitems: pushing never allocates */
    size_t nqueued;      /* entries of ready */
    uint64_t next_seq;
    struct item *oldest, *newest; /* the age list: queued keys in seq order */
    int skips; /* keys handed out in a row while an older one waited */

    struct item *inflight; /* keys handed out */
    size_t ninflight;

    struct item **heap; /* min-heap on ready_ns */
    size_t nheap;
    size_t cap_heap;

    double tokens; /* overall token bucket; may go negative (reservations) */
    int64_t refilled_ns;

    bool dropped_since; /* an add was dropped since kop_workqueue_take_dropped */
    kop__map dropped_keys;      /* key (borrowed from the entry) -> struct dropped */
    struct dropped *drop_head, *drop_tail;
    size_t ndropped;
    size_t forgotten; /* dropped and not remembered since kop_workqueue_take_forgotten */
    kop_metric *depth, *adds, *latency, *work, *unfinished, *longest, *retries, *dropped;
    const char *lv[3];       /* {name, name, NULL}: name and controller */
};

/* ---- time --------------------------------------------------------------- */

static int64_t now_ns(void)
{
    return kop_mono_ns();
}

static double seconds(int64_t ns)
{
    return (double)ns / 1e9;
}

/* ---- the record table --------------------------------------------------- */

static struct item *find(const kop_workqueue *q, const char *key)
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
    struct slot *r = realloc(q->ready, cap * sizeof *r);
    if (!r)
        return false;
    q->ready = r;
    q->cap_ready = cap;
    return true;
}

/*
 * lookup returns key's record, creating an idle one if needed. NULL if the
 * key cap is reached or memory runs out: the caller drops its add and counts
 * it.
 */
static struct item *lookup(kop_workqueue *q, const char *key)
{
    struct item *it = kop__map_get(&q->items, key);
    if (it)
        return it;
    if (q->nitems >= q->opts.max_keys || !reserve_ready(q, q->nitems + 1))
        return NULL;
    size_t len = strlen(key);
    it = calloc(1, sizeof *it + len + 1);
    if (!it)
        return NULL;
    memcpy(it->key, key, len + 1);
    it->heap_pos = NOT_WAITING;
    if (kop__map_put(&q->items, it->key, it, NULL) != KOP_OK) {
        free(it);
        return NULL;
    }
    q->nitems++;
    return it;
}

static void readmit_dropped(kop_workqueue *q);

/* release frees it if nothing about it remains to remember, then gives its
 * room to the oldest dropped key. */
static void release_if_idle(kop_workqueue *q, struct item *it)
{
    if (it->dirty || it->processing || it->heap_pos != NOT_WAITING || it->requeues > 0)
        return;
    KOP_ASSERT(!it->queued);
    void *was = kop__map_remove(&q->items, it->key);
    KOP_ASSERT(was == it);
    (void)was;
    q->nitems--;
    free(it);
    kop__map_shrink(&q->items);
    readmit_dropped(q);
}

/* ---- the ready heap and the age list ------------------------------------ */

/* before tells whether a goes out before b: the higher priority, then the older. */
static bool before(const struct slot *a, const struct slot *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->seq < b->seq);
}

static void ready_set(kop_workqueue *q, size_t pos, struct slot s)
{
    q->ready[pos] = s;
    s.it->ready_pos = pos;
}

static void ready_up(kop_workqueue *q, size_t pos)
{
    struct slot s = q->ready[pos];
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (!before(&s, &q->ready[parent]))
            break;
        ready_set(q, pos, q->ready[parent]);
        pos = parent;
    }
    ready_set(q, pos, s);
}

static void ready_down(kop_workqueue *q, size_t pos)
{
    struct slot s = q->ready[pos];
    for (;;) {
        size_t child = 2 * pos + 1;
        if (child >= q->nqueued)
            break;
        if (child + 1 < q->nqueued && before(&q->ready[child + 1], &q->ready[child]))
            child++;
        if (!before(&q->ready[child], &s))
            break;
        ready_set(q, pos, q->ready[child]);
        pos = child;
    }
    ready_set(q, pos, s);
}

/* ready_raise sets the priority of it, queued, to the higher prio. */
static void ready_raise(kop_workqueue *q, struct item *it, int prio)
{
    q->ready[it->ready_pos].prio = prio;
    ready_up(q, it->ready_pos);
}

/* depth_add moves the workqueue_depth series of priority prio by delta. */
static void depth_add(kop_workqueue *q, int prio, double delta)
{
    if (!q->depth)
        return;
    char p[16];
    snprintf(p, sizeof p, "%d", prio);
    const char *lv[] = {q->name, q->name, p, NULL};
    kop_metric_add(q->depth, lv, delta);
}

/* push queues it: into the ready heap (room is reserved) and at the young end of the age list. */
static void push(kop_workqueue *q, struct item *it)
{
    KOP_ASSERT(it->dirty && !it->processing && !it->queued && q->nqueued < q->cap_ready);
    it->queued = true;
    it->newer = NULL;
    it->older = q->newest;
    if (q->newest)
        q->newest->newer = it;
    else
        q->oldest = it;
    q->newest = it;
    ready_set(q, q->nqueued++, (struct slot){.seq = q->next_seq++, .prio = it->prio, .it = it});
    ready_up(q, it->ready_pos);
    pthread_cond_signal(&q->ready_cond);
}

/* unqueue takes it out of the ready heap and the age list. */
static void unqueue(kop_workqueue *q, struct item *it)
{
    KOP_ASSERT(it->queued && q->ready[it->ready_pos].it == it);
    size_t pos = it->ready_pos;
    struct slot last = q->ready[--q->nqueued];
    if (last.it != it) {
        ready_set(q, pos, last);
        if (pos > 0 && before(&last, &q->ready[(pos - 1) / 2]))
            ready_up(q, pos);
        else
            ready_down(q, pos);
    }
    if (it->older)
        it->older->newer = it->newer;
    else
        q->oldest = it->newer;
    if (it->newer)
        it->newer->older = it->older;
    else
        q->newest = it->older;
    it->older = it->newer = NULL;
    it->queued = false;
}

/*
 * next_out picks the key to hand out: the first in priority order, unless
 * starvation_limit keys in a row went out ahead of the oldest queued key;
 * then the oldest.
 */
static struct item *next_out(kop_workqueue *q)
{
    struct item *it = q->ready[0].it;
    if (it != q->oldest && q->opts.starvation_limit >= 0 && q->skips >= q->opts.starvation_limit)
        it = q->oldest;
    if (it == q->oldest)
        q->skips = 0;
    else
        q->skips++;
    return it;
}

/* ---- the timer heap ----------------------------------------------------- */

static void heap_set(kop_workqueue *q, size_t pos, struct item *it)
{
    q->heap[pos] = it;
    it->heap_pos = pos;
}

static void sift_up(kop_workqueue *q, size_t pos)
{
    struct item *it = q->heap[pos];
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (q->heap[parent]->ready_ns <= it->ready_ns)
            break;
        heap_set(q, pos, q->heap[parent]);
        pos = parent;
    }
    heap_set(q, pos, it);
}

static void sift_down(kop_workqueue *q, size_t pos)
{
    struct item *it = q->heap[pos];
    for (;;) {
        size_t child = 2 * pos + 1;
        if (child >= q->nheap)
            break;
        if (child + 1 < q->nheap && q->heap[child + 1]->ready_ns < q->heap[child]->ready_ns)
            child++;
        if (it->ready_ns <= q->heap[child]->ready_ns)
            break;
        heap_set(q, pos, q->heap[child]);
        pos = child;
    }
    heap_set(q, pos, it);
}

static struct item *heap_pop(kop_workqueue *q)
{
    struct item *top = q->heap[0];
    top->heap_pos = NOT_WAITING;
    if (--q->nheap > 0) {
        heap_set(q, 0, q->heap[q->nheap]);
        sift_down(q, 0);
    }
    return top;
}

/*
 * schedule makes it due at ready_ns, or earlier if it already waits for an
 * earlier time, to be added at prio or the higher priority it already
 * waits with. Wakes the timer thread when the earliest time changed.
 * Returns false (the add is dropped) when the heap cannot grow.
 */
static bool schedule(kop_workqueue *q, struct item *it, int64_t ready_ns, int prio)
{
    if (it->heap_pos != NOT_WAITING) {
        if (prio > it->wait_prio)
            it->wait_prio = prio; /* the higher priority wins */
        if (ready_ns >= it->ready_ns)
            return true; /* the earlier time wins */
        it->ready_ns = ready_ns;
        sift_up(q, it->heap_pos);
    } else {
        if (q->nheap == q->cap_heap) {
            size_t n = q->cap_heap ? q->cap_heap * 2 : 16;
            struct item **h = realloc(q->heap, n * sizeof *h);
            if (!h)
                return false;
            q->heap = h;
            q->cap_heap = n;
        }
        it->ready_ns = ready_ns;
        it->wait_prio = prio;
        heap_set(q, q->nheap++, it);
        sift_up(q, it->heap_pos);
    }
    if (it->heap_pos == 0)
        pthread_cond_signal(&q->timer_cond);
    return true;
}

/* ---- queue operations, with q->lock held -------------------------------- */

/*
 * remember keeps a dropped key to queue again once there is room (the
 * highest priority it was dropped with), or counts it as forgotten.
 */
static void remember(kop_workqueue *q, const char *key, int prio)
{
    struct dropped *d = kop__map_get(&q->dropped_keys, key);
    if (d) {
        if (prio > d->prio)
            d->prio = prio;
        return;
    }
    size_t len = strlen(key);
    if (q->ndropped >= q->opts.max_dropped || !(d = malloc(sizeof *d + len + 1))) {
        q->forgotten++;
        return;
    }
    memcpy(d->key, key, len + 1);
    d->prio = prio;
    d->next = NULL;
    if (kop__map_put(&q->dropped_keys, d->key, d, NULL) != KOP_OK) {
        free(d);
        q->forgotten++;
        return;
    }
    if (q->drop_tail)
        q->drop_tail->next = d;
    else
        q->drop_head = d;
    q->drop_tail = d;
    q->ndropped++;
}

/* count_dropped counts an add of key refused, raises the flag and remembers the key. */
static void count_dropped(kop_workqueue *q, const char *key, int prio)
{
    kop_metric_inc(q->dropped, q->lv);
    q->dropped_since = true;
    remember(q, key, prio);
}

/*
 * add_locked marks it dirty at prio (or the higher priority it is held
 * back with) and queues it unless a worker holds it; a key dirty already is
 * only raised, never lowered.
 */
static void add_locked(kop_workqueue *q, struct item *it, int prio)
{
    if (it->heap_pos != NOT_WAITING && it->wait_prio > prio)
        prio = it->wait_prio; /* one key, one item: its highest priority */
    if (it->dirty) { /* queued already, or will be at done */
        if (prio > it->prio) {
            depth_add(q, it->prio, -1);
            depth_add(q, prio, 1);
            it->prio = prio;
            if (it->queued)
                ready_raise(q, it, prio);
        }
        return;
    }
    it->dirty = true;
    it->prio = prio;
    if (!it->has_added) {
        it->added_ns = now_ns();
        it->has_added = true;
    }
    kop_metric_inc(q->adds, q->lv);
    depth_add(q, prio, 1);
    if (!it->processing)
        push(q, it);
}

/*
 * readmit_dropped queues remembered dropped keys, oldest drop first, while
 * there is room for them. A key that cannot get a record (no memory) stays
 * first in line for the next release.
 */
static void readmit_dropped(kop_workqueue *q)
{
    while (q->drop_head && !q->shutting_down) {
        struct dropped *d = q->drop_head;
        struct item *it = lookup(q, d->key);
        if (!it)
            return;
        q->drop_head = d->next;
        if (!q->drop_head)
            q->drop_tail = NULL;
        q->ndropped--;
        void *was = kop__map_remove(&q->dropped_keys, d->key);
        KOP_ASSERT(was == d);
        (void)was;
        add_locked(q, it, d->prio);
        free(d);
    }
    kop__map_shrink(&q->dropped_keys);
}

/* add_after_locked counts a retry, then adds it at prio now or at now + delay_ns. */
static void add_after_locked(kop_workqueue *q, struct item *it, int64_t delay_ns, int prio)
{
    kop_metric_inc(q->retries, q->lv);
    if (delay_ns <= 0) {
        add_locked(q, it, prio);
        return;
    }
    if (!schedule(q, it, now_ns() + delay_ns, prio)) {
        count_dropped(q, it->key, prio);
        release_if_idle(q, it);
    }
}

/* backoff_ns is the per-key delay for the next retry: base * 2^requeues,
 * capped; doubling stops at the cap, so any requeue count is safe. */
static int64_t backoff_ns(const kop_workqueue *q, int requeues)
{
    double max = (double)q->opts.max_delay_ms * 1e6;
    double d = (double)q->opts.base_delay_ms * 1e6;
    for (int i = 0; i < requeues && d < max; i++)
        d *= 2;
    return (int64_t)(d < max ? d : max);
}

/* bucket_ns reserves one token of the overall bucket and returns how long
 * to wait for it (golang.org/x/time/rate's Reserve().Delay()). */
static int64_t bucket_ns(kop_workqueue *q)
{
    if (q->opts.qps < 0)
        return 0;
    int64_t now = now_ns();
    q->tokens += seconds(now - q->refilled_ns) * q->opts.qps;
    if (q->tokens > q->opts.burst)
        q->tokens = q->opts.burst;
    q->refilled_ns = now;
    q->tokens -= 1;
    return q->tokens < 0 ? (int64_t)(-q->tokens / q->opts.qps * 1e9) : 0;
}

/* ---- timer thread ------------------------------------------------------- */

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
    return ts;
}

/* timer_main moves due keys from the heap to the queue, then sleeps until
 * the next one is due or schedule() announces an earlier one. */
static void *timer_main(void *arg)
{
    kop_workqueue *q = arg;
    pthread_mutex_lock(&q->lock);
    while (!q->shutting_down) {
        int64_t now = now_ns();
        while (q->nheap > 0 && q->heap[0]->ready_ns <= now) {
            struct item *it = heap_pop(q);
            add_locked(q, it, it->wait_prio);
        }
        if (q->nheap == 0) {
            pthread_cond_wait(&q->timer_cond, &q->lock);
        } else {
            struct timespec due = to_timespec(q->heap[0]->ready_ns);
            pthread_cond_timedwait(&q->timer_cond, &q->lock, &due);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* ---- metrics ------------------------------------------------------------ */

/* collect computes the in-flight gauges at render time, as client-go's
 * updateUnfinishedWork does every 500 ms. */
static void collect(void *user)
{
    kop_workqueue *q = user;
    double total = 0, longest = 0;
    pthread_mutex_lock(&q->lock);
    int64_t now = now_ns();
    for (struct item *it = q->inflight; it; it = it->next_inflight) {
        double age = seconds(now - it->started_ns);
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
    q->refilled_ns = now_ns();

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
    if (pthread_create(&q->timer, NULL, timer_main, q) != 0) {
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
        while (q->nheap > 0)
            release_if_idle(q, heap_pop(q));
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

/* add_key is every public add: key at prio, now, after after_ms, or rate-limited. */
static void add_key(kop_workqueue *q, const char *key, int prio, enum add_kind kind, long after_ms)
{
    if (!q || !key)
        return;
    pthread_mutex_lock(&q->lock);
    if (q->shutting_down)
        goto out;
    struct item *it = lookup(q, key);
    if (!it) {
        count_dropped(q, key, prio);
        goto out;
    }
    switch (kind) {
    case ADD_NOW:
        add_locked(q, it, prio);
        break;
    case ADD_AFTER:
        add_after_locked(q, it, after_ms > 0 ? (int64_t)after_ms * 1000000 : 0, prio);
        break;
    case ADD_RATE_LIMITED: {
        int64_t item_ns = backoff_ns(q, it->requeues);
        int64_t overall_ns = bucket_ns(q);
        if (it->requeues < INT_MAX)
            it->requeues++;
        add_after_locked(q, it, item_ns > overall_ns ? item_ns : overall_ns, prio);
        break;
    }
    }
out:
    pthread_mutex_unlock(&q->lock);
}

void kop_workqueue_add_with(kop_workqueue *q, const char *key, const kop_workqueue_add_opts *opts)
{
    if (!opts)
        add_key(q, key, KOP_PRIORITY_NORMAL, ADD_NOW, 0);
    else if (opts->rate_limited)
        add_key(q, key, opts->priority, ADD_RATE_LIMITED, 0);
    else if (opts->after_ms > 0)
        add_key(q, key, opts->priority, ADD_AFTER, opts->after_ms);
    else
        add_key(q, key, opts->priority, ADD_NOW, 0);
}

void kop_workqueue_add(kop_workqueue *q, const char *key)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_NOW, 0);
}

void kop_workqueue_add_after(kop_workqueue *q, const char *key, long delay_ms)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_AFTER, delay_ms);
}

void kop_workqueue_add_rate_limited(kop_workqueue *q, const char *key)
{
    add_key(q, key, KOP_PRIORITY_NORMAL, ADD_RATE_LIMITED, 0);
}

void kop_workqueue_forget(kop_workqueue *q, const char *key)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    struct item *it = find(q, key);
    if (it) {
        it->requeues = 0;
        release_if_idle(q, it);
    }
    pthread_mutex_unlock(&q->lock);
}

int kop_workqueue_num_requeues(kop_workqueue *q, const char *key)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->lock);
    struct item *it = find(q, key);
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
    struct item *it = next_out(q);
    char *copy = strdup(it->key);
    if (!copy) {
        q->skips = skips;
        err = KOP_ENOMEM;
        goto out;
    }
    unqueue(q, it);
    KOP_ASSERT(it->dirty && !it->processing);
    it->dirty = false;
    depth_add(q, it->prio, -1);
    it->processing = true;
    it->prev_inflight = NULL;
    it->next_inflight = q->inflight;
    if (q->inflight)
        q->inflight->prev_inflight = it;
    q->inflight = it;
    q->ninflight++;

    int64_t now = now_ns();
    it->started_ns = now;
    if (it->has_added)
        kop_metric_observe(q->latency, q->lv, seconds(now - it->added_ns));
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
    struct item *it = find(q, key);
    if (!it || !it->processing)
        goto out; /* not handed out: nothing to finish */
    /* One in flight: a key being processed is never also queued. */
    KOP_ASSERT(!it->queued && q->ninflight > 0);
    kop_metric_observe(q->work, q->lv, seconds(now_ns() - it->started_ns));
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
        push(q, it);
    if (q->ninflight == 0)
        pthread_cond_broadcast(&q->drain_cond);
    release_if_idle(q, it);
out:
    pthread_mutex_unlock(&q->lock);
}

size_t kop_workqueue_take_forgotten(kop_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->forgotten;
    q->forgotten = 0;
    pthread_mutex_unlock(&q->lock);
    return n;
}

bool kop_workqueue_take_dropped(kop_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    bool d = q->dropped_since;
    q->dropped_since = false;
    pthread_mutex_unlock(&q->lock);
    return d;
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

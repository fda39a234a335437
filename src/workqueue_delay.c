/*
 * workqueue_delay.c - the work queue's keys held back (see
 * workqueue_internal.h): add_after and add_rate_limited, the timer heap
 * they wait in, and the timer thread that adds them when they are due.
 *
 * The timer heap is a binary min-heap on ready_ns (CLOCK_MONOTONIC) of
 * records; each record knows its position (heap_pos), so that an add for
 * a key already waiting is a sift, not a second entry: the earlier time
 * and the higher priority win. Its operations are O(log n) in the keys
 * held back. A rate-limited add waits the longer of two delays, as
 * client-go's default controller rate limiter: the key's own exponential
 * backoff (base_delay_ms * 2^requeues, capped at max_delay_ms) and the
 * overall token bucket's (qps, burst), whose tokens may go negative, a
 * reservation per add.
 *
 * The timer thread sleeps on timer_cond until the earliest due time;
 * schedule signals it when that time changes. Invariants: heap_pos is
 * KOP__WQ_NOT_WAITING exactly when a record is not in the heap; the heap
 * is emptied at shutdown (asserted: only after shutting_down is set), so
 * no add is made after it.
 */
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "kop_internal.h"
#include "workqueue_internal.h"

/* ---- the timer heap ------------------------------------------------------- */

static void heap_set(kop_workqueue *q, size_t pos, struct kop__wq_item *it)
{
    q->heap[pos] = it;
    it->heap_pos = pos;
}

static void sift_up(kop_workqueue *q, size_t pos)
{
    struct kop__wq_item *it = q->heap[pos];
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
    struct kop__wq_item *it = q->heap[pos];
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

/* heap_remove takes the record at pos out of the heap and returns it. */
static struct kop__wq_item *heap_remove(kop_workqueue *q, size_t pos)
{
    struct kop__wq_item *it = q->heap[pos];
    it->heap_pos = KOP__WQ_NOT_WAITING;
    it->replaceable = false;
    if (--q->nheap > pos) { /* the last record fills the hole, then finds its place */
        struct kop__wq_item *moved = q->heap[q->nheap];
        heap_set(q, pos, moved);
        sift_down(q, pos);
        sift_up(q, moved->heap_pos);
    }
    return it;
}

static struct kop__wq_item *heap_pop(kop_workqueue *q)
{
    return heap_remove(q, 0);
}

void kop__wq_unschedule_locked(kop_workqueue *q, struct kop__wq_item *it)
{
    if (it->heap_pos != KOP__WQ_NOT_WAITING)
        (void)heap_remove(q, it->heap_pos);
}

/*
 * schedule makes it due at ready_ns, or earlier if it already waits for an
 * earlier time, to be added at prio or the higher priority it already
 * waits with; replaceable while only replacing adds made it. Wakes the
 * timer thread when the earliest time changed. Returns false (the add is
 * dropped) when the heap cannot grow.
 */
static bool schedule(kop_workqueue *q, struct kop__wq_item *it, int64_t ready_ns, int prio,
                     bool replace)
{
    if (it->heap_pos != KOP__WQ_NOT_WAITING) {
        it->replaceable = it->replaceable && replace;
        if (prio > it->wait_prio)
            it->wait_prio = prio; /* the higher priority wins */
        if (ready_ns >= it->ready_ns)
            return true; /* the earlier time wins */
        it->ready_ns = ready_ns;
        sift_up(q, it->heap_pos);
    } else {
        if (q->nheap == q->cap_heap) {
            size_t n = q->cap_heap ? q->cap_heap * 2 : 16;
            struct kop__wq_item **h = realloc(q->heap, n * sizeof *h);
            if (!h)
                return false;
            q->heap = h;
            q->cap_heap = n;
        }
        it->ready_ns = ready_ns;
        it->wait_prio = prio;
        it->replaceable = replace;
        heap_set(q, q->nheap++, it);
        sift_up(q, it->heap_pos);
    }
    if (it->heap_pos == 0)
        pthread_cond_signal(&q->timer_cond);
    return true;
}

/* ---- delayed and rate-limited adds ------------------------------------------ */

/* kop__wq_add_after_locked counts a retry, then adds it at prio now or at now + delay_ns. */
void kop__wq_add_after_locked(kop_workqueue *q, struct kop__wq_item *it, int64_t delay_ns,
                              int prio, bool replace)
{
    kop_metric_inc(q->retries, q->lv);
    if (delay_ns <= 0) {
        kop__wq_add_locked(q, it, prio);
        return;
    }
    if (!schedule(q, it, kop_mono_ns() + delay_ns, prio, replace)) {
        kop__wq_count_dropped(q, it->key, prio);
        kop__wq_release_if_idle(q, it);
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
    int64_t now = kop_mono_ns();
    q->tokens += kop__wq_seconds(now - q->refilled_ns) * q->opts.qps;
    if (q->tokens > q->opts.burst)
        q->tokens = q->opts.burst;
    q->refilled_ns = now;
    q->tokens -= 1;
    return q->tokens < 0 ? (int64_t)(-q->tokens / q->opts.qps * 1e9) : 0;
}

/* kop__wq_add_rate_limited_locked: the longer of the key's backoff and the bucket's wait. */
void kop__wq_add_rate_limited_locked(kop_workqueue *q, struct kop__wq_item *it, int prio,
                                     bool replace)
{
    int64_t item_ns = backoff_ns(q, it->requeues);
    int64_t overall_ns = bucket_ns(q);
    if (it->requeues < INT_MAX)
        it->requeues++;
    kop__wq_add_after_locked(q, it, item_ns > overall_ns ? item_ns : overall_ns, prio, replace);
}

/* kop__wq_drop_timers forgets every held-back add: shutdown refuses adds from then on. */
void kop__wq_drop_timers(kop_workqueue *q)
{
    KOP_ASSERT(q->shutting_down);
    while (q->nheap > 0)
        kop__wq_release_if_idle(q, heap_pop(q));
}

/* ---- timer thread ------------------------------------------------------- */

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
    return ts;
}

/* kop__wq_timer_main moves due keys from the heap to the queue, then sleeps until
 * the next one is due or schedule() announces an earlier one. */
void *kop__wq_timer_main(void *arg)
{
    kop_workqueue *q = arg;
    pthread_mutex_lock(&q->lock);
    while (!q->shutting_down) {
        int64_t now = kop_mono_ns();
        while (q->nheap > 0 && q->heap[0]->ready_ns <= now) {
            struct kop__wq_item *it = heap_pop(q);
            kop__wq_add_locked(q, it, it->wait_prio);
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

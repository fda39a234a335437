/*
 * workqueue_internal.h - what the work queue's files share; not installed.
 *
 * kop/workqueue.h is one module written in four files, one concept each:
 *
 *   workqueue.c          the handle: records (one per key), create, free,
 *                        metrics, and the public operations (add, get, done,
 *                        forget, shutdown)
 *   workqueue_ready.c    the keys ready to hand out: marking a key dirty,
 *                        the ready heap (priority, then age), the age list
 *                        and the starvation bound
 *   workqueue_delay.c    the keys held back: the timer heap, the per-key
 *                        backoff and the overall token bucket, the timer
 *                        thread that moves due keys to the ready heap
 *   workqueue_dropped.c  the keys refused at the max_keys cap: counted,
 *                        remembered in a capped FIFO set and queued again
 *                        when a record is released
 *
 * Every kop__wq_ function is called with q->lock held; the structures
 * below are read and written under that lock only. Record invariants (see
 * workqueue.c): queued => dirty && !processing; a record is freed only
 * when no state of its key remains (release_if_idle).
 */
#ifndef KOP_WORKQUEUE_INTERNAL_H
#define KOP_WORKQUEUE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kop/workqueue.h"
#include "map_internal.h"

/* heap_pos of a record that is not in the timer heap. */
#define KOP__WQ_NOT_WAITING SIZE_MAX

/* kop__wq_item: the record of one key, alive while any of its state is set. */
struct kop__wq_item {
    bool dirty;
    bool queued;
    bool processing;
    bool has_added;     /* added_ns is set */
    bool replaceable;   /* while in the timer heap: only replacing adds made it */
    int requeues;
    int prio;           /* while dirty: the priority it waits at */
    int wait_prio;      /* while in the timer heap: the priority it is added at */
    size_t heap_pos;    /* index in q->heap, or KOP__WQ_NOT_WAITING */
    size_t ready_pos;   /* while queued: index in q->ready */
    int64_t ready_ns;   /* while waiting: when it is due */
    int64_t added_ns;   /* when it last became dirty: queue_duration starts */
    int64_t started_ns; /* while processing: work_duration starts */
    struct kop__wq_item *older, *newer; /* the age list of queued keys */
    struct kop__wq_item *prev_inflight, *next_inflight;
    char key[];
};

/*
 * An entry of the ready heap: the order's keys are copied into the array,
 * so that sifting compares within it and touches a record only to tell it
 * its new position.
 */
struct kop__wq_slot {
    uint64_t seq; /* when it was queued, in queue order */
    int prio;
    struct kop__wq_item *it;
};

/* A dropped key, remembered until there is room for it. */
struct kop__wq_dropped {
    int prio;
    struct kop__wq_dropped *next; /* FIFO, oldest drop first */
    char key[];
};

/* kop_workqueue: the handle (opaque in kop/workqueue.h); the fields after lock are under it. */
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

    kop__map items; /* key (borrowed from the record) -> struct kop__wq_item */
    size_t nitems;

    struct kop__wq_slot *ready; /* max-heap on (prio, -seq) of queued keys */
    size_t cap_ready;           /* >= nitems: pushing never allocates */
    size_t nqueued;             /* entries of ready */
    uint64_t next_seq;
    struct kop__wq_item *oldest, *newest; /* the age list: queued keys in seq order */
    int skips; /* keys handed out in a row while an older one waited */

    struct kop__wq_item *inflight; /* keys handed out */
    size_t ninflight;

    struct kop__wq_item **heap; /* min-heap on ready_ns */
    size_t nheap;
    size_t cap_heap;

    double tokens; /* overall token bucket; may go negative (reservations) */
    int64_t refilled_ns;

    bool dropped_since; /* an add was dropped since kop_workqueue_take_dropped */
    kop__map dropped_keys; /* key (borrowed from the entry) -> struct kop__wq_dropped */
    struct kop__wq_dropped *drop_head, *drop_tail;
    size_t ndropped;
    size_t forgotten; /* dropped and not remembered since kop_workqueue_take_forgotten */
    kop_metric *depth, *adds, *latency, *work, *unfinished, *longest, *retries, *dropped;
    const char *lv[3]; /* {name, name, NULL}: name and controller */
};

/* kop__wq_seconds converts a duration in nanoseconds to seconds, for the metrics. */
static inline double kop__wq_seconds(int64_t ns)
{
    return (double)ns / 1e9;
}

/* ---- workqueue.c: the records ---------------------------------------------- */

/*
 * kop__wq_lookup returns key's record, creating an idle one if needed.
 * NULL if the key cap is reached or memory runs out: the caller drops its
 * add and counts it.
 */
struct kop__wq_item *kop__wq_lookup(kop_workqueue *q, const char *key);

/*
 * kop__wq_release_if_idle frees it if nothing about its key remains to
 * remember, then gives its room to the oldest dropped key.
 */
void kop__wq_release_if_idle(kop_workqueue *q, struct kop__wq_item *it);

/* ---- workqueue_ready.c: ready keys ----------------------------------------- */

/*
 * kop__wq_add_locked marks it dirty at prio (or the higher priority it is
 * held back with) and queues it unless a worker holds it; a key dirty
 * already is only raised, never lowered.
 */
void kop__wq_add_locked(kop_workqueue *q, struct kop__wq_item *it, int prio);

/* kop__wq_push queues it, dirty and not held: room in the ready heap is reserved. */
void kop__wq_push(kop_workqueue *q, struct kop__wq_item *it);

/* kop__wq_unqueue takes it out of the ready heap and the age list. */
void kop__wq_unqueue(kop_workqueue *q, struct kop__wq_item *it);

/*
 * kop__wq_next_out picks the queued key to hand out (q->nqueued > 0) and
 * counts it against the starvation bound; it stays queued.
 */
struct kop__wq_item *kop__wq_next_out(kop_workqueue *q);

/* kop__wq_depth_add moves the workqueue_depth series of priority prio by delta. */
void kop__wq_depth_add(kop_workqueue *q, int prio, double delta);

/* ---- workqueue_delay.c: held-back keys -------------------------------------- */

/*
 * kop__wq_add_after_locked counts a retry, then adds it at prio now or at
 * now + delay_ns; held back, it stays replaceable only if every add that
 * made it was a replacing one (replace).
 */
void kop__wq_add_after_locked(kop_workqueue *q, struct kop__wq_item *it, int64_t delay_ns,
                              int prio, bool replace);

/*
 * kop__wq_add_rate_limited_locked adds it after the longer of its own
 * backoff and the overall bucket's wait, and counts the requeue (replace:
 * as kop__wq_add_after_locked).
 */
void kop__wq_add_rate_limited_locked(kop_workqueue *q, struct kop__wq_item *it, int prio,
                                     bool replace);

/* kop__wq_unschedule_locked takes it out of the timer heap (it stays; release it if idle). */
void kop__wq_unschedule_locked(kop_workqueue *q, struct kop__wq_item *it);

/* kop__wq_drop_timers empties the timer heap at shutdown, releasing idle records. */
void kop__wq_drop_timers(kop_workqueue *q);

/* kop__wq_timer_main is the timer thread's body (q as arg); it runs until shutdown. */
void *kop__wq_timer_main(void *arg);

/* ---- workqueue_dropped.c: refused keys -------------------------------------- */

/*
 * kop__wq_count_dropped counts an add of key refused at prio, raises the
 * flag kop_workqueue_take_dropped reads, and remembers the key.
 */
void kop__wq_count_dropped(kop_workqueue *q, const char *key, int prio);

/*
 * kop__wq_readmit_dropped queues remembered dropped keys, oldest drop
 * first, while there is room for them.
 */
void kop__wq_readmit_dropped(kop_workqueue *q);

#endif /* KOP_WORKQUEUE_INTERNAL_H */

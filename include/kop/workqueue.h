/*
 * kop/workqueue.h - the queue of keys between event handlers and reconcile
 * workers, with client-go's workqueue semantics (rate-limiting, delaying
 * queue) and controller-runtime's priorities (its priority queue, v0.20+,
 * the default since v0.23).
 *
 * Keys are strings, typically "namespace/name". Every queued key has a
 * priority, an int; higher goes first. libkop's controllers add the objects
 * of an informer's initial list and of resyncs at KOP_PRIORITY_LOW and
 * watch events at KOP_PRIORITY_HIGH, so a change made while a backlog is
 * worked through overtakes it; plain adds are KOP_PRIORITY_NORMAL. The
 * queue guarantees:
 *
 * - A key is queued at most once: adding a key that is already waiting does
 *   not queue it twice (the "dirty" set); an add at a higher priority raises
 *   the waiting key to it, one at a lower priority never lowers it.
 * - A key is handed to at most one worker at a time: a key added while a
 *   worker processes it is marked dirty and queued again when that worker
 *   calls kop_workqueue_done (at the highest priority it was added with
 *   meanwhile), so the change is never lost and never processed
 *   concurrently.
 * - Within one priority, keys come out in the order they were queued
 *   (FIFO); a raised key keeps its place in that order among the keys of
 *   its new priority (it has waited since it was queued).
 * - No starvation (bounded share): at most starvation_limit keys (default
 *   7) in a row are handed out ahead of the oldest queued key; then the
 *   oldest goes next, whatever its priority. So under a steady stream of
 *   high-priority keys a low-priority backlog still gets at least one
 *   handout in eight, oldest first; with nothing older waiting, strict
 *   priority order holds.
 * - kop_workqueue_add_after holds a key back until its time; when the same
 *   key is held twice, the earlier time wins and the higher priority wins.
 *   When it is due it is added at that priority. An add of a key that is
 *   held back takes the held add's priority if that is higher (one key is
 *   one item, as in controller-runtime: a reconcile that requeues itself at
 *   a high priority is woken by its next event at that priority).
 * - kop_workqueue_add_rate_limited delays a retry by max(per-key exponential
 *   backoff, overall token bucket): client-go's DefaultControllerRateLimiter,
 *   5 ms * 2^n capped at 1000 s, and 10 qps with a burst of 100; the retry
 *   keeps its priority when it becomes due.
 * - A key dropped by the key cap (max_keys) is remembered, up to
 *   max_dropped keys, and queued again, oldest drop first, as soon as the
 *   queue has room for it (at the highest priority it was added with, at
 *   once even if it was an add_after): late, never lost, also for a key
 *   whose object is gone and that no resync would enqueue again. A dropped
 *   key that finds the remembered set full is forgotten and counted
 *   (kop_workqueue_take_forgotten).
 *
 * Costs: an add, a raise or a get is O(log n) in the keys queued (a binary
 * heap ordered by priority, then by queue order; in one priority a push
 * costs O(1)); done and the dedup of an add are O(1).
 *
 * Shutdown follows client-go's ShutDown: adds (and pending add_after
 * timers) are dropped from then on, but keys already queued are still
 * handed out; kop_workqueue_get returns KOP_ESHUTDOWN once the queue is
 * empty. Workers still call kop_workqueue_done on what they hold.
 *
 * All functions are thread-safe. Each queue runs one timer thread for
 * add_after; it sleeps on a condition variable (CLOCK_MONOTONIC) until the
 * earliest pending time and never polls.
 *
 * Metrics, when opts.metrics is set, are controller-runtime's (v0.20+):
 * workqueue_depth{name,controller,priority}, the keys that wait to be
 * handed out (queued, or added while in flight) by the priority they wait
 * at, in decimal ("-100", "0", "100" exist from the start); and with labels
 * {name,controller}: workqueue_adds_total, workqueue_queue_duration_seconds,
 * workqueue_work_duration_seconds, workqueue_retries_total,
 * workqueue_unfinished_work_seconds and
 * workqueue_longest_running_processor_seconds; the last two are computed
 * when the registry is rendered. Plus kop_workqueue_dropped_total{name,
 * controller}: adds refused by the key cap.
 */
#ifndef KOP_WORKQUEUE_H
#define KOP_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "kop/common.h"
#include "kop/err.h"
#include "kop/metrics.h"

KOP_BEGIN_DECLS

typedef struct kop_workqueue kop_workqueue;

/* Defaults applied to zero fields of kop_workqueue_opts (client-go's). */
#define KOP_WORKQUEUE_DEFAULT_QPS       10.0
#define KOP_WORKQUEUE_DEFAULT_BURST     100
#define KOP_WORKQUEUE_DEFAULT_BASE_MS   5L
#define KOP_WORKQUEUE_DEFAULT_MAX_MS    1000000L /* 1000 s */
#define KOP_WORKQUEUE_DEFAULT_MAX_KEYS  1000000u
#define KOP_WORKQUEUE_DEFAULT_MAX_DROPPED 4096u /* dropped keys remembered */
#define KOP_WORKQUEUE_DEFAULT_STARVATION_LIMIT 7

/*
 * Named priorities; any int may be used, higher first. LOW is what
 * controller-runtime gives the initial list (its LowPriority, -100).
 */
#define KOP_PRIORITY_LOW    (-100) /* initial lists, resyncs */
#define KOP_PRIORITY_NORMAL 0      /* kop_workqueue_add, kop_controller_enqueue */
#define KOP_PRIORITY_HIGH   100    /* watch events */

/* kop_workqueue_opts: zero means the default for every field. */
typedef struct kop_workqueue_opts {
    const char *name;      /* metrics labels "name" and "controller"; required with metrics */
    double qps;            /* overall token bucket of add_rate_limited; < 0 turns it off */
    int burst;             /* bucket size */
    long base_delay_ms;    /* per-key backoff: base_delay_ms * 2^requeues ... */
    long max_delay_ms;     /* ... capped at this */
    size_t max_keys;       /* distinct keys known at once (queued, in flight, waiting
                            * or backing off); adds of new keys past it are dropped
                            * and counted */
    size_t max_dropped;    /* dropped keys remembered to be queued again once
                            * there is room; past it a dropped key is forgotten */
    int starvation_limit;  /* keys handed out in a row ahead of the oldest queued
                            * key before it goes next; < 0: strict priority */
    kop_metrics *metrics;  /* optional, borrowed: must outlive the queue */
} kop_workqueue_opts;

/*
 * kop_workqueue_new makes a queue and starts its timer thread. opts may be
 * NULL. *out is owned by the caller: kop_workqueue_free. KOP_EINVAL for
 * metrics without a name, or if the workqueue_* families exist with other
 * labels; KOP_ENOMEM; KOP_EIO if the thread cannot start.
 */
KOP_API KOP_NODISCARD kop_err kop_workqueue_new(const kop_workqueue_opts *opts,
                                                kop_workqueue **out);

/*
 * kop_workqueue_free shuts q down if needed, stops its timer thread and
 * frees it. Call it after every worker has returned. NULL is ok.
 */
KOP_API void kop_workqueue_free(kop_workqueue *q);

/* kop_workqueue_add queues key (copied) unless it is queued already. Ignored after shutdown. */
KOP_API void kop_workqueue_add(kop_workqueue *q, const char *key);

/* kop_workqueue_add_opts: how kop_workqueue_add_with adds a key. */
typedef struct kop_workqueue_add_opts {
    int priority;      /* higher first; 0 is KOP_PRIORITY_NORMAL */
    long after_ms;     /* > 0: as kop_workqueue_add_after */
    bool rate_limited; /* as kop_workqueue_add_rate_limited (after_ms is then ignored) */
    /*
     * Replace the key's held-back add if a replacing add made it, and make
     * this one replaceable if it is held back. What a controller files its
     * reconciles' requeues with: each pass's requeue replaces the one the
     * key's previous pass asked for, which would otherwise fire later as a
     * pass nobody wants (the earlier time wins, above). A held-back add
     * made without replace is never replaced, and one it joins stops being
     * replaceable.
     */
    bool replace;
} kop_workqueue_add_opts;

/*
 * kop_workqueue_add_with adds key (copied) at opts->priority (NULL: as
 * kop_workqueue_add): now, after opts->after_ms, or rate-limited. A key
 * already queued is raised to the priority if it is higher, never lowered;
 * a key held back keeps the higher of the two priorities and the earlier
 * time. Ignored after shutdown.
 */
KOP_API void kop_workqueue_add_with(kop_workqueue *q, const char *key,
                                    const kop_workqueue_add_opts *opts);

/*
 * kop_workqueue_add_after adds key once delay_ms has passed; delay_ms <= 0
 * adds it now. If key is already waiting, the earlier of the two times is
 * kept. Counts one retry in workqueue_retries_total, as client-go does.
 */
KOP_API void kop_workqueue_add_after(kop_workqueue *q, const char *key, long delay_ms);

/*
 * kop_workqueue_add_rate_limited adds key after max(base_delay_ms *
 * 2^requeues capped at max_delay_ms, the token bucket's wait), then counts
 * one more requeue of key.
 */
KOP_API void kop_workqueue_add_rate_limited(kop_workqueue *q, const char *key);

/*
 * kop_workqueue_drop_replaceable forgets key's held-back add if it is
 * replaceable (made with kop_workqueue_add_opts.replace): a controller's
 * pass that asks for no requeue drops the one its previous pass asked for.
 */
KOP_API void kop_workqueue_drop_replaceable(kop_workqueue *q, const char *key);

/* kop_workqueue_forget resets key's backoff: its next retry waits base_delay_ms. */
KOP_API void kop_workqueue_forget(kop_workqueue *q, const char *key);

/*
 * kop_workqueue_take_dropped tells whether an add was dropped (the key cap,
 * or no memory) since the last call, and clears that. The dropped keys come
 * back on their own once there is room (see above), except those
 * kop_workqueue_take_forgotten counts.
 */
KOP_API bool kop_workqueue_take_dropped(kop_workqueue *q);

/*
 * kop_workqueue_take_forgotten returns how many dropped keys could not be
 * remembered (max_dropped reached, or no memory) since the last call, and
 * clears that. Only a resync makes those good, and only for objects that
 * still exist: libkop's controllers answer a non-zero count with one.
 */
KOP_API size_t kop_workqueue_take_forgotten(kop_workqueue *q);

/* kop_workqueue_num_requeues returns how many rate-limited adds key had since it was forgotten. */
KOP_API int kop_workqueue_num_requeues(kop_workqueue *q, const char *key);

/*
 * kop_workqueue_get blocks until a key can be processed and returns KOP_OK
 * with *key_out, a copy the caller owns: call kop_workqueue_done(q, key),
 * then free(key). Returns KOP_ESHUTDOWN (and *key_out NULL) once q is shut
 * down and nothing is queued; KOP_ENOMEM when the copy cannot be made, with
 * the queue as it was (the key stays queued: ask again).
 */
KOP_API KOP_NODISCARD kop_err kop_workqueue_get(kop_workqueue *q, char **key_out);

/*
 * kop_workqueue_get_with_priority is kop_workqueue_get that also tells the
 * priority the key was queued at (*priority_out; NULL is ok).
 */
KOP_API KOP_NODISCARD kop_err kop_workqueue_get_with_priority(kop_workqueue *q, char **key_out,
                                                              int *priority_out);

/*
 * kop_workqueue_done ends the processing of key. If key was added while it
 * was processed, it is queued again now.
 */
KOP_API void kop_workqueue_done(kop_workqueue *q, const char *key);

/* kop_workqueue_len returns the number of keys queued (not those in flight or waiting). */
KOP_API size_t kop_workqueue_len(kop_workqueue *q);

/*
 * kop_workqueue_shutdown stops accepting adds, drops pending add_after
 * timers and wakes every blocked getter. Queued keys are still handed out;
 * then kop_workqueue_get returns KOP_ESHUTDOWN. Idempotent; returns at once.
 */
KOP_API void kop_workqueue_shutdown(kop_workqueue *q);

/*
 * kop_workqueue_shutdown_drain shuts q down, then waits until every key
 * handed out has been passed to kop_workqueue_done (in-flight work
 * finishes). A concurrent kop_workqueue_shutdown ends the wait early.
 */
KOP_API void kop_workqueue_shutdown_drain(kop_workqueue *q);

/* kop_workqueue_shutting_down tells whether shutdown has been called. */
KOP_API bool kop_workqueue_shutting_down(kop_workqueue *q);

KOP_END_DECLS

#endif /* KOP_WORKQUEUE_H */

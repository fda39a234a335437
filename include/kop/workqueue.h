/*
 * kop/workqueue.h - the queue of keys between event handlers and reconcile
 * workers, with client-go's workqueue semantics (rate-limiting, delaying
 * queue).
 *
 * Keys are strings, typically "namespace/name". The queue guarantees:
 *
 * - A key is queued at most once: adding a key that is already waiting does
 *   nothing (the "dirty" set).
 * - A key is handed to at most one worker at a time: a key added while a
 *   worker processes it is marked dirty and queued again when that worker
 *   calls kop_workqueue_done, so the change is never lost and never
 *   processed concurrently.
 * - Otherwise keys come out in the order they were added (FIFO).
 * - kop_workqueue_add_after holds a key back until its time; when the same
 *   key is held twice, the earlier time wins.
 * - kop_workqueue_add_rate_limited delays a retry by max(per-key exponential
 *   backoff, overall token bucket): client-go's DefaultControllerRateLimiter,
 *   5 ms * 2^n capped at 1000 s, and 10 qps with a burst of 100.
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
 * workqueue_depth{name,controller,priority=""}, and with labels
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

/* kop_workqueue_forget resets key's backoff: its next retry waits base_delay_ms. */
KOP_API void kop_workqueue_forget(kop_workqueue *q, const char *key);

/*
 * kop_workqueue_take_dropped tells whether an add was dropped (the key cap,
 * or no memory) since the last call, and clears that. A controller answers
 * true with a resync: every cached object enqueued again.
 */
KOP_API bool kop_workqueue_take_dropped(kop_workqueue *q);

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

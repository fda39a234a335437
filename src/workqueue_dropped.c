/*
 * workqueue_dropped.c - the work queue's keys refused at its cap (see
 * workqueue_internal.h), and how they come back.
 *
 * The number of records is capped at opts.max_keys (default 1,000,000;
 * client-go has no cap): beyond it, adds of new keys are dropped and
 * counted in kop_workqueue_dropped_total, so a flood of distinct keys
 * cannot take all memory. The dropped keys themselves are remembered in a
 * second, capped set (map plus FIFO list, opts.max_dropped, default 4,096)
 * and queued again, oldest drop first, each time a record is released and
 * makes room. A controller's resync (every cached object enqueued again)
 * cannot do that for an object deleted meanwhile: no longer cached, its
 * key would be lost and its cleanup never run. A key that finds that set
 * full too is forgotten and counted (kop_workqueue_take_forgotten), which
 * the controller polls and answers with a resync: past both caps only live
 * objects are made good.
 *
 * Invariants: a key is remembered once (the map), at the highest priority
 * it was dropped with; ndropped counts the FIFO list and never exceeds
 * max_dropped; a remembered entry leaves the map and the list together
 * (asserted).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kop_internal.h"
#include "workqueue_internal.h"

/* ---- remembering and readmitting, with q->lock held ------------------------- */

/*
 * remember keeps a dropped key to queue again once there is room (the
 * highest priority it was dropped with), or counts it as forgotten.
 */
static void remember(kop_workqueue *q, const char *key, int prio)
{
    struct kop__wq_dropped *d = kop__map_get(&q->dropped_keys, key);
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

/* kop__wq_count_dropped counts an add of key refused, raises the flag and remembers the key. */
void kop__wq_count_dropped(kop_workqueue *q, const char *key, int prio)
{
    kop_metric_inc(q->dropped, q->lv);
    q->dropped_since = true;
    remember(q, key, prio);
}

/*
 * kop__wq_readmit_dropped queues remembered dropped keys, oldest drop first, while
 * there is room for them. A key that cannot get a record (no memory) stays
 * first in line for the next release.
 */
void kop__wq_readmit_dropped(kop_workqueue *q)
{
    while (q->drop_head && !q->shutting_down) {
        struct kop__wq_dropped *d = q->drop_head;
        struct kop__wq_item *it = kop__wq_lookup(q, d->key);
        if (!it)
            return;
        q->drop_head = d->next;
        if (!q->drop_head)
            q->drop_tail = NULL;
        q->ndropped--;
        void *was = kop__map_remove(&q->dropped_keys, d->key);
        KOP_ASSERT(was == d);
        (void)was;
        kop__wq_add_locked(q, it, d->prio);
        free(d);
    }
    kop__map_shrink(&q->dropped_keys);
}

/* ---- the controller's polls ------------------------------------------------- */

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

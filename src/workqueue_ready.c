/*
 * workqueue_ready.c - the work queue's keys ready to hand out (see
 * workqueue_internal.h): marking a key dirty, the ready heap, the age list
 * and the starvation bound.
 *
 * The ready heap is a binary max-heap on (prio, then the lower seq), both
 * copied into its array (struct kop__wq_slot) so that sifting touches no
 * record: seq numbers each entry into the queued state, so one priority is
 * FIFO, and a raise (a higher prio, same seq) is a sift up. Its array is
 * reserved to hold every record (kop__wq_lookup grows it before a record
 * is made), so queueing never allocates and cannot fail, also at done.
 * The age list links the queued keys in seq order (doubly, for O(1)
 * removal): its head is the oldest queued key, which starvation_limit
 * hands out after that many keys in a row went ahead of it (bounded share:
 * low priorities get at least one handout in starvation_limit + 1 while
 * they wait, oldest first).
 *
 * Invariants, asserted: a key pushed is dirty, not processing and not yet
 * queued, and the heap has room for it; a key unqueued sits where its
 * ready_pos says. Adds, raises and gets are O(log n) in the keys queued.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kop_internal.h"
#include "workqueue_internal.h"

/* ---- the ready heap ------------------------------------------------------- */

/* before tells whether a goes out before b: the higher priority, then the older. */
static bool before(const struct kop__wq_slot *a, const struct kop__wq_slot *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->seq < b->seq);
}

static void ready_set(kop_workqueue *q, size_t pos, struct kop__wq_slot s)
{
    q->ready[pos] = s;
    s.it->ready_pos = pos;
}

static void ready_up(kop_workqueue *q, size_t pos)
{
    struct kop__wq_slot s = q->ready[pos];
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
    struct kop__wq_slot s = q->ready[pos];
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
static void ready_raise(kop_workqueue *q, struct kop__wq_item *it, int prio)
{
    q->ready[it->ready_pos].prio = prio;
    ready_up(q, it->ready_pos);
}

/* ---- queueing and handing out ---------------------------------------------- */

/* kop__wq_depth_add moves the workqueue_depth series of priority prio by delta. */
void kop__wq_depth_add(kop_workqueue *q, int prio, double delta)
{
    if (!q->depth)
        return;
    char p[16];
    snprintf(p, sizeof p, "%d", prio);
    const char *lv[] = {q->name, q->name, p, NULL};
    kop_metric_add(q->depth, lv, delta);
}

/*
 * kop__wq_push queues it: into the ready heap (room is reserved) and at the
 * young end of the age list.
 */
void kop__wq_push(kop_workqueue *q, struct kop__wq_item *it)
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
    struct kop__wq_slot s = {.seq = q->next_seq++, .prio = it->prio, .it = it};
    ready_set(q, q->nqueued++, s);
    ready_up(q, it->ready_pos);
    pthread_cond_signal(&q->ready_cond);
}

/* kop__wq_unqueue takes it out of the ready heap and the age list. */
void kop__wq_unqueue(kop_workqueue *q, struct kop__wq_item *it)
{
    KOP_ASSERT(it->queued && q->ready[it->ready_pos].it == it);
    size_t pos = it->ready_pos;
    struct kop__wq_slot last = q->ready[--q->nqueued];
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
 * kop__wq_next_out picks the key to hand out: the first in priority order, unless
 * starvation_limit keys in a row went out ahead of the oldest queued key;
 * then the oldest.
 */
struct kop__wq_item *kop__wq_next_out(kop_workqueue *q)
{
    struct kop__wq_item *it = q->ready[0].it;
    if (it != q->oldest && q->opts.starvation_limit >= 0 && q->skips >= q->opts.starvation_limit)
        it = q->oldest;
    if (it == q->oldest)
        q->skips = 0;
    else
        q->skips++;
    return it;
}

/*
 * kop__wq_add_locked marks it dirty at prio (or the higher priority it is held
 * back with) and queues it unless a worker holds it; a key dirty already is
 * only raised, never lowered.
 */
void kop__wq_add_locked(kop_workqueue *q, struct kop__wq_item *it, int prio)
{
    if (it->heap_pos != KOP__WQ_NOT_WAITING && it->wait_prio > prio)
        prio = it->wait_prio; /* one key, one item: its highest priority */
    if (it->dirty) { /* queued already, or will be at done */
        if (prio > it->prio) {
            kop__wq_depth_add(q, it->prio, -1);
            kop__wq_depth_add(q, prio, 1);
            it->prio = prio;
            if (it->queued)
                ready_raise(q, it, prio);
        }
        return;
    }
    it->dirty = true;
    it->prio = prio;
    if (!it->has_added) {
        it->added_ns = kop_mono_ns();
        it->has_added = true;
    }
    kop_metric_inc(q->adds, q->lv);
    kop__wq_depth_add(q, prio, 1);
    if (!it->processing)
        kop__wq_push(q, it);
}

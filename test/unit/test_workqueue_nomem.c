/*
 * test_workqueue_nomem.c - the work queue when allocations fail (torture.h):
 * for n = 1, 2, ... the n-th allocation of a scenario fails, until a run
 * sees no failure. Whatever fails, nothing crashes or leaks (the sanitizer
 * build runs this too), and no added key is lost silently: each is handed
 * out by kop_workqueue_get, or kop_workqueue_take_dropped says a drop
 * happened (the queue then queues the key again once there is room, or
 * counts it forgotten, which makes the controller enqueue everything again:
 * test_controller.c). kop_meta_dumps under the same is
 * test_meta_dumps_nomem.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kop/metrics.h"
#include "kop/workqueue.h"
#include "torture.h"

#define KEYS 12

/* run_queue runs the scenario once; returns false when setting up failed (no queue to test). */
static bool run_queue(kop_metrics *m, bool *all_seen, bool *dropped)
{
    kop_workqueue *q = NULL;
    char key[16];
    bool seen[KEYS] = {false};
    if (kop_workqueue_new(&(kop_workqueue_opts){.name = "torture", .metrics = m}, &q) != KOP_OK)
        return false;
    for (int i = 0; i < KEYS; i++) {
        snprintf(key, sizeof key, "ns/k%02d", i);
        kop_workqueue_add(q, key);
        if (i % 4 == 0)
            kop_workqueue_add(q, key); /* deduplicated */
    }
    /* One key re-added while a worker holds it: queued again at done. */
    char *held = NULL;
    if (kop_workqueue_get(q, &held) == KOP_OK) {
        kop_workqueue_add(q, held);
        kop_workqueue_forget(q, held);
        kop_workqueue_done(q, held);
        free(held);
    }
    kop_workqueue_shutdown(q); /* what is queued is still handed out, then KOP_ESHUTDOWN */
    char *got = NULL;
    kop_err err;
    while ((err = kop_workqueue_get(q, &got)) != KOP_ESHUTDOWN) {
        if (err == KOP_ENOMEM)
            continue; /* the queue is as it was: ask again, as the controller's workers do */
        assert_int_equal(err, KOP_OK);
        int i = -1;
        if (sscanf(got, "ns/k%d", &i) == 1 && i >= 0 && i < KEYS)
            seen[i] = true;
        kop_workqueue_done(q, got);
        free(got);
    }
    *all_seen = true;
    for (int i = 0; i < KEYS; i++)
        *all_seen = *all_seen && seen[i];
    *dropped = kop_workqueue_take_dropped(q);
    kop_workqueue_free(q);
    return true;
}

static void test_workqueue_torture(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    long runs = 0, failed_setups = 0, drops = 0;
    for (long n = 1; n < 10000; n++) {
        bool all_seen = false, dropped = false;
        torture_fail_at(n);
        bool ran = run_queue(m, &all_seen, &dropped);
        bool hit = torture_hit();
        torture_fail_at(0);
        runs++;
        if (!ran) {
            failed_setups++;
            continue;
        }
        if (!all_seen && !dropped)
            fail_msg("allocation %ld failed: a key was lost and no drop was told", n);
        drops += dropped;
        if (!hit)
            break; /* the scenario no longer reaches the n-th allocation: all covered */
    }
    printf("workqueue torture: %ld runs, %ld failed at set-up, %ld told of a drop\n", runs,
           failed_setups, drops);
    assert_true(runs > KEYS); /* the scenario allocates per key: each was failed once */
    kop_metrics_free(m);
}

int main(void)
{
    torture_json_alloc();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workqueue_torture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

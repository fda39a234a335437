/*
 * test_controller.c - a controller on a manager against a real apiserver
 * (the devcluster fixture): its periodic resync (sync_period_ms, as
 * controller-runtime's SyncPeriod) reconciles an object again although
 * nothing about it changed, which is also what makes good a key the work
 * queue dropped and could not even remember (the queue: test_workqueue.c).
 *
 * The priority queue against the same cluster: 300 objects listed at start
 * wait at KOP_PRIORITY_LOW while one worker takes them slowly; one of them
 * (the last listed, so the last in FIFO order) is changed meanwhile, and
 * the watch event raises it to KOP_PRIORITY_HIGH: its reconcile comes
 * before the listed backlog drains, as does an object created meanwhile.
 *
 * A dropped deletion (issue 27, item 6): with a key cap of one and the only
 * worker held, an object is created and deleted; both of its adds are
 * dropped. No resync can bring its key back (the cache no longer holds it),
 * so only the queue remembering dropped keys reconciles it once the worker
 * lets go. Failed before the fix: the deleted object was never reconciled.
 *
 * A watch's update predicate (issue 26): two watches of the same objects,
 * one passing label changes only; data changes reach only the other. A
 * third passes adds and deletes of marked objects only (object_predicate).
 *
 * A pass's requeue replaces its previous pass's (issue 30): a requeue-after
 * answered by a later pass that is done never fires; a sentinel due after
 * it shows that, in the timer heap's order.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "it_common.h"
#include "kop/kop.h"

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};

static it_env env;
static atomic_int reconciles;

static kop_err create_cm(const char *name)
{
    kop_status st;
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", name, "namespace", env.ns, "data",
                           "k", "v");
    kop_err err = kop_create_object(env.client,
                                    &(kop_write_req){.target = {&CONFIGMAPS, env.ns, NULL},
                                                     .object = cm}, NULL, &st);
    json_decref(cm);
    return err;
}

static kop_result count_reconcile(const kop_reconcile *req, void *user)
{
    (void)user;
    if (strcmp(req->name, "resynced") == 0)
        atomic_fetch_add(&reconciles, 1);
    return KOP_DONE;
}

static void *run_manager(void *arg)
{
    kop_status st;
    kop_err *err = malloc(sizeof *err);
    *err = kop_manager_run(arg, &st);
    return err;
}

/* stop_manager stops m, which thread t runs, checks that its run ended well, and frees it. */
static void stop_manager(kop_manager *m, pthread_t t)
{
    kop_manager_stop(m);
    kop_err *err = NULL;
    pthread_join(t, (void **)&err);
    assert_non_null(err);
    assert_int_equal(*err, KOP_OK);
    free(err);
    kop_manager_free(m);
}

/* wait_count waits up to 60 s for at least n reconciles; false when it never comes. */
static bool wait_count(int n)
{
    for (int i = 0; i < 600; i++) {
        if (atomic_load(&reconciles) >= n)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

/* new_manager makes a manager named name for the test's cluster, without a metrics server. */
static kop_manager *new_manager(const char *name)
{
    char kubeconfig[512];
    kop_manager *m = NULL;
    kop_status st;
    it_path(&env, "kubeconfig", kubeconfig, sizeof kubeconfig);
    kop_manager_opts mo = {.name = name, .kubeconfig = kubeconfig, .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    return m;
}

static void test_resync(void **state)
{
    (void)state;
    kop_controller *c = NULL;
    kop_status st;
    kop_manager *m = new_manager("resync-test");
    kop_controller_opts co = {.name = "resync",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .reconcile = count_reconcile,
                              .sync_period_ms = 300};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);

    json_t *cm =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", "resynced", "namespace", env.ns, "data", "k", "v");
    assert_int_equal(kop_create_object(env.client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, env.ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_decref(cm);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    /* The add, then resyncs of an object nobody touches. */
    assert_true(wait_count(1));
    assert_true(wait_count(4));
    stop_manager(m, t);
}

/* ---- priorities: watch events overtake the initial list ---------------- */

#define BACKLOG 300
#define CHANGED "backlog-299" /* the last listed */

static atomic_int backlog_done;   /* backlog objects reconciled, CHANGED excepted */
static atomic_int changed_at;     /* backlog_done when CHANGED was reconciled after its change */
static atomic_int fresh_at;       /* backlog_done when "fresh" was reconciled */
static atomic_bool changed_edit;  /* CHANGED has been edited */

static kop_result slow_reconcile(const kop_reconcile *req, void *user)
{
    (void)user;
    if (strcmp(req->name, CHANGED) == 0 && atomic_load(&changed_edit)) {
        json_t *obj = NULL;
        /* The pass that sees the change (the cache has it by the time the event queues it). */
        if (kop_informer_dup(req->cache, req->namespace, req->name, &obj) == KOP_OK &&
            json_object_get(json_object_get(obj, "data"), "changed") &&
            atomic_load(&changed_at) < 0)
            atomic_store(&changed_at, atomic_load(&backlog_done));
        json_decref(obj);
        return KOP_DONE;
    }
    if (strcmp(req->name, "fresh") == 0) {
        if (atomic_load(&fresh_at) < 0)
            atomic_store(&fresh_at, atomic_load(&backlog_done));
        return KOP_DONE;
    }
    if (strncmp(req->name, "backlog-", 8) == 0) {
        usleep(30 * 1000); /* 300 of them: 9 s of backlog for one worker */
        atomic_fetch_add(&backlog_done, 1);
    }
    return KOP_DONE;
}

static bool wait_atomic_at_least(atomic_int *v, int n, int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        if (atomic_load(v) >= n)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

static void test_events_overtake_initial_list(void **state)
{
    (void)state;
    char name[32];
    kop_controller *c = NULL;
    kop_status st;
    atomic_store(&backlog_done, 0);
    atomic_store(&changed_at, -1);
    atomic_store(&fresh_at, -1);
    atomic_store(&changed_edit, false);
    for (int i = 0; i < BACKLOG; i++) {
        snprintf(name, sizeof name, "backlog-%03d", i);
        assert_int_equal(create_cm(name), KOP_OK);
    }
    kop_manager *m = new_manager("prio-test");
    kop_controller_opts co = {.name = "prio",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .max_concurrent = 1,
                              .reconcile = slow_reconcile};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);

    /* The backlog is being worked through: change its last object, create another. */
    assert_true(wait_atomic_at_least(&backlog_done, 5, 60));
    atomic_store(&changed_edit, true);
    json_t *patch = json_pack("{s:{s:s}}", "data", "changed", "yes");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&CONFIGMAPS, env.ns, CHANGED},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = patch},
                                      NULL, &st),
                     KOP_OK);
    json_decref(patch);
    assert_int_equal(create_cm("fresh"), KOP_OK);
    int edited_at = atomic_load(&backlog_done);

    assert_true(wait_atomic_at_least(&changed_at, 0, 60));
    assert_true(wait_atomic_at_least(&fresh_at, 0, 60));
    fprintf(stderr,
            "edited after %d of %d backlog reconciles; the change was reconciled after %d, "
            "the new object after %d\n",
            edited_at, BACKLOG - 1, atomic_load(&changed_at), atomic_load(&fresh_at));
    /* FIFO would have put both behind all 299 others. The margin is wide
     * (each backlog pass takes 30 ms; the events arrive within a few). */
    assert_true(atomic_load(&changed_at) < BACKLOG / 2);
    assert_true(atomic_load(&fresh_at) < BACKLOG / 2);
    assert_true(atomic_load(&backlog_done) < BACKLOG - 1); /* the backlog had not drained */
    stop_manager(m, t);
}

/* ---- a dropped deletion is reconciled late, not lost --------------------- */

static atomic_bool gate_open;       /* the blocker's reconcile may return */
static atomic_bool blocker_held;    /* the worker is in the blocker's reconcile */
static atomic_bool victim_gone_seen; /* "victim" was reconciled while absent from the cache */

static kop_result gated_reconcile(const kop_reconcile *req, void *user)
{
    (void)user;
    if (strcmp(req->name, "blocker") == 0 && !atomic_load(&gate_open)) {
        atomic_store(&blocker_held, true);
        for (int i = 0; i < 1200 && !atomic_load(&gate_open); i++)
            usleep(50 * 1000);
    }
    if (strcmp(req->name, "victim") == 0) {
        json_t *obj = NULL;
        if (kop_informer_dup(req->cache, req->namespace, req->name, &obj) == KOP_ENOTFOUND)
            atomic_store(&victim_gone_seen, true); /* where an operator cleans up after it */
        json_decref(obj);
    }
    return KOP_DONE;
}

/* wait_cached waits up to 60 s until the cache holds name (want true) or not. */
static bool wait_cached(kop_informer *inf, const char *name, bool want)
{
    for (int i = 0; i < 600; i++) {
        json_t *obj = NULL;
        bool has = kop_informer_dup(inf, env.ns, name, &obj) == KOP_OK;
        json_decref(obj);
        if (has == want)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

/* dropped_count reads kop_workqueue_dropped_total of the "drops" controller (-1: absent). */
static double dropped_count(kop_manager *m)
{
    char *text = NULL;
    if (kop_metrics_render(kop_manager_metrics(m), &text, NULL) != KOP_OK)
        return -1;
    const char *line =
        strstr(text, "kop_workqueue_dropped_total{name=\"drops\",controller=\"drops\"} ");
    double n = line ? atof(strchr(line, '}') + 2) : -1;
    free(text);
    return n;
}

/* wait_dropped waits up to 60 s until at least want adds were dropped. */
static bool wait_dropped(kop_manager *m, double want)
{
    for (int i = 0; i < 600; i++) {
        if (dropped_count(m) >= want)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

static void test_dropped_deletion_reconciled(void **state)
{
    (void)state;
    kop_controller *c = NULL;
    kop_status st;
    atomic_store(&gate_open, false);
    atomic_store(&blocker_held, false);
    atomic_store(&victim_gone_seen, false);
    kop_manager *m = new_manager("drop-test");
    kop_controller_opts co = {.name = "drops",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .max_concurrent = 1,
                              .max_queued_keys = 1,
                              .reconcile = gated_reconcile};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    kop_informer *cache = kop_controller_cache(c);
    assert_true(kop_informer_wait_synced(cache, 60000));

    /* The only worker holds the only key. */
    assert_int_equal(create_cm("blocker"), KOP_OK);
    for (int i = 0; i < 600 && !atomic_load(&blocker_held); i++)
        usleep(100 * 1000);
    assert_true(atomic_load(&blocker_held));

    /* Created and deleted while the queue is full: both adds dropped. */
    assert_int_equal(create_cm("victim"), KOP_OK);
    assert_true(wait_cached(cache, "victim", true));
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&CONFIGMAPS, env.ns, "victim"}},
                                       NULL, &st),
                     KOP_OK);
    assert_true(wait_cached(cache, "victim", false));
    /* The cache changes before the handlers run: wait for the second drop. */
    assert_true(wait_dropped(m, 2)); /* both drops really happened */

    /* Let go: the deleted object's key must still be reconciled. */
    atomic_store(&gate_open, true);
    for (int i = 0; i < 300 && !atomic_load(&victim_gone_seen); i++)
        usleep(100 * 1000);
    assert_true(atomic_load(&victim_gone_seen));

    stop_manager(m, t);
}

/* ---- a watch's update predicate ------------------------------------------ */

static atomic_int filtered_maps; /* calls of the watch with kop_predicate_labels_changed */
static atomic_int all_maps;      /* calls of the watch without a predicate */
static atomic_int marked_maps;   /* calls of the watch with only_marked */

/* only_marked: adds and deletes of ConfigMaps labelled mark=yes pass. */
static bool only_marked(const json_t *obj, void *user)
{
    (void)user;
    return kop_streq(kop_meta_label(obj, "mark"), "yes");
}

static void map_marked(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    (void)user;
    atomic_fetch_add(&marked_maps, 1);
    emit(kop_meta_namespace(obj), "parent", ctx);
}

static void map_filtered(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    (void)user;
    atomic_fetch_add(&filtered_maps, 1);
    emit(kop_meta_namespace(obj), "parent", ctx);
}

static void map_all(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    (void)user;
    atomic_fetch_add(&all_maps, 1);
    emit(kop_meta_namespace(obj), "parent", ctx);
}

static kop_result noop_reconcile(const kop_reconcile *req, void *user)
{
    (void)req;
    (void)user;
    return KOP_DONE;
}

/* patch_cm merge-patches the watched ConfigMap. */
static void patch_cm(const char *patch_text)
{
    kop_status st;
    json_t *patch = json_loads(patch_text, 0, NULL);
    assert_non_null(patch);
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&CONFIGMAPS, env.ns, "watched"},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = patch},
                                      NULL, &st),
                     KOP_OK);
    json_decref(patch);
}

/*
 * Two watches of the same ConfigMaps, one with kop_predicate_labels_changed:
 * a data change reaches only the other (which proves it was delivered: the
 * handlers run in the order they were added, the filtered one first), a
 * label change reaches both, and the add reaches both.
 */
static void test_watch_predicate(void **state)
{
    (void)state;
    kop_controller *c = NULL;
    kop_status st;
    kop_manager *m = new_manager("pred-test");
    kop_controller_opts co = {.name = "pred",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .reconcile = noop_reconcile};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);
    kop_controller_watch_opts filtered = {.resource = &CONFIGMAPS,
                                          .label_selector = "watched=yes",
                                          .fn = map_filtered,
                                          .map_reads_metadata = true,
                                          .update_predicate = kop_predicate_labels_changed};
    kop_controller_watch_opts marked = {.resource = &CONFIGMAPS,
                                        .label_selector = "watched=yes",
                                        .fn = map_marked,
                                        .map_reads_metadata = true,
                                        .update_predicate = kop_predicate_labels_changed,
                                        .object_predicate = only_marked};
    kop_controller_watch_opts all = {
        .resource = &CONFIGMAPS, .label_selector = "watched=yes", .fn = map_all};
    /* The handlers of one informer run in the order added: "all" last, so that when it has
     * seen an event, the other two have had it too. */
    assert_int_equal(kop_controller_watch(c, &filtered), KOP_OK);
    assert_int_equal(kop_controller_watch(c, &marked), KOP_OK);
    assert_int_equal(kop_controller_watch(c, &all), KOP_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    assert_true(kop_informer_wait_synced(kop_controller_cache(c), 60000));

    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1",
                           "kind", "ConfigMap", "metadata", "name", "watched", "namespace",
                           env.ns, "labels", "watched", "yes", "data", "k", "0");
    assert_int_equal(kop_create_object(env.client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, env.ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_decref(cm);
    assert_true(wait_atomic_at_least(&all_maps, 1, 60));
    assert_int_equal(atomic_load(&filtered_maps), 1); /* adds pass an update predicate */
    assert_int_equal(atomic_load(&marked_maps), 0);   /* not marked: refused */

    /* Data changes: seen by the watch without a predicate only. A watch with a map function
     * maps an update's old and new object each: two calls per update. */
    patch_cm("{\"data\":{\"k\":\"1\"}}");
    patch_cm("{\"data\":{\"k\":\"2\"}}");
    patch_cm("{\"data\":{\"k\":\"3\"}}");
    assert_true(wait_atomic_at_least(&all_maps, 1 + 3 * 2, 60));
    assert_int_equal(atomic_load(&filtered_maps), 1);

    /* A label change passes the predicate: both watches map it (the old and the new
     * object each: a child whose labels changed tells both parents). */
    patch_cm("{\"metadata\":{\"labels\":{\"x\":\"1\"}}}");
    assert_true(wait_atomic_at_least(&filtered_maps, 1 + 2, 60));
    /* "all" runs last: once it has both calls of the label change, so has "marked". */
    assert_true(wait_atomic_at_least(&all_maps, 1 + 4 * 2, 60));
    int marked_before = atomic_load(&marked_maps);
    assert_int_equal(marked_before, 2); /* an update: the object predicate is not asked */

    /* Deleted unmarked: refused; a marked one's add and delete pass. */
    int all_before = atomic_load(&all_maps);
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&CONFIGMAPS, env.ns,
                                                                    "watched"}},
                                       NULL, &st),
                     KOP_OK);
    assert_true(wait_atomic_at_least(&all_maps, all_before + 1, 60));
    assert_int_equal(atomic_load(&marked_maps), marked_before);
    cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}}", "apiVersion", "v1", "kind",
                   "ConfigMap", "metadata", "name", "marked", "namespace", env.ns, "labels",
                   "watched", "yes", "mark", "yes");
    assert_int_equal(kop_create_object(env.client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, env.ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_decref(cm);
    assert_true(wait_atomic_at_least(&all_maps, all_before + 2, 60));
    assert_int_equal(atomic_load(&marked_maps), marked_before + 1);
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&CONFIGMAPS, env.ns,
                                                                    "marked"}},
                                       NULL, &st),
                     KOP_OK);
    assert_true(wait_atomic_at_least(&all_maps, all_before + 3, 60));
    assert_int_equal(atomic_load(&marked_maps), marked_before + 2);

    stop_manager(m, t);
}

/* ---- a pass's requeue replaces its previous pass's -------------------------- */

#define FIRST_REQUEUE_MS 5000 /* long enough for the edit's pass to come before it */

static atomic_int waiting_passes; /* passes of "first" before its edit (each requeued) */
static atomic_int done_passes;    /* passes of "first" that saw its edit (and were done) */
static atomic_int sentinel_passes; /* passes of "sentinel" */

/*
 * requeue_reconcile: "first" asks to come back in FIRST_REQUEUE_MS until it
 * is edited (data k = "edited"), then is done; "sentinel" asks once for
 * the same delay, from after first's done pass.
 */
static kop_result requeue_reconcile(const kop_reconcile *req, void *user)
{
    json_t *cm = NULL;
    (void)user;
    if (strcmp(req->name, "sentinel") == 0)
        return atomic_fetch_add(&sentinel_passes, 1) == 0 ? KOP_REQUEUE_AFTER(FIRST_REQUEUE_MS)
                                                          : KOP_DONE;
    if (strcmp(req->name, "first") != 0 || kop_informer_dup(req->cache, req->namespace,
                                                            req->name, &cm) != KOP_OK)
        return KOP_DONE;
    bool edited = kop_streq(json_string_value(json_object_get(json_object_get(cm, "data"), "k")),
                            "edited");
    json_decref(cm);
    if (!edited) {
        atomic_fetch_add(&waiting_passes, 1);
        return KOP_REQUEUE_AFTER(FIRST_REQUEUE_MS);
    }
    atomic_fetch_add(&done_passes, 1);
    return KOP_DONE;
}

static void test_requeue_replaced(void **state)
{
    (void)state;
    kop_controller *c = NULL;
    kop_status st;
    kop_manager *m = new_manager("requeue-test");
    kop_controller_opts co = {.name = "requeue",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .reconcile = requeue_reconcile,
                              .max_concurrent = 1};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    assert_true(kop_informer_wait_synced(kop_controller_cache(c), 60000));

    assert_int_equal(create_cm("first"), KOP_OK);
    assert_true(wait_atomic_at_least(&waiting_passes, 1, 60)); /* its pass: again in 5 s */
    json_t *patch = json_pack("{s:{s:s}}", "data", "k", "edited");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&CONFIGMAPS, env.ns, "first"},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = patch},
                                      NULL, &st),
                     KOP_OK);
    json_decref(patch);
    assert_true(wait_atomic_at_least(&done_passes, 1, 60)); /* done: the 5 s requeue is void */
    /* The sentinel's requeue is due after first's would have been: one worker, one timer
     * heap, so a pass of first from it would come before the sentinel's second. */
    assert_int_equal(create_cm("sentinel"), KOP_OK);
    assert_true(wait_atomic_at_least(&sentinel_passes, 2, 60));
    assert_int_equal(atomic_load(&done_passes), 1);
    stop_manager(m, t);
}

static int setup(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl");
}

static int setup_prio(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl-prio");
}

static int setup_pred(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl-pred");
}

static int setup_requeue(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl-requeue");
}

static int setup_drop(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl-drop");
}

static int teardown(void **state)
{
    (void)state;
    it_teardown(&env);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_overtake_initial_list, setup_prio, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_deletion_reconciled, setup_drop, teardown),
        cmocka_unit_test_setup_teardown(test_watch_predicate, setup_pred, teardown),
        cmocka_unit_test_setup_teardown(test_requeue_replaced, setup_requeue, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

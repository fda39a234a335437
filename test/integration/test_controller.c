/*
 * test_controller.c - a controller on a manager against a real apiserver
 * (the devcluster fixture): its periodic resync (sync_period_ms, as
 * controller-runtime's SyncPeriod) reconciles an object again although
 * nothing about it changed, which is what makes an add the work queue had
 * to drop late rather than lost (the drop itself: test_workqueue.c).
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

static void test_resync(void **state)
{
    (void)state;
    char kubeconfig[512];
    kop_manager *m = NULL;
    kop_controller *c = NULL;
    kop_status st;
    it_path(&env, "kubeconfig", kubeconfig, sizeof kubeconfig);
    kop_manager_opts mo = {.name = "resync-test", .kubeconfig = kubeconfig, .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    kop_controller_opts co = {.name = "resync",
                              .for_resource = CONFIGMAPS,
                              .namespace = env.ns,
                              .reconcile = count_reconcile,
                              .sync_period_ms = 300};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);

    json_t *cm =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", "resynced", "namespace", env.ns, "data", "k", "v");
    assert_int_equal(kop_create(env.client, &CONFIGMAPS, env.ns, cm, NULL, NULL, &st), KOP_OK);
    json_decref(cm);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    /* The add, then resyncs of an object nobody touches. */
    assert_true(wait_count(1));
    assert_true(wait_count(4));
    kop_manager_stop(m);
    kop_err *err = NULL;
    pthread_join(t, (void **)&err);
    assert_int_equal(*err, KOP_OK);
    free(err);
    kop_manager_free(m);
}

static int setup(void **state)
{
    (void)state;
    return it_setup(&env, "kopc-ctl");
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
        cmocka_unit_test(test_resync),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

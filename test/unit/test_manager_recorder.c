/*
 * test_manager_recorder.c - kop_manager_recorder (kop/manager.h): the event
 * recorder the manager owns, on a real manager whose client points at
 * 127.0.0.1:1, where nothing listens (no apiserver: what an Event write
 * does there is a failed connection, counted by the recorder).
 *
 * The recorder is observed from outside through its sender thread: each
 * recorder starts exactly one (kop/events.h), and a manager starts none
 * before kop_manager_run, so the process's thread count
 * (/proc/self/task) tells how many recorders live.
 *
 * Asserted: no m or no out is KOP_EINVAL and makes nothing; the first ask
 * makes one recorder (not NULL, one sender thread more) and the next ones
 * hand back the same pointer with no thread more; eight threads asking
 * first at the same moment get one and the same recorder; events recorded
 * through it are queued and sent with the manager's configuration (to
 * 127.0.0.1:1, so counted as failed); kop_manager_free frees it, events
 * still queued or not: its sender thread is gone afterwards, and the
 * sanitizer build's leak check (build/asan) finds nothing the test did
 * not free, the test freeing no recorder itself.
 * Not checkable without an apiserver, and left to the integration test
 * (test/integration/test_ctrlutil.c): the Events written, and the manager's
 * name as their reporting component.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kop/kop.h"

static const char KUBECONFIG_NOWHERE[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: k, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n";

#define ASKERS 8 /* threads asking for the recorder at once */

static char kubeconfig[64];

static kop_manager *manager(void)
{
    kop_manager *m = NULL;
    kop_status st;
    kop_manager_opts mo = {.name = "unit-recorder", .kubeconfig = kubeconfig,
                           .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    assert_non_null(m);
    return m;
}

/* threads counts the threads of this process (-1 if /proc cannot say). */
static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n;
}

static void test_arguments(void **state)
{
    (void)state;
    int before = threads();
    kop_manager *m = manager();
    kop_recorder *rec = NULL;
    assert_int_equal(kop_manager_recorder(NULL, &rec), KOP_EINVAL);
    assert_null(rec);
    assert_int_equal(kop_manager_recorder(m, NULL), KOP_EINVAL);
    /* Neither call made a recorder: no sender thread started. */
    assert_int_equal(threads(), before);
    kop_manager_free(m);
    assert_int_equal(threads(), before);
}

static void test_made_once_and_freed_with_the_manager(void **state)
{
    (void)state;
    int before = threads();
    assert_true(before > 0);
    kop_manager *m = manager();
    /* Made on first ask, not with the manager. */
    assert_int_equal(threads(), before);

    kop_recorder *r1 = NULL, *r2 = NULL;
    assert_int_equal(kop_manager_recorder(m, &r1), KOP_OK);
    assert_non_null(r1);
    assert_int_equal(threads(), before + 1); /* one recorder, one sender */
    assert_int_equal(kop_manager_recorder(m, &r2), KOP_OK);
    assert_ptr_equal(r1, r2);
    assert_int_equal(threads(), before + 1); /* no second recorder */

    /* The manager owns it: freeing the manager stops and frees the
     * recorder (the leak check of build/asan sees the rest). */
    kop_manager_free(m);
    assert_int_equal(threads(), before);
}

struct asker {
    kop_manager *m;
    pthread_barrier_t *start;
    kop_recorder *rec;
    kop_err err;
};

static void *ask(void *arg)
{
    struct asker *a = arg;
    pthread_barrier_wait(a->start);
    a->err = kop_manager_recorder(a->m, &a->rec);
    return NULL;
}

static void test_first_asks_at_once(void **state)
{
    (void)state;
    int before = threads();
    kop_manager *m = manager();
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, ASKERS), 0);
    struct asker askers[ASKERS];
    pthread_t t[ASKERS];
    for (int i = 0; i < ASKERS; i++) {
        askers[i] = (struct asker){.m = m, .start = &start, .err = KOP_EINVAL};
        assert_int_equal(pthread_create(&t[i], NULL, ask, &askers[i]), 0);
    }
    for (int i = 0; i < ASKERS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    pthread_barrier_destroy(&start);

    /* One recorder for all: the same pointer, one sender thread. */
    for (int i = 0; i < ASKERS; i++) {
        assert_int_equal(askers[i].err, KOP_OK);
        assert_non_null(askers[i].rec);
        assert_ptr_equal(askers[i].rec, askers[0].rec);
    }
    assert_int_equal(threads(), before + 1);
    kop_manager_free(m);
    assert_int_equal(threads(), before);
}

static json_t *website(const char *name)
{
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "apiVersion", "demo.example.com/v1",
                            "kind", "Website", "metadata", "name", name, "namespace", "default",
                            "uid", "0b6f2f44-2d3e-4b7e-9d4c-5a8f6a1e2c3d");
    assert_non_null(obj);
    return obj;
}

static void test_events_sent_then_freed_with_the_manager(void **state)
{
    (void)state;
    int before = threads();
    kop_manager *m = manager();
    kop_recorder *rec = NULL;
    assert_int_equal(kop_manager_recorder(m, &rec), KOP_OK);

    /* An event is queued and sent through the manager's configuration:
     * to 127.0.0.1:1, so the write fails and is counted, not returned. */
    json_t *site = website("site-a");
    kop_event(rec, &(kop_event_req){.object = site, .reason = "PageWritten", .action = "Write"},
              "page %s written", "site-a-page");
    assert_int_equal(kop_recorder_flush(rec, 10000), KOP_OK);
    kop_recorder_stats stats;
    kop_recorder_read_stats(rec, &stats);
    assert_int_equal(stats.recorded, 1);
    assert_int_equal(stats.invalid, 0);
    assert_int_equal(stats.created, 0);
    assert_int_equal(stats.failed, 1);

    /* Events still queued when the manager goes: kop_manager_free drains
     * and frees the recorder with them (nothing left to the caller). */
    for (int i = 0; i < 5; i++) {
        kop_event(rec, &(kop_event_req){.object = site, .type = KOP_EVENT_WARNING,
                                        .reason = "PageFailed"},
                  "attempt %d", i);
    }
    json_decref(site);
    kop_manager_free(m);
    assert_int_equal(threads(), before);
}

int main(void)
{
    snprintf(kubeconfig, sizeof kubeconfig, "/tmp/kop-unit-recorder-%d.yaml", (int)getpid());
    FILE *kc = fopen(kubeconfig, "w");
    if (!kc || fputs(KUBECONFIG_NOWHERE, kc) < 0 || fclose(kc) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_made_once_and_freed_with_the_manager),
        cmocka_unit_test(test_first_asks_at_once),
        cmocka_unit_test(test_events_sent_then_freed_with_the_manager),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(kubeconfig);
    return failed;
}

/*
 * test_informer_resume.c - an informer resumes its watch from the last
 * event it applied: no event whose application failed is lost. Its every
 * allocation may fail (unit/torture.h) while the objects it watches
 * change, against a real apiserver (the devcluster fixture).
 *
 * The test's own thread is exempt, so its writes all land. The informer's
 * allocations fail (at 30% each) while it applies an event to its cache:
 * from its transform, where applying starts, to its handler, where it ends
 * (torture_window). An event that could not be applied must come again:
 * the informer resumes its watch from the
 * last event it applied, not the last it read (issue 17, defect 6). Each
 * object changes once while failures happen, so that change is its last
 * event: one lost would leave the cache stale for good. Once the failures
 * stop, the cache must equal the server's writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "it_common.h"
#include "kop/kop.h"
#include "torture.h"

#define OBJECTS 120

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static it_env env;

static void write_cm(int i, int round)
{
    char name[32], value[32];
    kop_status st;
    snprintf(name, sizeof name, "t-%02d", i);
    snprintf(value, sizeof value, "%d", round);
    json_t *cm =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", name, "namespace", env.ns, "data", "round", value);
    kop_patch_req req = {.target = {&CONFIGMAPS, env.ns, name},
                         .type = KOP_PATCH_APPLY,
                         .patch = cm,
                         .opts = {.field_manager = "torture", .force = true}};
    assert_int_equal(kop_patch_object(env.client, &req, NULL, &st), KOP_OK);
    json_decref(cm);
}

/* cache_matches: every object's cached round is the last written. */
static bool cache_matches(kop_informer *inf, int round)
{
    char name[32], want[32];
    snprintf(want, sizeof want, "%d", round);
    for (int i = 0; i < OBJECTS; i++) {
        json_t *obj = NULL;
        snprintf(name, sizeof name, "t-%02d", i);
        if (kop_informer_dup(inf, env.ns, name, &obj) != KOP_OK)
            return false;
        const char *got = json_string_value(json_object_get(json_object_get(obj, "data"), "round"));
        bool same = got && strcmp(got, want) == 0;
        json_decref(obj);
        if (!same)
            return false;
    }
    return true;
}

/* transform opens the failure window: applying the event starts here. */
static json_t *transform(json_t *obj, void *user)
{
    (void)user;
    json_object_del(json_object_get(obj, "metadata"), "managedFields");
    torture_window(true);
    return obj;
}

/* applied closes it: the event is in the cache. */
static void applied(const json_t *obj, void *user)
{
    (void)obj;
    (void)user;
    torture_window(false);
}

static void applied_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    applied(new_obj, user);
}

static void test_events_survive_failed_applies(void **state)
{
    (void)state;
    kop_informer *inf = NULL;
    for (int i = 0; i < OBJECTS; i++)
        write_cm(i, 0);
    kop_informer_opts o = {.resource = CONFIGMAPS, .namespace = env.ns, .transform = transform};
    kop_informer_handler h = {applied, applied_update, applied, NULL, KOP_OLD_FULL};
    assert_int_equal(kop_informer_new(env.client, &o, &inf), KOP_OK);
    assert_int_equal(kop_informer_add_handler(inf, &h), KOP_OK);
    assert_int_equal(kop_informer_start(inf), KOP_OK);
    assert_true(kop_informer_wait_synced(inf, 60000));

    torture_fail_window(300); /* applying an event: each allocation fails at 30% */
    for (int i = 0; i < OBJECTS; i++)
        write_cm(i, 1);
    /* The failures are the scenario: let them go on while the events come in, then end them. */
    sleep(5);
    bool hit = torture_hit();
    torture_fail_window(0);
    assert_true(hit);

    bool same = false;
    for (int t = 0; t < 1200 && !same; t++) { /* up to 120 s: the watch's backoff */
        same = cache_matches(inf, 1);
        if (!same)
            usleep(100 * 1000);
    }
    kop_informer_stats stats;
    kop_informer_read_stats(inf, &stats);
    long calls = 0, failures = 0;
    torture_counts(&calls, &failures);
    printf("informer torture: %lu watches, %lu errors, %lu events, %lu lists; %ld allocations, "
           "%ld failed\n",
           stats.watches, stats.errors, stats.events, stats.lists, calls, failures);
    assert_true(same);
    assert_true(stats.errors > 0); /* the failures really reached the informer */
    kop_informer_stop(inf);
    kop_informer_free(inf);
}

static int setup(void **state)
{
    (void)state;
    torture_exempt_thread();
    torture_json_alloc();
    return it_setup(&env, "kopc-tort");
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
        cmocka_unit_test(test_events_survive_failed_applies),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

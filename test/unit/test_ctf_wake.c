/*
 * test_ctf_wake.c - which updates of an instance's children wake its
 * Challenge (operators/ctf/core/wake.c): a pod's container that cannot
 * start, a slice gaining or losing its ready endpoint, a Deployment's
 * generation, annotations, replicas, a rollout beginning or ending, its
 * availability, and any child's labels do; a pod bound to its node,
 * started or deleted, an address not yet ready, a rollout's counts moving
 * along, a condition's timestamp do not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/json.h"
#include "core/update.h"
#include "core/wake.h"

static json_t *pod(const char *node, const char *reason)
{
    json_t *p = json_pack("{s:{s:s, s:{s:s}}, s:{}, s:{s:[{s:s, s:{}}]}}", "metadata", "name", "p",
                          "labels", "app", "x", "spec", "status", "containerStatuses", "name",
                          "main", "state");
    if (node)
        json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    json_t *state = json_object_get(json_array_get(json_object_get(json_object_get(p, "status"),
                                                                   "containerStatuses"), 0),
                                    "state");
    if (reason)
        json_object_set_new(state, "waiting", json_pack("{s:s}", "reason", reason));
    else
        json_object_set_new(state, "running", json_object());
    return p;
}

static void test_pod(void **state)
{
    (void)state;
    json_t *a = pod(NULL, "ContainerCreating"), *bound = pod("node-1", "ContainerCreating");
    json_t *pulling = pod("node-1", "ImagePullBackOff"), *running = pod("node-1", NULL);
    json_t *crashing = pod("node-1", "CrashLoopBackOff"), *erred = pod("node-1", "ErrImagePull");
    assert_false(ctf_wake_pod(a, bound, NULL)); /* bound to its node: nothing a pass reads */
    assert_false(ctf_pod_failing(a));           /* created, not failing */
    assert_false(ctf_wake_pod(bound, running, NULL)); /* started: its Deployment tells */
    assert_true(ctf_wake_pod(bound, pulling, NULL));
    assert_true(ctf_pod_failing(pulling));
    assert_true(ctf_wake_pod(pulling, running, NULL));
    assert_true(ctf_wake_pod(pulling, crashing, NULL));
    assert_false(ctf_wake_pod(pulling, pulling, NULL));
    assert_false(ctf_wake_pod(erred, pulling, NULL)); /* the same failure, another reason */
    assert_false(ctf_wake_pod(running, running, NULL));
    assert_false(ctf_pod_failing(running));
    json_t *relabelled = json_deep_copy(running), *going = json_deep_copy(running);
    json_object_set_new(json_object_get(json_object_get(relabelled, "metadata"), "labels"), "app",
                        json_string("y"));
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp",
                        json_string("2026-11-27T18:00:00Z"));
    assert_true(ctf_wake_pod(running, relabelled, NULL));
    assert_false(ctf_wake_pod(running, going, NULL)); /* its delete wakes, if it failed */
    json_t *none = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "p", "labels", "app",
                             "x"); /* no status yet */
    assert_false(ctf_wake_pod(none, a, NULL));
    assert_true(ctf_wake_pod(none, pulling, NULL));
    assert_false(ctf_wake_pod(none, none, NULL));
    /* Added or deleted: only a pod that cannot start wakes its Challenge. */
    assert_false(ctf_wake_pod_object(none, NULL));
    assert_false(ctf_wake_pod_object(running, NULL));
    assert_true(ctf_wake_pod_object(crashing, NULL));
    assert_string_equal(ctf_failure_reason("InvalidImageName"), "ImagePullFailed");
    assert_string_equal(ctf_failure_reason("CrashLoopBackOff"), "CrashLoop");
    assert_null(ctf_failure_reason("ContainerCreating"));
    assert_null(ctf_failure_reason(NULL));
    json_decref(a);
    json_decref(bound);
    json_decref(pulling);
    json_decref(running);
    json_decref(crashing);
    json_decref(erred);
    json_decref(relabelled);
    json_decref(going);
    json_decref(none);
}

static void test_slice(void **state)
{
    (void)state;
    json_t *empty = json_pack("{s:{s:s}, s:[]}", "metadata", "name", "s", "endpoints");
    json_t *unready = json_pack("{s:{s:s}, s:[{s:[s], s:{s:b}}]}", "metadata", "name", "s",
                                "endpoints", "addresses", "10.0.0.1", "conditions", "ready", 0);
    json_t *ready = json_pack("{s:{s:s}, s:[{s:[s], s:{s:b}}]}", "metadata", "name", "s",
                              "endpoints", "addresses", "10.0.0.1", "conditions", "ready", 1);
    json_t *implicit = json_pack("{s:{s:s}, s:[{s:[s]}]}", "metadata", "name", "s", "endpoints",
                                 "addresses", "10.0.0.2");
    assert_false(ctf_slice_ready(empty));
    assert_false(ctf_slice_ready(unready));
    assert_true(ctf_slice_ready(ready));
    assert_true(ctf_slice_ready(implicit)); /* an absent condition is ready */
    assert_false(ctf_wake_slice(empty, unready, NULL)); /* an address, not ready yet */
    assert_true(ctf_wake_slice(unready, ready, NULL));
    assert_false(ctf_wake_slice(ready, implicit, NULL)); /* still a ready endpoint */
    assert_true(ctf_wake_slice(ready, empty, NULL));
    json_decref(empty);
    json_decref(unready);
    json_decref(ready);
    json_decref(implicit);
}

static json_t *deployment(int gen, const char *version, int want, int available)
{
    return json_pack("{s:{s:s, s:i, s:{s:s}}, s:{s:i}, s:{s:i, s:i, s:i, s:i, s:[{s:s}]}}",
                     "metadata", "name", "d", "generation", gen, "annotations",
                     "ctf.kopc.io/version", version, "spec", "replicas", want, "status",
                     "observedGeneration", gen, "replicas", want, "updatedReplicas", want,
                     "availableReplicas", available, "conditions", "lastUpdateTime",
                     "2026-11-27T18:00:00Z");
}

static void test_deployment(void **state)
{
    (void)state;
    json_t *d = deployment(1, "v1", 1, 1), *same = deployment(1, "v1", 1, 1);
    json_object_set_new(json_array_get(json_object_get(json_object_get(same, "status"),
                                                       "conditions"), 0),
                        "lastUpdateTime", json_string("2026-11-27T18:00:05Z"));
    assert_false(ctf_wake_deployment(d, same, NULL)); /* a condition's timestamp */
    json_t *edited = deployment(2, "v1", 1, 1), *versioned = deployment(1, "v2", 1, 1);
    json_t *scaled = deployment(1, "v1", 2, 1), *down = deployment(1, "v1", 1, 0);
    assert_true(ctf_wake_deployment(d, edited, NULL));
    assert_true(ctf_wake_deployment(d, versioned, NULL));
    assert_true(ctf_wake_deployment(d, scaled, NULL));
    assert_true(ctf_wake_deployment(d, down, NULL));
    assert_false(ctf_update_deployment_short(d));
    assert_true(ctf_update_deployment_short(down));
    json_t *unsized = json_pack("{s:{}, s:{s:i}}", "spec", "status", "availableReplicas", 0);
    assert_true(ctf_update_deployment_short(unsized)); /* spec.replicas absent: 1 wanted */
    json_decref(unsized);
    /* down: the same rule, whatever the Available condition says, and since when. */
    time_t since = 1;
    json_t *four = deployment(1, "v1", 4, 3);
    json_object_set_new(json_array_get(ctf_get2(four, "status", "conditions"), 0), "type",
                        json_string("Available"));
    json_object_set_new(json_array_get(ctf_get2(four, "status", "conditions"), 0), "status",
                        json_string("True"));
    json_object_set_new(json_array_get(ctf_get2(four, "status", "conditions"), 0),
                        "lastTransitionTime", json_string("2026-11-27T18:00:00Z"));
    assert_true(ctf_update_deployment_down(four, &since)); /* 3 of 4, still Available */
    assert_int_equal(since, 0);
    json_object_set_new(json_array_get(ctf_get2(four, "status", "conditions"), 0), "status",
                        json_string("False"));
    assert_true(ctf_update_deployment_down(four, &since));
    assert_int_equal(since, 1795802400); /* 2026-11-27T18:00:00Z */
    json_object_set_new(json_object_get(four, "status"), "availableReplicas", json_integer(4));
    assert_false(ctf_update_deployment_down(four, &since));
    assert_int_equal(since, 0);
    json_decref(four);
    json_t *rolled = deployment(1, "v1", 1, 1);
    json_object_set_new(json_object_get(rolled, "status"), "updatedReplicas", json_integer(0));
    assert_true(ctf_wake_deployment(d, rolled, NULL)); /* a rollout begins */
    /* Its counts moving along in the middle of a rollout wake nothing: the old pod and the
     * new one both there, then the new one updated but the old one not yet gone. */
    json_t *surged = json_deep_copy(rolled), *updated = json_deep_copy(rolled);
    json_object_set_new(json_object_get(surged, "status"), "replicas", json_integer(2));
    json_object_set_new(json_object_get(updated, "status"), "replicas", json_integer(2));
    json_object_set_new(json_object_get(updated, "status"), "updatedReplicas", json_integer(1));
    json_object_set_new(json_object_get(updated, "status"), "availableReplicas", json_integer(2));
    assert_false(ctf_wake_deployment(rolled, surged, NULL));
    assert_false(ctf_wake_deployment(surged, updated, NULL));
    assert_true(ctf_wake_deployment(updated, d, NULL)); /* over: the old pod gone */
    json_t *observed = deployment(2, "v1", 1, 1); /* generation 2 observed at once */
    json_object_set_new(json_object_get(observed, "status"), "observedGeneration",
                        json_integer(1));
    assert_true(ctf_wake_deployment(d, observed, NULL)); /* edited: a new generation */
    json_decref(surged);
    json_decref(updated);
    json_decref(observed);
    json_decref(d);
    json_decref(same);
    json_decref(edited);
    json_decref(versioned);
    json_decref(scaled);
    json_decref(down);
    json_decref(rolled);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_deployment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

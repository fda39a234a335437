/*
 * test_meta_conditions.c - status conditions (meta_conditions.c): the
 * metav1 rules, lastTransitionTime moving only on a status change, and
 * the validation of a condition before it is written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json_fixture.h"
#include "kop/meta.h"
#include "kop_internal.h"

/* ---- conditions --------------------------------------------------------- */

#define T0 1795255200 /* 2026-11-21T10:00:00Z */

static void set_ok(json_t *status, kop_condition c, time_t now, bool want_changed)
{
    bool changed = !want_changed;
    kop_status st;
    kop_err err = kop_meta_set_condition(status, &c, now, &changed, &st);
    if (err)
        fail_msg("set %s: %s: %s", c.type, kop_err_name(err), st.message);
    assert_int_equal(changed, want_changed);
}

static void test_condition_lifecycle(void **state)
{
    (void)state;
    json_t *status = parse("{\"phase\":\"x\"}");
    kop_condition ready = {"Ready", "False", "Provisioning", "creating the namespace", 1};

    /* New: conditions[] is created, lastTransitionTime is now. */
    set_ok(status, ready, T0, true);
    assert_json_eq(status,
                   "{\"phase\":\"x\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                   "\"observedGeneration\":1,\"lastTransitionTime\":\"2026-11-21T10:00:00Z\","
                   "\"reason\":\"Provisioning\",\"message\":\"creating the namespace\"}]}",
                   "new");
    /* Field order is metav1's. */
    char *text = json_dumps(status, JSON_COMPACT);
    assert_string_equal(text, "{\"phase\":\"x\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
                              "\"False\",\"observedGeneration\":1,\"lastTransitionTime\":"
                              "\"2026-11-21T10:00:00Z\",\"reason\":\"Provisioning\",\"message\":"
                              "\"creating the namespace\"}]}");
    free(text);

    /* Same again later: no change at all, time kept. */
    set_ok(status, ready, T0 + 60, false);
    assert_string_equal(json_string_value(json_object_get(
                            kop_meta_find_condition(status, "Ready"), "lastTransitionTime")),
                        "2026-11-21T10:00:00Z");

    /* Reason, message, generation change: updated, time kept. */
    kop_condition ready2 = {"Ready", "False", "WaitingForPods", NULL, 2};
    set_ok(status, ready2, T0 + 120, true);
    assert_json_eq(kop_meta_find_condition(status, "Ready"),
                   "{\"type\":\"Ready\",\"status\":\"False\",\"observedGeneration\":2,"
                   "\"lastTransitionTime\":\"2026-11-21T10:00:00Z\",\"reason\":\"WaitingForPods\","
                   "\"message\":\"\"}",
                   "reason changed");

    /* Status changes: the time moves. Generation 0 drops the field. */
    kop_condition ready3 = {"Ready", "True", "Running", "all pods ready", 0};
    set_ok(status, ready3, T0 + 3600 + 59, true);
    assert_json_eq(kop_meta_find_condition(status, "Ready"),
                   "{\"type\":\"Ready\",\"status\":\"True\","
                   "\"lastTransitionTime\":\"2026-11-21T11:00:59Z\",\"reason\":\"Running\","
                   "\"message\":\"all pods ready\"}",
                   "status changed");
    assert_true(kop_meta_condition_is_true(status, "Ready"));

    /* A second condition; unknown fields of the first survive an update. */
    json_object_set_new(kop_meta_find_condition(status, "Ready"), "x-note", json_string("keep"));
    set_ok(status, (kop_condition){"example.com/Degraded", "Unknown", "Checking", "", 0}, T0, true);
    set_ok(status, (kop_condition){"Ready", "True", "Running", "still ready", 0}, T0 + 7200, true);
    json_t *r = kop_meta_find_condition(status, "Ready");
    assert_string_equal(json_string_value(json_object_get(r, "x-note")), "keep");
    assert_string_equal(json_string_value(json_object_get(r, "lastTransitionTime")),
                        "2026-11-21T11:00:59Z");
    assert_int_equal(json_array_size(json_object_get(status, "conditions")), 2);
    assert_string_equal(kop_meta_condition_status(status, "example.com/Degraded"), "Unknown");
    assert_false(kop_meta_condition_is_true(status, "example.com/Degraded"));
    assert_null(kop_meta_condition_status(status, "Missing"));
    assert_false(kop_meta_condition_is_true(status, "Missing"));
    assert_false(kop_meta_condition_is_true(NULL, "Ready"));

    /* A condition without a time gets one even when nothing else changes. */
    json_object_del(r, "lastTransitionTime");
    set_ok(status, (kop_condition){"Ready", "True", "Running", "still ready", 0}, T0, true);
    assert_string_equal(json_string_value(json_object_get(kop_meta_find_condition(status, "Ready"),
                                                          "lastTransitionTime")),
                        "2026-11-21T10:00:00Z");

    assert_true(kop_meta_remove_condition(status, "Ready"));
    assert_false(kop_meta_remove_condition(status, "Ready"));
    assert_null(kop_meta_find_condition(status, "Ready"));
    assert_string_equal(json_string_value(json_object_get(status, "phase")), "x");
    json_decref(status);
}

struct bad_condition {
    kop_condition c;
    const char *status_json;
    const char *msg;
};

static void test_condition_validation(void **state)
{
    (void)state;
    static char long_reason[KOP_CONDITION_REASON_MAX + 2];
    static char long_message[KOP_CONDITION_MESSAGE_MAX + 2];
    static char long_type[KOP_CONDITION_TYPE_MAX + 2];
    memset(long_reason, 'A', KOP_CONDITION_REASON_MAX + 1);
    memset(long_message, 'm', KOP_CONDITION_MESSAGE_MAX + 1);
    memset(long_type, 'T', KOP_CONDITION_TYPE_MAX + 1);
    const struct bad_condition cases[] = {
        {{NULL, "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"Has Space", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"-Ready", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"Ready-", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"Bad_Prefix/Ready", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"a/b/c", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"/Ready", "True", "R", NULL, 0}, "{}", "invalid type"},
        {{long_type, "True", "R", NULL, 0}, "{}", "invalid type"},
        {{"Ready", NULL, "R", NULL, 0}, "{}", "invalid status"},
        {{"Ready", "true", "R", NULL, 0}, "{}", "invalid status"},
        {{"Ready", "Yes", "R", NULL, 0}, "{}", "invalid status"},
        {{"Ready", "True", NULL, NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "not camel case", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "1Start", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "Ends,", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "Ends:", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "Dash-Ed", NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", long_reason, NULL, 0}, "{}", "invalid reason"},
        {{"Ready", "True", "R", long_message, 0}, "{}", "message longer"},
        {{"Ready", "True", "R", NULL, -1}, "{}", "negative observedGeneration"},
        {{"Ready", "True", "R", NULL, 0}, "{\"conditions\":{}}", "not an array"},
        {{"Ready", "True", "R", NULL, 0}, "[]", "not an object"},
    };
    for (size_t i = 0; i < KOP_ARRAY_LEN(cases); i++) {
        json_t *status = parse(cases[i].status_json);
        json_t *copy = json_deep_copy(status);
        bool changed = true;
        kop_status st;
        kop_err err = kop_meta_set_condition(status, &cases[i].c, T0, &changed, &st);
        if (err != KOP_EINVAL)
            fail_msg("case %zu: %s, want KOP_EINVAL", i, kop_err_name(err));
        if (!strstr(st.message, cases[i].msg))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, cases[i].msg);
        assert_false(changed);
        assert_true(json_equal(status, copy));
        json_decref(status);
        json_decref(copy);
    }
    assert_int_equal(kop_meta_set_condition(NULL, &(kop_condition){"A", "True", "R", NULL, 0},
                                            T0, NULL, NULL),
                     KOP_EINVAL);

    /* The edges that are valid. */
    const kop_condition good[] = {
        {"Ready", "True", "R", NULL, 0},
        {"a", "False", "a_b,c:d_", "", 1},
        {"example.com/Synced", "Unknown", "Z9", "x", INT64_MAX},
        {"x.y/A.b-c_D", "True", "CamelCase", NULL, 0},
    };
    long_reason[KOP_CONDITION_REASON_MAX] = '\0';
    long_message[KOP_CONDITION_MESSAGE_MAX] = '\0';
    long_type[KOP_CONDITION_TYPE_MAX] = '\0';
    json_t *status = json_object();
    for (size_t i = 0; i < KOP_ARRAY_LEN(good); i++)
        set_ok(status, good[i], T0, true);
    set_ok(status, (kop_condition){long_type, "True", long_reason, long_message, 0}, T0, true);
    assert_int_equal(json_array_size(json_object_get(status, "conditions")), 5);
    json_decref(status);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_condition_lifecycle),
        cmocka_unit_test(test_condition_validation),
    };
    return cmocka_run_group_tests_name("meta_conditions", tests, NULL, NULL);
}

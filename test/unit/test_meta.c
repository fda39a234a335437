/*
 * test_meta.c - object metadata helpers: finalizers, controller references,
 * conditions (metav1 rules, lastTransitionTime), generated names, the
 * validators checked against Kubernetes' own regular expressions, and keys.
 *
 * Every helper that edits an object is checked to keep the fields it does
 * not own, and to leave the object untouched when it fails or reports no
 * change.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kop/meta.h"
#include "kop_internal.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        fail_msg("bad test JSON: %s: %s", e.text, text);
    return v;
}

/* assert_json_eq compares a document with expected JSON text. */
static void assert_json_eq(const json_t *got, const char *want_text, const char *what)
{
    json_t *want = parse(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s:\n got %s\nwant %s", what, g, want_text);
    }
    json_decref(want);
}

/* ---- getters, labels, annotations -------------------------------------- */

static void test_getters(void **state)
{
    (void)state;
    json_t *obj = parse("{\"metadata\":{\"name\":\"web\",\"namespace\":\"ctf\",\"uid\":\"u-1\","
                        "\"resourceVersion\":\"42\",\"generation\":7,"
                        "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}");
    assert_string_equal(kop_meta_name(obj), "web");
    assert_string_equal(kop_meta_namespace(obj), "ctf");
    assert_string_equal(kop_meta_uid(obj), "u-1");
    assert_string_equal(kop_meta_resource_version(obj), "42");
    assert_int_equal(kop_meta_generation(obj), 7);
    assert_true(kop_meta_is_deleting(obj));
    json_decref(obj);

    /* Absent, wrong types, NULL objects. */
    const char *odd[] = {
        "{}",
        "{\"metadata\":5}",
        ("{\"metadata\":{\"name\":1,\"generation\":\"7\",\"deletionTimestamp\":null}}"),
        "[]",
    };
    for (size_t i = 0; i < KOP_ARRAY_LEN(odd); i++) {
        obj = parse(odd[i]);
        assert_null(kop_meta_name(obj));
        assert_null(kop_meta_namespace(obj));
        assert_null(kop_meta_uid(obj));
        assert_int_equal(kop_meta_generation(obj), 0);
        assert_false(kop_meta_is_deleting(obj));
        json_decref(obj);
    }
    assert_null(kop_meta_name(NULL));
    assert_int_equal(kop_meta_generation(NULL), 0);
}

static void test_labels_and_annotations(void **state)
{
    (void)state;
    json_t *obj = parse("{\"kind\":\"X\",\"spec\":{\"a\":1}}");
    assert_null(kop_meta_label(obj, "app"));
    assert_true(kop_meta_set_label(obj, "app", "ctf"));
    assert_false(kop_meta_set_label(obj, "app", "ctf"));
    assert_true(kop_meta_set_label(obj, "app", "web"));
    assert_true(kop_meta_set_label(obj, "tier", "1"));
    assert_true(kop_meta_set_annotation(obj, "kopc.io/note", "x y"));
    assert_string_equal(kop_meta_label(obj, "app"), "web");
    assert_string_equal(kop_meta_annotation(obj, "kopc.io/note"), "x y");
    assert_true(kop_meta_set_label(obj, "tier", NULL));
    assert_false(kop_meta_set_label(obj, "tier", NULL));
    assert_json_eq(obj,
                   "{\"kind\":\"X\",\"spec\":{\"a\":1},\"metadata\":{\"labels\":{\"app\":\"web\"},"
                   "\"annotations\":{\"kopc.io/note\":\"x y\"}}}",
                   "labels");
    /* A malformed labels field is not overwritten. */
    json_t *bad = parse("{\"metadata\":{\"labels\":[1]}}");
    assert_false(kop_meta_set_label(bad, "a", "b"));
    assert_json_eq(bad, "{\"metadata\":{\"labels\":[1]}}", "bad labels kept");
    assert_false(kop_meta_set_label(NULL, "a", "b"));
    json_decref(bad);
    json_decref(obj);
    /* Text that is not UTF-8 cannot be stored, and nothing is created for it. */
    json_t *empty = parse("{\"kind\":\"X\"}");
    assert_false(kop_meta_set_label(empty, "app", "\xa9"));
    assert_false(kop_meta_set_annotation(empty, "\xff", "x"));
    assert_false(kop_meta_add_finalizer(empty, "a\xa9" "b/c"));
    assert_json_eq(empty, "{\"kind\":\"X\"}", "nothing made for non-UTF-8 text");
    json_decref(empty);
}

/* ---- finalizers --------------------------------------------------------- */

struct fin_case {
    const char *before;
    char op; /* '+' add, '-' remove */
    const char *finalizer;
    bool changed;
    const char *after;
};

static const struct fin_case fin_cases[] = {
    {"{\"spec\":{}}", '+', "ctf.kopc.io/cleanup", true,
     "{\"spec\":{},\"metadata\":{\"finalizers\":[\"ctf.kopc.io/cleanup\"]}}"},
    {"{\"metadata\":{\"name\":\"a\"}}", '+', "f", true,
     "{\"metadata\":{\"name\":\"a\",\"finalizers\":[\"f\"]}}"},
    {"{\"metadata\":{\"finalizers\":[\"g\"]}}", '+', "f", true,
     "{\"metadata\":{\"finalizers\":[\"g\",\"f\"]}}"},
    {"{\"metadata\":{\"finalizers\":[\"g\",\"f\"]}}", '+', "f", false,
     "{\"metadata\":{\"finalizers\":[\"g\",\"f\"]}}"},
    {"{\"metadata\":{\"finalizers\":\"f\"}}", '+', "f", false,
     "{\"metadata\":{\"finalizers\":\"f\"}}"},
    {"{\"metadata\":{\"finalizers\":[\"f\",\"g\",\"f\"]}}", '-', "f", true,
     "{\"metadata\":{\"finalizers\":[\"g\"]}}"},
    {"{\"metadata\":{\"finalizers\":[\"f\"]}}", '-', "f", true,
     "{\"metadata\":{\"finalizers\":[]}}"},
    {"{\"metadata\":{\"finalizers\":[\"g\"]}}", '-', "f", false,
     "{\"metadata\":{\"finalizers\":[\"g\"]}}"},
    {"{}", '-', "f", false, "{}"},
    {"{\"metadata\":{\"finalizers\":[1,\"f\"]}}", '-', "f", true,
     "{\"metadata\":{\"finalizers\":[1]}}"},
};

static void test_finalizers(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(fin_cases); i++) {
        const struct fin_case *c = &fin_cases[i];
        json_t *obj = parse(c->before);
        bool changed = c->op == '+' ? kop_meta_add_finalizer(obj, c->finalizer)
                                    : kop_meta_remove_finalizer(obj, c->finalizer);
        if (changed != c->changed)
            fail_msg("case %zu: changed %d, want %d", i, changed, c->changed);
        char what[32];
        snprintf(what, sizeof what, "finalizer case %zu", i);
        assert_json_eq(obj, c->after, what);
        if (c->op == '+' && json_is_array(json_object_get(json_object_get(obj, "metadata"),
                                                          "finalizers")))
            assert_true(kop_meta_has_finalizer(obj, c->finalizer));
        if (c->op == '-')
            assert_false(kop_meta_has_finalizer(obj, c->finalizer));
        json_decref(obj);
    }
    assert_false(kop_meta_has_finalizer(NULL, "f"));
    assert_false(kop_meta_add_finalizer(NULL, "f"));
    json_t *arr = parse("[]");
    assert_false(kop_meta_add_finalizer(arr, "f"));
    json_decref(arr);
}

/* The finalizer patch: guarded by the list as read, or by the version when there is none. */
static const struct {
    const char *obj, *finalizers, *patch; /* patch NULL: KOP_EINVAL */
} finalizer_patches[] = {
    {"{\"metadata\":{\"resourceVersion\":\"7\",\"finalizers\":[\"g\"]}}", "[\"g\",\"f\"]",
     "[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[\"g\"]},"
     "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\",\"value\":[\"g\",\"f\"]}]"},
    {"{\"metadata\":{\"finalizers\":[\"f\",\"g\"]}}", "[\"g\"]",
     "[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[\"f\",\"g\"]},"
     "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\",\"value\":[\"g\"]}]"},
    {"{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"42\"}}", "[\"f\"]",
     "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"42\"},"
     "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"f\"]}]"},
    {"{\"metadata\":{\"name\":\"a\"}}", "[\"f\"]",
     "[{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"f\"]}]"},
    {"{\"metadata\":{\"finalizers\":[\"f\"]}}", "[]",
     "[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[\"f\"]},"
     "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\",\"value\":[]}]"},
    {"{\"metadata\":{}}", "[1]", NULL},
    {"{\"metadata\":{}}", "{}", NULL},
    {"{\"metadata\":[]}", "[\"f\"]", NULL},
    {"[]", "[\"f\"]", NULL},
};

static void test_finalizers_patch(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(finalizer_patches); i++) {
        char what[64];
        json_t *obj = parse(finalizer_patches[i].obj);
        json_t *fins = parse(finalizer_patches[i].finalizers);
        json_t *before = json_deep_copy(obj), *patch = (json_t *)1;
        kop_err err = kop_meta_finalizers_patch(obj, fins, &patch);
        snprintf(what, sizeof what, "finalizer patch case %zu", i);
        if (finalizer_patches[i].patch) {
            assert_int_equal(err, KOP_OK);
            assert_json_eq(patch, finalizer_patches[i].patch, what);
        } else {
            assert_int_equal(err, KOP_EINVAL);
            assert_null(patch);
        }
        assert_true(json_equal(obj, before)); /* obj is only read */
        json_decref(patch);
        json_decref(before);
        json_decref(fins);
        json_decref(obj);
    }
}

/* ---- owner references --------------------------------------------------- */

#define OWNER                                                                                      \
    "{\"apiVersion\":\"ctf.kopc.io/v1alpha1\",\"kind\":\"Challenge\",\"metadata\":{\"name\":"     \
    "\"web-1\",\"namespace\":\"ctf\",\"uid\":\"uid-1\"}}"
#define REF1                                                                                       \
    "{\"apiVersion\":\"ctf.kopc.io/v1alpha1\",\"kind\":\"Challenge\",\"name\":\"web-1\","         \
    "\"uid\":\"uid-1\",\"controller\":true,\"blockOwnerDeletion\":true}"

struct ref_case {
    const char *child, *owner;
    kop_err want;
    const char *after; /* child afterwards; NULL: unchanged */
    const char *msg;   /* fragment of st.message on error */
};

static const struct ref_case ref_cases[] = {
    /* A fresh child: metadata and the list are created. */
    {"{\"kind\":\"ConfigMap\"}", OWNER, KOP_OK,
     "{\"kind\":\"ConfigMap\",\"metadata\":{\"ownerReferences\":[" REF1 "]}}", NULL},
    /* Idempotent for the same owner. */
    {"{\"metadata\":{\"ownerReferences\":[" REF1 "]}}", OWNER, KOP_OK, NULL, NULL},
    /* Other owners are kept; a plain reference to the same owner is upgraded in place. */
    {"{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n\","
     "\"uid\":\"n1\"},{\"apiVersion\":\"ctf.kopc.io/v1beta1\",\"kind\":\"Challenge\",\"name\":"
     "\"web-1\",\"uid\":\"uid-1\",\"x-extra\":1}]}}",
     OWNER, KOP_OK,
     "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n\","
     "\"uid\":\"n1\"},{\"apiVersion\":\"ctf.kopc.io/v1alpha1\",\"kind\":\"Challenge\",\"name\":"
     "\"web-1\",\"uid\":\"uid-1\",\"x-extra\":1,\"controller\":true,"
     "\"blockOwnerDeletion\":true}]}}",
     NULL},
    /* A recreated owner (same name, new uid) takes the reference over. */
    {"{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"ctf.kopc.io/v1alpha1\",\"kind\":"
     "\"Challenge\",\"name\":\"web-1\",\"uid\":\"old\",\"controller\":true}]}}",
     OWNER, KOP_OK, "{\"metadata\":{\"ownerReferences\":[" REF1 "]}}", NULL},
    /* Already controlled by someone else: refused, unchanged. */
    {"{\"metadata\":{\"name\":\"cm\",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
     "\"Deployment\",\"name\":\"d\",\"uid\":\"d1\",\"controller\":true}]}}",
     OWNER, KOP_EALREADYEXISTS, NULL, "cm is already controlled by Deployment d (uid d1)"},
    /* Same kind and name in another group is another object. */
    {"{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"other.io/v1\",\"kind\":\"Challenge\","
     "\"name\":\"web-1\",\"uid\":\"z\",\"controller\":true}]}}",
     OWNER, KOP_EALREADYEXISTS, NULL, "already controlled"},
    /* Owners must be complete. */
    {"{}", "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}",
     KOP_EINVAL, NULL, "needs apiVersion, kind, metadata.name and metadata.uid"},
    {"{}", "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}}", KOP_EINVAL, NULL,
     "needs apiVersion"},
    {"{}", "{\"apiVersion\":\"v1\",\"kind\":\"\",\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}}",
     KOP_EINVAL, NULL, "needs apiVersion"},
    /* Cross-namespace references are refused. */
    {"{\"metadata\":{\"namespace\":\"other\"}}", OWNER, KOP_EINVAL, NULL, "cross-namespace"},
    /* A malformed list is not overwritten. */
    {"{\"metadata\":{\"ownerReferences\":{}}}", OWNER, KOP_EINVAL, NULL, "not an array"},
    {"[]", OWNER, KOP_EINVAL, NULL, "not an object"},
};

static void test_controller_ref(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(ref_cases); i++) {
        const struct ref_case *c = &ref_cases[i];
        json_t *child = parse(c->child), *owner = parse(c->owner);
        kop_status st;
        kop_status_clear(&st);
        kop_err err = kop_meta_set_controller_ref(child, owner, &st);
        if (err != c->want)
            fail_msg("case %zu: %s (%s), want %s", i, kop_err_name(err), st.message,
                     kop_err_name(c->want));
        char what[32];
        snprintf(what, sizeof what, "ref case %zu", i);
        assert_json_eq(child, c->after ? c->after : c->child, what);
        if (c->msg && !strstr(st.message, c->msg))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, c->msg);
        if (err == KOP_OK) {
            assert_true(kop_meta_is_controlled_by(child, "uid-1"));
            assert_false(kop_meta_is_controlled_by(child, "uid-2"));
            assert_string_equal(
                json_string_value(json_object_get(kop_meta_controller_ref(child), "name")),
                "web-1");
            /* And once more: nothing changes. */
            json_t *copy = json_deep_copy(child);
            assert_int_equal(kop_meta_set_controller_ref(child, owner, NULL), KOP_OK);
            assert_true(json_equal(copy, child));
            json_decref(copy);
        }
        json_decref(child);
        json_decref(owner);
    }
    json_t *plain = parse("{\"metadata\":{\"ownerReferences\":[{\"uid\":\"u\"}]}}");
    assert_null(kop_meta_controller_ref(plain));
    assert_false(kop_meta_is_controlled_by(plain, "u"));
    assert_false(kop_meta_is_controlled_by(NULL, "u"));
    json_decref(plain);
}

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

/* ---- names -------------------------------------------------------------- */

struct name_case {
    bool subdomain;
    const char *prefix;
    const char *parts[4];
    const char *want; /* computed independently (SHA-256 in Python) */
};

static const struct name_case name_cases[] = {
    {false, "ctf", {"web", "team1"}, "ctf-web-team1"},
    {false, "ctf", {"Web", "team1"}, "ctf-web-team1-85ac4ac8aa"},
    {false, "ctf", {"web", "team-1"}, "ctf-web-team-1-6ce8c958e0"},
    {false, NULL, {"a-b", "c"}, "a-b-c-f84d07e18d"},
    {false, NULL, {"a", "b-c"}, "a-b-c-d4cd470910"},
    {false, NULL, {"!!!"}, "ba5fc5c1a4"},
    {false, NULL, {NULL}, "e3b0c44298"},
    {false, "", {"x"}, "x"},
    {false, "ctf-inst", {"x"}, "ctf-inst-x"},
    {false, NULL, {"caf\xc3\xa9"}, "caf-425a4cd602"},
    {false, "ctf", {"a.b", "c"}, "ctf-a-b-c-a6b55767f7"},
    {false, "ctf", {"", ""}, "ctf-eacd74611e"},
    {false, "ctf", {NULL}, "ctf"},
    {false, "kopc", {"Team Rocket", "Web 100"}, "kopc-team-rocket-web-100-31f23597cf"},
    {false, NULL,
     {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxx"},
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-b2422ebfc5"},
    {true, "ctf", {"a.b", "c"}, "ctf-a.b-c"},
    {true, "x", {"A..B"}, "x-a.b-578a72c2f1"},
    {true, NULL, {"a.-b"}, "a.b-98ed117f65"},
    {true, NULL, {"a.b.c"}, "a.b.c"},
    {true, NULL, {".a."}, "a-48c47d4161"},
};

static kop_err make(bool subdomain, char *out, size_t size, const char *prefix,
                    const char *const *parts)
{
    return subdomain ? kop_meta_dns1123_subdomain(out, size, prefix, parts)
                     : kop_meta_dns1123_label(out, size, prefix, parts);
}

static void test_names_fixed(void **state)
{
    (void)state;
    char out[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    for (size_t i = 0; i < KOP_ARRAY_LEN(name_cases); i++) {
        const struct name_case *c = &name_cases[i];
        assert_int_equal(make(c->subdomain, out, sizeof out, c->prefix, c->parts), KOP_OK);
        if (strcmp(out, c->want) != 0)
            fail_msg("case %zu:\n got %s\nwant %s", i, out, c->want);
        assert_true(c->subdomain ? kop_meta_is_valid_dns1123_subdomain(out)
                                 : kop_meta_is_valid_dns1123_label(out));
    }
    /* parts may be NULL. */
    assert_int_equal(kop_meta_dns1123_label(out, sizeof out, "ctf", NULL), KOP_OK);
    assert_string_equal(out, "ctf");
    /* The buffer must hold the longest name. */
    char small[KOP_META_DNS1123_LABEL_MAX];
    assert_int_equal(kop_meta_dns1123_label(small, sizeof small, "a", NULL), KOP_EINVAL);
    char label[KOP_META_DNS1123_LABEL_MAX + 1];
    assert_int_equal(kop_meta_dns1123_label(label, sizeof label, "a", NULL), KOP_OK);
    assert_int_equal(kop_meta_dns1123_subdomain(label, sizeof label, "a", NULL), KOP_EINVAL);
}

static void test_names_lengths(void **state)
{
    (void)state;
    char big[600], out[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    for (size_t len = 1; len < sizeof big; len += 7) {
        const char *parts[] = {big, NULL};
        for (int sub = 0; sub < 2; sub++) {
            memset(big, 'a', len);
            big[len] = '\0';
            size_t max = sub ? KOP_META_DNS1123_SUBDOMAIN_MAX : KOP_META_DNS1123_LABEL_MAX;
            assert_int_equal(make(sub, out, sizeof out, NULL, parts), KOP_OK);
            if (len <= max) {
                assert_string_equal(out, big); /* fits and is exact: unchanged */
            } else {
                assert_int_equal(strlen(out), max);
                assert_int_equal(out[max - KOP_META_NAME_HASH_LEN - 1], '-');
            }
            /* Cutting never leaves a separator before the hash. */
            big[len > 60 ? 52 : 0] = '-';
            assert_int_equal(make(sub, out, sizeof out, "p", parts), KOP_OK);
            assert_true(sub ? kop_meta_is_valid_dns1123_subdomain(out)
                            : kop_meta_is_valid_dns1123_label(out));
            assert_true(strlen(out) <= max);
            assert_null(strstr(out, "--"));
        }
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Many similar inputs: every output valid, all distinct, each stable. */
static void test_names_distinct_and_stable(void **state)
{
    (void)state;
    enum { N = 12000 };
    char **names = calloc(N, sizeof *names);
    const char *seps[] = {"-", "_", ".", " ", "--", "A", "a"};
    char a[128], b[128];
    size_t k = 0;
    for (int i = 0; i < 600; i++) {
        for (size_t s = 0; s < KOP_ARRAY_LEN(seps); s++) {
            /* Variants that normalize alike: case, separators, splits, long shared prefixes. */
            snprintf(a, sizeof a, "team%s%d", seps[s], i);
            snprintf(b, sizeof b, "%0100d%s%d", 0, seps[s], i);
            const char *p1[] = {"web", a, NULL};
            const char *p2[] = {b, NULL};
            const char *p3[] = {a, "web", NULL};
            const char *const *ps[] = {p1, p2, p3};
            for (size_t v = 0; v < KOP_ARRAY_LEN(ps) && k < N; v++) {
                char out[KOP_META_DNS1123_LABEL_MAX + 1], again[KOP_META_DNS1123_LABEL_MAX + 1];
                assert_int_equal(kop_meta_dns1123_label(out, sizeof out, "ctf", ps[v]), KOP_OK);
                assert_int_equal(kop_meta_dns1123_label(again, sizeof again, "ctf", ps[v]),
                                 KOP_OK);
                assert_string_equal(out, again);
                assert_true(kop_meta_is_valid_dns1123_label(out));
                names[k++] = strdup(out);
            }
        }
    }
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 1; i < k; i++) {
        if (strcmp(names[i - 1], names[i]) == 0)
            fail_msg("collision: %s", names[i]);
    }
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
}

/* ---- validators --------------------------------------------------------- */

struct valid_case {
    const char *s;
    bool label, subdomain, value, key;
};

static const struct valid_case valid_cases[] = {
    {"a", true, true, true, true},
    {"abc-123", true, true, true, true},
    {"0abc", true, true, true, true},
    {"", false, false, true, false},
    {"-a", false, false, false, false},
    {"a-", false, false, false, false},
    {"A", false, false, true, true},
    {"a.b", false, true, true, true},
    {"a..b", false, false, true, true},
    {".a", false, false, false, false},
    {"a_b", false, false, true, true},
    {"_a", false, false, false, false},
    {"a b", false, false, false, false},
    {"app.kubernetes.io/name", false, false, false, true},
    {"kopc.io/", false, false, false, false},
    {"/name", false, false, false, false},
    {"Bad.io/name", false, false, false, false},
    {"a/b/c", false, false, false, false},
    {"x.io/-a", false, false, false, false},
    {"caf\xc3\xa9", false, false, false, false},
    /* Lengths at and past the limits. */
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true, true, true, true},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false, true, false, false},
};

/* The regular expressions apimachinery's validation uses. */
#define RE_LABEL     "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define RE_SUBDOMAIN RE_LABEL "(\\." RE_LABEL ")*"
#define RE_QNAME     "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

static bool re_match(const regex_t *re, const char *s)
{
    return regexec(re, s, 0, NULL, 0) == 0;
}

static void test_validators(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(valid_cases); i++) {
        const struct valid_case *c = &valid_cases[i];
        if (kop_meta_is_valid_dns1123_label(c->s) != c->label ||
            kop_meta_is_valid_dns1123_subdomain(c->s) != c->subdomain ||
            kop_meta_is_valid_label_value(c->s) != c->value ||
            kop_meta_is_valid_label_key(c->s) != c->key)
            fail_msg("case %zu (%s): got %d%d%d%d", i, c->s, kop_meta_is_valid_dns1123_label(c->s),
                     kop_meta_is_valid_dns1123_subdomain(c->s),
                     kop_meta_is_valid_label_value(c->s), kop_meta_is_valid_label_key(c->s));
    }
    assert_false(kop_meta_is_valid_dns1123_label(NULL));
    assert_false(kop_meta_is_valid_label_key(NULL));
    assert_false(kop_meta_is_valid_label_value(NULL));
    assert_false(kop_meta_is_valid_dns1123_subdomain(NULL));

    /* Random strings from a small alphabet, judged by the regexes themselves. */
    regex_t label, subdomain, value, key;
    assert_int_equal(regcomp(&label, "^" RE_LABEL "$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&subdomain, "^" RE_SUBDOMAIN "$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&value, "^(" RE_QNAME ")?$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(
        regcomp(&key, "^(" RE_SUBDOMAIN "/)?" RE_QNAME "$", REG_EXTENDED | REG_NOSUB), 0);
    const char alphabet[] = "ab0Z-._/ ";
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        char s[80];
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t len = (seed >> 33) % (i % 10 == 0 ? 75 : 9);
        for (size_t j = 0; j < len; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            s[j] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
        }
        s[len] = '\0';
        const char *slash = strchr(s, '/');
        size_t name_len = slash ? strlen(slash + 1) : len;
        size_t prefix_len = slash ? (size_t)(slash - s) : 0;
        bool want_label = re_match(&label, s) && len <= 63;
        bool want_sub = re_match(&subdomain, s) && len <= 253;
        bool want_value = re_match(&value, s) && len <= 63;
        bool want_key = re_match(&key, s) && name_len <= 63 && prefix_len <= 253;
        if (kop_meta_is_valid_dns1123_label(s) != want_label ||
            kop_meta_is_valid_dns1123_subdomain(s) != want_sub ||
            kop_meta_is_valid_label_value(s) != want_value ||
            kop_meta_is_valid_label_key(s) != want_key)
            fail_msg("\"%s\": label %d/%d subdomain %d/%d value %d/%d key %d/%d", s,
                     kop_meta_is_valid_dns1123_label(s), want_label,
                     kop_meta_is_valid_dns1123_subdomain(s), want_sub,
                     kop_meta_is_valid_label_value(s), want_value,
                     kop_meta_is_valid_label_key(s), want_key);
    }
    regfree(&label);
    regfree(&subdomain);
    regfree(&value);
    regfree(&key);
}

/* ---- keys --------------------------------------------------------------- */

struct key_case {
    const char *ns, *name;
    kop_err want;
    const char *key;
};

static const struct key_case key_cases[] = {
    {"ctf", "web", KOP_OK, "ctf/web"},
    {NULL, "node-1", KOP_OK, "node-1"},
    {"", "node-1", KOP_OK, "node-1"},
    {"ctf", "", KOP_EINVAL, ""},
    {"ctf", NULL, KOP_EINVAL, ""},
};

struct split_case {
    const char *key;
    kop_err want;
    const char *ns, *name;
};

static const struct split_case split_cases[] = {
    {"ctf/web", KOP_OK, "ctf", "web"},
    {"node-1", KOP_OK, "", "node-1"},
    {"", KOP_EINVAL, "", ""},
    {"/web", KOP_EINVAL, "", ""},
    {"ctf/", KOP_EINVAL, "", ""},
    {"a/b/c", KOP_EINVAL, "", ""},
    {"averyveryverylongnamespace/x", KOP_ETOOBIG, "", ""},
    {"ctf/averyveryverylongname", KOP_ETOOBIG, "", ""},
};

static void test_keys(void **state)
{
    (void)state;
    char out[KOP_META_KEY_MAX];
    for (size_t i = 0; i < KOP_ARRAY_LEN(key_cases); i++) {
        const struct key_case *c = &key_cases[i];
        assert_int_equal(kop_meta_key(out, sizeof out, c->ns, c->name), c->want);
        assert_string_equal(out, c->key);
    }
    char tiny[7];
    assert_int_equal(kop_meta_key(tiny, sizeof tiny, "ctf", "web"), KOP_ETOOBIG);
    assert_string_equal(tiny, "");
    assert_int_equal(kop_meta_key(tiny, sizeof tiny, "ct", "web"), KOP_OK);
    assert_string_equal(tiny, "ct/web");

    for (size_t i = 0; i < KOP_ARRAY_LEN(split_cases); i++) {
        const struct split_case *c = &split_cases[i];
        char ns[16] = "stale", name[16] = "stale";
        kop_err err = kop_meta_split_key(c->key, ns, sizeof ns, name, sizeof name);
        if (err != c->want)
            fail_msg("split case %zu: %s", i, kop_err_name(err));
        assert_string_equal(ns, c->ns);
        if (err == KOP_OK)
            assert_string_equal(name, c->name);
        else
            assert_string_equal(ns, "");
    }
    /* Round trip with full-size names. */
    char ns[64], name[254], back_ns[64], back_name[254];
    memset(ns, 'n', 63);
    ns[63] = '\0';
    memset(name, 'm', 253);
    name[253] = '\0';
    assert_int_equal(kop_meta_key(out, sizeof out, ns, name), KOP_OK);
    assert_int_equal(strlen(out), KOP_META_KEY_MAX - 1);
    assert_int_equal(kop_meta_split_key(out, back_ns, sizeof back_ns, back_name, sizeof back_name),
                     KOP_OK);
    assert_string_equal(back_ns, ns);
    assert_string_equal(back_name, name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_labels_and_annotations),
        cmocka_unit_test(test_finalizers),
        cmocka_unit_test(test_finalizers_patch),
        cmocka_unit_test(test_controller_ref),
        cmocka_unit_test(test_condition_lifecycle),
        cmocka_unit_test(test_condition_validation),
        cmocka_unit_test(test_names_fixed),
        cmocka_unit_test(test_names_lengths),
        cmocka_unit_test(test_names_distinct_and_stable),
        cmocka_unit_test(test_validators),
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests_name("meta", tests, NULL, NULL);
}

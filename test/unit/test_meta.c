/*
 * test_meta.c - object metadata helpers of meta.c: getters, labels and
 * annotations, finalizers (and their patch), and namespace/name keys.
 * Owner references, conditions and names have their own tests
 * (test_meta_owner.c, test_meta_conditions.c, test_meta_names.c);
 * kop_meta_dumps under allocation failure is test_meta_dumps_nomem.c.
 *
 * Every helper that edits an object is checked to keep the fields it does
 * not own, and to leave the object untouched when it fails or reports no
 * change.
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
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests_name("meta", tests, NULL, NULL);
}

/*
 * test_meta_owner.c - owner references (meta_owner.c): setting the
 * controller reference, its conflicts, and kop_meta_is_controlled_by.
 *
 * Every edit is checked to keep the fields it does not own, and to leave
 * the object untouched when it fails or reports no change.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controller_ref),
    };
    return cmocka_run_group_tests_name("meta_owner", tests, NULL, NULL);
}

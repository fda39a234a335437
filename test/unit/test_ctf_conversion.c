/*
 * test_ctf_conversion.c - ChallengeDefinition between v1alpha1 and v1beta1
 * (operators/ctf/core/conversion.c, docs/crd-versions.md): the field that
 * moves, what the reserved annotation keeps of v1beta1's update.rolling,
 * round trips in both directions that give back every field (unknown ones
 * included), what is refused and why, and hostile objects that must not
 * break a read (an annotation that is not JSON, an update that is not an
 * object).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/conversion.h"
#include "core/json.h"
#include "core/update.h"

#define ALPHA CTF_VERSION_ALPHA
#define BETA  CTF_VERSION_BETA

/* convert converts a copy of text (single-quoted JSON); the result, or NULL with *err set. */
static json_t *convert(const char *text, const char *from, const char *to, kop_err *err,
                       kop_status *st)
{
    json_t *def = parse(text);
    *err = ctf_convert_definition(def, from, to, st);
    if (*err) {
        json_decref(def);
        return NULL;
    }
    return def;
}

/* converts asserts that text converts to want. */
static void converts(const char *text, const char *from, const char *to, const char *want)
{
    kop_err err;
    kop_status st = {0};
    json_t *got = convert(text, from, to, &err, &st);
    if (!got)
        fail_msg("%s -> %s refused (%s): %s", from, to, st.message, text);
    assert_json_eq(got, want, text);
    json_decref(got);
}

/* round_trip asserts that from -> to -> from gives back text, field for field. */
static void round_trip(const char *text, const char *from, const char *to)
{
    json_t *orig = parse(text), *def = json_deep_copy(orig);
    kop_status st = {0};
    assert_int_equal(ctf_convert_definition(def, from, to, &st), KOP_OK);
    assert_int_equal(ctf_convert_definition(def, to, from, &st), KOP_OK);
    if (!json_equal(def, orig)) {
        char *g = json_dumps(def, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s -> %s -> %s changed %s into %s", from, to, from, text, g);
    }
    json_decref(def);
    json_decref(orig);
}

/* annotation returns the reserved annotation of def, borrowed, or NULL. */
static const char *annotation(const json_t *def)
{
    return json_string_value(json_object_get(ctf_get2(def, "metadata", "annotations"),
                                             CTF_CONVERSION_ROLLING_ANNOTATION));
}

static void test_moves_max_unavailable(void **state)
{
    (void)state;
    converts("{'metadata':{'name':'d'},'spec':{'title':'t','update':{'strategy':'Rolling',"
             "'maxUnavailable':'10%'}}}",
             ALPHA, BETA,
             "{'metadata':{'name':'d'},'spec':{'title':'t','update':{'strategy':'Rolling',"
             "'rolling':{'maxUnavailable':'10%'}}}}");
    converts("{'metadata':{'name':'d'},'spec':{'update':{'strategy':'Rolling',"
             "'rolling':{'maxUnavailable':5}}}}",
             BETA, ALPHA,
             "{'metadata':{'name':'d'},'spec':{'update':{'strategy':'Rolling',"
             "'maxUnavailable':5}}}");
    /* Without update, or without the moving field, nothing changes. */
    converts("{'metadata':{},'spec':{'title':'t','x-unknown':[1,{'a':null}]}}", ALPHA, BETA,
             "{'metadata':{},'spec':{'title':'t','x-unknown':[1,{'a':null}]}}");
    converts("{'metadata':{},'spec':{'update':{'strategy':'Recreate'}}}", BETA, ALPHA,
             "{'metadata':{},'spec':{'update':{'strategy':'Recreate'}}}");
    /* The same version: untouched, whatever the object holds. */
    converts("{'spec':{'update':{'maxUnavailable':1,'rolling':2}}}", BETA, BETA,
             "{'spec':{'update':{'maxUnavailable':1,'rolling':2}}}");
}

/* The full fixtures of the other tests, status and unknown fields included. */
static void test_fixtures_round_trip(void **state)
{
    (void)state;
    const char *defs[] = {DEF_TCP, DEF_HTTP, DEF_TWO, DEF_WEB, DEF_NC,
                          "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
                          "'metadata':{'name':'r','annotations':{'a':'b'},'labels':{'l':'m'}},"
                          "'spec':{'title':'r','pods':[{'name':'p','template':{'containers':[]}}],"
                          "'update':{'strategy':'Rolling','maxUnavailable':3,'x-new':true},"
                          "'x-later':{'deep':[1,2]}},"
                          "'status':{'update':{'strategy':'Rolling','current':2},"
                          "'pool':{'size':1}}}"};
    for (size_t i = 0; i < LEN(defs); i++) {
        round_trip(defs[i], ALPHA, BETA);
        /* And its v1beta1 form the other way. */
        json_t *beta = parse(defs[i]);
        kop_status st = {0};
        assert_int_equal(ctf_convert_definition(beta, ALPHA, BETA, &st), KOP_OK);
        char *text = json_dumps(beta, JSON_COMPACT);
        round_trip(text, BETA, ALPHA);
        free(text);
        json_decref(beta);
    }
}

/* What v1alpha1 cannot hold of rolling goes to the annotation and comes back. */
static void test_annotation_keeps_rolling(void **state)
{
    (void)state;
    static const char *betas[] = {
        "{'metadata':{'name':'e'},'spec':{'update':{'strategy':'Rolling','rolling':{}}}}",
        ("{'metadata':{'name':'f'},'spec':{'update':{'strategy':'Rolling',"
         "'rolling':{'maxUnavailable':2,'maxSurge':1}}}}"),
        "{'metadata':{'name':'g','annotations':{'keep':'me'}},'spec':{'update':{'rolling':'odd'}}}",
        /* (Never annotations: {}, which the apiserver does not serve: an empty map is dropped.) */
        "{'metadata':{'name':'h','annotations':{'o':''}},'spec':{'update':{'rolling':null}}}",
        "{'metadata':{'name':'i'},'spec':{'update':{'rolling':[1,{'maxUnavailable':1}]}}}",
    };
    for (size_t i = 0; i < LEN(betas); i++)
        round_trip(betas[i], BETA, ALPHA);

    kop_err err;
    kop_status st = {0};
    json_t *a = convert(betas[1], BETA, ALPHA, &err, &st);
    assert_non_null(a);
    assert_json_eq(ctf_get2(a, "spec", "update"), "{'strategy':'Rolling','maxUnavailable':2}",
                   "v1alpha1 update");
    assert_string_equal(annotation(a), "{\"maxSurge\":1}");
    json_decref(a);

    /* rolling {} is not the same as no rolling: the annotation says it was there. */
    a = convert(betas[0], BETA, ALPHA, &err, &st);
    assert_non_null(a);
    assert_string_equal(annotation(a), "{}");
    assert_json_eq(ctf_get2(a, "spec", "update"), "{'strategy':'Rolling'}", "update");
    json_decref(a);

    /* Exactly {maxUnavailable}: no annotation, annotations left as they were. */
    a = convert("{'metadata':{'name':'j'},'spec':{'update':{'rolling':{'maxUnavailable':1}}}}",
                BETA, ALPHA, &err, &st);
    assert_non_null(a);
    assert_null(ctf_get2(a, "metadata", "annotations"));
    json_decref(a);
}

/* A v1alpha1 client that set maxUnavailable after a down-conversion: the saved rolling merges. */
static void test_alpha_edit_merges(void **state)
{
    (void)state;
    json_t *a = parse("{'metadata':{'name':'k','annotations':{'x':'y'}},"
                      "'spec':{'update':{'strategy':'Rolling','maxUnavailable':4}}}");
    json_object_set_new(ctf_get2(a, "metadata", "annotations"), CTF_CONVERSION_ROLLING_ANNOTATION,
                        json_string("{\"maxSurge\":2}"));
    kop_status st = {0};
    assert_int_equal(ctf_convert_definition(a, ALPHA, BETA, &st), KOP_OK);
    assert_json_eq(a,
                   "{'metadata':{'name':'k','annotations':{'x':'y'}},'spec':{'update':{"
                   "'strategy':'Rolling','rolling':{'maxSurge':2,'maxUnavailable':4}}}}",
                   "merged");
    json_decref(a);
}

/* Hostile or odd objects: never a crash, never a read refused for what could be stored. */
static void test_hostile(void **state)
{
    (void)state;
    kop_err err;
    kop_status st = {0};
    /* An annotation that is not JSON, on a stored v1alpha1 object, stays where it is. */
    json_t *a = parse("{'metadata':{'annotations':{}},'spec':{'update':{'maxUnavailable':1}}}");
    json_object_set_new(ctf_get2(a, "metadata", "annotations"), CTF_CONVERSION_ROLLING_ANNOTATION,
                        json_string("{not json"));
    assert_int_equal(ctf_convert_definition(a, ALPHA, BETA, &st), KOP_OK);
    assert_string_equal(annotation(a), "{not json");
    assert_json_eq(ctf_get2(a, "spec", "update"), "{'rolling':{'maxUnavailable':1}}", "update");
    json_decref(a);
    /* update, spec or annotations of the wrong type: left alone. */
    const char *odd[] = {"{'spec':{'update':'Rolling'}}", "{'spec':[1]}", "{'spec':null}", "{}",
                         "{'metadata':{'annotations':7},'spec':{'update':{'maxUnavailable':1}}}"};
    for (size_t i = 0; i < LEN(odd); i++) {
        json_t *d = convert(odd[i], ALPHA, BETA, &err, &st);
        assert_non_null(d);
        json_decref(d);
    }
    /* The other version's field is refused, not one of two values dropped. */
    assert_null(convert("{'spec':{'update':{'rolling':{}}}}", ALPHA, BETA, &err, &st));
    assert_int_equal(err, KOP_EINVAL);
    assert_string_equal(st.message, "spec.update.rolling is not a field of v1alpha1");
    assert_null(convert("{'spec':{'update':{'maxUnavailable':1}}}", BETA, ALPHA, &err, &st));
    assert_string_equal(st.message, "spec.update.maxUnavailable is not a field of v1beta1");
    /* Something to keep, but no metadata object to keep it in. */
    assert_null(convert("{'spec':{'update':{'rolling':{}}}}", BETA, ALPHA, &err, &st));
    assert_null(convert("{'metadata':3,'spec':{'update':{'rolling':{}}}}", BETA, ALPHA, &err, &st));
    assert_null(convert("{'metadata':{'annotations':[]},'spec':{'update':{'rolling':{}}}}", BETA,
                        ALPHA, &err, &st));
    assert_string_equal(st.message, "metadata and metadata.annotations must be objects");
    /* Versions that are not ours, and objects that are not objects. */
    assert_null(convert("{}", "v1", BETA, &err, &st));
    assert_string_equal(st.message, "cannot convert a ChallengeDefinition from v1 to v1beta1");
    assert_null(convert("{}", ALPHA, NULL, &err, &st));
    assert_null(convert("[]", ALPHA, BETA, &err, &st));
    assert_int_equal(err, KOP_EINVAL);
    /* A rolling too big for the annotation is refused, not cut. */
    json_t *big = parse("{'metadata':{},'spec':{'update':{'rolling':{}}}}");
    char *s = malloc(CTF_CONVERSION_ANNOTATION_MAX + 1);
    memset(s, 'x', CTF_CONVERSION_ANNOTATION_MAX);
    s[CTF_CONVERSION_ANNOTATION_MAX] = '\0';
    json_object_set_new(json_object_get(ctf_get2(big, "spec", "update"), "rolling"), "note",
                        json_string(s));
    free(s);
    assert_int_equal(ctf_convert_definition(big, BETA, ALPHA, &st), KOP_EINVAL);
    json_decref(big);
}

/* The parser reads the shape of the object's apiVersion. */
static void test_update_parse_by_version(void **state)
{
    (void)state;
    ctf_update_spec u;
    kop_status st = {0};
    json_t *d = parse("{'apiVersion':'ctf.kopc.io/v1beta1','spec':{'update':{'strategy':'Rolling',"
                      "'rolling':{'maxUnavailable':7}}}}");
    assert_int_equal(ctf_update_parse(d, &u, &st), KOP_OK);
    assert_int_equal(u.strategy, CTF_UPDATE_ROLLING);
    assert_int_equal(u.max_unavailable, 7);
    assert_false(u.percent);
    /* The same object read as v1alpha1 again: the same spec. */
    assert_int_equal(ctf_convert_definition(d, BETA, ALPHA, &st), KOP_OK);
    json_object_set_new(d, "apiVersion", json_string("ctf.kopc.io/v1alpha1"));
    ctf_update_spec v;
    assert_int_equal(ctf_update_parse(d, &v, &st), KOP_OK);
    assert_int_equal(v.strategy, u.strategy);
    assert_int_equal(v.max_unavailable, u.max_unavailable);
    assert_int_equal(v.percent, u.percent);
    json_decref(d);
    const char *bad[] = {
        ("{'apiVersion':'ctf.kopc.io/v1beta1',"
         "'spec':{'update':{'strategy':'Recreate','rolling':{}}}}"),
        "{'apiVersion':'ctf.kopc.io/v1beta1','spec':{'update':{'strategy':'Rolling','rolling':3}}}",
        ("{'apiVersion':'ctf.kopc.io/v1beta1','spec':{'update':{'strategy':'Rolling',"
         "'rolling':{'maxUnavailable':'0%'}}}}"),
    };
    for (size_t i = 0; i < LEN(bad); i++) {
        d = parse(bad[i]);
        assert_int_equal(ctf_update_parse(d, &u, &st), KOP_EINVAL);
        json_decref(d);
    }
    d = parse(bad[0]);
    assert_int_equal(ctf_update_parse(d, &u, &st), KOP_EINVAL);
    assert_string_equal(st.message, "spec.update.rolling is for the Rolling strategy only.");
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves_max_unavailable),
        cmocka_unit_test(test_fixtures_round_trip),
        cmocka_unit_test(test_annotation_keeps_rolling),
        cmocka_unit_test(test_alpha_edit_merges),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_update_parse_by_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

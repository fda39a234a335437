/*
 * test_ctf_pool.c - warm pool sizing (operators/ctf/core/pool.c): spec.pool
 * read and refused, the sizing rule, the demand window that feeds it (one
 * Challenge counts once), and the backoff of a failing pool.
 * The objects of a warm instance are test_ctf_instance_warm.c's, its
 * namespace's name test_ctf_names.c's, a claim's verdicts test_ctf_claim.c's,
 * and warm starts racing admissions test_ctf_admission.c's.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/pool.h"

/* pool_of parses the text and reads its pool; the error, if any. */
static kop_err pool_of(const char *text, ctf_pool_spec *p)
{
    json_t *def = parse(text);
    kop_status st;
    kop_err err = ctf_pool_parse(def, p, &st);
    json_decref(def);
    return err;
}

static void test_parse(void **state)
{
    (void)state;
    ctf_pool_spec p;
    assert_int_equal(pool_of("{'spec':{}}", &p), KOP_OK);
    assert_false(ctf_pool_enabled(&p));
    assert_int_equal(pool_of("{'spec':{'pool':{'min':3}}}", &p), KOP_OK);
    assert_true(p.min == 3 && p.max == 3 && !p.autoscale && ctf_pool_enabled(&p));
    assert_int_equal(pool_of("{'spec':{'pool':{'min':0,'max':5,'autoscale':true}}}", &p), KOP_OK);
    assert_true(p.min == 0 && p.max == 5 && p.autoscale && ctf_pool_enabled(&p));
    assert_int_equal(pool_of("{'spec':{'pool':{'min':0,'max':0}}}", &p), KOP_OK);
    assert_false(ctf_pool_enabled(&p));
    /* A pool for a 2,000-team CTF, up to the schema's bound. */
    assert_int_equal(pool_of("{'spec':{'pool':{'min':2000}}}", &p), KOP_OK);
    assert_int_equal(pool_of("{'spec':{'pool':{'min':5000,'max':5000}}}", &p), KOP_OK);
    assert_true(p.min == 5000 && p.max == 5000);

    static const char *const bad[] = {
        "{'spec':{'pool':3}}",
        "{'spec':{'pool':{'min':4,'max':2}}}",
        "{'spec':{'pool':{'min':-1}}}",
        "{'spec':{'pool':{'min':5001,'max':5001}}}",
        "{'spec':{'pool':{'min':'3'}}}",
        "{'spec':{'pool':{'min':1.5}}}",
        "{'spec':{'pool':{'min':1,'autoscale':'yes'}}}",
    };
    for (size_t i = 0; i < LEN(bad); i++) {
        json_t *def = parse(bad[i]);
        kop_status st;
        p.min = 7;
        assert_int_equal(ctf_pool_parse(def, &p, &st), KOP_EINVAL);
        assert_non_null(strstr(st.message, "spec.pool"));
        assert_int_equal(p.min, 0); /* nothing half-read */
        json_decref(def);
    }
    /* The definition's validation refuses it too, for the Challenges' status. */
    json_t *def = parse(DEF_NC);
    kop_status st;
    assert_int_equal(ctf_validate_definition(def, &st), KOP_OK);
    json_object_set_new(json_object_get(def, "spec"), "pool", parse("{'min':9,'max':1}"));
    assert_int_equal(ctf_validate_definition(def, &st), KOP_EINVAL);
    assert_non_null(strstr(st.message, "spec.pool.min"));
    json_decref(def);
}

static void test_target(void **state)
{
    (void)state;
    ctf_pool_spec fixed = {3, 3, false}, scaled = {2, 10, true}, off = {0, 0, true};
    ctf_pool_spec from_zero = {0, 4, true};
    assert_int_equal(ctf_pool_target(&fixed, 0), 3);
    assert_int_equal(ctf_pool_target(&fixed, 50), 3); /* no autoscale: demand is ignored */
    assert_int_equal(ctf_pool_target(&scaled, 0), 2);
    assert_int_equal(ctf_pool_target(&scaled, -4), 2);
    assert_int_equal(ctf_pool_target(&scaled, 5), 7);
    assert_int_equal(ctf_pool_target(&scaled, 8), 10);
    assert_int_equal(ctf_pool_target(&scaled, 9), 10);
    assert_int_equal(ctf_pool_target(&scaled, INT_MAX), 10);
    assert_int_equal(ctf_pool_target(&off, 100), 0);
    assert_int_equal(ctf_pool_target(&from_zero, 1), 1);
    assert_int_equal(ctf_pool_target(NULL, 1), 0);
}

/* A failing pool waits 5 s, then twice as long after each failed pass, at most 5 min. */
static void test_backoff(void **state)
{
    (void)state;
    assert_int_equal(ctf_pool_backoff_ms(-1), 0);
    assert_int_equal(ctf_pool_backoff_ms(0), 0);
    assert_int_equal(ctf_pool_backoff_ms(1), CTF_POOL_BACKOFF_BASE_MS);
    assert_int_equal(ctf_pool_backoff_ms(2), 2 * CTF_POOL_BACKOFF_BASE_MS);
    assert_int_equal(ctf_pool_backoff_ms(4), 8 * CTF_POOL_BACKOFF_BASE_MS);
    for (int n = 1; n < 100; n++) {
        assert_true(ctf_pool_backoff_ms(n + 1) >= ctf_pool_backoff_ms(n));
        assert_true(ctf_pool_backoff_ms(n) <= CTF_POOL_BACKOFF_MAX_MS);
    }
    assert_int_equal(ctf_pool_backoff_ms(7), CTF_POOL_BACKOFF_MAX_MS); /* 5 s * 64 > 5 min */
    assert_int_equal(ctf_pool_backoff_ms(INT_MAX), CTF_POOL_BACKOFF_MAX_MS);
}

#define WINDOW_MS ((int64_t)CTF_POOL_WINDOW_S * 1000)

/* One Challenge asking again (a retried pass, a lost claim, a refused admission woken
 * again) counts once in the window; a second Challenge counts too. */
static void test_demand_once(void **state)
{
    (void)state;
    json_t *w = json_object();
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", 0, 16), KOP_OK);
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", 10, 16), KOP_OK);
    assert_int_equal(ctf_pool_demand_note(w, "uid-b", 20, 16), KOP_OK);
    assert_int_equal(ctf_pool_demand_count(w, 30, WINDOW_MS), 2); /* counted per try: 3 */
    assert_int_equal(json_integer_value(json_object_get(w, "uid-a")), 0); /* its first ask */
    assert_int_equal(ctf_pool_demand_count(w, WINDOW_MS + 10, WINDOW_MS), 1); /* a's is out */
    assert_null(json_object_get(w, "uid-a"));
    /* Once out of the window, the same Challenge asking again counts again. */
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", WINDOW_MS + 10, 16), KOP_OK);
    assert_int_equal(ctf_pool_demand_count(w, WINDOW_MS + 10, WINDOW_MS), 2);
    /* All gone past the window. */
    assert_int_equal(ctf_pool_demand_count(w, 3 * WINDOW_MS, WINDOW_MS), 0);
    assert_int_equal(json_object_size(w), 0);
    assert_int_equal(ctf_pool_demand_count(w, 3 * WINDOW_MS, WINDOW_MS), 0);

    assert_int_equal(ctf_pool_demand_note(NULL, "uid-a", 0, 16), KOP_EINVAL);
    assert_int_equal(ctf_pool_demand_note(w, NULL, 0, 16), KOP_EINVAL);
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", 0, 0), KOP_EINVAL);
    assert_int_equal(ctf_pool_demand_count(NULL, 0, WINDOW_MS), 0);
    json_decref(w);
}

/* A full window makes room by dropping its oldest entry; one already in takes none. */
static void test_demand_cap(void **state)
{
    (void)state;
    json_t *w = json_object();
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", 0, 3), KOP_OK);
    assert_int_equal(ctf_pool_demand_note(w, "uid-b", 1, 3), KOP_OK);
    assert_int_equal(ctf_pool_demand_note(w, "uid-c", 2, 3), KOP_OK);
    assert_int_equal(ctf_pool_demand_note(w, "uid-b", 3, 3), KOP_OK); /* in already */
    assert_int_equal(json_object_size(w), 3);
    assert_non_null(json_object_get(w, "uid-a"));
    assert_int_equal(ctf_pool_demand_note(w, "uid-d", 4, 3), KOP_OK);
    assert_int_equal(ctf_pool_demand_count(w, 5, WINDOW_MS), 3);
    assert_null(json_object_get(w, "uid-a"));
    assert_non_null(json_object_get(w, "uid-b"));
    assert_non_null(json_object_get(w, "uid-d"));
    assert_int_equal(ctf_pool_demand_note(w, "uid-a", 6, 3), KOP_OK); /* back: b goes */
    assert_null(json_object_get(w, "uid-b"));
    assert_non_null(json_object_get(w, "uid-c"));
    assert_int_equal(ctf_pool_demand_count(w, 7, WINDOW_MS), 3);
    json_decref(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_target),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_demand_once),
        cmocka_unit_test(test_demand_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

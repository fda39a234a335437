/*
 * test_predicates.c - the update predicates of kop/controller.h, on the
 * objects a watch hands them: with and without a generation, a deletion
 * mark, labels.
 *
 * The case that failed before issue 26's fix: two versions of an object
 * that differ only in status, neither marked for deletion. jansson's
 * json_equal calls two absent fields different, so
 * kop_predicate_generation_changed let every update through, and every
 * status write woke its controller again (and, through a watch, every
 * parent mapped to the object).
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
#include "kop/controller.h"

struct pred_case {
    const char *old_obj, *new_obj;
    bool generation_changed, labels_changed;
};

/* GEN(g, META): an object at generation g with more metadata fields META. */
#define GEN(g, meta) "{\"metadata\":{\"name\":\"a\",\"generation\":" #g meta "}}"
#define STATUS(g, phase)                                                                           \
    "{\"metadata\":{\"name\":\"a\",\"generation\":" #g "},\"status\":{\"phase\":\"" phase "\"}}"

static const struct pred_case cases[] = {
    /* A status write: same generation, no deletion mark on either. */
    {STATUS(3, "A"), STATUS(3, "B"), false, false},
    /* A spec change. */
    {GEN(3, ""), GEN(4, ""), true, false},
    /* The deletion mark appears (the generation may stay). */
    {GEN(3, ""), GEN(3, ",\"deletionTimestamp\":\"2026-11-27T10:00:00Z\""), true, false},
    /* Marked in both: nothing new. */
    {GEN(3, ",\"deletionTimestamp\":\"2026-11-27T10:00:00Z\""),
     GEN(3, ",\"deletionTimestamp\":\"2026-11-27T10:00:00Z\""), false, false},
    /* Objects without a generation (ConfigMaps): data changes do not count. */
    {"{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"1\"}}",
     "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"2\"}}", false, false},
    /* Labels: added, changed, removed, the same, absent on both. */
    {GEN(1, ""), GEN(1, ",\"labels\":{\"x\":\"1\"}"), false, true},
    {GEN(1, ",\"labels\":{\"x\":\"1\"}"), GEN(1, ",\"labels\":{\"x\":\"2\"}"), false, true},
    {GEN(1, ",\"labels\":{\"x\":\"1\"}"), GEN(1, ""), false, true},
    {GEN(1, ",\"labels\":{\"x\":\"1\"}"), GEN(1, ",\"labels\":{\"x\":\"1\"}"), false, false},
    {GEN(1, ",\"labels\":{}"), GEN(1, ""), false, false},
};

static void test_predicates(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *a = parse(cases[i].old_obj), *b = parse(cases[i].new_obj);
        if (kop_predicate_generation_changed(a, b, NULL) != cases[i].generation_changed)
            fail_msg("case %zu: generation_changed should be %d", i,
                     cases[i].generation_changed);
        if (kop_predicate_labels_changed(a, b, NULL) != cases[i].labels_changed)
            fail_msg("case %zu: labels_changed should be %d", i, cases[i].labels_changed);
        json_decref(a);
        json_decref(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_predicates)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

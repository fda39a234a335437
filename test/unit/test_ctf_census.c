/*
 * test_ctf_census.c - the Challenges of each definition by the generation
 * they run (operators/ctf/core/census.c): current, updating and behind
 * against a generation, moved between classes as a Challenge changes,
 * never counted twice (a resync files it again), out when it is being
 * deleted or deleted, and apart per namespace and definition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/census.h"

static json_t *chal(const char *uid, const char *ns, const char *def, const char *phase,
                    int runs)
{
    json_t *c = json_pack("{s:{s:s, s:s, s:s}, s:{s:s}, s:{}}", "metadata", "uid", uid,
                          "namespace", ns, "name", uid, "spec", "definition", def, "status");
    if (phase)
        json_object_set_new(json_object_get(c, "status"), "currentStatus", json_string(phase));
    if (runs > 0)
        json_object_set_new(json_object_get(c, "status"), "definitionGeneration",
                            json_integer(runs));
    return c;
}

static void expect(ctf_census *c, const char *ns, const char *def, int64_t gen, int current,
                   int updating, int behind)
{
    ctf_census_counts n = ctf_census_count(c, ns, def, gen);
    assert_int_equal(n.current, current);
    assert_int_equal(n.updating, updating);
    assert_int_equal(n.behind, behind);
}

static void seen(ctf_census *c, json_t *x)
{
    ctf_census_seen(c, x);
    json_decref(x);
}

static void test_counts(void **state)
{
    (void)state;
    ctf_census *c = NULL;
    assert_int_equal(ctf_census_new(&c), KOP_OK);
    expect(c, "ctf", "web", 2, 0, 0, 0);
    seen(c, chal("a", "ctf", "web", "Running", 1));
    seen(c, chal("b", "ctf", "web", "Running", 1));
    seen(c, chal("c", "ctf", "web", "Pending", 0)); /* runs nothing yet: in no count */
    seen(c, chal("d", "other", "web", "Running", 1));
    seen(c, chal("e", "ctf", "pwn", "Running", 1));
    expect(c, "ctf", "web", 1, 2, 0, 0);
    expect(c, "ctf", "web", 2, 0, 0, 2); /* the definition changed: both behind */
    /* The total counts the one running nothing yet too, and this namespace's only. */
    assert_int_equal(ctf_census_count(c, "ctf", "web", 2).total, 3);
    assert_int_equal(ctf_census_count(c, "other", "web", 2).total, 1);

    /* One is replaced: Updating, then Running the new generation. */
    seen(c, chal("a", "ctf", "web", "Updating", 1));
    expect(c, "ctf", "web", 2, 0, 1, 1);
    seen(c, chal("a", "ctf", "web", "Running", 2));
    seen(c, chal("a", "ctf", "web", "Running", 2)); /* filed again: counted once */
    expect(c, "ctf", "web", 2, 1, 0, 1);
    seen(c, chal("c", "ctf", "web", "Running", 2));
    expect(c, "ctf", "web", 2, 2, 0, 1);

    /* Being deleted, or deleted: out. */
    json_t *going = chal("b", "ctf", "web", "Terminating", 1);
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp",
                        json_string("2026-11-27T18:00:00Z"));
    seen(c, going);
    expect(c, "ctf", "web", 2, 2, 0, 0);
    assert_int_equal(ctf_census_count(c, "ctf", "web", 2).total, 2);
    ctf_census_gone(c, "a");
    ctf_census_gone(c, "never-seen");
    ctf_census_gone(c, NULL);
    expect(c, "ctf", "web", 2, 1, 0, 0);

    /* Other namespaces and definitions apart; unknown ones empty. */
    expect(c, "other", "web", 1, 1, 0, 0);
    expect(c, "ctf", "pwn", 1, 1, 0, 0);
    expect(c, "ctf", "nothing", 1, 0, 0, 0);
    expect(c, NULL, "web", 1, 0, 0, 0);
    ctf_census_free(c);
    ctf_census_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

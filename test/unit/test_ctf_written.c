/*
 * test_ctf_written.c - the status last written to each Challenge (operators/
 * ctf/core/written.c): kept while the cache shows an older resource
 * version and for CTF_WRITTEN_LAG_MS at most, dropped as soon as the cache
 * shows the write, when it ages out or its Challenge goes; a copy, never
 * the caller's object; capped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/written.h"

static void test_kept_until_cached(void **state)
{
    (void)state;
    ctf_written *w = NULL;
    const int64_t t = 1000000;
    assert_int_equal(ctf_written_new(&w), KOP_OK);
    json_t *status = json_pack("{s:s}", "currentStatus", "Updating");
    ctf_written_note(w, "u1", "42", status, t);
    json_object_set_new(status, "currentStatus", json_string("Running")); /* the caller's own */

    /* The cache still shows the version before the write: the write is kept, as written. */
    json_t *got = ctf_written_dup(w, "u1", "41", t + 5);
    assert_non_null(got);
    assert_string_equal(json_string_value(json_object_get(got, "currentStatus")), "Updating");
    json_decref(got);
    assert_int_equal(ctf_written_count(w), 1);

    /* The cache shows the write: dropped, and nothing is vouched for any more. */
    assert_null(ctf_written_dup(w, "u1", "42", t + 10));
    assert_int_equal(ctf_written_count(w), 0);
    assert_null(ctf_written_dup(w, "u1", "41", t + 11));

    /* Another Challenge, no note, no uid: nothing. */
    assert_null(ctf_written_dup(w, "u2", "1", t));
    assert_null(ctf_written_dup(w, NULL, "1", t));
    json_decref(status);
    ctf_written_free(w);
}

static void test_ages_and_forget(void **state)
{
    (void)state;
    ctf_written *w = NULL;
    const int64_t t = 1000000;
    assert_int_equal(ctf_written_new(&w), KOP_OK);
    json_t *status = json_pack("{s:s}", "currentStatus", "Running");

    /* A cache lagging longer than CTF_WRITTEN_LAG_MS: the note is not trusted, and dropped. */
    ctf_written_note(w, "u1", "7", status, t);
    json_t *got = ctf_written_dup(w, "u1", "6", t + CTF_WRITTEN_LAG_MS - 1);
    assert_non_null(got);
    json_decref(got);
    assert_null(ctf_written_dup(w, "u1", "6", t + CTF_WRITTEN_LAG_MS));
    assert_int_equal(ctf_written_count(w), 0);
    /* A clock that went back: not trusted either. */
    ctf_written_note(w, "u1", "7", status, t);
    assert_null(ctf_written_dup(w, "u1", "6", t - 1));

    /* A newer write replaces the note; forget drops it. */
    ctf_written_note(w, "u1", "7", status, t);
    ctf_written_note(w, "u1", "9", status, t + 1);
    assert_int_equal(ctf_written_count(w), 1);
    assert_null(ctf_written_dup(w, "u1", "9", t + 2));
    ctf_written_note(w, "u1", "9", status, t);
    ctf_written_forget(w, "u1");
    ctf_written_forget(w, "never-noted");
    ctf_written_forget(w, NULL);
    assert_int_equal(ctf_written_count(w), 0);

    /* What cannot be a note is not noted. */
    ctf_written_note(w, NULL, "1", status, t);
    ctf_written_note(w, "u1", NULL, status, t);
    ctf_written_note(w, "u1", "", status, t);
    ctf_written_note(w, "u1", "1", NULL, t);
    assert_int_equal(ctf_written_count(w), 0);
    json_decref(status);
    ctf_written_free(w);
    ctf_written_free(NULL);
}

static void test_capped(void **state)
{
    (void)state;
    ctf_written *w = NULL;
    char uid[32];
    assert_int_equal(ctf_written_new(&w), KOP_OK);
    json_t *status = json_object();
    for (int i = 0; i < CTF_WRITTEN_MAX + 10; i++) {
        snprintf(uid, sizeof uid, "u%d", i);
        ctf_written_note(w, uid, "1", status, 0);
    }
    assert_int_equal(ctf_written_count(w), CTF_WRITTEN_MAX);
    /* Full: a new Challenge's write is not noted, a noted one's is still replaced. */
    assert_null(ctf_written_dup(w, uid, "0", 1));
    ctf_written_note(w, "u0", "2", status, 5);
    json_t *got = ctf_written_dup(w, "u0", "1", 6); /* the first note (rv 1) would be dropped */
    assert_non_null(got);
    json_decref(got);
    json_decref(status);
    ctf_written_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_until_cached),
        cmocka_unit_test(test_ages_and_forget),
        cmocka_unit_test(test_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

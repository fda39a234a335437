/*
 * test_ctf_applied.c - what the reconciler last applied (operators/ctf/
 * core/applied.c): the same children seen whole in the caches are skipped; a
 * child missing just after the apply waits for the caches, later it is
 * applied again; a Deployment edited by someone else (its generation ahead)
 * is applied again at once; other children, an old record, a forgotten one
 * or none at all mean applying. The digest covers every byte of the
 * children and ignores the order of keys. A process with no record takes
 * the stamp of a full apply seen on the server as its record, only when it
 * is this very digest and no cached child is missing. Each child is also
 * remembered by itself: one applied as this digest within the resync (a
 * Deployment: at the generation the cache shows) need not go out again; the
 * records go with the instance's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <kop/meta.h>

#include "core/applied.h"

static json_t *children(const char *flag)
{
    return json_pack("[{s:s, s:{s:s}}, {s:s, s:{s:s, s:s}, s:{s:s}}]", "kind", "Namespace",
                     "metadata", "name", "ctf-web-team-a", "kind", "Secret", "metadata", "name",
                     "flag", "namespace", "ctf-web-team-a", "stringData", "flag", flag);
}

static void test_digest(void **state)
{
    (void)state;
    char a[CTF_DIGEST_HEX], b[CTF_DIGEST_HEX], c[CTF_DIGEST_HEX];
    json_t *x = children("flag{a}"), *y = children("flag{b}");
    json_t *z =
        json_loads("[{\"metadata\": {\"name\": \"ctf-web-team-a\"}, \"kind\": \"Namespace\"},"
                   " {\"stringData\": {\"flag\": \"flag{a}\"}, \"kind\": \"Secret\","
                   " \"metadata\": {\"namespace\": \"ctf-web-team-a\", \"name\": \"flag\"}}]",
                   0, NULL);
    assert_non_null(z);
    assert_int_equal(ctf_applied_digest(x, a), KOP_OK);
    assert_int_equal(ctf_applied_digest(y, b), KOP_OK);
    assert_int_equal(ctf_applied_digest(z, c), KOP_OK);
    assert_int_equal(strlen(a), CTF_DIGEST_HEX - 1);
    assert_string_not_equal(a, b); /* one byte of the flag differs */
    assert_string_equal(a, c);     /* the order of keys does not matter */
    json_decref(x);
    json_decref(y);
    json_decref(z);
}

static void test_decide(void **state)
{
    (void)state;
    ctf_applied *a = NULL;
    long wait = -1;
    const int64_t t = 1000000;
    const ctf_applied_seen whole = {.missing = 0, .generations = 2};
    const ctf_applied_seen lagging = {.missing = 1, .generations = 1};
    const ctf_applied_seen edited = {.missing = 0, .generations = 3};
    assert_int_equal(ctf_applied_new(&a), KOP_OK);

    /* Nothing known: apply. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &whole, t, &wait), CTF_APPLY);
    ctf_applied_record(a, "u1", "d1", 2, t);
    /* The same, seen whole: skip, at once and for the resync period. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &whole, t, &wait), CTF_APPLY_SKIP);
    assert_int_equal(
        ctf_applied_decide(a, "u1", "d1", &whole, t + CTF_APPLIED_RESYNC_MS - 1, &wait),
        CTF_APPLY_SKIP);
    /* Then everything once more. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &whole, t + CTF_APPLIED_RESYNC_MS, &wait),
                     CTF_APPLY);
    /* Other children: apply. Another instance: apply. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d2", &whole, t, &wait), CTF_APPLY);
    assert_int_equal(ctf_applied_decide(a, "u2", "d1", &whole, t, &wait), CTF_APPLY);
    /* Missing or behind just after the apply: wait out the lag; later: apply. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &lagging, t + 1000, &wait), CTF_APPLY_WAIT);
    assert_int_equal(wait, CTF_APPLIED_LAG_MS - 1000);
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &lagging, t + CTF_APPLIED_LAG_MS, &wait),
                     CTF_APPLY);
    assert_int_equal(wait, 0);
    /* A Deployment ahead of what was applied was edited: apply at once. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &edited, t + 1, &wait), CTF_APPLY);
    /* A clock that went back is no proof of anything. */
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &whole, t - 1, &wait), CTF_APPLY);
    /* Forgotten: apply. */
    assert_true(ctf_applied_known(a, "u1"));
    ctf_applied_forget(a, "u1");
    assert_false(ctf_applied_known(a, "u1"));
    assert_false(ctf_applied_known(a, NULL));
    assert_int_equal(ctf_applied_decide(a, "u1", "d1", &whole, t, &wait), CTF_APPLY);
    ctf_applied_forget(a, "never-known");
    ctf_applied_free(a);
}

static void test_stamp_and_seed(void **state)
{
    (void)state;
    ctf_applied *a = NULL;
    long wait = -1;
    char d[CTF_DIGEST_HEX], after[CTF_DIGEST_HEX];
    const int64_t t = 5000000;
    const ctf_applied_seen whole = {.missing = 0, .generations = 4};
    const ctf_applied_seen lagging = {.missing = 1, .generations = 4};
    json_t *x = children("flag{a}");
    assert_int_equal(ctf_applied_new(&a), KOP_OK);
    assert_int_equal(ctf_applied_digest(x, d), KOP_OK);

    /* The stamp goes on the child given, with the time, and nowhere else. */
    char stamp[CTF_STAMP_SIZE], older[CTF_STAMP_SIZE], other[CTF_DIGEST_HEX];
    snprintf(stamp, sizeof stamp, "1700000000123:%s", d);
    assert_int_equal(ctf_applied_stamp(json_array_get(x, 1), d, 1700000000123), KOP_OK);
    assert_string_equal(kop_meta_annotation(json_array_get(x, 1), CTF_ANNOTATION_APPLIED), stamp);
    assert_null(kop_meta_annotation(json_array_get(x, 0), CTF_ANNOTATION_APPLIED));
    assert_int_equal(ctf_applied_digest(x, after), KOP_OK);
    assert_string_not_equal(after, d); /* a digest is taken before stamping, never after */
    assert_int_equal(ctf_applied_stamp(NULL, d, 1), KOP_EINVAL);
    assert_int_equal(ctf_applied_stamp(json_array_get(x, 0), "", 1), KOP_EINVAL);
    assert_int_equal(ctf_applied_stamp(json_array_get(x, 0), "abc", 1), KOP_EINVAL);
    assert_int_equal(ctf_applied_stamp(json_array_get(x, 0), d, -1), KOP_EINVAL);
    char not_hex[CTF_DIGEST_HEX];
    memset(not_hex, 'z', CTF_DIGEST_HEX - 1);
    not_hex[CTF_DIGEST_HEX - 1] = '\0';
    assert_int_equal(ctf_applied_stamp(json_array_get(x, 0), not_hex, 1), KOP_EINVAL);

    /* The newer of two stamps wins; a stamp from before times counts as the oldest; what is
     * not a stamp is none. */
    memset(other, 'a', CTF_DIGEST_HEX - 1);
    other[CTF_DIGEST_HEX - 1] = '\0';
    snprintf(older, sizeof older, "1699999999999:%s", other);
    assert_ptr_equal(ctf_applied_stamp_newer(older, stamp), stamp);
    assert_ptr_equal(ctf_applied_stamp_newer(stamp, older), stamp);
    assert_ptr_equal(ctf_applied_stamp_newer(other, older), older);
    assert_ptr_equal(ctf_applied_stamp_newer(older, older), older);
    assert_ptr_equal(ctf_applied_stamp_newer(NULL, other), other);
    assert_ptr_equal(ctf_applied_stamp_newer(stamp, "not-a-stamp"), stamp);
    assert_null(ctf_applied_stamp_newer("12:zz", ":"));
    assert_null(ctf_applied_stamp_newer("x:abc", NULL));
    char long_ms[CTF_STAMP_SIZE + 8];
    snprintf(long_ms, sizeof long_ms, "1234567890123456789:%s", d);
    assert_null(ctf_applied_stamp_newer(long_ms, NULL)); /* more digits than a time has */

    /* No stamp, another digest's stamp, or a child missing: no record. */
    assert_false(ctf_applied_seed(a, "u1", d, NULL, &whole, t));
    assert_false(ctf_applied_seed(a, "u1", d, older, &whole, t));
    assert_false(ctf_applied_seed(a, "u1", d, "another-digest", &whole, t));
    assert_false(ctf_applied_seed(a, "u1", d, stamp, &lagging, t));
    assert_false(ctf_applied_known(a, "u1"));
    /* This digest, seen whole: a record, and the next pass writes nothing. */
    assert_true(ctf_applied_seed(a, "u1", d, stamp, &whole, t));
    assert_int_equal(ctf_applied_decide(a, "u1", d, &whole, t, &wait), CTF_APPLY_SKIP);
    /* A Deployment edited since, seen after the seed: applied again. */
    const ctf_applied_seen edited = {.missing = 0, .generations = 5};
    assert_int_equal(ctf_applied_decide(a, "u1", d, &edited, t + 1, &wait), CTF_APPLY);
    /* A record of this process's own is never replaced by a stamp. */
    ctf_applied_record(a, "u2", "mine", 1, t);
    assert_false(ctf_applied_seed(a, "u2", d, stamp, &whole, t));
    assert_int_equal(ctf_applied_decide(a, "u2", "mine", &(ctf_applied_seen){0, 1}, t, &wait),
                     CTF_APPLY_SKIP);
    /* The seeded record ages like any other: everything again at the resync. */
    assert_int_equal(ctf_applied_decide(a, "u1", d, &whole, t + CTF_APPLIED_RESYNC_MS, &wait),
                     CTF_APPLY);
    json_decref(x);
    ctf_applied_free(a);
}

static void test_children(void **state)
{
    (void)state;
    ctf_applied *a = NULL;
    const int64_t t = 1000000;
    char key[CTF_CHILD_KEY_SIZE];
    json_t *x = children("flag{a}");
    assert_int_equal(ctf_applied_new(&a), KOP_OK);
    ctf_applied_child_key(json_array_get(x, 1), key, sizeof key);
    assert_string_equal(key, "Secret/ctf-web-team-a/flag");
    ctf_applied_child_key(json_array_get(x, 0), key, sizeof key);
    assert_string_equal(key, "Namespace//ctf-web-team-a");

    /* A child applied as this digest, within the resync: skipped; another digest, an old
     * record or none at all: applied. */
    json_t *was = json_pack("{s:s, s:I, s:I}", "digest", "d1", "at", (json_int_t)t,
                            "generation", (json_int_t)0);
    assert_true(ctf_applied_child_skip(was, "d1", -1, t + 5));
    assert_true(ctf_applied_child_skip(was, "d1", -1, t + CTF_APPLIED_RESYNC_MS - 1));
    assert_false(ctf_applied_child_skip(was, "d1", -1, t + CTF_APPLIED_RESYNC_MS));
    assert_false(ctf_applied_child_skip(was, "d1", -1, t - 1));
    assert_false(ctf_applied_child_skip(was, "d2", -1, t + 5));
    assert_false(ctf_applied_child_skip(NULL, "d1", -1, t + 5));
    json_decref(was);
    /* A Deployment: only at the generation its apply answered (edited since: applied). */
    was = json_pack("{s:s, s:I, s:I}", "digest", "d1", "at", (json_int_t)t, "generation",
                    (json_int_t)3);
    assert_true(ctf_applied_child_skip(was, "d1", 3, t + 5));
    assert_false(ctf_applied_child_skip(was, "d1", 4, t + 5));
    assert_false(ctf_applied_child_skip(was, "d1", -2, t + 5)); /* not in the cache */

    /* Kept on the instance's record only, and gone with it. */
    ctf_applied_children_keep(a, "u1", json_pack("{s:O}", "Deployment/ns/web", was));
    assert_null(ctf_applied_children_dup(a, "u1")); /* no record to keep them on */
    ctf_applied_record(a, "u1", "whole", 3, t);
    ctf_applied_children_keep(a, "u1", json_pack("{s:O}", "Deployment/ns/web", was));
    json_t *kids = ctf_applied_children_dup(a, "u1");
    assert_non_null(kids);
    assert_true(json_equal(json_object_get(kids, "Deployment/ns/web"), was));
    json_decref(kids);
    ctf_applied_forget(a, "u1");
    assert_null(ctf_applied_children_dup(a, "u1"));
    assert_null(ctf_applied_children_dup(a, NULL));
    json_decref(was);
    json_decref(x);
    ctf_applied_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_stamp_and_seed),
        cmocka_unit_test(test_children),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

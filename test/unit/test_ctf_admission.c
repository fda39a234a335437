/*
 * test_ctf_admission.c - the quotas (operators/ctf/admission.c): admitting
 * up to the per-team and CTF-wide caps, asking again answers the same,
 * release frees a slot, the API's check admits nothing, and the Challenge
 * cache's events rebuild the counts as a restarted operator would: an
 * admitted Challenge counts, one refused for quota does not, one being
 * deleted leaves. The counts' invariant is checked by KOP_ASSERT in debug
 * builds (this test is built with KOP_DEBUG), so a miscount aborts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_internal.h"

/* chal makes a Challenge of team in ns with uid; status as given (NULL: none). */
static json_t *chal(const char *ns, const char *team, const char *uid, const char *phase,
                    const char *reason, const char *instance_ns)
{
    json_t *c = json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "metadata", "name", uid, "namespace",
                          ns, "uid", uid, "spec", "team", team, "definition", "web");
    json_t *st = json_object();
    if (phase)
        json_object_set_new(st, "currentStatus", json_string(phase));
    if (reason)
        json_object_set_new(st, "reason", json_string(reason));
    if (instance_ns)
        json_object_set_new(st, "namespace", json_string(instance_ns));
    json_object_set_new(c, "status", st);
    return c;
}

static void deleting(json_t *c)
{
    json_object_set_new(json_object_get(c, "metadata"), "deletionTimestamp",
                        json_string("2026-11-25T00:00:00Z"));
}

static void test_team_cap(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(2, 100, &a), KOP_OK);
    json_t *c1 = chal("ctf", "t1", "u1", NULL, NULL, NULL);
    json_t *c2 = chal("ctf", "t1", "u2", NULL, NULL, NULL);
    json_t *c3 = chal("ctf", "t1", "u3", NULL, NULL, NULL);
    json_t *other = chal("ctf", "t2", "u4", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c1, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c2, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c1, false, msg, sizeof msg), CTF_ADMIT_OK); /* again */
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 2);
    assert_int_equal(ctf_admission_admit(a, c3, false, msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    assert_non_null(strstr(msg, "team t1 already runs 2 instances"));
    /* Another team, and the same team in another namespace, are not full. */
    assert_int_equal(ctf_admission_admit(a, other, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_check(a, "ctf2", "t1", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_check(a, "ctf", "t1", msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    /* A release frees the slot; releasing twice frees nothing more. */
    assert_true(ctf_admission_release(a, "u1"));
    assert_false(ctf_admission_release(a, "u1"));
    assert_int_equal(ctf_admission_admit(a, c3, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_count(a, "ctf", NULL), 3);
    json_decref(c1);
    json_decref(c2);
    json_decref(c3);
    json_decref(other);
    ctf_admission_free(a);
}

static void test_ctf_cap(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256], uid[8], team[8];
    assert_int_equal(ctf_admission_new(3, 5, &a), KOP_OK);
    for (int i = 0; i < 6; i++) {
        snprintf(uid, sizeof uid, "u%d", i);
        snprintf(team, sizeof team, "t%d", i);
        json_t *c = chal("ctf", team, uid, NULL, NULL, NULL);
        ctf_verdict v = ctf_admission_admit(a, c, false, msg, sizeof msg);
        assert_int_equal(v, i < 5 ? CTF_ADMIT_OK : CTF_ADMIT_CTF_FULL);
        json_decref(c);
    }
    assert_non_null(strstr(msg, "maximum of 5 instances"));
    assert_int_equal(ctf_admission_check(a, "ctf", "new", msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_count(a, "ctf", NULL), 5);
    ctf_admission_free(a);
}

/* Warm pools count against --max-instances; a claim takes a warm slot. */
static void test_warm_pools(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 4, &a), KOP_OK);
    ctf_admission_set_warm(a, "ctf/web", 2);
    ctf_admission_set_warm(a, "ctf/nc", 1);
    assert_int_equal(ctf_admission_room(a), 1);
    json_t *c1 = chal("ctf", "t1", "u1", NULL, NULL, NULL);
    json_t *c2 = chal("ctf", "t2", "u2", NULL, NULL, NULL);
    json_t *c3 = chal("ctf", "t3", "u3", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c1, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_room(a), 0);
    /* Fresh: 1 Challenge + 3 warm fill the CTF; a claim still fits. */
    assert_int_equal(ctf_admission_admit(a, c2, false, msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_admit(a, c2, true, msg, sizeof msg), CTF_ADMIT_OK);
    /* The pool reports the claimed one gone; setting again replaces. */
    ctf_admission_set_warm(a, "ctf/web", 1);
    ctf_admission_set_warm(a, "ctf/web", 1);
    assert_int_equal(ctf_admission_room(a), 0);
    ctf_admission_set_warm(a, "ctf/web", 0);
    ctf_admission_set_warm(a, "ctf/nc", -3); /* nonsense counts as none */
    assert_int_equal(ctf_admission_room(a), 2);
    assert_int_equal(ctf_admission_admit(a, c3, false, msg, sizeof msg), CTF_ADMIT_OK);
    /* Challenges alone at the cap: even a claim is refused. */
    json_t *c4 = chal("ctf", "t4", "u4", NULL, NULL, NULL);
    json_t *c5 = chal("ctf", "t5", "u5", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c4, true, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c5, true, msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_room(a), 0);
    json_decref(c1);
    json_decref(c2);
    json_decref(c3);
    json_decref(c4);
    json_decref(c5);
    ctf_admission_free(a);
}

static void test_bad_challenge(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 5, &a), KOP_OK);
    json_t *c = json_pack("{s:{s:s, s:s}}", "metadata", "name", "x", "namespace", "ctf");
    assert_int_not_equal(ctf_admission_admit(a, c, false, msg, sizeof msg), CTF_ADMIT_OK);
    assert_true(msg[0] != '\0');
    assert_int_equal(ctf_admission_count(a, NULL, NULL), 0);
    json_decref(c);
    ctf_admission_free(a);
}

/* The cache's events, as after a restart: what was admitted counts again. */
static void test_cache_events(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(2, 100, &a), KOP_OK);
    kop_informer_handler h = ctf_admission_handler(a);
    json_t *running = chal("ctf", "t1", "u1", "Running", NULL, "ctf-web-1");
    json_t *pending = chal("ctf", "t1", "u2", "Pending", NULL, "ctf-web-2");
    json_t *refused = chal("ctf", "t1", "u3", "Error", CTF_REASON_QUOTA, NULL);
    json_t *fresh = chal("ctf", "t1", "u4", NULL, NULL, NULL);
    h.on_add(running, h.user);
    h.on_add(pending, h.user);
    h.on_add(refused, h.user);
    h.on_add(fresh, h.user);
    h.on_add(running, h.user); /* twice is once */
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 2);
    assert_int_equal(ctf_admission_admit(a, refused, false, msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    /* Being deleted: the slot frees at once, and the refused one gets it. */
    json_t *going = json_deep_copy(running);
    deleting(going);
    h.on_update(running, going, h.user);
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 1);
    assert_int_equal(ctf_admission_admit(a, refused, false, msg, sizeof msg), CTF_ADMIT_OK);
    /* Deleted: gone from the set (already out: nothing changes). */
    h.on_delete(going, h.user);
    h.on_delete(pending, h.user);
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 1);
    assert_int_equal(ctf_admission_count(a, NULL, NULL), 1);
    json_decref(going);
    json_decref(running);
    json_decref(pending);
    json_decref(refused);
    json_decref(fresh);
    ctf_admission_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_team_cap),     cmocka_unit_test(test_ctf_cap),
        cmocka_unit_test(test_warm_pools),   cmocka_unit_test(test_bad_challenge),
        cmocka_unit_test(test_cache_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

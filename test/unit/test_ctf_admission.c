/*
 * test_ctf_admission.c - the quotas (operators/ctf/core/admission.c): admitting
 * up to the per-team and CTF-wide caps, asking again answers the same,
 * release frees a slot, the API's check admits nothing, and the Challenge
 * cache's events rebuild the counts as a restarted operator would: an
 * admitted Challenge counts, one refused for quota does not, one being
 * deleted leaves. Warm instances (issue 27, items 1 and 8): each counts
 * from the pool's reservation, which the cap refuses like an admission; a
 * Challenge of a pooled definition takes a warm slot only by claiming it,
 * and one that claims none is admitted fresh against the total, warm ones
 * included; the namespaces' cache events count the warm instances that
 * exist. A pool pass's warm starts racing fresh admissions (issue 27, item
 * 8): each start is reserved as it is made, so the two together never grant
 * more than --max-instances. The counts' invariant is checked by KOP_ASSERT in debug
 * builds (this test is built with KOP_DEBUG), so a miscount aborts.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/admission.h"
#include "core/names.h"

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
    assert_int_equal(ctf_admission_admit(a, c1, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c2, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c1, NULL, msg, sizeof msg), CTF_ADMIT_OK); /* again */
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 2);
    assert_int_equal(ctf_admission_admit(a, c3, NULL, msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    assert_non_null(strstr(msg, "team t1 already runs 2 instances"));
    /* Another team, and the same team in another namespace, are not full. */
    assert_int_equal(ctf_admission_admit(a, other, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_check(a, "ctf2", "t1", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_check(a, "ctf", "t1", msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    /* A release frees the slot; releasing twice frees nothing more. */
    assert_true(ctf_admission_release(a, "u1"));
    assert_false(ctf_admission_release(a, "u1"));
    assert_int_equal(ctf_admission_admit(a, c3, NULL, msg, sizeof msg), CTF_ADMIT_OK);
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
        ctf_verdict v = ctf_admission_admit(a, c, NULL, msg, sizeof msg);
        assert_int_equal(v, i < 5 ? CTF_ADMIT_OK : CTF_ADMIT_CTF_FULL);
        json_decref(c);
    }
    assert_non_null(strstr(msg, "maximum of 5 instances"));
    assert_int_equal(ctf_admission_check(a, "ctf", "new", msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_count(a, "ctf", NULL), 5);
    ctf_admission_free(a);
}

/* warm_ns makes an instance namespace of pool ctf/def with id (claimed by uid when set). */
static json_t *warm_ns(const char *def, const char *id, const char *uid)
{
    char name[64];
    snprintf(name, sizeof name, "ctf-%s-pool-%s", def, id);
    json_t *n = json_pack("{s:{s:s, s:{s:s, s:s, s:s}, s:{}}}", "metadata", "name", name, "labels",
                          CTF_LABEL_DEFINITION, def, CTF_LABEL_POOL, id, CTF_LABEL_POOL_NS, "ctf",
                          "annotations");
    if (uid) {
        json_t *meta = json_object_get(n, "metadata");
        json_object_set_new(json_object_get(meta, "labels"), CTF_LABEL_CHALLENGE, json_string(uid));
        json_object_set_new(json_object_get(meta, "annotations"), CTF_ANNOTATION_CHALLENGE_UID,
                            json_string(uid));
    }
    return n;
}

/* counted: every instance namespace the ledger counts, warm and the teams'. */
static int counted(ctf_admission *a, int cap)
{
    return cap - ctf_admission_room(a);
}

/* Warm instances count against --max-instances; the pool reserves each start. */
static void test_warm_reserved(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 4, &a), KOP_OK);
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w1"));
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w1")); /* twice is once */
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w2"));
    assert_true(ctf_admission_reserve_warm(a, "ctf/nc", "n1"));
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 2);
    assert_int_equal(ctf_admission_warm(a, NULL), 3);
    assert_int_equal(ctf_admission_room(a), 1);
    json_t *c1 = chal("ctf", "t1", "u1", NULL, NULL, NULL);
    json_t *c2 = chal("ctf", "t2", "u2", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c1, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    /* Full: no fresh instance, and no more warm ones. */
    assert_int_equal(ctf_admission_admit(a, c2, NULL, msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_non_null(strstr(msg, "--max-instances"));
    assert_false(ctf_admission_reserve_warm(a, "ctf/web", "w3"));
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 2);
    /* A start that failed gives its slot back. */
    ctf_admission_drop_warm(a, "n1");
    ctf_admission_drop_warm(a, "n1");
    assert_int_equal(ctf_admission_room(a), 1);
    assert_int_equal(ctf_admission_admit(a, c2, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(counted(a, 4), 4);
    json_decref(c1);
    json_decref(c2);
    ctf_admission_free(a);
}

/*
 * Issue 27, item 1, as the ledger sees it: --max-instances 10, a pool of 8
 * warm instances, 10 Challenges of an autoscaled pool with none: each is
 * built fresh, so only 2 fit; the other 8 are refused, never 18 in all.
 */
static void test_pooled_fallback(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256], uid[16], ns[16];
    assert_int_equal(ctf_admission_new(3, 10, &a), KOP_OK);
    for (int i = 0; i < 8; i++) {
        snprintf(ns, sizeof ns, "a%d", i);
        assert_true(ctf_admission_reserve_warm(a, "ctf/a", ns));
    }
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(uid, sizeof uid, "b%d", i);
        json_t *c = chal("ctf", uid, uid, NULL, NULL, NULL);
        /* Admitted as a Challenge of pool b: b has no warm slot, so fresh or nothing. */
        ctf_verdict v = ctf_admission_admit(a, c, "ctf/b", msg, sizeof msg);
        if (v == CTF_ADMIT_OK) /* its claim finds nothing: built fresh */
            v = ctf_admission_unclaimed(a, c, msg, sizeof msg);
        ok += v == CTF_ADMIT_OK;
        if (v != CTF_ADMIT_OK)
            assert_non_null(strstr(msg, "--max-instances"));
        assert_true(counted(a, 10) <= 10);
        json_decref(c);
    }
    assert_int_equal(ok, 2);
    assert_int_equal(ctf_admission_count(a, NULL, NULL), 2);
    assert_int_equal(ctf_admission_warm(a, NULL), 8);
    ctf_admission_free(a);
}

/*
 * A Challenge of a pooled definition waits on a free warm slot of its pool
 * (the total does not change); a claim won moves the slot to it; a claim
 * lost admits it fresh or refuses it. Two cannot wait on one slot.
 */
static void test_claim_slots(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 3, &a), KOP_OK);
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w1"));
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w2"));
    json_t *c1 = chal("ctf", "t1", "u1", NULL, NULL, NULL);
    json_t *c2 = chal("ctf", "t2", "u2", NULL, NULL, NULL);
    json_t *c3 = chal("ctf", "t3", "u3", NULL, NULL, NULL);
    json_t *c4 = chal("ctf", "t4", "u4", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c1, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_room(a), 0);
    /* Full, but the pool has two warm slots: two may wait on them, a third may not. */
    assert_int_equal(ctf_admission_admit(a, c2, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c3, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_admit(a, c4, "ctf/web", msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_admit(a, c4, "ctf/nc", msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(counted(a, 3), 3);
    assert_int_equal(ctf_admission_count(a, "ctf", "t2"), 1); /* a waiting one is the team's */
    /* c2 claims w1: the slot is c2's now; the total is unchanged. */
    ctf_admission_claimed(a, c2, "w1");
    ctf_admission_claimed(a, c2, "w1");
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 1);
    assert_int_equal(counted(a, 3), 3);
    /* c3 finds none Ready: fresh, and the total is full (w2 still counts): refused. */
    assert_int_equal(ctf_admission_unclaimed(a, c3, msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_non_null(strstr(msg, "--max-instances"));
    assert_int_equal(ctf_admission_count(a, "ctf", "t3"), 0);
    assert_int_equal(counted(a, 3), 3);
    /* Asking again after a claim won answers the same. */
    assert_int_equal(ctf_admission_admit(a, c2, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_unclaimed(a, c1, msg, sizeof msg), CTF_ADMIT_OK);
    /* w2 goes: c3, claiming again, finds no warm slot but room, and is admitted fresh. */
    ctf_admission_drop_warm(a, "w2");
    assert_int_equal(ctf_admission_admit(a, c3, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(ctf_admission_unclaimed(a, c3, msg, sizeof msg), CTF_ADMIT_OK);
    assert_int_equal(counted(a, 3), 3);
    /* A Challenge admitted fresh that then wins a claim frees its fresh slot. */
    assert_true(ctf_admission_release(a, "u3"));
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w3"));
    assert_int_equal(ctf_admission_admit(a, c4, NULL, msg, sizeof msg), CTF_ADMIT_CTF_FULL);
    assert_int_equal(ctf_admission_release(a, "u1"), true);
    assert_int_equal(ctf_admission_admit(a, c4, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    ctf_admission_claimed(a, c4, "w3");
    assert_int_equal(counted(a, 3), 2);
    /* A waiting Challenge deleted gives its claim on the slot back. */
    assert_true(ctf_admission_reserve_warm(a, "ctf/web", "w4"));
    json_t *c5 = chal("ctf", "t5", "u5", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c5, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    assert_true(ctf_admission_release(a, "u5"));
    assert_int_equal(ctf_admission_admit(a, c3, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    json_decref(c1);
    json_decref(c2);
    json_decref(c3);
    json_decref(c4);
    json_decref(c5);
    ctf_admission_free(a);
}

/*
 * The namespaces' cache events: a warm namespace counts (after a restart
 * too); claimed, its slot becomes its Challenge's when that Challenge is
 * admitted here (the event may come before the claim's answer), or it stays
 * counted until it goes; being deleted or deleted, it no longer counts.
 */
static void test_namespace_events(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 3, &a), KOP_OK);
    kop_informer_handler h = ctf_admission_namespace_handler(a);
    json_t *w1 = warm_ns("web", "01", NULL), *w2 = warm_ns("web", "02", NULL);
    json_t *other = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "ctf-web-t9", "labels",
                              CTF_LABEL_DEFINITION, "web");
    h.on_add(w1, h.user);
    h.on_add(w2, h.user);
    h.on_update(w2, w2, h.user);
    h.on_add(other, h.user); /* a fresh instance's: the Challenges count it */
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 2);
    /* u1 waits on a slot; the cache shows w1 claimed by u1 before the claim returns. */
    json_t *c1 = chal("ctf", "t1", "u1", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c1, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    json_t *c2 = chal("ctf", "t2", "u2", NULL, NULL, NULL);
    assert_int_equal(ctf_admission_admit(a, c2, "ctf/web", msg, sizeof msg), CTF_ADMIT_OK);
    json_t *w1c = warm_ns("web", "01", "u2");
    h.on_update(w1, w1c, h.user);
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 1);
    assert_int_equal(counted(a, 3), 3);
    ctf_admission_claimed(a, c2, kop_meta_name(w1c)); /* the answer: nothing more changes */
    assert_int_equal(counted(a, 3), 3);
    /* A claim by a Challenge not admitted here: w2 stays counted until it goes. */
    json_t *w2c = warm_ns("web", "02", "u-elsewhere");
    h.on_update(w2, w2c, h.user);
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 1);
    json_object_set_new(json_object_get(w2c, "metadata"), "deletionTimestamp",
                        json_string("2026-11-25T00:00:00Z"));
    h.on_update(w2c, w2c, h.user);
    assert_int_equal(ctf_admission_warm(a, "ctf/web"), 0);
    h.on_delete(w2c, h.user);
    h.on_delete(w1c, h.user); /* a claimed one deleted: it was the team's, not warm */
    assert_int_equal(ctf_admission_warm(a, NULL), 0);
    assert_int_equal(counted(a, 3), 2);
    json_decref(w1);
    json_decref(w2);
    json_decref(w1c);
    json_decref(w2c);
    json_decref(other);
    json_decref(c1);
    json_decref(c2);
    ctf_admission_free(a);
}

static void test_bad_challenge(void **state)
{
    (void)state;
    ctf_admission *a = NULL;
    char msg[256];
    assert_int_equal(ctf_admission_new(3, 5, &a), KOP_OK);
    json_t *c = json_pack("{s:{s:s, s:s}}", "metadata", "name", "x", "namespace", "ctf");
    assert_int_not_equal(ctf_admission_admit(a, c, NULL, msg, sizeof msg), CTF_ADMIT_OK);
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
    assert_int_equal(ctf_admission_admit(a, refused, NULL, msg, sizeof msg), CTF_ADMIT_TEAM_FULL);
    /* Being deleted: the slot frees at once, and the refused one gets it. */
    json_t *going = json_deep_copy(running);
    deleting(going);
    h.on_update(running, going, h.user);
    assert_int_equal(ctf_admission_count(a, "ctf", "t1"), 1);
    assert_int_equal(ctf_admission_admit(a, refused, NULL, msg, sizeof msg), CTF_ADMIT_OK);
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

/* ---- warm starts racing admissions ---------------------------------------------- */

#define RACE_CAP      10
#define RACE_WANT     10 /* the pool's target: the whole cap */
#define RACE_ADMITTER 4
#define RACE_EACH     5 /* Challenges each admitter brings: 20 in all */

struct race {
    ctf_admission *a;
    int id;
    int granted;
};

/* pool_pass starts warm instances as controller/pool.c's start_warm does: one reservation per start. */
static void *pool_pass(void *arg)
{
    struct race *r = arg;
    char ns[32];
    for (int i = 0; i < RACE_WANT; i++) {
        snprintf(ns, sizeof ns, "ctf-warm-pool-%02d", i);
        if (!ctf_admission_reserve_warm(r->a, "ctf/warm", ns))
            break;
        r->granted++;
        sched_yield(); /* the create's round trip, during which admissions go on */
    }
    return NULL;
}

/* admitter admits fresh Challenges of its own teams, as the reconciler does. */
static void *admitter(void *arg)
{
    struct race *r = arg;
    char uid[32], msg[256];
    for (int i = 0; i < RACE_EACH; i++) {
        snprintf(uid, sizeof uid, "u%d-%d", r->id, i);
        json_t *c = json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "metadata", "name", uid,
                              "namespace", "ctf", "uid", uid, "spec", "team", uid, "definition",
                              "web");
        if (ctf_admission_admit(r->a, c, NULL, msg, sizeof msg) == CTF_ADMIT_OK)
            r->granted++;
        json_decref(c);
        sched_yield();
    }
    return NULL;
}

static void test_warm_starts_race_admissions(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        ctf_admission *a = NULL;
        pthread_t t[RACE_ADMITTER + 1];
        struct race r[RACE_ADMITTER + 1];
        assert_int_equal(ctf_admission_new(3, RACE_CAP, &a), KOP_OK);
        for (int i = 0; i <= RACE_ADMITTER; i++) {
            r[i] = (struct race){a, i, 0};
            assert_int_equal(pthread_create(&t[i], NULL, i ? admitter : pool_pass, &r[i]), 0);
        }
        int granted = 0;
        for (int i = 0; i <= RACE_ADMITTER; i++) {
            assert_int_equal(pthread_join(t[i], NULL), 0);
            granted += r[i].granted;
        }
        /* Demand (10 warm + 20 fresh) exceeds the cap: exactly the cap is granted. */
        assert_int_equal(granted, RACE_CAP);
        assert_int_equal(ctf_admission_warm(a, NULL) + ctf_admission_count(a, NULL, NULL),
                         RACE_CAP);
        assert_int_equal(ctf_admission_warm(a, NULL), r[0].granted);
        assert_int_equal(ctf_admission_room(a), 0);
        ctf_admission_free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_team_cap),     cmocka_unit_test(test_ctf_cap),
        cmocka_unit_test(test_warm_reserved), cmocka_unit_test(test_pooled_fallback),
        cmocka_unit_test(test_claim_slots),   cmocka_unit_test(test_namespace_events),
        cmocka_unit_test(test_bad_challenge), cmocka_unit_test(test_cache_events),
        cmocka_unit_test(test_warm_starts_race_admissions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

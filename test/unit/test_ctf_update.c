/*
 * test_ctf_update.c - how running instances take a change of their
 * definition (operators/ctf/core/update.c, issue 30): spec.update read and
 * refused, the budgets, the version (what changes it, what does not), the
 * verdict per instance, what counts as a Deployment's rollout, and the
 * rollout ledger: never more slots than the budget, even from many threads
 * at once, waiting instances handed back once each as slots free, and a
 * seeded ledger counting the replacements of the process before; the
 * definition's progress counted at most once a second, per definition.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/json.h"
#include "core/update.h"

/* update_of parses the text and reads its update; the error, if any. */
static kop_err update_of(const char *text, ctf_update_spec *u)
{
    json_t *def = parse(text);
    kop_status st;
    kop_err err = ctf_update_parse(def, u, &st);
    json_decref(def);
    return err;
}

static void test_parse(void **state)
{
    (void)state;
    ctf_update_spec u;
    assert_int_equal(update_of("{'spec':{}}", &u), KOP_OK);
    assert_int_equal(u.strategy, CTF_UPDATE_ON_NEXT_START);
    assert_string_equal(ctf_update_strategy_name(u.strategy), "OnNextStart");
    assert_int_equal(update_of("{'spec':{'update':{'strategy':'Recreate'}}}", &u), KOP_OK);
    assert_int_equal(u.strategy, CTF_UPDATE_RECREATE);
    assert_int_equal(update_of("{'spec':{'update':{'strategy':'Rolling'}}}", &u), KOP_OK);
    assert_true(u.strategy == CTF_UPDATE_ROLLING && u.percent && u.max_unavailable == 25);
    assert_int_equal(
        update_of("{'spec':{'update':{'strategy':'Rolling','maxUnavailable':5}}}", &u), KOP_OK);
    assert_true(!u.percent && u.max_unavailable == 5);
    assert_int_equal(
        update_of("{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'10%'}}}", &u),
        KOP_OK);
    assert_true(u.percent && u.max_unavailable == 10);
    assert_int_equal(
        update_of("{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'100%'}}}", &u),
        KOP_OK);

    static const char *const bad[] = {
        "{'spec':{'update':'Rolling'}}",
        "{'spec':{'update':{'strategy':'rolling'}}}",
        "{'spec':{'update':{'strategy':'BlueGreen'}}}",
        "{'spec':{'update':{'strategy':5}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':0}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':10001}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'0%'}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'101%'}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'%'}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'5'}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':'1.5%'}}}",
        "{'spec':{'update':{'strategy':'Rolling','maxUnavailable':true}}}",
        "{'spec':{'update':{'maxUnavailable':3}}}",
        "{'spec':{'update':{'strategy':'Recreate','maxUnavailable':3}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *def = parse(bad[i]);
        kop_status st;
        if (ctf_update_parse(def, &u, &st) != KOP_EINVAL)
            fail_msg("accepted: %s", bad[i]);
        assert_string_equal(st.reason, CTF_REASON_INVALID_DEFINITION);
        assert_non_null(strstr(st.message, "spec.update"));
        json_decref(def);
    }
    /* The definition's check refuses them too. */
    json_t *def = parse(DEF_TCP);
    json_object_set_new(json_object_get(def, "spec"), "update",
                        json_pack("{s:s, s:i}", "strategy", "OnNextStart", "maxUnavailable", 2));
    assert_int_equal(ctf_validate_definition(def, NULL), KOP_EINVAL);
    json_decref(def);
}

static void test_budget(void **state)
{
    (void)state;
    ctf_update_spec rolling_pct = {CTF_UPDATE_ROLLING, 10, true};
    ctf_update_spec rolling_n = {CTF_UPDATE_ROLLING, 7, false};
    ctf_update_spec recreate = {CTF_UPDATE_RECREATE, 25, true};
    ctf_update_spec next = {CTF_UPDATE_ON_NEXT_START, 25, true};
    assert_int_equal(ctf_update_budget(&rolling_pct, 1000), 100);
    assert_int_equal(ctf_update_budget(&rolling_pct, 50), 5);
    assert_int_equal(ctf_update_budget(&rolling_pct, 19), 1); /* rounded down */
    assert_int_equal(ctf_update_budget(&rolling_pct, 5), 1);  /* at least 1 */
    assert_int_equal(ctf_update_budget(&rolling_pct, 0), 1);
    assert_int_equal(ctf_update_budget(&rolling_n, 3), 7);
    assert_int_equal(ctf_update_budget(&recreate, 1000), 1000);
    assert_int_equal(ctf_update_budget(&recreate, 0), 1);
    assert_int_equal(ctf_update_budget(&next, 1000), 0);
    /* Warm pools: a quarter at a time unless the strategy says otherwise. */
    assert_int_equal(ctf_update_pool_budget(&next, 10), 2);
    assert_int_equal(ctf_update_pool_budget(&next, 2), 1);
    assert_int_equal(ctf_update_pool_budget(&rolling_n, 10), 7);
    assert_int_equal(ctf_update_pool_budget(&recreate, 10), 10);
}

/* version_with sets spec[field] = value (JSON text) on DEF_TCP and returns its version. */
static void version_with(const char *field, const char *value, char out[CTF_VERSION_LEN + 1])
{
    json_t *def = parse(DEF_TCP);
    if (field)
        json_object_set_new(json_object_get(def, "spec"), field, parse(value));
    assert_int_equal(ctf_update_version(def, out), KOP_OK);
    assert_int_equal(strlen(out), CTF_VERSION_LEN);
    json_decref(def);
}

static void test_version(void **state)
{
    (void)state;
    char base[CTF_VERSION_LEN + 1], v[CTF_VERSION_LEN + 1];
    version_with(NULL, NULL, base);
    /* What does not make the pods: the same version. */
    static const char *const same[][2] = {
        {"title", "'Another title'"}, {"points", "500"},
        {"description", "'changed'"}, {"category", "'web'"},
        {"pool", "{'min':3}"},        {"update", "{'strategy':'Rolling'}"},
        {"lifetime", "{'default':'10m','max':'1h','renewBy':'10m'}"},
        {"flag", "{'static':'CTF{another}'}"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        version_with(same[i][0], same[i][1], v);
        if (strcmp(v, base) != 0)
            fail_msg("a change of %s changed the version", same[i][0]);
    }
    /* What does: another version. */
    version_with("network", "{'egress':'Internet'}", v);
    assert_string_not_equal(v, base);
    version_with("resources", "{'cpu':'2'}", v);
    assert_string_not_equal(v, base);
    json_t *def = parse(DEF_TCP);
    json_t *c = json_array_get(ctf_get2(json_array_get(ctf_get2(def, "spec", "pods"), 0),
                                        "template", "containers"),
                               0);
    json_object_set_new(c, "image", json_string("registry.example/pwn:2"));
    assert_int_equal(ctf_update_version(def, v), KOP_OK);
    assert_string_not_equal(v, base);
    json_decref(def);
    /* Every Deployment the builder makes carries it, and the generation. */
    def = parse(DEF_TCP);
    json_object_set_new(json_object_get(def, "metadata"), "generation", json_integer(7));
    json_t *kids = NULL, *chal = challenge_for("pwn");
    assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &kids, NULL), KOP_OK);
    json_t *dep = find(kids, "Deployment", "app");
    assert_non_null(dep);
    assert_string_equal(kop_meta_annotation(dep, CTF_ANNOTATION_VERSION), base);
    assert_string_equal(kop_meta_annotation(dep, CTF_ANNOTATION_GENERATION), "7");
    json_decref(kids);
    json_decref(chal);
    json_decref(def);
}

static void test_decide(void **state)
{
    (void)state;
    ctf_update_spec next = {CTF_UPDATE_ON_NEXT_START, 25, true};
    ctf_update_spec rolling = {CTF_UPDATE_ROLLING, 1, false};
    ctf_update_spec recreate = {CTF_UPDATE_RECREATE, 25, true};
    const ctf_update_spec *all[] = {&next, &rolling, &recreate};
    for (size_t i = 0; i < 3; i++) {
        /* Fresh, unknown (an instance from before versions), current, never started. */
        assert_int_equal(ctf_update_decide(all[i], NULL, "b", true), CTF_UPDATE_APPLY);
        assert_int_equal(ctf_update_decide(all[i], "", "b", true), CTF_UPDATE_APPLY);
        assert_int_equal(ctf_update_decide(all[i], "b", "b", true), CTF_UPDATE_APPLY);
        assert_int_equal(ctf_update_decide(all[i], "a", "b", false), CTF_UPDATE_APPLY);
    }
    assert_int_equal(ctf_update_decide(&next, "a", "b", true), CTF_UPDATE_KEEP);
    assert_int_equal(ctf_update_decide(&rolling, "a", "b", true), CTF_UPDATE_ROLL);
    assert_int_equal(ctf_update_decide(&recreate, "a", "b", true), CTF_UPDATE_ROLL);
}

static void test_rolling(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool rolling;
    } cases[] = {
        /* Rolled out, available. */
        {"{'metadata':{'generation':2},'spec':{'replicas':1},"
         "'status':{'observedGeneration':2,'replicas':1,'updatedReplicas':1,'availableReplicas':1}}",
         false},
        /* Its pod died: not a rollout (the start timeout's business). */
        {"{'metadata':{'generation':2},'spec':{'replicas':1},"
         "'status':{'observedGeneration':2,'replicas':1,'updatedReplicas':1}}",
         false},
        /* A new spec not seen by its controller yet. */
        {"{'metadata':{'generation':3},'spec':{'replicas':1},"
         "'status':{'observedGeneration':2,'replicas':1,'updatedReplicas':1,'availableReplicas':1}}",
         true},
        /* The new pod surging beside the old one. */
        {"{'metadata':{'generation':3},'spec':{'replicas':1},"
         "'status':{'observedGeneration':3,'replicas':2,'updatedReplicas':1,'availableReplicas':1}}",
         true},
        /* No pod of the new template yet. */
        {"{'metadata':{'generation':3},'spec':{'replicas':2},"
         "'status':{'observedGeneration':3,'replicas':2,'updatedReplicas':1,'availableReplicas':2}}",
         true},
        /* Just created: nothing observed. */
        {"{'metadata':{'generation':1},'spec':{'replicas':1}}", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *d = parse(cases[i].text);
        if (ctf_update_deployment_rolling(d) != cases[i].rolling)
            fail_msg("case %zu: rolling should be %d", i, cases[i].rolling);
        json_decref(d);
    }
}

static void test_ledger(void **state)
{
    (void)state;
    ctf_rollout *r = NULL;
    assert_int_equal(ctf_rollout_new(&r), KOP_OK);
    /* A budget of 2: two slots, the third waits. */
    assert_false(ctf_rollout_seeded(r, "ctf/web"));
    assert_true(ctf_rollout_begin(r, "ctf/web", "u1", 2, "ctf/a"));
    assert_true(ctf_rollout_begin(r, "ctf/web", "u1", 2, "ctf/a")); /* held already */
    assert_true(ctf_rollout_begin(r, "ctf/web", "u2", 2, "ctf/b"));
    assert_false(ctf_rollout_begin(r, "ctf/web", "u3", 2, "ctf/c"));
    assert_false(ctf_rollout_begin(r, "ctf/web", "u4", 2, "ctf/d"));
    assert_int_equal(ctf_rollout_count(r, "ctf/web"), 2);
    assert_true(ctf_rollout_holds(r, "ctf/web", "u2"));
    assert_false(ctf_rollout_holds(r, "ctf/web", "u3"));
    /* Another definition has its own. */
    assert_true(ctf_rollout_begin(r, "ctf/pwn", "p1", 1, "ctf/p"));
    /* One slot freed: one waiting Challenge is woken, once. */
    json_t *wake = ctf_rollout_end(r, "ctf/web", "u1", 2);
    assert_int_equal(json_array_size(wake), 1);
    const char *first = json_string_value(json_array_get(wake, 0));
    assert_true(strcmp(first, "ctf/c") == 0 || strcmp(first, "ctf/d") == 0);
    json_decref(wake);
    /* A freed slot goes to whoever asks first; the other waiter is woken at the next end. */
    assert_true(ctf_rollout_begin(r, "ctf/web", "u4", 2, "ctf/d"));
    assert_false(ctf_rollout_begin(r, "ctf/web", "u3", 2, "ctf/c"));
    wake = ctf_rollout_end(r, "ctf/web", "u2", 2);
    assert_int_equal(json_array_size(wake), 1);
    assert_string_equal(json_string_value(json_array_get(wake, 0)), "ctf/c");
    json_decref(wake);
    /* An end with nobody waiting wakes nobody; an end of a uid not held is harmless. */
    json_decref(ctf_rollout_end(r, "ctf/web", "u4", 2));
    wake = ctf_rollout_end(r, "ctf/web", "nobody", 2);
    assert_int_equal(json_array_size(wake), 0);
    json_decref(wake);
    assert_int_equal(ctf_rollout_count(r, "ctf/web"), 0);
    /* Seeded with the replacements the caches show: they count against the budget. */
    json_t *uids = parse("['s1','s2','s3']");
    ctf_rollout_seed(r, "ctf/big", uids);
    json_decref(uids);
    assert_true(ctf_rollout_seeded(r, "ctf/big"));
    assert_int_equal(ctf_rollout_count(r, "ctf/big"), 3);
    assert_false(ctf_rollout_begin(r, "ctf/big", "n1", 3, "ctf/n1"));
    assert_true(ctf_rollout_begin(r, "ctf/big", "n1", 4, "ctf/n1"));
    json_decref(ctf_rollout_end(r, "ctf/big", "s1", 4));
    assert_true(ctf_rollout_holds(r, "ctf/big", "s2"));
    assert_false(ctf_rollout_holds(r, "ctf/big", "s1"));
    /* A second seed (another worker's, read from the caches before s1 was given back)
     * changes nothing: s1 stays given back. */
    uids = parse("['s1','s2','s3']");
    ctf_rollout_seed(r, "ctf/big", uids);
    json_decref(uids);
    assert_false(ctf_rollout_holds(r, "ctf/big", "s1"));
    assert_int_equal(ctf_rollout_count(r, "ctf/big"), 3);
    /* A waiter that stops asking is not handed the next free slot; the one still waiting is. */
    assert_false(ctf_rollout_begin(r, "ctf/big", "w1", 3, "ctf/w1"));
    assert_false(ctf_rollout_begin(r, "ctf/big", "w2", 3, "ctf/w2"));
    ctf_rollout_unwait(r, "ctf/big", "w1");
    ctf_rollout_unwait(r, "ctf/big", "nobody");
    ctf_rollout_unwait(r, "ctf/none", "w2"); /* another definition: no record, no effect */
    wake = ctf_rollout_end(r, "ctf/big", "s2", 3);
    assert_int_equal(json_array_size(wake), 1);
    assert_string_equal(json_string_value(json_array_get(wake, 0)), "ctf/w2");
    json_decref(wake);
    ctf_rollout_free(r);
    ctf_rollout_free(NULL);
}

/* ---- many passes at once never take more slots than the budget ---- */

#define RACE_THREADS 8
#define RACE_UIDS    200
#define RACE_BUDGET  5

struct race {
    ctf_rollout *r;
    int id;
    pthread_mutex_t *lock;
    int *held, *max_held;
};

static void *racer(void *arg)
{
    struct race *a = arg;
    char uid[32], name[48];
    for (int i = 0; i < RACE_UIDS; i++) {
        snprintf(uid, sizeof uid, "t%d-u%d", a->id, i);
        snprintf(name, sizeof name, "ctf/%s", uid);
        while (!ctf_rollout_begin(a->r, "ctf/race", uid, RACE_BUDGET, name))
            ;
        pthread_mutex_lock(a->lock);
        int now = ++*a->held;
        if (now > *a->max_held)
            *a->max_held = now;
        pthread_mutex_unlock(a->lock);
        pthread_mutex_lock(a->lock);
        --*a->held;
        pthread_mutex_unlock(a->lock);
        json_decref(ctf_rollout_end(a->r, "ctf/race", uid, RACE_BUDGET));
    }
    return NULL;
}

static void test_ledger_race(void **state)
{
    (void)state;
    ctf_rollout *r = NULL;
    pthread_t t[RACE_THREADS];
    struct race a[RACE_THREADS];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int held = 0, max_held = 0;
    assert_int_equal(ctf_rollout_new(&r), KOP_OK);
    for (int i = 0; i < RACE_THREADS; i++) {
        a[i] = (struct race){r, i, &lock, &held, &max_held};
        assert_int_equal(pthread_create(&t[i], NULL, racer, &a[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_true(max_held <= RACE_BUDGET);
    assert_true(max_held >= 1);
    assert_int_equal(ctf_rollout_count(r, "ctf/race"), 0);
    ctf_rollout_free(r);
}

static void test_report_due(void **state)
{
    (void)state;
    ctf_rollout *r = NULL;
    long wait = -1;
    const int64_t t = 5000000;
    assert_int_equal(ctf_rollout_new(&r), KOP_OK);
    assert_true(ctf_rollout_report_due(r, "ctf/web", t, 1000, &wait)); /* the first time */
    assert_int_equal(wait, 0);
    assert_false(ctf_rollout_report_due(r, "ctf/web", t + 300, 1000, &wait));
    assert_int_equal(wait, 700);
    assert_true(ctf_rollout_report_due(r, "ctf/other", t + 300, 1000, &wait)); /* its own */
    assert_true(ctf_rollout_report_due(r, "ctf/web", t + 1000, 1000, &wait));
    assert_false(ctf_rollout_report_due(r, "ctf/web", t + 1999, 1000, &wait));
    assert_int_equal(wait, 1);
    /* The report's timing is no slot: the ledger of the definition stays empty, unseeded. */
    assert_int_equal(ctf_rollout_count(r, "ctf/web"), 0);
    assert_false(ctf_rollout_seeded(r, "ctf/web"));

    /* The count's pass coming anyway: until the time it asked for, and not once it is over. */
    assert_false(ctf_rollout_report_coming(r, "ctf/web", t)); /* never asked */
    ctf_rollout_report_at(r, "ctf/web", t + 1000);
    assert_true(ctf_rollout_report_coming(r, "ctf/web", t + 400));
    assert_true(ctf_rollout_report_coming(r, "ctf/web", t + 1000));
    assert_false(ctf_rollout_report_coming(r, "ctf/web", t + 1001)); /* late: wake it */
    assert_false(ctf_rollout_report_coming(r, "ctf/other", t + 400)); /* its own */
    ctf_rollout_report_at(r, "ctf/web", 0); /* the update is over */
    assert_false(ctf_rollout_report_coming(r, "ctf/web", t + 400));
    ctf_rollout_report_at(r, "ctf/none", 0); /* nothing recorded for a definition never seen */
    assert_false(ctf_rollout_report_coming(r, "ctf/none", t));
    ctf_rollout_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),   cmocka_unit_test(test_budget),
        cmocka_unit_test(test_version), cmocka_unit_test(test_decide),
        cmocka_unit_test(test_rolling), cmocka_unit_test(test_ledger),
        cmocka_unit_test(test_ledger_race), cmocka_unit_test(test_report_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

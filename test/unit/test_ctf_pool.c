/*
 * test_ctf_pool.c - the pure part of warm pools: spec.pool read and
 * refused, the sizing rule, warm namespace names, and the objects of a warm
 * instance before and after a team claims it (nothing but the Namespace and
 * the flag changes, and a warm instance never holds a team's flag), how a
 * claim whose answer was lost is settled (ctf_pool_claim_answer,
 * ctf_pool_claim_verdict), and a pool pass's warm starts racing fresh
 * admissions in the quota's ledger (issue 27, item 8): each start is
 * reserved as it is made, so the two together never grant more than
 * --max-instances.
 */
#include <limits.h>
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

#include "ctf_fixture.h"
#include "core/admission.h"
#include "controller/claim.h"
#include "core/pool.h"
#include "core/instance.h"

/* A dynamic flag, HTTP, and a template that sets a FLAG of its own. */
static const char DEF_WEB[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'web','namespace':'ctf'},"
    "'spec':{'title':'Web','pods':[{'name':'web','template':{'containers':[{"
    "'name':'web','image':'registry.example/web:1','ports':[{'containerPort':8080}],"
    "'env':[{'name':'FLAG','value':'not-the-flag'}]}]}}],"
    "'expose':[{'name':'web','pod':'web','port':8080,'type':'HTTP'}],"
    "'flag':{'dynamic':{'secretRef':{'name':'ctf-flag-key'}}},"
    "'pool':{'min':2,'max':6,'autoscale':true}}}";

/* A static flag, TCP. */
static const char DEF_NC[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'nc','namespace':'ctf'},"
    "'spec':{'title':'nc','pods':[{'name':'app','template':{'containers':[{"
    "'name':'app','image':'registry.example/nc:1','ports':[{'containerPort':1337}]}]}}],"
    "'expose':[{'name':'nc','pod':'app','port':1337,'type':'TCP'}],"
    "'flag':{'static':'flag{same_for_all}'},'pool':{'min':3}}}";

static const char CHAL_WEB[] = "{'metadata':{'name':'web-team1','namespace':'ctf','uid':'uid-1'},"
                               "'spec':{'definition':'web','team':'team1'}}";

static const ctf_config CFG = {.node_address = "10.0.0.5"};
static const char ID[] = "0123456789";

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

    static const char *const bad[] = {
        "{'spec':{'pool':3}}",
        "{'spec':{'pool':{'min':4,'max':2}}}",
        "{'spec':{'pool':{'min':-1}}}",
        "{'spec':{'pool':{'min':1001,'max':1001}}}",
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

static void test_namespace(void **state)
{
    (void)state;
    char ns[CTF_NAMESPACE_SIZE], same[CTF_NAMESPACE_SIZE];
    /* python3 -c 'import hashlib; print(hashlib.sha256(
     *   "ctf\0web\0pool:0123456789\0".encode()).hexdigest()[:12])' */
    assert_int_equal(ctf_pool_namespace("ctf", "web", ID, ns, sizeof ns), KOP_OK);
    assert_string_equal(ns, "ctf-web-28de6c9ef70b");
    assert_int_equal(ctf_instance_namespace("ctf", "web", "pool:0123456789", same, sizeof same),
                     KOP_OK);
    assert_string_equal(ns, same);
    static const char *const bad[] = {"012345678", "01234567890", "ABCDEF0123", "01234567zz", ""};
    for (size_t i = 0; i < LEN(bad); i++) {
        assert_int_equal(ctf_pool_namespace("ctf", "web", bad[i], ns, sizeof ns), KOP_EINVAL);
        assert_string_equal(ns, "");
    }
    assert_int_equal(ctf_pool_namespace("ctf", "web", NULL, ns, sizeof ns), KOP_EINVAL);
    assert_int_equal(ctf_pool_namespace("ctf", "web", ID, ns, 8), KOP_EINVAL);
}

static json_t *pooled(const char *def_text, const char *chal_text, const char *flag)
{
    json_t *def = parse(def_text), *chal = chal_text ? parse(chal_text) : NULL, *out = NULL;
    kop_status st;
    kop_err err = ctf_build_pooled_children(&CFG, def, ID, chal, flag, &out, &st);
    if (err)
        fail_msg("build: %s: %s", kop_strerror(err), st.message);
    json_decref(def);
    json_decref(chal);
    return out;
}

/* env_has_flag: some container of the Deployment has an env FLAG. */
static bool env_has_flag(const json_t *deploy)
{
    const json_t *containers = json_object_get(
        json_object_get(json_object_get(json_object_get(deploy, "spec"), "template"), "spec"),
        "containers");
    size_t i, j;
    json_t *c, *e;
    json_array_foreach(containers, i, c)
    {
        json_array_foreach(json_object_get(c, "env"), j, e)
        {
            if (kop_streq(json_string_value(json_object_get(e, "name")), "FLAG"))
                return true;
        }
    }
    return false;
}

static void test_warm_children(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_WEB, NULL, "");
    json_t *o;
    size_t i;
    json_t *want =
        parse("{'app.kubernetes.io/managed-by':'kopc-ctf','ctf.kopc.io/definition':'web',"
              "'ctf.kopc.io/pool':'0123456789','ctf.kopc.io/pool-namespace':'ctf'}");
    json_array_foreach(warm, i, o)
    {
        json_t *labels = json_deep_copy(json_object_get(json_object_get(o, "metadata"), "labels"));
        json_object_del(labels, "pod-security.kubernetes.io/enforce");
        json_object_del(labels, "pod-security.kubernetes.io/enforce-version");
        json_object_del(labels, CTF_LABEL_POD);
        if (!json_equal(labels, want))
            fail_msg("%s %s: labels not the pool's", json_string_value(json_object_get(o, "kind")),
                     kop_meta_name(o));
        json_decref(labels);
        if (strcmp(json_string_value(json_object_get(o, "kind")), "Namespace") != 0)
            assert_string_equal(kop_meta_namespace(o), "ctf-web-28de6c9ef70b");
    }
    json_t *ns = child_of(warm, "Namespace", "ctf-web-28de6c9ef70b");
    assert_non_null(ns);
    assert_null(kop_meta_annotation(ns, CTF_ANNOTATION_CHALLENGE_UID));
    /* The flag by file only, empty: no env FLAG at all, the template's own removed too. */
    json_t *deploy = child_of(warm, "Deployment", "web");
    assert_non_null(deploy);
    assert_false(env_has_flag(deploy));
    json_t *c = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(deploy, "spec"), "template"), "spec"),
            "containers"),
        0);
    json_t *mount = json_array_get(json_object_get(c, "volumeMounts"), 0);
    assert_string_equal(json_string_value(json_object_get(mount, "mountPath")),
                        CTF_FLAG_MOUNT_PATH);
    json_t *secret = child_of(warm, "Secret", "flag");
    assert_string_equal(json_string_value(json_object_get(json_object_get(secret, "data"), "flag")),
                        "");
    json_decref(want);
    json_decref(warm);
}

static void test_claimed_children(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_WEB, NULL, "");
    json_t *claimed = pooled(DEF_WEB, CHAL_WEB, "flag{team1}");
    json_t *o;
    size_t i;
    assert_int_equal(json_array_size(warm), json_array_size(claimed));
    json_array_foreach(claimed, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        json_t *before = child_of(warm, kind, kop_meta_name(o));
        assert_non_null(before);
        if (strcmp(kind, "Namespace") == 0 || strcmp(kind, "Secret") == 0)
            continue;
        /* Everything else the same: claiming restarts nothing. */
        if (!json_equal(o, before))
            fail_msg("%s %s changes when claimed", kind, kop_meta_name(o));
    }
    json_t *ns = child_of(claimed, "Namespace", "ctf-web-28de6c9ef70b");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_TEAM), "team1");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_CHALLENGE), "web-team1");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_CHALLENGE_NS), "ctf");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_POOL), ID);
    assert_string_equal(kop_meta_label(ns, "pod-security.kubernetes.io/enforce"), "restricted");
    assert_string_equal(kop_meta_annotation(ns, CTF_ANNOTATION_CHALLENGE_UID), "uid-1");
    /* base64("flag{team1}") = ZmxhZ3t0ZWFtMX0= */
    json_t *secret = child_of(claimed, "Secret", "flag");
    assert_string_equal(json_string_value(json_object_get(json_object_get(secret, "data"), "flag")),
                        "ZmxhZ3t0ZWFtMX0=");
    json_decref(warm);
    json_decref(claimed);
}

static void test_static_flag(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_NC, NULL, "flag{same_for_all}");
    assert_true(env_has_flag(child_of(warm, "Deployment", "app"))); /* static: env and file */
    json_decref(warm);
    json_t *none = pooled(DEF_NC, NULL, NULL);
    assert_false(env_has_flag(child_of(none, "Deployment", "app")));
    assert_null(child_of(none, "Secret", "flag"));
    json_decref(none);
}

static void test_refused(void **state)
{
    (void)state;
    json_t *def = parse(DEF_WEB), *out = NULL;
    kop_status st;
    assert_int_equal(ctf_build_pooled_children(&CFG, def, "nothex!!!!", NULL, "", &out, &st),
                     KOP_EINVAL);
    assert_null(out);
    json_t *bad_chal = parse("{'metadata':{'name':'x','namespace':'ctf'},'spec':{}}");
    assert_int_equal(ctf_build_pooled_children(&CFG, def, ID, bad_chal, "", &out, &st), KOP_EINVAL);
    assert_null(out);
    assert_int_equal(ctf_build_pooled_children(NULL, def, ID, NULL, "", &out, &st), KOP_EINVAL);
    json_decref(bad_chal);
    json_decref(def);
}

/* ctf_harden_pod_spec with the flag by file only. */
static void test_harden_file_only(void **state)
{
    (void)state;
    json_t *spec = parse("{'containers':[{'name':'a','image':'x',"
                         "'env':[{'name':'FLAG','value':'mine'},{'name':'K','value':'v'}]}]}");
    assert_int_equal(ctf_harden_pod_spec(spec, NULL, CTF_FLAG_FILE), KOP_OK);
    json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
    assert_int_equal(json_array_size(json_object_get(c, "env")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(c, "env"), 0), "name")),
        "K");
    json_t *m = json_array_get(json_object_get(c, "volumeMounts"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "mountPath")), CTF_FLAG_MOUNT_PATH);
    assert_int_equal(json_array_size(json_object_get(spec, "volumes")), 1);
    json_decref(spec);
}

/* A claim's write: only a refusal before acting lets the namespace go unread. */
static void test_claim_answer(void **state)
{
    (void)state;
    assert_int_equal(ctf_pool_claim_answer(KOP_OK), CTF_CLAIM_DONE);
    assert_int_equal(ctf_pool_claim_answer(KOP_ENOTFOUND), CTF_CLAIM_GONE);
    assert_int_equal(ctf_pool_claim_answer(KOP_EFORBIDDEN), CTF_CLAIM_REFUSED);
    assert_int_equal(ctf_pool_claim_answer(KOP_EINVALID), CTF_CLAIM_REFUSED);
    assert_int_equal(ctf_pool_claim_answer(KOP_ETOOMANYREQUESTS), CTF_CLAIM_REFUSED);
    /* A conflict may be the claimer's own write, retried; the rest may have landed. */
    const kop_err check[] = {KOP_ECONFLICT, KOP_ETIMEOUT, KOP_ECONNECT, KOP_EIO, KOP_EINTERNAL,
                             KOP_EUNAVAILABLE, KOP_ESERVERTIMEOUT, KOP_EPARSE, KOP_EAPI, KOP_EEOF};
    for (size_t i = 0; i < sizeof check / sizeof check[0]; i++)
        assert_int_equal(ctf_pool_claim_answer(check[i]), CTF_CLAIM_CHECK);
}

/* Whose a warm Namespace is, as the server shows it. */
static void test_claim_verdict(void **state)
{
    (void)state;
    json_t *warm = parse("{'metadata':{'name':'w','resourceVersion':'5',"
                         "'labels':{'ctf.kopc.io/pool':'0123456789'}}}");
    json_t *mine = parse("{'metadata':{'name':'w','labels':{'ctf.kopc.io/pool':'0123456789',"
                         "'ctf.kopc.io/challenge':'web-team1'},"
                         "'annotations':{'ctf.kopc.io/challenge-uid':'uid-1'}}}");
    json_t *going = parse("{'metadata':{'name':'w','deletionTimestamp':'2026-01-01T00:00:00Z',"
                          "'labels':{'ctf.kopc.io/pool':'0123456789'}}}");
    json_t *mine_going = parse("{'metadata':{'name':'w','deletionTimestamp':'2026-01-01T00:00:00Z',"
                               "'labels':{'ctf.kopc.io/challenge':'web-team1'},"
                               "'annotations':{'ctf.kopc.io/challenge-uid':'uid-1'}}}");
    assert_int_equal(ctf_pool_claim_verdict(warm, "uid-1"), CTF_CLAIM_FREE);
    assert_int_equal(ctf_pool_claim_verdict(mine, "uid-1"), CTF_CLAIM_MINE);
    assert_int_equal(ctf_pool_claim_verdict(mine, "uid-2"), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(mine, NULL), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(going, "uid-1"), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(mine_going, "uid-1"), CTF_CLAIM_MINE);
    assert_int_equal(ctf_pool_claim_verdict(NULL, "uid-1"), CTF_CLAIM_LOST);
    json_decref(warm);
    json_decref(mine);
    json_decref(going);
    json_decref(mine_going);
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
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_target),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_namespace),
        cmocka_unit_test(test_warm_children),
        cmocka_unit_test(test_claimed_children),
        cmocka_unit_test(test_static_flag),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_harden_file_only),
        cmocka_unit_test(test_claim_answer),
        cmocka_unit_test(test_claim_verdict),
        cmocka_unit_test(test_warm_starts_race_admissions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

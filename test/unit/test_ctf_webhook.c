/*
 * test_ctf_webhook.c - the Challenge validating webhook's judgement
 * (operators/ctf/controller/webhook.c, ctf_webhook_judge, and the core's
 * ctf_admission_review), whole AdmissionReviews in and out through libkop's
 * review code (webhook_internal.h), with the caches replaced by a table of
 * definitions and a real quota ledger:
 *   - a missing definition, an invalid one, a team at its cap and the CTF
 *     at its cap are refused with code 403, the status's reason
 *     (DefinitionNotFound, InvalidDefinition, QuotaExceeded) and exactly
 *     the message the reconciler writes in status (the same functions);
 *   - a valid Challenge is admitted, and judging admits nothing (the ledger
 *     is unchanged: the reconciler admits);
 *   - only CREATE of ctf.kopc.io Challenges is judged; UPDATE, DELETE,
 *     other kinds and namespaces outside --namespace pass without a look;
 *   - caches not synced, or a definition that could not be read: let
 *     through with a warning, never refused;
 *   - the request's namespace is the one judged, not the object's claim;
 *   - hostile and odd bodies: objects without spec, with numbers for
 *     strings, arrays for objects, huge names, no object, not a review;
 *     answered or a 400, never a crash or a leak (ASan build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "controller/webhook.h"
#include "core/definition.h"
#include "ctf_definitions.h"
#include "webhook_internal.h"

/* ---- a fake view of the caches ----------------------------------------------- */

struct cache {
    json_t *defs;      /* "<ns>/<name>" -> definition */
    bool synced;
    kop_err read_err;  /* returned on a miss instead of KOP_ENOTFOUND when set */
    int lookups;
    char last_ns[64];
};

static kop_err lookup(void *user, const char *ns, const char *name, json_t **def)
{
    struct cache *c = user;
    char key[400];
    c->lookups++;
    snprintf(c->last_ns, sizeof c->last_ns, "%s", ns);
    snprintf(key, sizeof key, "%s/%s", ns, name);
    *def = json_incref(json_object_get(c->defs, key));
    if (*def)
        return KOP_OK;
    return c->read_err ? c->read_err : KOP_ENOTFOUND;
}

static bool is_synced(void *user)
{
    return ((struct cache *)user)->synced;
}

struct fixture {
    struct cache cache;
    ctf_admission *adm;
    ctf_webhook_view view;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->cache.defs = json_object();
    f->cache.synced = true;
    json_object_set_new(f->cache.defs, "ctf/pwn", parse(DEF_TCP));
    json_object_set_new(f->cache.defs, "ctf/web", parse(DEF_HTTP));
    /* A definition the reconciler would call invalid: a pod without containers. */
    json_object_set_new(f->cache.defs, "ctf/broken",
                        parse("{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
                              "'metadata':{'name':'broken','namespace':'ctf'},"
                              "'spec':{'pods':[{'name':'app','template':{}}]}}"));
    assert_int_equal(ctf_admission_new(2, 3, &f->adm), KOP_OK);
    f->view = (ctf_webhook_view){.admission = f->adm,
                                 .definition = lookup,
                                 .synced = is_synced,
                                 .user = &f->cache};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ctf_admission_free(f->adm);
    json_decref(f->cache.defs);
    free(f);
    return 0;
}

/* ---- reviews ---------------------------------------------------------------- */

static kop_err handle(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    return ctf_webhook_judge(user, req, resp);
}

/* review_text builds an AdmissionReview of a Challenge (owned, free()). */
static char *review_text(const char *op, const char *ns, const char *name, const char *def,
                         const char *team)
{
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "apiVersion",
                            "ctf.kopc.io/v1alpha1", "kind", "Challenge", "metadata", "name", name,
                            "namespace", ns, "spec", "definition", def, "team", team);
    json_t *rv = json_pack(
        "{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s}, s:o}}",
        "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "request", "uid",
        "0e1c2b1a-1111-2222-3333-444455556666", "kind", "group", "ctf.kopc.io", "version",
        "v1alpha1", "kind", "Challenge", "resource", "group", "ctf.kopc.io", "version", "v1alpha1",
        "resource", "challenges", "operation", op, "namespace", ns, "name", name, "userInfo",
        "username", "alice", "object", obj);
    char *s = json_dumps(rv, JSON_COMPACT);
    json_decref(rv);
    return s;
}

/* answer runs a review body through the webhook; the AdmissionReview's response (owned). */
static json_t *answer(struct fixture *f, const char *body)
{
    kop_webhook_admission h = {.path = CTF_WEBHOOK_VALIDATE_CHALLENGE, .handle = handle,
                               .user = &f->view};
    char *out = NULL;
    kop_status st;
    kop_status_clear(&st);
    assert_int_equal(kop__admission_review(&h, body, strlen(body), &out, &st), KOP_OK);
    json_t *rv = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(rv);
    json_t *resp = json_incref(json_object_get(rv, "response"));
    json_decref(rv);
    assert_non_null(resp);
    return resp;
}

static json_t *create(struct fixture *f, const char *def, const char *team)
{
    char *body = review_text("CREATE", "ctf", "c1", def, team);
    json_t *resp = answer(f, body);
    free(body);
    return resp;
}

/* answer_request wraps a single-quoted request fixture ({'request':...}) in an
 * AdmissionReview v1 and answers it. */
static json_t *answer_request(struct fixture *f, const char *fixture)
{
    json_t *rv = parse(fixture);
    json_object_set_new(rv, "apiVersion", json_string("admission.k8s.io/v1"));
    json_object_set_new(rv, "kind", json_string("AdmissionReview"));
    char *body = json_dumps(rv, JSON_COMPACT);
    json_t *resp = answer(f, body);
    free(body);
    json_decref(rv);
    return resp;
}

static bool allowed(const json_t *resp)
{
    return json_is_true(json_object_get(resp, "allowed"));
}

/* assert_refused checks a refusal: 403, reason, message. */
static void assert_refused(const json_t *resp, const char *reason, const char *message)
{
    const json_t *st = json_object_get(resp, "status");
    assert_false(allowed(resp));
    assert_int_equal(json_integer_value(json_object_get(st, "code")), 403);
    assert_string_equal(json_string_value(json_object_get(st, "reason")), reason);
    assert_string_equal(json_string_value(json_object_get(st, "message")), message);
}

/* chal makes an admitted-looking Challenge of team (uid) for the ledger. */
static json_t *chal(const char *team, const char *uid)
{
    return json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "metadata", "name", uid, "namespace",
                     "ctf", "uid", uid, "spec", "team", team, "definition", "pwn");
}

/* admit counts one instance of team in the ledger, as the reconciler does. */
static void admit(struct fixture *f, const char *team, const char *uid)
{
    char msg[512];
    json_t *c = chal(team, uid);
    assert_int_equal(ctf_admission_admit(f->adm, c, NULL, msg, sizeof msg), CTF_ADMIT_OK);
    json_decref(c);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_valid_admitted(void **state)
{
    struct fixture *f = *state;
    json_t *resp = create(f, "pwn", "team-a");
    assert_true(allowed(resp));
    assert_null(json_object_get(resp, "warnings"));
    json_decref(resp);
    /* Judging counted nothing: the reconciler admits. */
    assert_int_equal(ctf_admission_count(f->adm, "ctf", NULL), 0);
    assert_int_equal(f->cache.lookups, 1);
}

static void test_missing_definition(void **state)
{
    struct fixture *f = *state;
    char want[512];
    json_t *resp = create(f, "nope", "team-a");
    /* The status's words, from the function the reconciler calls. */
    ctf_say_no_definition("nope", "ctf", want, sizeof want);
    assert_string_equal(want, "ChallengeDefinition nope not found in namespace ctf");
    assert_refused(resp, CTF_REASON_DEFINITION_NOT_FOUND, want);
    json_decref(resp);
}

static void test_invalid_definition(void **state)
{
    struct fixture *f = *state;
    kop_status st;
    json_t *def = json_object_get(f->cache.defs, "ctf/broken");
    assert_int_equal(ctf_validate_definition(def, &st), KOP_EINVAL);
    json_t *resp = create(f, "broken", "team-a");
    assert_refused(resp, CTF_REASON_INVALID_DEFINITION, st.message);
    json_decref(resp);
}

static void test_team_over_quota(void **state)
{
    struct fixture *f = *state;
    char status_msg[512];
    admit(f, "team-a", "u1");
    json_t *resp = create(f, "pwn", "team-a");
    assert_true(allowed(resp)); /* one of two */
    json_decref(resp);
    admit(f, "team-a", "u2");
    resp = create(f, "web", "team-a");
    /* What the reconciler would write in status for a third instance. */
    json_t *third = chal("team-a", "u3");
    assert_int_equal(ctf_admission_admit(f->adm, third, NULL, status_msg, sizeof status_msg),
                     CTF_ADMIT_TEAM_FULL);
    json_decref(third);
    assert_non_null(strstr(status_msg, "--max-instances-per-team"));
    assert_refused(resp, CTF_REASON_QUOTA, status_msg);
    json_decref(resp);
    /* Another team still fits. */
    resp = create(f, "pwn", "team-b");
    assert_true(allowed(resp));
    json_decref(resp);
}

static void test_ctf_over_quota(void **state)
{
    struct fixture *f = *state;
    char status_msg[512];
    admit(f, "team-a", "u1");
    admit(f, "team-b", "u2");
    admit(f, "team-c", "u3");
    json_t *resp = create(f, "pwn", "team-d");
    json_t *fourth = chal("team-d", "u4");
    assert_int_equal(ctf_admission_admit(f->adm, fourth, NULL, status_msg, sizeof status_msg),
                     CTF_ADMIT_CTF_FULL);
    json_decref(fourth);
    assert_non_null(strstr(status_msg, "--max-instances)"));
    assert_refused(resp, CTF_REASON_QUOTA, status_msg);
    json_decref(resp);
    /* A slot freed: admitted again. */
    assert_true(ctf_admission_release(f->adm, "u1"));
    resp = create(f, "pwn", "team-d");
    assert_true(allowed(resp));
    json_decref(resp);
}

/* Missing definition is judged before the quota, as the reconciler's order. */
static void test_order_of_checks(void **state)
{
    struct fixture *f = *state;
    admit(f, "team-a", "u1");
    admit(f, "team-a", "u2");
    json_t *resp = create(f, "nope", "team-a");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(resp, "status"), "reason")),
        CTF_REASON_DEFINITION_NOT_FOUND);
    json_decref(resp);
}

static void test_only_create_judged(void **state)
{
    struct fixture *f = *state;
    const char *ops[] = {"UPDATE", "DELETE", "CONNECT", ""};
    for (size_t i = 0; i < LEN(ops); i++) {
        char *body = review_text(ops[i], "ctf", "c1", "nope", "team-a");
        json_t *resp = answer(f, body);
        assert_true(allowed(resp));
        json_decref(resp);
        free(body);
    }
    /* Another kind or group, even named like ours. */
    const char *other[] = {
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'ChallengeDefinition'},"
        "'object':{'metadata':{'name':'x'},'spec':{'definition':'nope','team':'a'}}}}",
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'evil.example','version':'v1','kind':'Challenge'},"
        "'object':{'metadata':{'name':'x'},'spec':{'definition':'nope','team':'a'}}}}",
    };
    for (size_t i = 0; i < LEN(other); i++) {
        json_t *resp = answer_request(f, other[i]);
        assert_true(allowed(resp));
        json_decref(resp);
    }
    assert_int_equal(f->cache.lookups, 0);
}

static void test_outside_watch_namespace(void **state)
{
    struct fixture *f = *state;
    f->view.watch_namespace = "ctf";
    char *body = review_text("CREATE", "elsewhere", "c1", "nope", "team-a");
    json_t *resp = answer(f, body);
    assert_true(allowed(resp));
    json_decref(resp);
    free(body);
    assert_int_equal(f->cache.lookups, 0);
    resp = create(f, "nope", "team-a"); /* in the watched one: judged */
    assert_false(allowed(resp));
    json_decref(resp);
}

static void assert_warned(const json_t *resp, const char *part)
{
    const json_t *w = json_object_get(resp, "warnings");
    assert_true(allowed(resp));
    assert_int_equal(json_array_size(w), 1);
    assert_non_null(strstr(json_string_value(json_array_get(w, 0)), part));
}

static void test_cannot_judge_lets_through(void **state)
{
    struct fixture *f = *state;
    f->cache.synced = false;
    json_t *resp = create(f, "nope", "team-a");
    assert_warned(resp, "caches are still loading");
    json_decref(resp);
    assert_int_equal(f->cache.lookups, 0);

    f->cache.synced = true;
    f->cache.read_err = KOP_ETIMEOUT;
    resp = create(f, "nope", "team-a");
    assert_warned(resp, "could not be read");
    json_decref(resp);
    f->cache.read_err = KOP_OK;
}

/* The request's namespace is authoritative; the object's may say anything. */
static void test_request_namespace_wins(void **state)
{
    struct fixture *f = *state;
    json_t *resp =
        answer_request(f, "{'request':{'uid':'u','operation':'CREATE','namespace':'other',"
                          "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
                          "'object':{'metadata':{'name':'x','namespace':'ctf'},"
                          "'spec':{'definition':'pwn','team':'a'}}}}");
    assert_string_equal(f->cache.last_ns, "other");
    assert_refused(resp, CTF_REASON_DEFINITION_NOT_FOUND,
                   "ChallengeDefinition pwn not found in namespace other");
    json_decref(resp);
}

/* Odd and hostile objects: answered, never a crash; no definition means refused. */
static void test_odd_bodies(void **state)
{
    struct fixture *f = *state;
    static const char *const odd[] = {
        /* no spec */
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
        "'object':{'metadata':{'name':'x'}}}}",
        /* numbers and arrays where strings and objects go */
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
        "'object':{'metadata':[],'spec':{'definition':7,'team':[1]}}}}",
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
        "'object':{'spec':[]}}}",
        /* a definition that exists, with a team of the wrong type: no team key */
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
        "'object':{'metadata':{'name':'x'},'spec':{'definition':'pwn','team':null}}}}",
        /* no namespace anywhere */
        "{'request':{'uid':'u','operation':'CREATE',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},"
        "'object':{'metadata':{'name':'x'},'spec':{'definition':'pwn','team':'a'}}}}",
        /* no object on a CREATE */
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'}}}",
        /* object not an object */
        "{'request':{'uid':'u','operation':'CREATE','namespace':'ctf',"
        "'kind':{'group':'ctf.kopc.io','version':'v1alpha1','kind':'Challenge'},'object':'x'}}",
    };
    for (size_t i = 0; i < LEN(odd); i++) {
        json_t *resp = answer_request(f, odd[i]);
        assert_string_equal(json_string_value(json_object_get(resp, "uid")), "u");
        assert_true(json_is_boolean(json_object_get(resp, "allowed")));
        json_decref(resp);
    }
    /* A huge team and definition: refused (no such definition), message capped. */
    char *big = malloc(100000);
    memset(big, 'a', 99999);
    big[99999] = '\0';
    char *body = review_text("CREATE", "ctf", "c1", big, big);
    json_t *resp = answer(f, body);
    assert_false(allowed(resp));
    const char *msg =
        json_string_value(json_object_get(json_object_get(resp, "status"), "message"));
    assert_true(strlen(msg) < 1024);
    json_decref(resp);
    free(body);
    free(big);
    /* Not a review at all: a 400, not an answer. */
    static const char *const junk[] = {
        "", "null", "[]", "{", "{\"request\":{\"uid\":\"u\"}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":7}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{\"uid\":\"u\"}}"};
    kop_webhook_admission h = {.path = "/x", .handle = handle, .user = &f->view};
    for (size_t i = 0; i < LEN(junk); i++) {
        char *out = NULL;
        kop_status st;
        kop_status_clear(&st);
        assert_int_equal(kop__admission_review(&h, junk[i], strlen(junk[i]), &out, &st),
                         KOP_EBADREQUEST);
        assert_null(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid_admitted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_definition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_definition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_team_over_quota, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctf_over_quota, setup, teardown),
        cmocka_unit_test_setup_teardown(test_order_of_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_create_judged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_watch_namespace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cannot_judge_lets_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_namespace_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_odd_bodies, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

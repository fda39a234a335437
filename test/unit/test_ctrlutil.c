/*
 * test_ctrlutil.c - the pure parts of the operator helpers (ctrlutil.c):
 * the subset comparison kop_json_contains, and every path of
 * kop_finalizer_ensure / kop_finalizer_remove / kop_create_or_update that
 * must decide without writing.
 *
 * "Without writing" is checked for real: the client points at a port where
 * nothing listens (127.0.0.1:1), so a request the helper should not make
 * fails the call with KOP_ECONNECT. The writes themselves are tested
 * against the devcluster (test/integration/test_ctrlutil.c).
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
#include "kop/client.h"
#include "kop/config.h"
#include "kop/ctrlutil.h"

/* ---- kop_json_contains -------------------------------------------------- */

struct contains_case {
    const char *have, *want;
    bool contained;
};

static const struct contains_case contains_cases[] = {
    /* The server adds members: still contained. */
    {"{\"a\":1,\"b\":{\"c\":\"x\",\"d\":true}}", "{\"b\":{\"c\":\"x\"}}", true},
    {"{\"a\":1}", "{}", true},
    /* A different value, a missing member, a different type. */
    {"{\"a\":1}", "{\"a\":2}", false},
    {"{\"a\":1}", "{\"b\":1}", false},
    {"{\"a\":\"1\"}", "{\"a\":1}", false},
    {"{\"a\":{\"b\":1}}", "{\"a\":[1]}", false},
    /* Numbers by value: the apiserver may print 1 where we wrote 1.0. */
    {"{\"a\":1}", "{\"a\":1.0}", true},
    {"{\"a\":1.5}", "{\"a\":1}", false},
    /* Arrays: same length, element by element, each a subset. */
    {"{\"c\":[{\"name\":\"web\",\"image\":\"nginx\",\"imagePullPolicy\":\"Always\"}]}",
     "{\"c\":[{\"name\":\"web\",\"image\":\"nginx\"}]}", true},
    {"{\"c\":[{\"name\":\"web\",\"image\":\"nginx:1\"}]}",
     "{\"c\":[{\"name\":\"web\",\"image\":\"nginx:2\"}]}", false},
    {"{\"c\":[1,2,3]}", "{\"c\":[1,2]}", false},
    {"{\"c\":[1,2]}", "{\"c\":[2,1]}", false},
    {"{\"c\":[]}", "{\"c\":[]}", true},
    /* null asks for absence. */
    {"{\"a\":1}", "{\"b\":null}", true},
    {"{\"a\":1,\"b\":null}", "{\"b\":null}", true},
    {"{\"a\":1,\"b\":2}", "{\"b\":null}", false},
    /* Scalars. */
    {"[\"x\"]", "[\"x\"]", true},
    {"[true]", "[false]", false},
    /* A Deployment as the apiserver fills it, against what an operator wrote. */
    {"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"w\","
     "\"namespace\":\"d\",\"uid\":\"u\",\"generation\":3,\"labels\":{\"app\":\"w\"}},"
     "\"spec\":{\"replicas\":2,\"revisionHistoryLimit\":10,\"selector\":{\"matchLabels\":"
     "{\"app\":\"w\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"w\"}},\"spec\":"
     "{\"containers\":[{\"name\":\"web\",\"image\":\"nginx\",\"ports\":[{\"containerPort\":80,"
     "\"protocol\":\"TCP\"}],\"terminationMessagePath\":\"/dev/termination-log\"}],"
     "\"restartPolicy\":\"Always\"}}},\"status\":{\"replicas\":2}}",
     "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"w\","
     "\"namespace\":\"d\",\"labels\":{\"app\":\"w\"}},\"spec\":{\"replicas\":2,\"selector\":"
     "{\"matchLabels\":{\"app\":\"w\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"w\"}},"
     "\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":\"nginx\",\"ports\":"
     "[{\"containerPort\":80}]}]}}}}",
     true},
};

static void test_json_contains(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof contains_cases / sizeof contains_cases[0]; i++) {
        const struct contains_case *c = &contains_cases[i];
        json_t *have = parse(c->have), *want = parse(c->want);
        if (kop_json_contains(have, want) != c->contained)
            fail_msg("case %zu: kop_json_contains(%s, %s) should be %d", i, c->have, c->want,
                     c->contained);
        json_decref(have);
        json_decref(want);
    }
    json_t *one = parse("{\"a\":1}");
    assert_true(kop_json_contains(one, NULL));
    assert_true(kop_json_contains(NULL, NULL));
    assert_false(kop_json_contains(NULL, one));
    json_decref(one);
}

static void test_op_result_name(void **state)
{
    (void)state;
    assert_string_equal(kop_op_result_name(KOP_OP_UNCHANGED), "unchanged");
    assert_string_equal(kop_op_result_name(KOP_OP_CREATED), "created");
    assert_string_equal(kop_op_result_name(KOP_OP_UPDATED), "updated");
    assert_string_equal(kop_op_result_name((kop_op_result)42), "unknown");
}

/* ---- decisions without a write ------------------------------------------ */

/* A client whose every request fails to connect. */
static const char KUBECONFIG_NOWHERE[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: k, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n";

struct nowhere {
    kop_config *cfg;
    kop_client *c;
};

static int nowhere_setup(void **state)
{
    static struct nowhere n;
    kop_status st;
    if (kop_config_parse(KUBECONFIG_NOWHERE, sizeof KUBECONFIG_NOWHERE - 1, NULL, NULL, &n.cfg,
                         &st) != KOP_OK)
        return -1;
    /* No retries: a request made by mistake fails at once. */
    if (kop_client_new(n.cfg, &(kop_client_opts){.max_retries = -1, .timeout_ms = 2000}, &n.c,
                       &st) != KOP_OK)
        return -1;
    *state = &n;
    return 0;
}

static int nowhere_teardown(void **state)
{
    struct nowhere *n = *state;
    kop_client_free(n->c);
    kop_config_free(n->cfg);
    return 0;
}

static const kop_resource SITES = {"demo.example.com", "v1", "websites", "Website", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
#define FIN "demo.example.com/cleanup"

static void test_finalizer_no_write(void **state)
{
    struct nowhere *n = *state;
    kop_status st;
    kop_op_result did = KOP_OP_UPDATED;
    json_t *with = parse("{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"resourceVersion\":"
                         "\"5\",\"finalizers\":[\"other\",\"" FIN "\"]}}");
    json_t *without = parse("{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\","
                            "\"resourceVersion\":\"5\",\"finalizers\":[\"other\"]}}");
    json_t *deleting = parse("{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\","
                             "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}");

    /* Already there / already gone: no request, KOP_OP_UNCHANGED. */
    assert_int_equal(kop_finalizer_ensure(n->c, &(kop_finalizer_req){&SITES, with, FIN}, &did, &st),
                     KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    did = KOP_OP_UPDATED;
    assert_int_equal(
        kop_finalizer_remove(n->c, &(kop_finalizer_req){&SITES, without, FIN}, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    assert_int_equal(kop_finalizer_remove(n->c, &(kop_finalizer_req){&SITES, deleting, FIN}, NULL,
                                          &st),
                     KOP_OK);

    /* A needed write is attempted: here it cannot connect. */
    assert_int_equal(kop_finalizer_ensure(n->c, &(kop_finalizer_req){&SITES, without, FIN}, &did,
                                          &st),
                     KOP_ECONNECT);
    assert_int_equal(did, KOP_OP_UNCHANGED);

    /* An object being deleted takes no new finalizer: refused before sending. */
    assert_int_equal(kop_finalizer_ensure(n->c, &(kop_finalizer_req){&SITES, deleting, FIN}, &did,
                                          &st),
                     KOP_EINVALID);
    assert_non_null(strstr(st.message, "being deleted"));

    /* Missing arguments. */
    assert_int_equal(kop_finalizer_ensure(n->c, &(kop_finalizer_req){&SITES, with, NULL}, NULL,
                                          &st),
                     KOP_EINVAL);
    assert_int_equal(kop_finalizer_remove(n->c, &(kop_finalizer_req){NULL, with, FIN}, NULL, &st),
                     KOP_EINVAL);
    assert_int_equal(kop_finalizer_ensure(NULL, &(kop_finalizer_req){&SITES, with, FIN}, NULL,
                                          &st),
                     KOP_EINVAL);
    json_decref(with);
    json_decref(without);
    json_decref(deleting);
}

static void test_create_or_update_refusals(void **state)
{
    struct nowhere *n = *state;
    kop_status st;
    kop_op_result did = KOP_OP_UPDATED;
    json_t *owner = parse("{\"apiVersion\":\"demo.example.com/v1\",\"kind\":\"Website\","
                          "\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"u1\"}}");
    json_t *cm = parse("{\"metadata\":{\"name\":\"s-page\"},\"data\":{\"a\":\"1\"}}");
    json_t *copy = json_deep_copy(cm);
    json_t *noname = parse("{\"metadata\":{},\"data\":{}}");

    assert_int_equal(kop_create_or_update(n->c,
                                          &(kop_child_req){.resource = &CONFIGMAPS,
                                                           .owner = owner, .object = noname},
                                          &did, &st),
                     KOP_EINVAL);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    assert_non_null(strstr(st.message, "metadata.name"));
    assert_int_equal(kop_create_or_update(n->c, &(kop_child_req){.resource = &CONFIGMAPS}, &did,
                                          &st),
                     KOP_EINVAL);
    /* A namespaced child with no namespace and no owner to take it from. */
    assert_int_equal(kop_create_or_update(n->c,
                                          &(kop_child_req){.resource = &CONFIGMAPS, .object = cm},
                                          &did, &st),
                     KOP_EINVAL);
    assert_non_null(strstr(st.message, "namespace"));
    /* With an owner, the read is attempted (and cannot connect); the
     * caller's object is never changed. */
    assert_int_equal(kop_create_or_update(n->c,
                                          &(kop_child_req){.resource = &CONFIGMAPS,
                                                           .owner = owner, .object = cm},
                                          &did, &st),
                     KOP_ECONNECT);
    assert_true(json_equal(cm, copy));
    json_decref(owner);
    json_decref(cm);
    json_decref(copy);
    json_decref(noname);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_contains),
        cmocka_unit_test(test_op_result_name),
        cmocka_unit_test(test_finalizer_no_write),
        cmocka_unit_test(test_create_or_update_refusals),
    };
    return cmocka_run_group_tests_name("ctrlutil", tests, nowhere_setup, nowhere_teardown);
}

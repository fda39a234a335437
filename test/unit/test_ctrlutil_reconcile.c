/*
 * test_ctrlutil_reconcile.c - the kop_reconcile_* helpers (kop/ctrlutil.h)
 * and kop_controller_owned_cache, on a real manager and controller whose
 * caches are filled by hand (kop__informer_apply_object at generation 0, as a watch
 * would), with no apiserver: the client points at 127.0.0.1:1, where
 * nothing listens, so a request a helper should not make fails the call
 * with KOP_ECONNECT, and one it must make shows as that same failure.
 *
 * Asserted: kop_reconcile_get hands out a live object, NULL for a gone
 * one and for one being deleted (unless asked for it); the owned-cache
 * lookup finds the informer kop_controller_owns made and nothing else;
 * kop_reconcile_child reads that cache and writes nothing for a settled
 * child; kop_reconcile_status compares with observedGeneration stamped in
 * and writes nothing when the status shows it all, never changing the
 * caller's status; kop_reconcile_end maps errors to KOP_RETRY. The writes
 * themselves are tested on the devcluster (test/integration/test_ctrlutil.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "informer_internal.h"
#include "json_fixture.h"
#include "kop/kop.h"

static const char KUBECONFIG_NOWHERE[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: k, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n";

static const kop_resource SITES = {"demo.example.com", "v1", "websites", "Website", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource SECRETS = {"", "v1", "secrets", "Secret", true};
static const kop_resource SERVICES = {"", "v1", "services", "Service", true};

struct fixture {
    char kubeconfig[64];
    kop_manager *m;
    kop_controller *ctl;
    kop_informer *pages; /* from kop_controller_owns */
};

static kop_result never(const kop_reconcile *req, void *user)
{
    (void)req;
    (void)user;
    return KOP_DONE;
}

static void no_map(const json_t *obj, kop_emit_fn emit, void *emit_ctx, void *user)
{
    (void)obj;
    (void)emit;
    (void)emit_ctx;
    (void)user;
}

static int setup(void **state)
{
    static struct fixture f;
    kop_status st;
    snprintf(f.kubeconfig, sizeof f.kubeconfig, "/tmp/kop-unit-reconcile-%d.yaml", (int)getpid());
    FILE *kc = fopen(f.kubeconfig, "w");
    if (!kc || fputs(KUBECONFIG_NOWHERE, kc) < 0 || fclose(kc) != 0)
        return -1;
    kop_manager_opts mo = {.name = "unit-operator", .kubeconfig = f.kubeconfig,
                           .metrics_bind = "0"};
    if (kop_manager_new(&mo, &f.m, &st) != KOP_OK)
        return -1;
    kop_controller_opts co = {.name = "website", .for_resource = SITES, .reconcile = never};
    if (kop_controller_new(f.m, &co, &f.ctl) != KOP_OK ||
        kop_controller_owns(f.ctl, &CONFIGMAPS, &f.pages) != KOP_OK ||
        kop_controller_watches(f.ctl, &SERVICES, NULL, no_map, NULL) != KOP_OK)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    kop_manager_free(f->m);
    unlink(f->kubeconfig);
    return 0;
}

/* cache puts the object text holds into inf, as a watch event would. */
static void cache(kop_informer *inf, const char *text)
{
    assert_int_equal(kop__informer_apply_object(inf, parse(text), 0), KOP_OK);
}

static kop_reconcile request(struct fixture *f, const char *name)
{
    return (kop_reconcile){.namespace = "d", .name = name, .client = kop_manager_client(f->m),
                           .cache = kop_controller_cache(f->ctl), .controller = f->ctl,
                           .manager = f->m};
}

#define SITE(name, extra)                                                                          \
    "{\"apiVersion\":\"demo.example.com/v1\",\"kind\":\"Website\",\"metadata\":{\"name\":\"" name \
    "\",\"namespace\":\"d\",\"uid\":\"uid-" name "\",\"generation\":2" extra "}}"

static void test_get(void **state)
{
    struct fixture *f = *state;
    kop_status st;
    json_t *obj = (json_t *)1;
    cache(kop_controller_cache(f->ctl), SITE("live", ""));
    cache(kop_controller_cache(f->ctl),
          SITE("leaving",
               ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"finalizers\":[\"x\"]"));

    kop_reconcile req = request(f, "live");
    assert_int_equal(kop_reconcile_get(&req, KOP_GET_LIVE, &obj, &st), KOP_OK);
    assert_non_null(obj);
    assert_string_equal(kop_meta_name(obj), "live");
    json_decref(obj);

    /* Gone: nothing to do, and no error. */
    req = request(f, "gone");
    obj = (json_t *)1;
    assert_int_equal(kop_reconcile_get(&req, KOP_GET_DELETING, &obj, &st), KOP_OK);
    assert_null(obj);

    /* Being deleted: NULL for a reconcile with no cleanup, the object for one with. */
    req = request(f, "leaving");
    obj = (json_t *)1;
    assert_int_equal(kop_reconcile_get(&req, KOP_GET_LIVE, &obj, &st), KOP_OK);
    assert_null(obj);
    assert_int_equal(kop_reconcile_get(&req, KOP_GET_DELETING, &obj, &st), KOP_OK);
    assert_non_null(obj);
    assert_true(kop_meta_is_deleting(obj));
    json_decref(obj);

    /* Wrong calls. */
    assert_int_equal(kop_reconcile_get(NULL, KOP_GET_LIVE, &obj, &st), KOP_EINVAL);
    assert_null(obj);
    assert_int_equal(kop_reconcile_get(&req, KOP_GET_LIVE, NULL, &st), KOP_EINVAL);
    kop_reconcile nocache = {.namespace = "d", .name = "live"};
    assert_int_equal(kop_reconcile_get(&nocache, KOP_GET_LIVE, &obj, &st), KOP_EINVAL);
    assert_non_null(strstr(st.message, "kop_reconcile_get"));
}

static void test_owned_cache(void **state)
{
    struct fixture *f = *state;
    assert_non_null(f->pages);
    assert_ptr_equal(kop_controller_owned_cache(f->ctl, &CONFIGMAPS), f->pages);
    /* Found by group, version and plural: another copy of the resource will do. */
    kop_resource copy = {NULL, "v1", "configmaps", "ConfigMap", true};
    assert_ptr_equal(kop_controller_owned_cache(f->ctl, &copy), f->pages);
    /* Not owned: a kind never added, and one watched through a map function. */
    assert_null(kop_controller_owned_cache(f->ctl, &SECRETS));
    assert_null(kop_controller_owned_cache(f->ctl, &SERVICES));
    assert_null(kop_controller_owned_cache(NULL, &CONFIGMAPS));
    assert_null(kop_controller_owned_cache(f->ctl, NULL));
}

static void test_child(void **state)
{
    struct fixture *f = *state;
    kop_status st;
    kop_op_result did = KOP_OP_UPDATED;
    json_t *site = parse(SITE("s1", ""));
    kop_reconcile req = request(f, "s1");
    /* The pass as the server holds it: controlled by the site, with more data. */
    cache(f->pages, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                    "\"s1-page\",\"namespace\":\"d\",\"ownerReferences\":[{\"apiVersion\":"
                    "\"demo.example.com/v1\",\"kind\":\"Website\",\"name\":\"s1\",\"uid\":"
                    "\"uid-s1\",\"controller\":true}]},\"data\":{\"a\":\"1\",\"b\":\"2\"}}");

    /* Settled: read from the owned cache, nothing written (no connection tried). */
    json_t *want = parse("{\"metadata\":{\"name\":\"s1-page\"},\"data\":{\"a\":\"1\"}}");
    assert_int_equal(kop_reconcile_child(&req, &CONFIGMAPS, site, want, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(want);

    /* Different: the write is attempted, and cannot connect. */
    want = parse("{\"metadata\":{\"name\":\"s1-page\"},\"data\":{\"a\":\"9\"}}");
    assert_int_equal(kop_reconcile_child(&req, &CONFIGMAPS, site, want, &did, &st),
                     KOP_ECONNECT);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(want);

    /* Not in the cache: read from the apiserver, which cannot be reached. */
    want = parse("{\"metadata\":{\"name\":\"s1-other\"},\"data\":{}}");
    assert_int_equal(kop_reconcile_child(&req, &CONFIGMAPS, site, want, NULL, &st), KOP_ECONNECT);
    json_decref(want);

    /* A json_pack that failed, and a missing resource. */
    assert_int_equal(kop_reconcile_child(&req, &CONFIGMAPS, site, NULL, &did, &st), KOP_ENOMEM);
    assert_non_null(strstr(st.message, "ConfigMap"));
    assert_int_equal(kop_reconcile_child(&req, NULL, site, site, &did, &st), KOP_EINVAL);
    json_decref(site);
}

static void test_status(void **state)
{
    struct fixture *f = *state;
    kop_status st;
    kop_op_result did = KOP_OP_UPDATED;
    kop_reconcile req = request(f, "s2");
    json_t *settled = parse(SITE("s2", "") "");
    json_object_set_new(settled, "status",
                        parse("{\"phase\":\"Ready\",\"observedGeneration\":2,\"other\":1}"));
    json_t *status = parse("{\"phase\":\"Ready\"}");

    /* Shown already, observedGeneration included: no write. */
    assert_int_equal(kop_reconcile_status(&req, settled, status, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    /* The caller's status is not changed (no observedGeneration added). */
    assert_json_eq(status, "{\"phase\":\"Ready\"}", "status after the call");

    /* A newer generation: the same fields, but observedGeneration is stale. */
    json_object_set_new(json_object_get(settled, "metadata"), "generation", json_integer(3));
    assert_int_equal(kop_reconcile_status(&req, settled, status, &did, &st), KOP_ECONNECT);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    /* A field that differs, at the same generation. */
    json_object_set_new(json_object_get(settled, "metadata"), "generation", json_integer(2));
    json_t *failed = parse("{\"phase\":\"Failed\"}");
    assert_int_equal(kop_reconcile_status(&req, settled, failed, NULL, &st), KOP_ECONNECT);
    json_decref(failed);

    /* A json_pack that failed, a status that is no object, no object at all. */
    assert_int_equal(kop_reconcile_status(&req, settled, NULL, &did, &st), KOP_ENOMEM);
    json_t *text = json_string("Ready");
    assert_int_equal(kop_reconcile_status(&req, settled, text, &did, &st), KOP_EINVAL);
    json_decref(text);
    assert_int_equal(kop_reconcile_status(&req, NULL, status, &did, &st), KOP_EINVAL);
    json_decref(status);
    json_decref(settled);
}

static void test_end(void **state)
{
    struct fixture *f = *state;
    kop_reconcile req = request(f, "s3");
    kop_status st;
    kop_status_setf(&st, 409, "Conflict", "the object was modified");
    assert_int_equal(kop_reconcile_end(&req, KOP_OK, &st).kind, KOP_RESULT_DONE);
    assert_int_equal(kop_reconcile_end(&req, KOP_ECONFLICT, &st).kind, KOP_RESULT_ERROR);
    assert_int_equal(kop_reconcile_end(&req, KOP_ENOMEM, NULL).kind, KOP_RESULT_ERROR);
    assert_int_equal(kop_reconcile_end(NULL, KOP_ENOMEM, NULL).kind, KOP_RESULT_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get),           cmocka_unit_test(test_owned_cache),
        cmocka_unit_test(test_child),         cmocka_unit_test(test_status),
        cmocka_unit_test(test_end),
    };
    return cmocka_run_group_tests_name("ctrlutil_reconcile", tests, setup, teardown);
}

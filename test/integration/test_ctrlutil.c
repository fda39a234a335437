/*
 * test_ctrlutil.c - the operator helpers against a real apiserver (the
 * devcluster fixture): kop/ctrlutil.h's finalizers and create-or-update,
 * kop_controller_owns' cache, the manager's recorder, and the discovery
 * check kop_manager_run makes before it starts anything (issue 33).
 *
 * - Finalizers: one call adds, a second writes nothing (the
 *   resourceVersion stays); a finalizer another writer added or removed
 *   after our read survives our write (the guarded patch is refused, read
 *   again and retried); removal releases a deleted object; removal from a
 *   gone object is success; an object being deleted takes none.
 * - Create-or-update: a Deployment is created, then left alone although
 *   the apiserver filled in defaults (unchanged, no write), then updated
 *   when a field we set changes; a field we stop setting is removed; a
 *   child controlled by another owner is refused.
 * - A small operator on a manager (Website -> ConfigMap + finalizer) uses
 *   them all with the cache from kop_controller_owns and the manager's
 *   recorder: its pass on a settled object writes nothing; its Events
 *   name the manager as their reporting component.
 * - Start-up typos: a wrong plural, kind or version ends kop_manager_run
 *   at once with a message naming group, version, plural and kind.
 * - A status write to a CRD without the status subresource says so.
 * - kop_main runs a whole operator (flags, manager, controller owning
 *   ConfigMaps) whose reconcile is kop_reconcile_get/child/status/end: the
 *   child is created controlled by the site with the manager's name as
 *   field manager, status shows phase and observedGeneration, the pass the
 *   status write causes writes nothing, a spec edit reaches the child and
 *   observedGeneration, a deleted site is a pass with nothing to do, and
 *   SIGTERM ends kop_main with 0.
 */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "it_common.h"
#include "kop/kop.h"

#define GROUP "ctrlutil.it.kopc.io"
#define FIN   GROUP "/cleanup"

static const kop_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                  "CustomResourceDefinition", false};
static const kop_resource SITES = {GROUP, "v1", "websites", "Website", true};
static const kop_resource PLAIN = {GROUP, "v1", "plainsites", "PlainSite", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource DEPLOYMENTS = {"apps", "v1", "deployments", "Deployment", true};
static const kop_resource EVENTS = {"", "v1", "events", "Event", true};

static it_env env;

/* ---- fixtures --------------------------------------------------------------- */

/* install_crd creates the CRD of kind/plural (with or without status) and
 * waits until discovery serves it. */
static void install_crd(const char *kind, const char *plural, bool status)
{
    kop_status st;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", plural, GROUP);
    json_t *crd = json_pack(
        "{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:s}, s:[{s:s, s:b, s:b, s:o, s:{s:{s:s, "
        "s:b}}}]}}",
        "apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition", "metadata",
        "name", name, "spec", "group", GROUP, "scope", "Namespaced", "names", "kind", kind,
        "plural", plural, "versions", "name", "v1", "served", 1, "storage", 1, "subresources",
        status ? json_pack("{s:{}}", "status") : json_object(), "schema", "openAPIV3Schema",
        "type", "object", "x-kubernetes-preserve-unknown-fields", 1);
    assert_non_null(crd);
    kop_err err = kop_create_object(env.client,
                                    &(kop_write_req){.target = {&CRDS, NULL, NULL}, .object = crd},
                                    NULL, &st);
    json_decref(crd);
    if (err != KOP_OK && err != KOP_EALREADYEXISTS)
        fail_msg("CRD %s: %s", name, st.message);
    kop_resource found;
    char av[64];
    snprintf(av, sizeof av, "%s/v1", GROUP);
    err = KOP_ENOTFOUND;
    for (int i = 0; i < 600 && err == KOP_ENOTFOUND; i++) {
        err = kop_client_resource_for_kind(env.client, av, kind, &found, &st);
        if (err == KOP_ENOTFOUND)
            usleep(100 * 1000);
    }
    assert_int_equal(err, KOP_OK);
    /* Served for reads too (a CRD is discoverable a moment before it lists). */
    json_t *list = NULL;
    const kop_resource *r = status ? &SITES : &PLAIN;
    for (int i = 0; i < 600; i++) {
        if (kop_list(env.client, r, env.ns, NULL, &list, &st) == KOP_OK)
            break;
        usleep(100 * 1000);
    }
    json_decref(list);
}

static int setup(void **state)
{
    (void)state;
    if (it_setup(&env, "kopc-ctrlutil"))
        return -1;
    install_crd("Website", "websites", true);
    install_crd("PlainSite", "plainsites", false);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_teardown(&env);
    return 0;
}

/* make_site creates a Website (or PlainSite) and returns it as stored (owned). */
static json_t *make_site(const kop_resource *r, const char *name)
{
    kop_status st;
    json_t *out = NULL;
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", GROUP "/v1",
                            "kind", r->kind, "metadata", "name", name, "namespace", env.ns,
                            "spec", "title", "hello");
    kop_err err = kop_create_object(
        env.client, &(kop_write_req){.target = {r, env.ns, NULL}, .object = obj}, &out, &st);
    json_decref(obj);
    if (err)
        fail_msg("create %s: %s", name, st.message);
    return out;
}

/* server reads the object as it is now (owned), NULL when it is gone. */
static json_t *server(const kop_resource *r, const char *name)
{
    kop_status st;
    json_t *out = NULL;
    kop_err err = kop_get(env.client, r, env.ns, name, &out, &st);
    if (err && err != KOP_ENOTFOUND)
        fail_msg("get %s: %s", name, st.message);
    return out;
}

/* set_finalizers writes obj's finalizers as another writer would (a merge patch). */
static void set_finalizers(const char *name, json_t *list)
{
    kop_status st;
    json_t *p = json_pack("{s:{s:o}}", "metadata", "finalizers", list);
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&SITES, env.ns, name},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = p},
                                      NULL, &st),
                     KOP_OK);
    json_decref(p);
}

static bool has_fin(const json_t *obj, const char *f)
{
    return kop_meta_has_finalizer(obj, f);
}

/* ---- finalizers --------------------------------------------------------------- */

static void test_finalizers(void **state)
{
    (void)state;
    kop_status st;
    kop_op_result did;
    json_t *site = make_site(&SITES, "fin");

    /* Added in one call; the second call writes nothing. */
    assert_int_equal(
        kop_finalizer_ensure(env.client, &(kop_finalizer_req){&SITES, site, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UPDATED);
    json_t *now = server(&SITES, "fin");
    assert_true(has_fin(now, FIN));
    char rv[64];
    snprintf(rv, sizeof rv, "%s", kop_meta_resource_version(now));
    assert_int_equal(
        kop_finalizer_ensure(env.client, &(kop_finalizer_req){&SITES, now, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(now);
    now = server(&SITES, "fin");
    assert_string_equal(kop_meta_resource_version(now), rv);

    /* Our copy is stale: another writer removed ours and added theirs since.
     * Ensuring from the stale copy must keep theirs. */
    set_finalizers("fin", json_pack("[s]", "other.example.com/x"));
    json_t *stale = now; /* holds [FIN] only */
    now = NULL;
    assert_int_equal(
        kop_finalizer_ensure(env.client, &(kop_finalizer_req){&SITES, stale, FIN}, &did, &st),
        KOP_OK);
    /* The stale copy already had ours: nothing was sent, and the server lacks
     * it. A caller reading its cache again gets it right: */
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(stale);
    stale = server(&SITES, "fin"); /* [other] */
    set_finalizers("fin", json_pack("[s, s]", "other.example.com/x", "third.example.com/y"));
    assert_int_equal(
        kop_finalizer_ensure(env.client, &(kop_finalizer_req){&SITES, stale, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UPDATED);
    now = server(&SITES, "fin");
    assert_true(has_fin(now, FIN));
    assert_true(has_fin(now, "other.example.com/x"));
    assert_true(has_fin(now, "third.example.com/y")); /* added after our read, kept */
    json_decref(stale);

    /* Removal from a stale copy keeps a finalizer added after the read. */
    stale = now;
    set_finalizers("fin", json_pack("[s, s, s]", "other.example.com/x", "third.example.com/y",
                                    "fourth.example.com/z"));
    set_finalizers("fin", json_pack("[s, s, s]", FIN, "other.example.com/x",
                                    "fourth.example.com/z"));
    assert_int_equal(
        kop_finalizer_remove(env.client, &(kop_finalizer_req){&SITES, stale, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UPDATED);
    json_decref(stale);
    now = server(&SITES, "fin");
    assert_false(has_fin(now, FIN));
    assert_true(has_fin(now, "fourth.example.com/z"));
    assert_false(has_fin(now, "third.example.com/y")); /* removed by its writer: not brought back */
    json_decref(now);

    /* Deletion: the object stays while our finalizer holds it. */
    set_finalizers("fin", json_pack("[s]", FIN));
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&SITES, env.ns, "fin"}}, NULL,
                                       &st),
                     KOP_OK);
    now = server(&SITES, "fin");
    assert_non_null(now);
    assert_true(kop_meta_is_deleting(now));
    /* Being deleted: no new finalizer, said before anything is sent. */
    assert_int_equal(kop_finalizer_ensure(env.client,
                                          &(kop_finalizer_req){&SITES, now, "late.example.com/a"},
                                          &did, &st),
                     KOP_EINVALID);
    assert_non_null(strstr(st.message, "being deleted"));
    /* Removing ours releases it. */
    assert_int_equal(
        kop_finalizer_remove(env.client, &(kop_finalizer_req){&SITES, now, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UPDATED);
    json_t *gone = NULL;
    for (int i = 0; i < 300 && (gone = server(&SITES, "fin")); i++) {
        json_decref(gone);
        usleep(100 * 1000);
    }
    assert_null(gone);
    /* Removing again, from the last copy we held: gone is success. */
    assert_int_equal(
        kop_finalizer_remove(env.client, &(kop_finalizer_req){&SITES, now, FIN}, &did, &st),
        KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(now);
    json_decref(site);
}

/* ---- create-or-update ----------------------------------------------------------- */

/* deployment is what an operator asks for: only the fields it sets. */
static json_t *deployment(const char *image, bool with_env)
{
    json_t *container =
        json_pack("{s:s, s:s, s:[{s:i}]}", "name", "web", "image", image, "ports", "containerPort",
                  80);
    if (with_env)
        json_object_set_new(container, "env", json_pack("[{s:s, s:s}]", "name", "MODE", "value",
                                                        "demo"));
    return json_pack("{s:{s:s, s:{s:s}}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, s:{s:[o]}}}}",
                     "metadata", "name", "site-web", "labels", "app", "site-web", "spec",
                     "replicas", 1, "selector", "matchLabels", "app", "site-web", "template",
                     "metadata", "labels", "app", "site-web", "spec", "containers", container);
}

static void test_create_or_update(void **state)
{
    (void)state;
    kop_status st;
    kop_op_result did;
    json_t *site = make_site(&SITES, "owner");
    kop_child_req req = {.resource = &DEPLOYMENTS,
                         .owner = site,
                         .field_manager = "ctrlutil-test"};

    /* Created, controlled by the site, in the site's namespace. */
    json_t *want = deployment("nginx:1", true);
    req.object = want;
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_CREATED);
    json_t *have = server(&DEPLOYMENTS, "site-web");
    assert_non_null(have);
    assert_true(kop_meta_is_controlled_by(have, kop_meta_uid(site)));
    /* The apiserver filled in defaults we never set. */
    json_t *c0 = json_array_get(json_object_get(json_object_get(json_object_get(
                                    json_object_get(have, "spec"), "template"), "spec"),
                                                "containers"),
                                0);
    assert_non_null(json_object_get(c0, "imagePullPolicy"));
    int64_t generation = kop_meta_generation(have);
    json_decref(have);

    /* Again: the defaults do not count as a difference. No write (the
     * deployment controller writes status meanwhile, so the spec's
     * generation is what must stay). */
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    have = server(&DEPLOYMENTS, "site-web");
    assert_int_equal(kop_meta_generation(have), generation);
    json_decref(have);
    json_decref(want);

    /* A field we set changes, and one we set no more goes. */
    want = deployment("nginx:2", false);
    req.object = want;
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UPDATED);
    have = server(&DEPLOYMENTS, "site-web");
    c0 = json_array_get(json_object_get(json_object_get(json_object_get(
                            json_object_get(have, "spec"), "template"), "spec"),
                                        "containers"),
                        0);
    assert_string_equal(json_string_value(json_object_get(c0, "image")), "nginx:2");
    assert_null(json_object_get(c0, "env"));
    json_decref(have);
    /* And settled again. */
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    json_decref(want);

    /* A child someone else controls is refused, and left as it is. */
    json_t *rival = make_site(&SITES, "rival");
    json_t *cm = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", "contested", "data", "k",
                           "v");
    req = (kop_child_req){.resource = &CONFIGMAPS, .owner = rival, .object = cm};
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_OK);
    assert_int_equal(did, KOP_OP_CREATED);
    req.owner = site;
    assert_int_equal(kop_create_or_update(env.client, &req, &did, &st), KOP_EALREADYEXISTS);
    assert_int_equal(did, KOP_OP_UNCHANGED);
    have = server(&CONFIGMAPS, "contested");
    assert_true(kop_meta_is_controlled_by(have, kop_meta_uid(rival)));
    json_decref(have);
    json_decref(cm);
    json_decref(rival);
    json_decref(site);
}

/* ---- a small operator on a manager ------------------------------------------------ */

struct op {
    kop_informer *pages; /* from kop_controller_owns */
    atomic_int created, updated, unchanged, released, passes;
};

static kop_result site_reconcile(const kop_reconcile *req, void *user)
{
    struct op *op = user;
    kop_status st;
    kop_op_result did = KOP_OP_UNCHANGED;
    kop_recorder *rec = NULL;
    json_t *site = NULL, *page = NULL;
    kop_result res = KOP_DONE;

    atomic_fetch_add(&op->passes, 1);
    if (kop_informer_dup(req->cache, req->namespace, req->name, &site) != KOP_OK)
        return KOP_DONE;
    kop_finalizer_req fin = {&SITES, site, FIN};
    if (kop_meta_is_deleting(site)) {
        if (kop_finalizer_remove(req->client, &fin, &did, &st) != KOP_OK)
            res = KOP_RETRY;
        else if (did == KOP_OP_UPDATED)
            atomic_fetch_add(&op->released, 1);
        goto out;
    }
    if (kop_finalizer_ensure(req->client, &fin, NULL, &st) != KOP_OK ||
        kop_manager_recorder(req->manager, &rec) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }
    char name[128];
    snprintf(name, sizeof name, "%s-page", req->name);
    page = json_pack("{s:{s:s}, s:{s:O}}", "metadata", "name", name, "data", "title",
                     json_object_get(json_object_get(site, "spec"), "title"));
    kop_child_req child = {.resource = &CONFIGMAPS, .owner = site, .object = page,
                           .cache = op->pages, .field_manager = "website-test"};
    if (kop_create_or_update(req->client, &child, &did, &st) != KOP_OK) {
        kop_logger_log(req->log, KOP_LOG_ERROR, "page", KOP_LOG_STR("reason", st.message));
        res = KOP_RETRY;
        goto out;
    }
    atomic_fetch_add(did == KOP_OP_CREATED ? &op->created
                     : did == KOP_OP_UPDATED ? &op->updated
                                             : &op->unchanged,
                     1);
    if (did != KOP_OP_UNCHANGED)
        kop_event(rec, &(kop_event_req){.object = site, .reason = "PageWritten"}, "page %s %s",
                  name, kop_op_result_name(did));
out:
    json_decref(page);
    json_decref(site);
    return res;
}

static void *run_manager(void *arg)
{
    kop_status st;
    kop_err *err = malloc(sizeof *err);
    *err = kop_manager_run(arg, &st);
    return err;
}

static bool wait_for(atomic_int *v, int n)
{
    for (int i = 0; i < 600; i++) {
        if (atomic_load(v) >= n)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

/* page_title reads the page's title on the server, NULL while it is missing. */
static bool page_says(const char *name, const char *title)
{
    json_t *cm = server(&CONFIGMAPS, name);
    bool ok = cm && kop_streq(json_string_value(json_object_get(json_object_get(cm, "data"),
                                                                "title")),
                              title);
    json_decref(cm);
    return ok;
}

static void test_operator(void **state)
{
    (void)state;
    static struct op op;
    char kubeconfig[512];
    kop_manager *m = NULL;
    kop_controller *c = NULL;
    kop_informer *shared = NULL;
    kop_status st;
    it_path(&env, "kubeconfig", kubeconfig, sizeof kubeconfig);
    kop_manager_opts mo = {.name = "website-test", .kubeconfig = kubeconfig, .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    kop_controller_opts co = {.name = "website", .for_resource = SITES, .namespace = env.ns,
                              .reconcile = site_reconcile, .user = &op};
    assert_int_equal(kop_controller_new(m, &co, &c), KOP_OK);
    assert_int_equal(kop_controller_owns(c, &CONFIGMAPS, &op.pages), KOP_OK);
    assert_non_null(op.pages);
    /* It is the manager's shared cache of the children, not a second one. */
    assert_int_equal(kop_manager_informer(m, &CONFIGMAPS, env.ns, NULL, &shared), KOP_OK);
    assert_ptr_equal(shared, op.pages);
    /* NULL is allowed for callers that do not want it. */
    assert_int_equal(kop_controller_owns(c, &DEPLOYMENTS, NULL), KOP_OK);
    /* The recorder is made once, whoever asks. */
    kop_recorder *r1 = NULL, *r2 = NULL;
    assert_int_equal(kop_manager_recorder(m, &r1), KOP_OK);
    assert_int_equal(kop_manager_recorder(m, &r2), KOP_OK);
    assert_ptr_equal(r1, r2);

    json_t *site = make_site(&SITES, "op-site");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    assert_true(wait_for(&op.created, 1));
    for (int i = 0; i < 300 && !page_says("op-site-page", "hello"); i++)
        usleep(100 * 1000);
    assert_true(page_says("op-site-page", "hello"));
    json_t *now = server(&SITES, "op-site");
    assert_true(kop_meta_has_finalizer(now, FIN));
    json_decref(now);

    /* A settled object's pass writes nothing: wake it with a label change
     * (no write of ours follows, so the page's resourceVersion stays). */
    json_t *cm = server(&CONFIGMAPS, "op-site-page");
    char rv[64];
    snprintf(rv, sizeof rv, "%s", kop_meta_resource_version(cm));
    json_decref(cm);
    int unchanged = atomic_load(&op.unchanged);
    json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "poke", "1");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&SITES, env.ns, "op-site"},
                                                       .type = KOP_PATCH_MERGE, .patch = p},
                                      NULL, &st),
                     KOP_OK);
    json_decref(p);
    assert_true(wait_for(&op.unchanged, unchanged + 1));
    cm = server(&CONFIGMAPS, "op-site-page");
    assert_string_equal(kop_meta_resource_version(cm), rv);
    json_decref(cm);

    /* An edit of the spec reaches the page. */
    p = json_pack("{s:{s:s}}", "spec", "title", "bonjour");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&SITES, env.ns, "op-site"},
                                                       .type = KOP_PATCH_MERGE, .patch = p},
                                      NULL, &st),
                     KOP_OK);
    json_decref(p);
    assert_true(wait_for(&op.updated, 1));
    assert_true(page_says("op-site-page", "bonjour"));

    /* The recorder's events reached the apiserver. */
    assert_int_equal(kop_recorder_flush(r1, 10000), KOP_OK);
    json_t *events = NULL;
    assert_int_equal(kop_list(env.client, &EVENTS, env.ns,
                              &(kop_list_opts){.field_selector = "reason=PageWritten"}, &events,
                              &st),
                     KOP_OK);
    assert_true(json_array_size(json_object_get(events, "items")) >= 1);
    /* The manager's name is their reporting component (kop/manager.h). */
    json_t *ev = json_array_get(json_object_get(events, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(ev, "reportingComponent")),
                        "website-test");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "source"),
                                                          "component")),
                        "website-test");
    json_decref(events);

    /* Deletion: the finalizer is released and the site goes. */
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&SITES, env.ns, "op-site"}},
                                       NULL, &st),
                     KOP_OK);
    assert_true(wait_for(&op.released, 1));
    json_t *gone = NULL;
    for (int i = 0; i < 300 && (gone = server(&SITES, "op-site")); i++) {
        json_decref(gone);
        usleep(100 * 1000);
    }
    assert_null(gone);

    kop_manager_stop(m);
    kop_err *err = NULL;
    pthread_join(t, (void **)&err);
    assert_int_equal(*err, KOP_OK);
    free(err);
    kop_manager_free(m); /* frees the recorder too: nothing for the test to free */
    json_decref(site);
}

/* ---- start-up typos ----------------------------------------------------------------- */

static kop_result noop_reconcile(const kop_reconcile *req, void *user)
{
    (void)req;
    (void)user;
    return KOP_DONE;
}

struct typo_run {
    kop_manager *m;
    kop_status st;
    kop_err err;
    atomic_bool done;
};

static void *typo_thread(void *arg)
{
    struct typo_run *r = arg;
    r->err = kop_manager_run(r->m, &r->st);
    atomic_store(&r->done, true);
    return NULL;
}

/*
 * run_with runs a manager whose controller is for `primary` and owns
 * `child`; returns what kop_manager_run returned, its message in st. The
 * run must end by itself within 30 s: one that is still going (it started,
 * retrying its lists) is stopped and fails the test.
 */
static kop_err run_with(const kop_resource *primary, const kop_resource *child, kop_status *st)
{
    static struct typo_run r;
    char kubeconfig[512];
    kop_controller *c = NULL;
    pthread_t t;
    r = (struct typo_run){0};
    it_path(&env, "kubeconfig", kubeconfig, sizeof kubeconfig);
    kop_manager_opts mo = {.name = "typo-test", .kubeconfig = kubeconfig, .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &r.m, st), KOP_OK);
    kop_controller_opts co = {.name = "typo", .for_resource = *primary, .namespace = env.ns,
                              .reconcile = noop_reconcile};
    assert_int_equal(kop_controller_new(r.m, &co, &c), KOP_OK);
    assert_int_equal(kop_controller_owns(c, child, NULL), KOP_OK);
    assert_int_equal(pthread_create(&t, NULL, typo_thread, &r), 0);
    for (int i = 0; i < 300 && !atomic_load(&r.done); i++)
        usleep(100 * 1000);
    bool ended = atomic_load(&r.done);
    if (!ended)
        kop_manager_stop(r.m);
    pthread_join(t, NULL);
    kop_manager_free(r.m);
    if (!ended)
        fail_msg("%s/%s (%s) with child %s: the manager started instead of refusing",
                 primary->version, primary->resource, primary->kind, child->resource);
    *st = r.st;
    return r.err;
}

static void assert_says(const kop_status *st, const char *const *parts)
{
    for (; *parts; parts++)
        if (!strstr(st->message, *parts))
            fail_msg("start-up error \"%s\" lacks \"%s\"", st->message, *parts);
}

static void test_startup_typos(void **state)
{
    (void)state;
    kop_status st;

    /* The plural. */
    const kop_resource plural = {GROUP, "v1", "websitez", "Website", true};
    assert_int_equal(run_with(&plural, &CONFIGMAPS, &st), KOP_ENOTFOUND);
    assert_says(&st, (const char *[]){"no resource websitez in " GROUP "/v1", "Website",
                                      "is the CRD installed", "websites (Website)", NULL});

    /* The kind, where owner references would never match. */
    const kop_resource kind = {GROUP, "v1", "websites", "WebSite", true};
    assert_int_equal(run_with(&kind, &CONFIGMAPS, &st), KOP_EINVAL);
    assert_says(&st, (const char *[]){"websites in " GROUP "/v1", "serves kind Website",
                                      "not WebSite", NULL});

    /* The version (a CRD that is not installed looks the same). */
    const kop_resource version = {GROUP, "v2", "websites", "Website", true};
    assert_int_equal(run_with(&version, &CONFIGMAPS, &st), KOP_ENOTFOUND);
    assert_says(&st, (const char *[]){"no resource websites in " GROUP "/v2", "Website",
                                      "is the CRD installed", NULL});

    /* A child's typo counts as much as the primary's. */
    const kop_resource child = {"", "v1", "configmap", "ConfigMap", true};
    assert_int_equal(run_with(&SITES, &child, &st), KOP_ENOTFOUND);
    assert_says(&st, (const char *[]){"no resource configmap in v1", "ConfigMap",
                                      "configmaps (ConfigMap)", NULL});

    /* The scope. */
    const kop_resource scope = {GROUP, "v1", "websites", "Website", false};
    assert_int_equal(run_with(&scope, &CONFIGMAPS, &st), KOP_EINVAL);
    assert_says(&st, (const char *[]){"websites", "namespaced", NULL});
}

/* ---- status without the subresource ----------------------------------------------- */

static void test_status_without_subresource(void **state)
{
    (void)state;
    kop_status st;
    json_t *plain = make_site(&PLAIN, "plain");
    json_t *status = json_pack("{s:s}", "phase", "Ready");
    assert_int_equal(kop_patch_status(env.client, &PLAIN, plain, status, NULL, &st),
                     KOP_ENOTFOUND);
    assert_says(&st, (const char *[]){"no status subresource", "plainsites", GROUP "/v1",
                                      "subresources", NULL});
    /* A resource with the subresource and a missing object: a plain 404. */
    json_t *ghost = json_pack("{s:{s:s, s:s}}", "metadata", "name", "ghost", "namespace", env.ns);
    assert_int_equal(kop_patch_status(env.client, &SITES, ghost, status, NULL, &st),
                     KOP_ENOTFOUND);
    assert_null(strstr(st.message, "no status subresource"));
    json_decref(ghost);
    json_decref(status);
    json_decref(plain);
}

/* ---- kop_main and the kop_reconcile_* helpers ---------------------------------------- */

struct main_op {
    atomic_int children_written, status_written, status_unchanged, nothing, failed;
};
static struct main_op mop;

/*
 * main_reconcile reconciles every Website of the namespace (the Sites the
 * earlier tests left, owner and rival, included), but counts the passes of
 * main-site alone: the counters are what test_main asserts about it, and
 * the others' passes run in any order beside its own.
 */
static kop_result main_reconcile(const kop_reconcile *req, void *user)
{
    static struct main_op ignored;
    struct main_op *op = kop_streq(req->name, "main-site") ? user : &ignored;
    json_t *site = NULL, *page = NULL, *status = NULL;
    kop_op_result child_did = KOP_OP_UNCHANGED, status_did = KOP_OP_UNCHANGED;
    kop_status st;
    kop_err err = kop_reconcile_get(req, KOP_GET_LIVE, &site, &st);
    if (!err && !site)
        atomic_fetch_add(&op->nothing, 1);
    if (!err && site) {
        page = json_pack("{s:{s:s+}, s:{s:O}}", "metadata", "name", kop_meta_name(site), "-main",
                         "data", "title", json_object_get(json_object_get(site, "spec"), "title"));
        status = json_pack("{s:s}", "phase", "Ready");
        err = kop_reconcile_child(req, &CONFIGMAPS, site, page, &child_did, &st);
        if (!err)
            err = kop_reconcile_status(req, site, status, &status_did, &st);
    }
    if (err)
        atomic_fetch_add(&op->failed, 1);
    if (child_did != KOP_OP_UNCHANGED)
        atomic_fetch_add(&op->children_written, 1);
    if (!err && site)
        atomic_fetch_add(status_did == KOP_OP_UPDATED ? &op->status_written : &op->status_unchanged,
                         1);
    json_decref(status);
    json_decref(page);
    json_decref(site);
    return kop_reconcile_end(req, err, &st);
}

static const kop_resource *const MAIN_OWNS[] = {&CONFIGMAPS, NULL};

struct main_run {
    char kubeconfig[512];
    int rc;
    atomic_bool done;
};

static void *main_thread(void *arg)
{
    struct main_run *r = arg;
    char *argv[] = {"main-operator", "--kubeconfig", r->kubeconfig, "--metrics-bind", "0",
                    "--namespace", env.ns, NULL};
    r->rc = kop_main(7, argv, &(kop_main_opts){
        .manager.name = "main-test",
        /* No generation predicate: the pass after our status write must find nothing to write. */
        .controller = {.name = "main-site", .for_resource = SITES, .reconcile = main_reconcile,
                       .user = &mop},
        .owns = MAIN_OWNS});
    atomic_store(&r->done, true);
    return NULL;
}

/* site_shows reads main-site's status: phase Ready at observedGeneration == generation == gen. */
static bool site_shows(int64_t gen)
{
    json_t *s = server(&SITES, "main-site");
    const json_t *status = json_object_get(s, "status");
    bool ok = s && kop_meta_generation(s) == gen &&
              kop_streq(json_string_value(json_object_get(status, "phase")), "Ready") &&
              json_integer_value(json_object_get(status, "observedGeneration")) == gen;
    json_decref(s);
    return ok;
}

static bool wait_until(bool (*cond)(int64_t), int64_t arg)
{
    for (int i = 0; i < 600; i++) {
        if (cond(arg))
            return true;
        usleep(100 * 1000);
    }
    return false;
}

static bool page_titled_hello(int64_t unused)
{
    (void)unused;
    return page_says("main-site-main", "hello");
}

static bool page_titled_bonjour(int64_t unused)
{
    (void)unused;
    return page_says("main-site-main", "bonjour");
}

static void test_main(void **state)
{
    (void)state;
    static struct main_run run;
    kop_status st;
    it_path(&env, "kubeconfig", run.kubeconfig, sizeof run.kubeconfig);
    /* SIGTERM stays pending until the manager's sigwait takes it, whichever
     * thread it is sent to (kop_manager_new blocks it only in its thread). */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &term, NULL), 0);

    json_t *site = make_site(&SITES, "main-site");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, main_thread, &run), 0);

    /* The child, controlled by the site, written under the manager's name. */
    assert_true(wait_until(page_titled_hello, 0));
    json_t *cm = server(&CONFIGMAPS, "main-site-main");
    assert_true(kop_meta_is_controlled_by(cm, kop_meta_uid(site)));
    bool by_us = false;
    size_t i;
    json_t *mf;
    json_array_foreach(json_object_get(json_object_get(cm, "metadata"), "managedFields"), i, mf)
        by_us |= kop_streq(json_string_value(json_object_get(mf, "manager")), "main-test");
    assert_true(by_us);
    json_decref(cm);

    /* Status with observedGeneration; the pass our status write caused writes nothing. */
    assert_true(wait_until(site_shows, 1));
    assert_true(wait_for(&mop.status_unchanged, 1));
    json_t *now = server(&SITES, "main-site");
    char site_rv[64];
    snprintf(site_rv, sizeof site_rv, "%s", kop_meta_resource_version(now));
    json_decref(now);
    int settled = atomic_load(&mop.status_unchanged);
    int written = atomic_load(&mop.children_written);
    assert_true(written >= 1);
    json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "poke", "1");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&CONFIGMAPS, env.ns,
                                                                  "main-site-main"},
                                                       .type = KOP_PATCH_MERGE, .patch = p},
                                      NULL, &st),
                     KOP_OK);
    json_decref(p);
    assert_true(wait_for(&mop.status_unchanged, settled + 1)); /* woken through the child */
    now = server(&SITES, "main-site");
    assert_string_equal(kop_meta_resource_version(now), site_rv);
    json_decref(now);
    assert_int_equal(atomic_load(&mop.children_written), written);

    /* A spec edit reaches the child and observedGeneration. */
    p = json_pack("{s:{s:s}}", "spec", "title", "bonjour");
    assert_int_equal(kop_patch_object(env.client,
                                      &(kop_patch_req){.target = {&SITES, env.ns, "main-site"},
                                                       .type = KOP_PATCH_MERGE, .patch = p},
                                      NULL, &st),
                     KOP_OK);
    json_decref(p);
    assert_true(wait_until(page_titled_bonjour, 0));
    assert_true(wait_until(site_shows, 2));

    /* Deleted: a pass with nothing to do, no error. */
    int nothing = atomic_load(&mop.nothing);
    assert_int_equal(kop_delete_object(env.client,
                                       &(kop_delete_req){.target = {&SITES, env.ns, "main-site"}},
                                       NULL, &st),
                     KOP_OK);
    assert_true(wait_for(&mop.nothing, nothing + 1));
    assert_int_equal(atomic_load(&mop.failed), 0);

    /* SIGTERM: kop_main returns 0. */
    assert_false(atomic_load(&run.done));
    assert_int_equal(kill(getpid(), SIGTERM), 0);
    for (int j = 0; j < 300 && !atomic_load(&run.done); j++)
        usleep(100 * 1000);
    assert_true(atomic_load(&run.done));
    pthread_join(t, NULL);
    assert_int_equal(run.rc, 0);
    json_decref(site);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finalizers),
        cmocka_unit_test(test_create_or_update),
        cmocka_unit_test(test_operator),
        cmocka_unit_test(test_startup_typos),
        cmocka_unit_test(test_status_without_subresource),
        cmocka_unit_test(test_main),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_client.c - the REST client against a real apiserver (the devcluster
 * started by the ctest fixture; KOP_DEVCLUSTER_DIR names its directory).
 *
 * Each run works in a namespace of its own, so runs do not see each other's
 * objects. Nothing here is mocked: every assertion is about what the
 * apiserver stored or answered.
 *
 * The TLS trust tests put test/e2e/faultproxy.py (KOP_FAULTPROXY), which
 * terminates TLS with a certificate the test signs, in front of the
 * apiserver. The one about the system's CA store runs its client in a
 * child process with a mount namespace of its own, where a throwaway
 * directory is mounted over /etc/ssl/certs: the machine's store is never
 * touched (this needs root, as the devcluster does).
 */
#define _GNU_SOURCE /* unshare */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "it_common.h"
#include "kop/kop.h"

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
static const kop_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                  "CustomResourceDefinition", false};

static const char *cluster_dir;
static it_env env;
static char ns[64];
static kop_config *cfg;
static kop_client *client;
/* The TLS tests' proxy running now, if any: a failed assertion leaves its
 * test before proxy_stop, so the group's teardown stops it (it would
 * otherwise hold ctest's output open until the timeout). */
static pid_t live_proxy;
static int live_proxy_out = -1; /* the read end of its stdout */

/* ---- helpers ------------------------------------------------------------ */

static json_t *configmap(const char *name, const char *k, const char *v)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                     "metadata", "name", name, "data", k, v);
}

static void path_in_cluster(char *out, size_t size, const char *file)
{
    snprintf(out, size, "%s/%s", cluster_dir, file);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return strdup(buf);
}

/* make_client loads a kubeconfig file and makes a client for it. */
static kop_err make_client(const char *kubeconfig, kop_config **cfg_out, kop_client **out,
                           kop_status *st)
{
    kop_config_opts o = {.kubeconfig = kubeconfig};
    kop_err err = kop_config_load(&o, cfg_out, st);
    if (err)
        return err;
    err = kop_client_new(*cfg_out, NULL, out, st);
    if (err) {
        kop_config_free(*cfg_out);
        *cfg_out = NULL;
    }
    return err;
}

/* write_kubeconfig writes a kubeconfig for the cluster whose user block is user_yaml. */
static void write_kubeconfig(const char *path, const char *ca_file, const char *user_yaml)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: %s\n    certificate-authority: %s\n"
            "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
            "users:\n- name: u\n  user:\n%s",
            kop_config_server(cfg), ca_file, user_yaml);
    fclose(f);
}

/* ---- fixture ------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    if (it_setup(&env, "kopc-it"))
        return -1;
    cfg = env.cfg;
    client = env.client;
    snprintf(ns, sizeof ns, "%s", env.ns);
    cluster_dir = env.dir;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (live_proxy > 0) {
        kill(live_proxy, SIGTERM);
        waitpid(live_proxy, NULL, 0);
    }
    it_teardown(&env);
    return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void test_version(void **state)
{
    (void)state;
    json_t *v = NULL;
    kop_status st;
    assert_int_equal(kop_get_path(client, "/version", &v, &st), KOP_OK);
    const char *git = json_string_value(json_object_get(v, "gitVersion"));
    assert_non_null(git);
    assert_int_equal(strncmp(git, "v1.", 3), 0);
    json_decref(v);
}

static void test_configmap_crud(void **state)
{
    (void)state;
    kop_status st;
    json_t *cm = configmap("crud", "a", "1"), *got = NULL, *upd = NULL;

    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, &got, &st), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(got, "data"), "a")), "1");
    /* Without a field manager the apiserver names the writer after the user agent. */
    json_t *mf = json_array_get(json_object_get(json_object_get(got, "metadata"), "managedFields"), 0);
    assert_string_equal(json_string_value(json_object_get(mf, "manager")), "kopc");
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm},
                                       NULL, &st),
                     KOP_EALREADYEXISTS);
    assert_int_equal(st.code, 409);
    assert_string_equal(st.reason, "AlreadyExists");
    json_decref(got);

    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "crud", &got, &st), KOP_OK);
    json_object_set_new(json_object_get(got, "data"), "a", json_string("2"));
    assert_int_equal(kop_update_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = got}, &upd, &st), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(upd, "data"), "a")), "2");
    json_decref(got);
    json_decref(upd);

    assert_int_equal(kop_delete_object(
                         client, &(kop_delete_req){.target = {&CONFIGMAPS, ns, "crud"}}, NULL, &st),
                     KOP_OK);
    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "crud", &got, &st), KOP_ENOTFOUND);
    assert_null(got);
    assert_int_equal(st.code, 404);
    assert_string_equal(st.reason, "NotFound");
    assert_non_null(strstr(st.message, "crud"));
    json_decref(cm);
}

static void test_stale_update_conflicts(void **state)
{
    (void)state;
    kop_status st;
    json_t *cm = configmap("stale", "a", "1"), *v1 = NULL, *v2 = NULL;
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, &v1, &st), KOP_OK);
    json_t *copy = json_deep_copy(v1);
    json_object_set_new(json_object_get(v1, "data"), "a", json_string("2"));
    assert_int_equal(kop_update_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = v1}, &v2, &st), KOP_OK);
    /* copy still carries the first resourceVersion */
    json_object_set_new(json_object_get(copy, "data"), "a", json_string("3"));
    kop_write_req stale = {.target = {&CONFIGMAPS, ns, NULL}, .object = copy};
    assert_int_equal(kop_update_object(client, &stale, NULL, &st), KOP_ECONFLICT);
    assert_int_equal(st.code, 409);
    assert_string_equal(st.reason, "Conflict");
    json_decref(cm);
    json_decref(v1);
    json_decref(v2);
    json_decref(copy);
}

/* patch_cm patches the ConfigMap NAME of the test namespace. */
static kop_err patch_cm(const char *name, kop_patch_type type, json_t *patch, kop_write_opts o,
                        json_t **out, kop_status *st)
{
    kop_patch_req rq = {.target = {&CONFIGMAPS, ns, name}, .type = type, .patch = patch, .opts = o};
    return kop_patch_object(client, &rq, out, st);
}

static void test_merge_patch_keeps_fields(void **state)
{
    (void)state;
    kop_status st;
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", "merge", "data", "a", "1", "b", "2");
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_t *patch = json_pack("{s:{s:s}}", "data", "c", "3"), *out = NULL;
    assert_int_equal(patch_cm("merge", KOP_PATCH_MERGE, patch, (kop_write_opts){0}, &out, &st),
                     KOP_OK);
    json_t *data = json_object_get(out, "data");
    assert_string_equal(json_string_value(json_object_get(data, "a")), "1");
    assert_string_equal(json_string_value(json_object_get(data, "b")), "2");
    assert_string_equal(json_string_value(json_object_get(data, "c")), "3");
    json_decref(out);

    /* A JSON patch whose test fails changes nothing and is refused. */
    json_t *jp = json_pack("[{s:s, s:s, s:s}, {s:s, s:s}]", "op", "test", "path", "/data/a",
                           "value", "wrong", "op", "remove", "path", "/data/b");
    assert_int_not_equal(patch_cm("merge", KOP_PATCH_JSON, jp, (kop_write_opts){0}, NULL, &st),
                         KOP_OK);
    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "merge", &out, &st), KOP_OK);
    assert_non_null(json_object_get(json_object_get(out, "data"), "b"));
    json_decref(out);
    json_decref(jp);
    json_decref(patch);
    json_decref(cm);
}

static void test_server_side_apply(void **state)
{
    (void)state;
    kop_status st;
    kop_write_opts o = {.field_manager = "kopc-test", .force = true};
    json_t *cm = configmap("applied", "a", "1"), *out = NULL;
    assert_int_equal(patch_cm("applied", KOP_PATCH_APPLY, cm, o, &out, &st), KOP_OK);
    const char *uid = json_string_value(json_object_get(json_object_get(out, "metadata"), "uid"));
    assert_non_null(uid);
    char *uid1 = strdup(uid);
    json_decref(out);

    json_object_set_new(json_object_get(cm, "data"), "a", json_string("2"));
    assert_int_equal(patch_cm("applied", KOP_PATCH_APPLY, cm, o, &out, &st), KOP_OK);
    json_t *meta = json_object_get(out, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "uid")), uid1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "a")), "2");
    json_t *mf = json_array_get(json_object_get(meta, "managedFields"), 0);
    assert_string_equal(json_string_value(json_object_get(mf, "manager")), "kopc-test");
    assert_string_equal(json_string_value(json_object_get(mf, "operation")), "Apply");
    free(uid1);
    json_decref(out);

    /* Apply without a field manager is refused before anything is sent. */
    assert_int_equal(patch_cm("applied", KOP_PATCH_APPLY, cm, (kop_write_opts){0}, NULL, &st),
                     KOP_EINVAL);
    json_decref(cm);
}

static void test_delete_precondition(void **state)
{
    (void)state;
    kop_status st;
    json_t *cm = configmap("guarded", "a", "1"), *out = NULL;
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    kop_delete_opts o = {.precondition_uid = "00000000-0000-0000-0000-000000000000"};
    assert_int_equal(
        kop_delete_object(client,
                          &(kop_delete_req){.target = {&CONFIGMAPS, ns, "guarded"}, .opts = o},
                          NULL, &st),
        KOP_ECONFLICT);
    assert_int_equal(st.code, 409);
    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "guarded", &out, &st), KOP_OK);
    o.precondition_uid = json_string_value(json_object_get(json_object_get(out, "metadata"), "uid"));
    o.propagation = KOP_PROPAGATION_BACKGROUND;
    assert_int_equal(
        kop_delete_object(client,
                          &(kop_delete_req){.target = {&CONFIGMAPS, ns, "guarded"}, .opts = o},
                          NULL, &st),
        KOP_OK);
    json_decref(out);
    json_decref(cm);
}

/* ---- paging ------------------------------------------------------------- */

#define PAGED_N 1200
#define WRITERS 4

struct writer {
    int first, count;
    kop_err err;
    char msg[256];
};

/* create_range creates configmaps page-<first>..: the client is shared by all threads. */
static void *create_range(void *arg)
{
    struct writer *w = arg;
    for (int i = w->first; i < w->first + w->count; i++) {
        char name[32];
        kop_status st;
        snprintf(name, sizeof name, "page-%04d", i);
        json_t *cm = configmap(name, "i", name);
        json_object_set_new(json_object_get(cm, "metadata"), "labels",
                            json_pack("{s:s}", "set", "paging"));
        kop_err err = kop_create_object(client,
                                        &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                         .object = cm}, NULL, &st);
        json_decref(cm);
        if (err) {
            w->err = err;
            snprintf(w->msg, sizeof w->msg, "%s: %.200s", name, st.message);
            break;
        }
    }
    return NULL;
}

struct pages {
    int npages;
    int seen[PAGED_N];
    int total;
};

static kop_err count_page(json_t *page, void *user)
{
    struct pages *p = user;
    json_t *item;
    size_t i;
    p->npages++;
    json_array_foreach(json_object_get(page, "items"), i, item)
    {
        const char *name = json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        int n = -1;
        if (!name || sscanf(name, "page-%d", &n) != 1 || n < 0 || n >= PAGED_N)
            return KOP_EPARSE;
        p->seen[n]++;
        p->total++;
    }
    return KOP_OK;
}

/*
 * Writes by request struct: create and update name their object by the
 * target or by the object itself, and refuse a target name that is not the
 * object's before sending anything; patch and delete keep their options.
 */
static void test_write_requests(void **state)
{
    (void)state;
    kop_status st;
    json_t *cm = configmap("legacy", "a", "1"), *out = NULL;
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, "other"},
                                                        .object = cm}, NULL, &st),
                     KOP_EINVAL);
    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "other", &out, &st), KOP_ENOTFOUND);
    assert_int_equal(
        kop_create_object(client, &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL}, .object = cm},
                          &out, &st),
        KOP_OK);
    json_object_set_new(json_object_get(out, "data"), "c", json_string("3"));
    json_t *stored = NULL;
    assert_int_equal(kop_update_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, "legacy"},
                                                        .object = out}, &stored, &st),
                     KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(stored, "data"), "c")),
                        "3");
    json_decref(stored);
    json_decref(out);
    out = NULL;
    json_t *patch = json_pack("{s:{s:s}}", "data", "b", "2");
    kop_patch_req pr = {.target = {&CONFIGMAPS, ns, "legacy"},
                        .type = KOP_PATCH_MERGE,
                        .patch = patch,
                        .opts = {.dry_run = true}};
    assert_int_equal(kop_patch_object(client, &pr, NULL, &st), KOP_OK);
    assert_int_equal(kop_get(client, &CONFIGMAPS, ns, "legacy", &out, &st), KOP_OK);
    assert_null(json_object_get(json_object_get(out, "data"), "b")); /* a dry run */
    json_decref(out);
    pr.opts.dry_run = false;
    assert_int_equal(kop_patch_object(client, &pr, &out, &st), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "data"), "b")), "2");
    kop_delete_req dr = {.target = {&CONFIGMAPS, ns, "legacy"},
                         .opts = {.precondition_uid = "00000000-0000-0000-0000-000000000000"}};
    assert_int_equal(kop_delete_object(client, &dr, NULL, &st), KOP_ECONFLICT);
    dr.opts.precondition_uid = NULL;
    assert_int_equal(kop_delete_object(client, &dr, NULL, &st), KOP_OK);
    json_decref(out);
    json_decref(patch);
    json_decref(cm);
}

static void test_paging_returns_each_once(void **state)
{
    (void)state;
    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.first = i * (PAGED_N / WRITERS), .count = PAGED_N / WRITERS};
        assert_int_equal(pthread_create(&th[i], NULL, create_range, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].err)
            fail_msg("writer %d: %s: %s", i, kop_err_name(w[i].err), w[i].msg);
    }

    struct pages *p = calloc(1, sizeof *p);
    char *rv = NULL;
    kop_status st;
    kop_list_opts o = {.label_selector = "set=paging", .limit = 500};
    assert_int_equal(kop_list_each(client,
                                   &(kop_list_req){.resource = &CONFIGMAPS, .namespace = ns,
                                                   .opts = o, .fn = count_page, .user = p}, &rv,
                                   &st), KOP_OK);
    assert_int_equal(p->npages, 3);
    assert_int_equal(p->total, PAGED_N);
    for (int i = 0; i < PAGED_N; i++)
        assert_int_equal(p->seen[i], 1);
    assert_non_null(rv);
    assert_true(strlen(rv) > 0);

    /* One page by hand: limit and continue come back as the API says. */
    json_t *page = NULL;
    assert_int_equal(kop_list(client, &CONFIGMAPS, ns, &o, &page, &st), KOP_OK);
    assert_int_equal(json_array_size(json_object_get(page, "items")), 500);
    assert_non_null(json_string_value(json_object_get(json_object_get(page, "metadata"), "continue")));
    json_decref(page);
    free(rv);
    free(p);
}

/* ---- watch -------------------------------------------------------------- */

static void expect_event(kop_watch *w, kop_watch_type type, const char *name, const char *value)
{
    kop_watch_event ev;
    kop_status st;
    for (;;) {
        kop_err err = kop_watch_next(w, &ev, &st);
        if (err)
            fail_msg("watch_next: %s: %s", kop_err_name(err), st.message);
        if (ev.type != KOP_WATCH_BOOKMARK)
            break;
        kop_watch_event_fini(&ev);
    }
    assert_string_equal(kop_watch_type_name(ev.type), kop_watch_type_name(type));
    json_t *meta = json_object_get(ev.object, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "name")), name);
    if (value)
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(ev.object, "data"), "a")), value);
    kop_watch_event_fini(&ev);
}

static void test_watch_sees_changes_in_order(void **state)
{
    (void)state;
    kop_status st;
    json_t *list = NULL;
    kop_list_opts lo = {.field_selector = "metadata.name=watched"};
    assert_int_equal(kop_list(client, &CONFIGMAPS, ns, &lo, &list, &st), KOP_OK);
    const char *rv = json_string_value(json_object_get(json_object_get(list, "metadata"),
                                                       "resourceVersion"));
    kop_watch_opts wo = {.resource_version = rv, .field_selector = "metadata.name=watched",
                         .allow_bookmarks = true, .timeout_seconds = 120};
    kop_watch *w = NULL;
    assert_int_equal(kop_watch_open(client, &CONFIGMAPS, ns, &wo, &w, &st), KOP_OK);
    json_decref(list);

    json_t *cm = configmap("watched", "a", "1"), *out = NULL;
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, &out, &st), KOP_OK);
    json_object_set_new(json_object_get(out, "data"), "a", json_string("2"));
    assert_int_equal(kop_update_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = out}, NULL, &st), KOP_OK);
    assert_int_equal(kop_delete_object(client,
                                       &(kop_delete_req){.target = {&CONFIGMAPS, ns, "watched"}},
                                       NULL, &st),
                     KOP_OK);

    expect_event(w, KOP_WATCH_ADDED, "watched", "1");
    expect_event(w, KOP_WATCH_MODIFIED, "watched", "2");
    expect_event(w, KOP_WATCH_DELETED, "watched", NULL);
    kop_watch_free(w);
    json_decref(out);
    json_decref(cm);
}

static void test_watch_from_expired_version_is_gone(void **state)
{
    (void)state;
    kop_status st;
    kop_err err = KOP_OK;
    /* The fixture's apiserver compacts etcd every 5 s; until the compaction
     * passes version 1 the watch replays history, after it the answer is 410.
     * Try for up to two minutes: a generous bound, not a timing assertion. */
    for (int attempt = 0; attempt < 120; attempt++) {
        kop_watch *w = NULL;
        kop_watch_event ev;
        kop_watch_opts wo = {.resource_version = "1", .timeout_seconds = 30};
        err = kop_watch_open(client, &CONFIGMAPS, NULL, &wo, &w, &st);
        if (err == KOP_OK) {
            /* 200 and then an ERROR event carrying the 410, or history. */
            err = kop_watch_next(w, &ev, &st);
            kop_watch_event_fini(&ev);
            kop_watch_free(w);
        }
        if (err != KOP_OK)
            break;
        sleep(1);
    }
    assert_string_equal(kop_err_name(err), kop_err_name(KOP_EGONE));
    assert_int_equal(st.code, 410);
}

static void *cancel_later(void *arg)
{
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    kop_watch_cancel(arg);
    return NULL;
}

static void test_watch_cancel_from_another_thread(void **state)
{
    (void)state;
    kop_status st;
    kop_watch *w = NULL;
    kop_watch_event ev;
    kop_watch_opts wo = {.field_selector = "metadata.name=nothing-happens-here"};
    assert_int_equal(kop_watch_open(client, &CONFIGMAPS, ns, &wo, &w, &st), KOP_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cancel_later, w), 0);
    assert_int_equal(kop_watch_next(w, &ev, &st), KOP_ECANCELED);
    pthread_join(th, NULL);
    assert_int_equal(kop_watch_next(w, &ev, &st), KOP_EEOF);
    kop_watch_free(w);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The client-side limiter spaces requests: 11 requests at 20 qps with a
 * burst of 1 cannot take less than 10 intervals of 50 ms. Only the lower
 * bound is asserted; a slow machine passes too. */
static void test_rate_limiter_spaces_requests(void **state)
{
    (void)state;
    kop_client *limited = NULL;
    kop_status st;
    kop_client_opts o = {.qps = 20, .burst = 1};
    assert_int_equal(kop_client_new(cfg, &o, &limited, &st), KOP_OK);
    double t0 = now_s();
    for (int i = 0; i < 11; i++) {
        json_t *v = NULL;
        assert_int_equal(kop_get_path(limited, "/version", &v, &st), KOP_OK);
        json_decref(v);
    }
    assert_true(now_s() - t0 >= 0.45);
    kop_client_free(limited);
}

/* ---- custom resources and discovery --------------------------------------- */

static const char *crd_json =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"gadgets.it.kopc.io\"},"
    "\"spec\":{\"group\":\"it.kopc.io\",\"scope\":\"Namespaced\","
    "\"names\":{\"kind\":\"Gadget\",\"plural\":\"gadgets\",\"singular\":\"gadget\"},"
    "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
    "\"subresources\":{\"status\":{}},"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{"
    "\"spec\":{\"type\":\"object\",\"properties\":{\"size\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":10}}},"
    "\"status\":{\"type\":\"object\",\"properties\":{\"phase\":{\"type\":\"string\"}}}}}}}]}}";

static void test_custom_resource_crud(void **state)
{
    (void)state;
    kop_status st;
    json_t *crd = json_loads(crd_json, 0, NULL);
    assert_non_null(crd);
    kop_err err = kop_create_object(client,
                                    &(kop_write_req){.target = {&CRDS, NULL, NULL}, .object = crd},
                                    NULL, &st);
    assert_true(err == KOP_OK || err == KOP_EALREADYEXISTS);
    json_decref(crd);

    /* Discovery finds the kind once the CRD is served (a miss refreshes). */
    kop_resource gadgets;
    err = KOP_ENOTFOUND;
    for (int i = 0; i < 300 && err == KOP_ENOTFOUND; i++) {
        err = kop_client_resource_for_kind(client, "it.kopc.io/v1", "Gadget", &gadgets, &st);
        if (err == KOP_ENOTFOUND)
            usleep(100 * 1000);
    }
    assert_int_equal(err, KOP_OK);
    assert_string_equal(gadgets.resource, "gadgets");
    assert_string_equal(gadgets.group, "it.kopc.io");
    assert_true(gadgets.namespaced);

    json_t *g = json_pack("{s:s, s:s, s:{s:s}, s:{s:i}}", "apiVersion", "it.kopc.io/v1", "kind",
                          "Gadget", "metadata", "name", "g1", "spec", "size", 3);
    json_t *out = NULL;
    kop_write_req create = {.target = {&gadgets, ns, NULL}, .object = g};
    assert_int_equal(kop_create_object(client, &create, &out, &st), KOP_OK);
    json_decref(out);

    /* The schema refuses an invalid field: Invalid, 422, naming the field. */
    json_t *bad = json_pack("{s:s, s:s, s:{s:s}, s:{s:i}}", "apiVersion", "it.kopc.io/v1",
                            "kind", "Gadget", "metadata", "name", "g2", "spec", "size", 42);
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&gadgets, ns, NULL},
                                                        .object = bad}, NULL, &st), KOP_EINVALID);
    assert_int_equal(st.code, 422);
    assert_non_null(strstr(st.message, "spec.size"));
    json_decref(bad);

    /* Status subresource: a patch of status leaves spec alone. */
    kop_write_opts so = {.subresource = "status"};
    json_t *sp = json_pack("{s:{s:s}}", "status", "phase", "Ready");
    assert_int_equal(kop_patch_object(client,
                                      &(kop_patch_req){.target = {&gadgets, ns, "g1"},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = sp,
                                                       .opts = so},
                                      &out, &st),
                     KOP_OK);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "status"), "phase")), "Ready");
    json_decref(out);
    assert_int_equal(kop_get(client, &gadgets, ns, "g1", &out, &st), KOP_OK);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "spec"), "size")), 3);
    json_decref(out);
    json_decref(sp);

    assert_int_equal(
        kop_delete_object(client, &(kop_delete_req){.target = {&gadgets, ns, "g1"}}, NULL, &st),
        KOP_OK);
    json_decref(g);

    kop_resource dep;
    assert_int_equal(kop_client_resource_for_kind(client, "apps/v1", "Deployment", &dep, &st),
                     KOP_OK);
    assert_string_equal(dep.resource, "deployments");
    assert_int_equal(kop_client_resource_for_kind(client, "apps/v1", "NoSuchKind", &dep, &st),
                     KOP_ENOTFOUND);
}

/* ---- authentication ------------------------------------------------------ */

static void get_namespace_with(const char *user_yaml, kop_err want)
{
    char dir[] = "/tmp/kopc-auth-XXXXXX", path[256], ca[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/kubeconfig", dir);
    path_in_cluster(ca, sizeof ca, "ca.crt");
    write_kubeconfig(path, ca, user_yaml);
    kop_config *c2 = NULL;
    kop_client *k2 = NULL;
    kop_status st;
    kop_err err = make_client(path, &c2, &k2, &st);
    if (err)
        fail_msg("config: %s: %s", kop_err_name(err), st.message);
    json_t *out = NULL;
    err = kop_get(k2, &NAMESPACES, NULL, ns, &out, &st);
    if (err != want)
        fail_msg("got %s (%s), want %s", kop_err_name(err), st.message, kop_err_name(want));
    json_decref(out);
    kop_client_free(k2);
    kop_config_free(c2);
    unlink(path);
    rmdir(dir);
}

static void test_token_file_user(void **state)
{
    (void)state;
    char yaml[1024 + 64], token[1024];
    path_in_cluster(token, sizeof token, "admin.token");
    snprintf(yaml, sizeof yaml, "    tokenFile: %s\n", token);
    get_namespace_with(yaml, KOP_OK);
    get_namespace_with("    token: not-a-valid-token\n", KOP_EUNAUTHORIZED);
}

static void test_exec_plugin_user(void **state)
{
    (void)state;
    char tokpath[1024], script[] = "/tmp/kopc-exec-XXXXXX", yaml[2048];
    path_in_cluster(tokpath, sizeof tokpath, "admin.token");
    char *token = read_file(tokpath);
    int fd = mkstemp(script);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f,
            "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
            "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'\n",
            token);
    fclose(f);
    chmod(script, 0700);
    snprintf(yaml, sizeof yaml,
             "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: %s\n      interactiveMode: Never\n",
             script);
    get_namespace_with(yaml, KOP_OK);
    unlink(script);
    free(token);
}

static void test_tls_is_verified(void **state)
{
    (void)state;
    /* A CA that did not sign the serving certificate: the request must fail. */
    char dir[] = "/tmp/kopc-tls-XXXXXX", path[256], ca[256], cmd[512], tokpath[1024],
         yaml[1200 + 64];
    assert_non_null(mkdtemp(dir));
    snprintf(ca, sizeof ca, "%s/other-ca.crt", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
             "-subj /CN=other -keyout %s/k.pem -out %s 2>/dev/null",
             dir, ca);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/kubeconfig", dir);
    path_in_cluster(tokpath, sizeof tokpath, "admin.token");
    snprintf(yaml, sizeof yaml, "    tokenFile: %s\n", tokpath);
    write_kubeconfig(path, ca, yaml);
    kop_config *c2 = NULL;
    kop_client *k2 = NULL;
    kop_status st;
    assert_int_equal(make_client(path, &c2, &k2, &st), KOP_OK);
    json_t *out = NULL;
    assert_int_equal(kop_get(k2, &NAMESPACES, NULL, ns, &out, &st), KOP_ETLS);
    assert_null(out);
    kop_client_free(k2);
    kop_config_free(c2);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- TLS trust: the kubeconfig's CA only, and tls-server-name ----------- */

/* run_sh runs a shell command built from fmt and fails the test unless it
 * exits 0. */
static void run_sh(const char *fmt, ...) KOP_PRINTF(1, 2);
static void run_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* free_tcp_port returns a loopback port nobody listens on now. */
static int free_tcp_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

struct tls_proxy {
    pid_t pid;
    int port; /* TLS, on 127.0.0.1 */
    int ctl;  /* its control endpoint */
    int out;  /* the read end of its stdout, open while it runs */
};


/* proxy_start runs faultproxy.py in http mode in front of the apiserver,
 * serving cert/key, and waits for its "ready" line. */
static void proxy_start(struct tls_proxy *p, const char *cert, const char *key)
{
    const char *script = getenv("KOP_FAULTPROXY");
    char port[16], ctl[16], ca[1024], line[64] = "";
    const char *server = kop_config_server(cfg);
    if (live_proxy > 0) { /* left by a test that failed */
        kill(live_proxy, SIGTERM);
        waitpid(live_proxy, NULL, 0);
        close(live_proxy_out);
        live_proxy = 0;
    }
    assert_non_null(script);
    assert_int_equal(strncmp(server, "https://", 8), 0);
    p->port = free_tcp_port();
    p->ctl = free_tcp_port();
    snprintf(port, sizeof port, "%d", p->port);
    snprintf(ctl, sizeof ctl, "%d", p->ctl);
    path_in_cluster(ca, sizeof ca, "ca.crt");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* and if the test dies */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("python3", "python3", script, "--listen", port, "--upstream", server + 8,
               "--control", ctl, "--cert", cert, "--key", key, "--upstream-ca", ca, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    live_proxy = p->pid;
    live_proxy_out = fds[0];
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    size_t n = 0;
    /* The whole line: with PYTHONUNBUFFERED the newline is a write of its
     * own, and a pipe closed in between kills the proxy with EPIPE. */
    while (n < sizeof line - 1 && !strstr(line, "ready\n") && poll(&pfd, 1, 30000) == 1) {
        ssize_t r = read(fds[0], line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        line[n] = '\0';
    }
    p->out = fds[0]; /* closed by proxy_stop: the proxy never writes into a closed pipe */
    if (!strstr(line, "ready\n"))
        fail_msg("faultproxy did not start (said: %s)", line);
}

static void proxy_stop(struct tls_proxy *p)
{
    kill(p->pid, SIGTERM);
    waitpid(p->pid, NULL, 0);
    close(p->out);
    live_proxy = 0;
}

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    kop_buf *b = user;
    return kop_buf_append(b, data, size * n) ? 0 : size * n;
}

/* proxy_get returns the answer of the proxy's control endpoint to path
 * (owned: free). */
static char *proxy_get(const struct tls_proxy *p, const char *path)
{
    char url[256];
    kop_buf b;
    kop_buf_init(&b, 1 << 20);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", p->ctl, path);
    CURL *h = curl_easy_init();
    assert_non_null(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    curl_easy_cleanup(h);
    assert_int_equal(kop_buf_append(&b, "", 1), KOP_OK);
    size_t len;
    return kop_buf_take(&b, &len);
}

/* serving_cert makes dir/name.crt and dir/name.key: a server certificate
 * for the subjectAltName san (e.g. "IP:127.0.0.1"), signed by ca_crt/ca_key. */
static void serving_cert(const char *dir, const char *name, const char *san, const char *ca_crt,
                         const char *ca_key)
{
    run_sh("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=%s "
           "-keyout %s/%s.key -out %s/%s.csr 2>/dev/null",
           name, dir, name, dir, name);
    run_sh("printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\nkeyUsage=digitalSignature\\n"
           "extendedKeyUsage=serverAuth\\n' >%s/%s.ext",
           san, dir, name);
    run_sh("openssl x509 -req -in %s/%s.csr -CA %s -CAkey %s -CAcreateserial -days 1 "
           "-extfile %s/%s.ext -out %s/%s.crt 2>/dev/null",
           dir, name, ca_crt, ca_key, dir, name, dir, name);
}

/* write_tls_kubeconfig writes an admin kubeconfig (token file) for server,
 * with certificate-authority ca (none when NULL) and tls-server-name name
 * (none when NULL). */
static void write_tls_kubeconfig(const char *path, const char *server, const char *ca,
                                 const char *name)
{
    char tok[1024];
    path_in_cluster(tok, sizeof tok, "admin.token");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n",
            server);
    if (ca)
        fprintf(f, "    certificate-authority: %s\n", ca);
    if (name)
        fprintf(f, "    tls-server-name: %s\n", name);
    fprintf(f,
            "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
            "users:\n- name: u\n  user:\n    tokenFile: %s\n",
            tok);
    fclose(f);
}

/* version_with GETs /version with a client for kubeconfig; st says why it
 * failed. */
static kop_err version_with(const char *kubeconfig, kop_status *st)
{
    kop_config *c2 = NULL;
    kop_client *k2 = NULL;
    json_t *out = NULL;
    kop_err err = make_client(kubeconfig, &c2, &k2, st);
    if (!err)
        err = kop_get_path(k2, "/version", &out, st);
    json_decref(out);
    kop_client_free(k2);
    kop_config_free(c2);
    return err;
}

/* version_with_store runs version_with in a child process that sees store
 * mounted over /etc/ssl/certs (libcurl's compiled-in CA path and bundle on
 * Debian), in a mount namespace of its own. Returns its kop_err; the child
 * says on stderr why it failed. */
static kop_err version_with_store(const char *store, const char *kubeconfig)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
            mount(store, "/etc/ssl/certs", NULL, MS_BIND, NULL)) {
            fprintf(stderr, "mount namespace with %s over /etc/ssl/certs: %s (needs root)\n",
                    store, strerror(errno));
            _exit(255);
        }
        kop_status st;
        kop_err err = version_with(kubeconfig, &st);
        if (err)
            fprintf(stderr, "    %s: %s: %s\n", kubeconfig, kop_err_name(err), st.message);
        _exit(-err);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 255);
    return (kop_err)-WEXITSTATUS(status);
}

/*
 * A CA in the system's store but not in the kubeconfig is not trusted for
 * the apiserver (kubectl's rule): libcurl reads its compiled-in CA path
 * besides the CA the client gives it unless told not to. A kubeconfig with
 * no CA at all still uses the system's store.
 */
static void test_tls_trusts_only_the_kubeconfig_ca(void **state)
{
    (void)state;
    char dir[] = "/tmp/kopc-tls-store-XXXXXX", store[64], kc[128], cert[128], key[128],
        server[64], ca[1024], sys_ca[128];
    assert_non_null(mkdtemp(dir));
    path_in_cluster(ca, sizeof ca, "ca.crt");
    /* A throwaway CA in a throwaway system store (hashed, as c_rehash does,
     * and as the bundle file), and a proxy whose certificate it signed. */
    snprintf(store, sizeof store, "%s/certs", dir);
    snprintf(sys_ca, sizeof sys_ca, "%s/sys-ca.crt", dir);
    run_sh("mkdir %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
           "-days 1 -subj /CN=kopc-system-store-ca -keyout %s/sys-ca.key -out %s 2>/dev/null",
           store, dir, sys_ca);
    run_sh("cp %s %s/ && cp %s %s/ca-certificates.crt && openssl rehash %s", sys_ca, store,
           sys_ca, store, store);
    snprintf(key, sizeof key, "%s/sys-ca.key", dir);
    serving_cert(dir, "proxy", "IP:127.0.0.1", sys_ca, key);
    snprintf(cert, sizeof cert, "%s/proxy.crt", dir);
    snprintf(key, sizeof key, "%s/proxy.key", dir);
    struct tls_proxy p;
    proxy_start(&p, cert, key);
    snprintf(server, sizeof server, "https://127.0.0.1:%d", p.port);
    snprintf(kc, sizeof kc, "%s/kubeconfig", dir);

    /* The store is in force: with the proxy's CA as the kubeconfig's, and
     * with no CA at all (the system's roots), the request passes. */
    write_tls_kubeconfig(kc, server, sys_ca, NULL);
    assert_int_equal(version_with_store(store, kc), KOP_OK);
    write_tls_kubeconfig(kc, server, NULL, NULL);
    assert_int_equal(version_with_store(store, kc), KOP_OK);
    /* The kubeconfig names the cluster's CA: the system's is not consulted. */
    write_tls_kubeconfig(kc, server, ca, NULL);
    assert_int_equal(version_with_store(store, kc), KOP_ETLS);
    /* The same with the CA given inline (certificate-authority-data). */
    run_sh("sed -i \"s|certificate-authority: .*|certificate-authority-data: $(base64 -w0 %s)|\" "
           "%s",
           ca, kc);
    assert_int_equal(version_with_store(store, kc), KOP_ETLS);

    proxy_stop(&p);
    run_sh("rm -rf %s", dir);
}

/*
 * tls-server-name: the client connects to the server URL's address and
 * verifies the certificate against that name, which it also sends as SNI.
 * A proxy on 127.0.0.1 serves a certificate of the cluster's CA carrying
 * only the DNS name kopc-tls-name.test. Requests and watches pass with the
 * name; without it, or with another name, they are refused.
 */
static void test_tls_server_name(void **state)
{
    (void)state;
    static const char *NAME = "kopc-tls-name.test";
    char dir[] = "/tmp/kopc-tls-name-XXXXXX", kc[128], cert[128], key[128], server[64],
        ca[1024], ca_key[1024], san[64];
    kop_status st;
    assert_non_null(mkdtemp(dir));
    path_in_cluster(ca, sizeof ca, "ca.crt");
    path_in_cluster(ca_key, sizeof ca_key, "pki/ca.key");
    snprintf(san, sizeof san, "DNS:%s", NAME);
    serving_cert(dir, "named", san, ca, ca_key);
    snprintf(cert, sizeof cert, "%s/named.crt", dir);
    snprintf(key, sizeof key, "%s/named.key", dir);
    struct tls_proxy p;
    proxy_start(&p, cert, key);
    snprintf(server, sizeof server, "https://127.0.0.1:%d", p.port);
    snprintf(kc, sizeof kc, "%s/kubeconfig", dir);

    /* Without the name the certificate does not match 127.0.0.1. */
    write_tls_kubeconfig(kc, server, ca, NULL);
    assert_int_equal(version_with(kc, &st), KOP_ETLS);
    /* Another name does not match either: the name is checked, not waived. */
    write_tls_kubeconfig(kc, server, ca, "kopc-other-name.test");
    assert_int_equal(version_with(kc, &st), KOP_ETLS);

    /* A name that cannot be a host is a configuration error, not a request. */
    kop_config *c2 = NULL;
    kop_client *k2 = NULL;
    write_tls_kubeconfig(kc, server, ca, "kopc/bad:name");
    assert_int_equal(make_client(kc, &c2, &k2, &st), KOP_ECONFIG);

    /* With it, a request and a watch pass, by way of 127.0.0.1. */
    write_tls_kubeconfig(kc, server, ca, NAME);
    kop_err err = version_with(kc, &st);
    if (err)
        fail_msg("GET /version with tls-server-name: %s: %s", kop_err_name(err), st.message);
    kop_watch *w = NULL;
    assert_int_equal(make_client(kc, &c2, &k2, &st), KOP_OK);
    kop_watch_opts wo = {.field_selector = "metadata.name=tls-name", .timeout_seconds = 60};
    err = kop_watch_open(k2, &CONFIGMAPS, ns, &wo, &w, &st);
    if (err)
        fail_msg("watch with tls-server-name: %s: %s", kop_err_name(err), st.message);
    json_t *cm = configmap("tls-name", "a", "1");
    assert_int_equal(kop_create_object(k2,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_decref(cm);
    expect_event(w, KOP_WATCH_ADDED, "tls-name", "1");
    kop_watch_free(w);
    kop_client_free(k2);
    kop_config_free(c2);

    /* The proxy saw the name as SNI, and the server URL's own authority as
     * the Host header, as kubectl sends them. */
    char *stats = proxy_get(&p, "/stats");
    char want_sni[128];
    snprintf(want_sni, sizeof want_sni, "\"%s\":", NAME);
    if (!strstr(stats, want_sni))
        fail_msg("the proxy never saw SNI %s: %s", NAME, stats);
    free(stats);
    char *reqs = proxy_get(&p, "/requests");
    char want_host[128];
    snprintf(want_host, sizeof want_host, "\"host\": \"127.0.0.1:%d\"", p.port);
    if (!strstr(reqs, want_host))
        fail_msg("no request with %s: %s", want_host, reqs);
    free(reqs);

    proxy_stop(&p);
    run_sh("rm -rf %s", dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_configmap_crud),
        cmocka_unit_test(test_stale_update_conflicts),
        cmocka_unit_test(test_merge_patch_keeps_fields),
        cmocka_unit_test(test_server_side_apply),
        cmocka_unit_test(test_delete_precondition),
        cmocka_unit_test(test_write_requests),
        cmocka_unit_test(test_paging_returns_each_once),
        cmocka_unit_test(test_watch_sees_changes_in_order),
        cmocka_unit_test(test_watch_from_expired_version_is_gone),
        cmocka_unit_test(test_watch_cancel_from_another_thread),
        cmocka_unit_test(test_rate_limiter_spaces_requests),
        cmocka_unit_test(test_custom_resource_crud),
        cmocka_unit_test(test_token_file_user),
        cmocka_unit_test(test_exec_plugin_user),
        cmocka_unit_test(test_tls_is_verified),
        cmocka_unit_test(test_tls_trusts_only_the_kubeconfig_ca),
        cmocka_unit_test(test_tls_server_name),
    };
    return cmocka_run_group_tests_name("client (integration)", tests, setup, teardown);
}

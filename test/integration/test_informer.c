/*
 * test_informer.c - informers against a real apiserver (the devcluster
 * fixture; KOP_DEVCLUSTER_DIR names it, DEVCLUSTER is the binary).
 *
 * The cache must end equal to the server's state however fast objects
 * change, deletes must reach the handlers, and the informer must survive
 * an apiserver restart, relisting when its version was compacted away. The
 * last test restarts the fixture's cluster, so it runs last.
 */
#include <pthread.h>
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

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};

static const char *cluster_dir;
static it_env env;
static char ns[64];
static kop_config *cfg;
static kop_client *client;

#define OBJECTS 100
#define UPDATES 5000
#define WRITERS 4

/* ---- fixture ------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    if (it_setup(&env, "kopc-inf"))
        return -1;
    cfg = env.cfg;
    client = env.client;
    snprintf(ns, sizeof ns, "%s", env.ns);
    cluster_dir = env.dir;
    if (!getenv("DEVCLUSTER")) {
        fprintf(stderr, "DEVCLUSTER is not set: run through ctest\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_teardown(&env);
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static json_t *configmap(const char *name, const char *set, int value)
{
    char v[32];
    snprintf(v, sizeof v, "%d", value);
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", name, "labels", "set", set, "data", "v", v);
}

static const char *rv_of(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static const char *name_of(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

/*
 * cache_matches_server lists the set from the server and compares every
 * object's resourceVersion and data with the informer's cache.
 */
static bool cache_matches_server(kop_informer *inf, const char *selector, size_t want)
{
    kop_status st;
    json_t *list = NULL, *item;
    size_t i;
    kop_list_opts lo = {.label_selector = selector};
    if (kop_list(client, &CONFIGMAPS, ns, &lo, &list, &st) != KOP_OK)
        return false;
    bool same = json_array_size(json_object_get(list, "items")) == want &&
                kop_informer_len(inf) == want;
    json_array_foreach(json_object_get(list, "items"), i, item)
    {
        json_t *cached = NULL;
        if (!same || kop_informer_dup(inf, ns, name_of(item), &cached) != KOP_OK) {
            same = false;
            break;
        }
        same = strcmp(rv_of(cached), rv_of(item)) == 0 &&
               json_equal(json_object_get(cached, "data"), json_object_get(item, "data"));
        json_decref(cached);
    }
    json_decref(list);
    return same;
}

/* eventually polls cond for up to secs seconds: a generous bound, not a timing test. */
static bool eventually(int secs, kop_informer *inf, const char *selector, size_t want)
{
    for (int i = 0; i < secs * 4; i++) {
        if (cache_matches_server(inf, selector, want))
            return true;
        usleep(250 * 1000);
    }
    return false;
}

struct counts {
    atomic_int adds, updates, deletes;
    char last_deleted[128];
    pthread_mutex_t mu;
};

static void on_add(const json_t *obj, void *user)
{
    (void)obj;
    atomic_fetch_add(&((struct counts *)user)->adds, 1);
}

static void on_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    (void)new_obj;
    atomic_fetch_add(&((struct counts *)user)->updates, 1);
}

static void on_delete(const json_t *obj, void *user)
{
    struct counts *c = user;
    pthread_mutex_lock(&c->mu);
    snprintf(c->last_deleted, sizeof c->last_deleted, "%s", name_of(obj));
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->deletes, 1);
}

static kop_informer *start_informer(const char *selector, struct counts *c)
{
    kop_informer *inf = NULL;
    kop_informer_opts o = {.resource = CONFIGMAPS, .namespace = ns, .label_selector = selector};
    assert_int_equal(kop_informer_new(client, &o, &inf), KOP_OK);
    kop_informer_handler h = {on_add, on_update, on_delete, c, KOP_OLD_FULL};
    assert_int_equal(kop_informer_add_handler(inf, &h), KOP_OK);
    assert_int_equal(kop_informer_start(inf), KOP_OK);
    assert_true(kop_informer_wait_synced(inf, 60000));
    return inf;
}

/* ---- tests -------------------------------------------------------------- */

struct writer {
    int id;
    kop_err err;
};

static void *update_many(void *arg)
{
    struct writer *w = arg;
    uint64_t seed = (uint64_t)w->id * 7919 + 1;
    for (int i = 0; i < UPDATES / WRITERS; i++) {
        char name[32], v[32];
        kop_status st;
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        snprintf(name, sizeof name, "rapid-%02d", (int)((seed >> 33) % OBJECTS));
        snprintf(v, sizeof v, "%d-%d", w->id, i);
        json_t *patch = json_pack("{s:{s:s}}", "data", "v", v);
        kop_err err = kop_patch_object(client,
                                       &(kop_patch_req){.target = {&CONFIGMAPS, ns, name},
                                                        .type = KOP_PATCH_MERGE,
                                                        .patch = patch},
                                       NULL, &st);
        json_decref(patch);
        if (err) {
            w->err = err;
            break;
        }
    }
    return NULL;
}

static void test_rapid_updates_converge(void **state)
{
    (void)state;
    kop_status st;
    static struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    for (int i = 0; i < OBJECTS; i++) {
        char name[32];
        snprintf(name, sizeof name, "rapid-%02d", i);
        json_t *cm = configmap(name, "rapid", 0);
        assert_int_equal(kop_create_object(client,
                                           &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                            .object = cm}, NULL, &st), KOP_OK);
        json_decref(cm);
    }
    kop_informer *inf = start_informer("set=rapid", &c);
    assert_int_equal(kop_informer_len(inf), OBJECTS);
    assert_int_equal(atomic_load(&c.adds), OBJECTS);

    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.id = i};
        assert_int_equal(pthread_create(&th[i], NULL, update_many, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].err, KOP_OK);
    }
    assert_true(eventually(60, inf, "set=rapid", OBJECTS));
    assert_true(atomic_load(&c.updates) > 0);

    /* The namespace index answers from the cache. */
    json_t *in_ns = NULL;
    assert_int_equal(kop_informer_list(inf, ns, &in_ns), KOP_OK);
    assert_int_equal(json_array_size(in_ns), OBJECTS);
    json_decref(in_ns);
    /* managedFields are dropped by the default transform. */
    json_t *one = NULL;
    assert_int_equal(kop_informer_dup(inf, ns, "rapid-00", &one), KOP_OK);
    assert_null(json_object_get(json_object_get(one, "metadata"), "managedFields"));
    assert_string_equal(json_string_value(json_object_get(one, "kind")), "ConfigMap");
    json_decref(one);
    kop_informer_free(inf);
}

/* What an update handler saw of the replaced object. */
struct seen_old {
    atomic_int updates;
    atomic_bool had_data, had_head,
        older; /* data there; apiVersion, kind, name; an older version */
};

static void saw_old(const json_t *old_obj, const json_t *new_obj, void *user)
{
    struct seen_old *s = user;
    const json_t *meta = json_object_get(old_obj, "metadata");
    atomic_store(&s->had_data, json_object_get(old_obj, "data") != NULL);
    atomic_store(&s->had_head,
                 json_object_get(old_obj, "apiVersion") && json_object_get(old_obj, "kind") &&
                     json_object_get(meta, "name") && json_object_get(meta, "labels"));
    atomic_store(&s->older, strcmp(rv_of(old_obj), rv_of(new_obj)) != 0);
    atomic_fetch_add(&s->updates, 1);
}

static kop_informer *start_old_watcher(kop_old_use a, struct seen_old *sa, kop_old_use b,
                                       struct seen_old *sb)
{
    kop_informer *inf = NULL;
    kop_informer_opts o = {.resource = CONFIGMAPS, .namespace = ns, .label_selector = "set=old"};
    assert_int_equal(kop_informer_new(client, &o, &inf), KOP_OK);
    kop_informer_handler ha = {NULL, saw_old, NULL, sa, a}, hb = {NULL, saw_old, NULL, sb, b};
    assert_int_equal(kop_informer_add_handler(inf, &ha), KOP_OK);
    if (sb)
        assert_int_equal(kop_informer_add_handler(inf, &hb), KOP_OK);
    assert_int_equal(kop_informer_start(inf), KOP_OK);
    assert_true(kop_informer_wait_synced(inf, 60000));
    return inf;
}

/*
 * The replaced object is parsed as far as the handlers read it: metadata
 * only when every handler says so (the rest absent), the whole object when
 * one handler reads it; the cached object itself stays whole, and
 * kop_informer_dup_metadata reads its head alone.
 */
static void test_old_object_as_far_as_read(void **state)
{
    (void)state;
    kop_status st;
    static struct seen_old meta_only, meta_beside_full, full;
    json_t *cm = configmap("old-1", "old", 1), *patch = json_pack("{s:{s:s}}", "data", "v", "2");
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    kop_informer *slim = start_old_watcher(KOP_OLD_METADATA, &meta_only, KOP_OLD_UNUSED, NULL);
    kop_informer *whole =
        start_old_watcher(KOP_OLD_METADATA, &meta_beside_full, KOP_OLD_FULL, &full);
    assert_int_equal(kop_patch_object(client,
                                      &(kop_patch_req){.target = {&CONFIGMAPS, ns, "old-1"},
                                                       .type = KOP_PATCH_MERGE,
                                                       .patch = patch},
                                      NULL, &st),
                     KOP_OK);
    for (int i = 0;
         i < 240 && (atomic_load(&meta_only.updates) < 1 || atomic_load(&full.updates) < 1); i++)
        usleep(250 * 1000);
    assert_true(atomic_load(&meta_only.updates) >= 1 && atomic_load(&full.updates) >= 1);
    assert_true(atomic_load(&meta_only.had_head) && atomic_load(&meta_only.older));
    assert_false(atomic_load(&meta_only.had_data)); /* only metadata was parsed */
    assert_true(atomic_load(&full.had_data) && atomic_load(&meta_beside_full.had_data));
    json_t *cached = NULL;
    assert_int_equal(kop_informer_dup(slim, ns, "old-1", &cached), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(cached, "data"), "v")),
                        "2");
    assert_string_equal(json_string_value(json_object_get(cached, "kind")), "ConfigMap");
    json_decref(cached);
    /* A reader of metadata alone gets the head only. */
    assert_int_equal(kop_informer_dup_metadata(slim, ns, "old-1", &cached), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(cached, "kind")), "ConfigMap");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(cached, "metadata"), "name")), "old-1");
    assert_null(json_object_get(cached, "data"));
    json_decref(cached);
    assert_int_equal(kop_informer_dup_metadata(slim, ns, "no-such", &cached), KOP_ENOTFOUND);
    kop_informer_free(slim);
    kop_informer_free(whole);
    json_decref(patch);
    json_decref(cm);
}

static void test_delete_reaches_handler(void **state)
{
    (void)state;
    kop_status st;
    static struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    json_t *cm = configmap("doomed", "del", 1);
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = cm}, NULL, &st), KOP_OK);
    json_decref(cm);
    kop_informer *inf = start_informer("set=del", &c);
    assert_int_equal(kop_informer_len(inf), 1);
    assert_int_equal(kop_delete_object(client,
                                       &(kop_delete_req){.target = {&CONFIGMAPS, ns, "doomed"}},
                                       NULL, &st),
                     KOP_OK);
    for (int i = 0; i < 240 && atomic_load(&c.deletes) == 0; i++)
        usleep(250 * 1000);
    assert_int_equal(atomic_load(&c.deletes), 1);
    pthread_mutex_lock(&c.mu);
    assert_string_equal(c.last_deleted, "doomed");
    pthread_mutex_unlock(&c.mu);
    assert_int_equal(kop_informer_len(inf), 0);
    json_t *gone = NULL;
    assert_int_equal(kop_informer_dup(inf, ns, "doomed", &gone), KOP_ENOTFOUND);
    kop_informer_free(inf);
}

static void test_owner_index(void **state)
{
    (void)state;
    kop_status st;
    static struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    json_t *owner = configmap("owner", "own", 0), *made = NULL;
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = owner}, &made, &st), KOP_OK);
    const char *uid = json_string_value(json_object_get(json_object_get(made, "metadata"), "uid"));
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "child-%d", i);
        json_t *child = configmap(name, "own", i);
        json_object_set_new(json_object_get(child, "metadata"), "ownerReferences",
                            json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1", "kind",
                                      "ConfigMap", "name", "owner", "uid", uid, "controller", 1));
        assert_int_equal(kop_create_object(client,
                                           &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                            .object = child}, NULL, &st), KOP_OK);
        json_decref(child);
    }
    kop_informer *inf = start_informer("set=own", &c);
    json_t *children = NULL;
    assert_int_equal(kop_informer_by_index(inf, KOP_INDEX_OWNER, uid, &children), KOP_OK);
    assert_int_equal(json_array_size(children), 3);
    json_decref(children);
    assert_int_equal(kop_informer_by_index(inf, "no-such-index", "x", &children), KOP_EINVAL);
    kop_informer_free(inf);
    json_decref(made);
    json_decref(owner);
}

/*
 * kop_informer_index_keys: the keys and resourceVersions of an index value,
 * unparsed, whole or a page at a time; pages that keep the cursor go round
 * the set, every key once before any twice.
 */
static void test_index_keys(void **state)
{
    (void)state;
    kop_status st;
    static struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    enum { N = 10, PAGE = 3 };
    json_t *want = json_object(); /* "ns/name" -> resourceVersion, as created */
    for (int i = 0; i < N; i++) {
        char name[32], key[128];
        json_t *made = NULL, *cm = NULL;
        snprintf(name, sizeof name, "keys-%d", i);
        cm = configmap(name, "keys", i);
        assert_int_equal(kop_create_object(client,
                                           &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                            .object = cm}, &made, &st), KOP_OK);
        snprintf(key, sizeof key, "%s/%s", ns, name);
        json_object_set_new(want, key, json_string(rv_of(made)));
        json_decref(made);
        json_decref(cm);
    }
    kop_informer *inf = start_informer("set=keys", &c);

    /* Every key, with the version created (nothing changed them since). */
    json_t *all = NULL;
    assert_int_equal(kop_informer_index_keys(inf, KOP_INDEX_NAMESPACE, ns, NULL, &all), KOP_OK);
    assert_true(json_equal(all, want));
    json_decref(all);

    /* Pages of 3: the first N keys of successive pages are the set, each once. */
    kop_index_page page = {.max = PAGE};
    json_t *seen = json_object();
    size_t order = 0;
    for (int call = 0; call < (N + PAGE - 1) / PAGE; call++) {
        json_t *keys = NULL;
        const char *k;
        json_t *rv;
        assert_int_equal(kop_informer_index_keys(inf, KOP_INDEX_NAMESPACE, ns, &page, &keys),
                         KOP_OK);
        assert_int_equal(page.total, N);
        assert_int_equal(json_object_size(keys), PAGE);
        json_object_foreach(keys, k, rv)
        {
            assert_true(json_equal(rv, json_object_get(want, k)));
            if (order++ < N) {
                assert_null(json_object_get(seen, k)); /* not twice before all once */
                json_object_set_new(seen, k, json_true());
            }
        }
        json_decref(keys);
    }
    assert_int_equal(json_object_size(seen), N);
    json_decref(seen);

    /* A value no object has; an index that does not exist. */
    json_t *none = NULL;
    page = (kop_index_page){.max = PAGE};
    assert_int_equal(kop_informer_index_keys(inf, KOP_INDEX_NAMESPACE, "no-such-ns", &page, &none),
                     KOP_OK);
    assert_int_equal(json_object_size(none), 0);
    assert_int_equal(page.total, 0);
    json_decref(none);
    assert_int_equal(kop_informer_index_keys(inf, "no-such-index", ns, NULL, &none), KOP_EINVAL);
    assert_null(none);
    kop_informer_free(inf);
    json_decref(want);
}

static int devcluster(const char *verb)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s --dir '%s' >/dev/null", getenv("DEVCLUSTER"), verb,
             cluster_dir);
    return system(cmd);
}

/*
 * The apiserver goes away and comes back. One informer watches a busy set
 * and must converge; another watches an idle set whose version the
 * compaction (every 5 s in the fixture) passes while the apiserver is down
 * or coming up, so it must get 410 Gone and relist.
 */
static void test_apiserver_restart_and_gone(void **state)
{
    (void)state;
    kop_status st;
    static struct counts busy_c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    static struct counts idle_c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "busy-%d", i);
        json_t *cm = configmap(name, "busy", 0);
        assert_int_equal(kop_create_object(client,
                                           &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                            .object = cm}, NULL, &st), KOP_OK);
        json_decref(cm);
    }
    json_t *quiet = configmap("quiet", "idle", 0);
    assert_int_equal(kop_create_object(client,
                                       &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                        .object = quiet}, NULL, &st), KOP_OK);
    json_decref(quiet);

    kop_informer *busy = start_informer("set=busy", &busy_c);
    kop_informer *idle = start_informer("set=idle", &idle_c);

    /* Move the cluster's revision on, and let compaction pass the idle
     * informer's version (two compaction periods and a margin). */
    for (int i = 0; i < 12; i++) {
        char name[32];
        snprintf(name, sizeof name, "filler-%d", i);
        json_t *cm = configmap(name, "filler", i);
        assert_int_equal(kop_create_object(client,
                                           &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                            .object = cm}, NULL, &st), KOP_OK);
        json_decref(cm);
        sleep(1);
    }

    assert_int_equal(devcluster("stop"), 0);
    sleep(2);
    assert_int_equal(devcluster("start"), 0);

    /* Changes after the restart reach the busy informer's cache. */
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "busy-%d", i);
        json_t *patch = json_pack("{s:{s:s}}", "data", "v", "after-restart");
        kop_err err = KOP_EUNAVAILABLE;
        for (int tries = 0; tries < 60 && err != KOP_OK; tries++) {
            err = kop_patch_object(client,
                                   &(kop_patch_req){.target = {&CONFIGMAPS, ns, name},
                                                    .type = KOP_PATCH_MERGE,
                                                    .patch = patch},
                                   NULL, &st);
            if (err)
                sleep(1);
        }
        assert_int_equal(err, KOP_OK);
        json_decref(patch);
    }
    assert_true(eventually(90, busy, "set=busy", 10));
    json_t *b = NULL;
    assert_int_equal(kop_informer_dup(busy, ns, "busy-3", &b), KOP_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "data"), "v")),
                        "after-restart");
    json_decref(b);

    /* The idle informer had to relist: Gone was seen and a second list made. */
    kop_informer_stats s;
    for (int i = 0; i < 360; i++) {
        kop_informer_read_stats(idle, &s);
        if (s.gone > 0 && s.lists >= 2)
            break;
        usleep(250 * 1000);
    }
    kop_informer_read_stats(idle, &s);
    assert_true(s.gone >= 1);
    assert_true(s.lists >= 2);
    assert_true(eventually(30, idle, "set=idle", 1));
    kop_informer_read_stats(busy, &s);
    assert_true(s.watches >= 2); /* it reconnected */

    kop_informer_free(idle);
    kop_informer_free(busy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rapid_updates_converge),
        cmocka_unit_test(test_delete_reaches_handler),
        cmocka_unit_test(test_old_object_as_far_as_read),
        cmocka_unit_test(test_owner_index),
        cmocka_unit_test(test_index_keys),
        cmocka_unit_test(test_apiserver_restart_and_gone), /* restarts the cluster: last */
    };
    return cmocka_run_group_tests_name("informer (integration)", tests, setup, teardown);
}

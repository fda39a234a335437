/*
 * test_events.c - the event recorder against a real apiserver (the
 * devcluster started by the ctest fixture; KOP_DEVCLUSTER_DIR names its
 * directory).
 *
 * Each run works in a namespace of its own and each test on ConfigMaps of
 * its own, so the per-object spam filter of one test never affects
 * another. Every assertion is about the Events the apiserver stored, read
 * back with a field selector on involvedObject.uid.
 */
#include <setjmp.h>
#include <stdarg.h>
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
#include "kop/events.h"

/* The clock hook in events.c, for tests only. */
void kop__events_set_clock(time_t (*now)(void));

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
static const kop_resource EVENTS = {"", "v1", "events", "Event", true};

#define FLUSH_MS 30000

static it_env env;
static char ns[64];
static kop_config *cfg;
static kop_client *client;
static kop_recorder *rec;

/* ---- helpers ------------------------------------------------------------ */

/* configmap creates a ConfigMap in the test namespace and returns it as stored. */
static json_t *configmap(const char *name)
{
    kop_status st;
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", name, "data", "a", "1");
    json_t *out = NULL;
    kop_err err = kop_create_object(client,
                                    &(kop_write_req){.target = {&CONFIGMAPS, ns, NULL},
                                                     .object = cm}, &out, &st);
    json_decref(cm);
    if (err)
        fail_msg("create configmap %s: %s: %s", name, kop_err_name(err), st.message);
    /* Items of a list lack apiVersion and kind; a created object has them. */
    assert_string_equal(json_string_value(json_object_get(out, "kind")), "ConfigMap");
    return out;
}

/* events_for lists the Events about the object with uid in event_ns (owned). */
static json_t *events_for(const char *event_ns, const char *uid)
{
    char sel[128];
    kop_status st;
    json_t *list = NULL;
    snprintf(sel, sizeof sel, "involvedObject.uid=%s", uid);
    kop_err err =
        kop_list(client, &EVENTS, event_ns, &(kop_list_opts){.field_selector = sel}, &list, &st);
    if (err)
        fail_msg("list events: %s: %s", kop_err_name(err), st.message);
    return list;
}

static json_t *items(json_t *list)
{
    return json_object_get(list, "items");
}

/* by_reason finds the one Event with reason in list (borrowed). */
static json_t *by_reason(json_t *list, const char *reason)
{
    size_t i;
    json_t *ev, *found = NULL;
    json_array_foreach(items(list), i, ev)
    {
        if (strcmp(json_string_value(json_object_get(ev, "reason")), reason) == 0) {
            assert_null(found);
            found = ev;
        }
    }
    if (!found)
        fail_msg("no event with reason %s", reason);
    return found;
}

static const char *str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static long long count_of(const json_t *ev)
{
    return (long long)json_integer_value(json_object_get(ev, "count"));
}

static void flush(kop_recorder *r)
{
    assert_int_equal(kop_recorder_flush(r, FLUSH_MS), KOP_OK);
}

/* ---- fixture ------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    if (it_setup(&env, "kopc-ev"))
        return -1;
    cfg = env.cfg;
    client = env.client;
    snprintf(ns, sizeof ns, "%s", env.ns);
    if (kop_recorder_new(client, "kopc-test", "it-host", &rec) != KOP_OK) {
        fprintf(stderr, "recorder: cannot make one\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kop_recorder_free(rec);
    it_teardown(&env);
    return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void test_same_event_counts(void **state)
{
    (void)state;
    json_t *cm = configmap("dedup");
    kop_recorder_stats before, after;
    kop_recorder_read_stats(rec, &before);
    for (int i = 0; i < 5; i++)
        kop_event(rec,
                  &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Synced",
                                   .action = "Sync"}, "synced %d items", 3);
    flush(rec);
    kop_recorder_read_stats(rec, &after);
    assert_int_equal(after.recorded - before.recorded, 5);
    assert_int_equal(after.created - before.created, 1);
    assert_int_equal(after.patched - before.patched, 4);
    assert_int_equal(after.failed, 0);

    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 1);
    json_t *ev = json_array_get(items(list), 0);
    assert_int_equal(count_of(ev), 5);
    assert_string_equal(str(ev, "reason"), "Synced");
    assert_string_equal(str(ev, "message"), "synced 3 items");
    assert_string_equal(str(ev, "type"), "Normal");
    assert_string_equal(str(ev, "action"), "Sync");
    assert_string_equal(str(ev, "reportingComponent"), "kopc-test");
    assert_string_equal(str(ev, "reportingInstance"), "it-host");
    assert_string_equal(str(json_object_get(ev, "source"), "component"), "kopc-test");
    assert_string_equal(str(json_object_get(ev, "source"), "host"), "it-host");
    assert_non_null(str(ev, "firstTimestamp"));
    assert_true(strcmp(str(ev, "firstTimestamp"), str(ev, "lastTimestamp")) <= 0);
    assert_string_equal(kop_meta_namespace(ev), ns);
    assert_int_equal(strncmp(kop_meta_name(ev), "dedup.", 6), 0);

    /* involvedObject names the ConfigMap exactly. */
    json_t *io = json_object_get(ev, "involvedObject");
    assert_string_equal(str(io, "apiVersion"), "v1");
    assert_string_equal(str(io, "kind"), "ConfigMap");
    assert_string_equal(str(io, "name"), "dedup");
    assert_string_equal(str(io, "namespace"), ns);
    assert_string_equal(str(io, "uid"), kop_meta_uid(cm));
    assert_string_equal(str(io, "resourceVersion"), kop_meta_resource_version(cm));
    json_decref(list);
    json_decref(cm);
}

static void test_reasons_types_and_messages(void **state)
{
    (void)state;
    json_t *cm = configmap("kinds");
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Created"},
              "created %s", "pods");
    kop_event(rec,
              &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Failed",
                               .action = "Provision"}, "boom: %s (%d%%, %05.1f)", "disk full", 95,
              2.5);
    kop_event(rec,
              &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Failed",
                               .action = "Provision"}, "boom: %s (%d%%, %05.1f)", "disk full", 95,
              2.5);
    /* Same reason, another type: another Event. */
    kop_event(rec,
              &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Failed",
                               .action = "Provision"}, "boom: %s (%d%%, %05.1f)", "disk full", 95,
              2.5);
    flush(rec);

    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 3);
    json_t *created = by_reason(list, "Created");
    assert_string_equal(str(created, "type"), "Normal");
    assert_string_equal(str(created, "message"), "created pods");
    assert_int_equal(count_of(created), 1);
    assert_null(json_object_get(created, "action"));
    size_t i;
    json_t *ev;
    int warnings = 0;
    json_array_foreach(items(list), i, ev)
    {
        if (strcmp(str(ev, "reason"), "Failed") != 0)
            continue;
        assert_string_equal(str(ev, "message"), "boom: disk full (95%, 002.5)");
        if (strcmp(str(ev, "type"), "Warning") == 0) {
            assert_int_equal(count_of(ev), 2);
            warnings++;
        } else {
            assert_string_equal(str(ev, "type"), "Normal");
            assert_int_equal(count_of(ev), 1);
        }
    }
    assert_int_equal(warnings, 1);
    json_decref(list);
    json_decref(cm);
}

static void test_long_message_cut_on_character(void **state)
{
    (void)state;
    json_t *cm = configmap("long");
    char msg[1300] = "";
    for (int i = 0; i < 400; i++)
        strcat(msg, "\xe2\x82\xac"); /* the euro sign: 3 bytes, 1200 in all */
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Long"}, "%s",
              msg);
    flush(rec);
    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 1);
    const char *got = str(json_array_get(items(list), 0), "message");
    assert_int_equal(strlen(got), 1023); /* 341 whole characters, not 1024 bytes */
    assert_int_equal(strncmp(got, msg, 1023), 0);
    json_decref(list);
    json_decref(cm);
}

static void test_cluster_scoped_object(void **state)
{
    (void)state;
    kop_status st;
    json_t *nsobj = NULL;
    assert_int_equal(kop_get(client, &NAMESPACES, NULL, ns, &nsobj, &st), KOP_OK);
    /* A GET of one object carries apiVersion and kind. */
    assert_string_equal(str(nsobj, "kind"), "Namespace");
    kop_event(rec,
              &(kop_event_req){.object = nsobj, .type = KOP_EVENT_NORMAL, .reason = "Labelled"},
              "namespace %s labelled", ns);
    flush(rec);
    json_t *list = events_for("default", kop_meta_uid(nsobj));
    assert_int_equal(json_array_size(items(list)), 1);
    json_t *ev = json_array_get(items(list), 0);
    assert_string_equal(kop_meta_namespace(ev), "default");
    json_t *io = json_object_get(ev, "involvedObject");
    assert_string_equal(str(io, "kind"), "Namespace");
    assert_string_equal(str(io, "name"), ns);
    assert_null(json_object_get(io, "namespace"));
    /* Events in "default" outlive the test namespace: remove it. */
    assert_int_equal(
        kop_delete_object(client,
                          &(kop_delete_req){.target = {&EVENTS, "default", kop_meta_name(ev)}},
                          NULL, &st),
        KOP_OK);
    json_decref(list);
    json_decref(nsobj);
}

static time_t fake_now;

static time_t fake_clock(void)
{
    return fake_now;
}

static void test_dedup_window(void **state)
{
    (void)state;
    json_t *cm = configmap("window");
    fake_now = time(NULL);
    kop__events_set_clock(fake_clock);
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Retrying"},
              "still failing");
    flush(rec);
    fake_now += 300; /* within 10 minutes of the last: counted */
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Retrying"},
              "still failing");
    flush(rec);
    fake_now += 601; /* more than 10 minutes after the last: a new Event */
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Retrying"},
              "still failing");
    flush(rec);
    kop__events_set_clock(NULL);

    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 2);
    long long c0 = count_of(json_array_get(items(list), 0));
    long long c1 = count_of(json_array_get(items(list), 1));
    assert_true((c0 == 2 && c1 == 1) || (c0 == 1 && c1 == 2));
    json_decref(list);
    json_decref(cm);
}

static void test_aggregation_and_spam_filter(void **state)
{
    (void)state;
    json_t *cm = configmap("spam");
    kop_recorder_stats before, after;
    kop_recorder_read_stats(rec, &before);
    /* 30 different messages, one reason: 9 Events of their own, then one combined Event. The
     * object's 25 tokens pass the first 25 sends (9 creates, 1 create, 15 patches). */
    for (int i = 0; i < 30; i++)
        kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Probe"},
                  "probe %d", i);
    flush(rec);
    kop_recorder_read_stats(rec, &after);
    assert_int_equal(after.dropped_spam - before.dropped_spam, 5);
    assert_int_equal(after.created - before.created, 10);
    assert_int_equal(after.patched - before.patched, 15);

    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 10);
    size_t i;
    json_t *ev;
    int combined = 0;
    json_array_foreach(items(list), i, ev)
    {
        const char *m = str(ev, "message");
        if (strncmp(m, "(combined from similar events): ", 32) == 0) {
            assert_string_equal(m, "(combined from similar events): probe 24");
            assert_int_equal(count_of(ev), 16);
            combined++;
        } else {
            assert_int_equal(count_of(ev), 1);
        }
    }
    assert_int_equal(combined, 1);
    json_decref(list);
    json_decref(cm);
}

static void test_burst_never_blocks(void **state)
{
    (void)state;
    json_t *cm = configmap("burst");
    kop_recorder_stats before, after;
    kop_recorder_read_stats(rec, &before);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 5000; i++)
        kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_WARNING, .reason = "Hot"},
                  "hot loop");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    flush(rec);
    kop_recorder_read_stats(rec, &after);
    /* Every call was either queued or dropped because the queue was full. */
    uint64_t queued = after.recorded - before.recorded;
    assert_int_equal(queued + (after.dropped_full - before.dropped_full), 5000);
    fprintf(stderr, "5000 kop_event calls took %.1f ms; %llu dropped as the queue was full\n",
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
            (unsigned long long)(after.dropped_full - before.dropped_full));
    /* The spam filter let 25 through: one create and 24 patches. */
    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 1);
    assert_int_equal(count_of(json_array_get(items(list), 0)), 25);
    json_decref(list);
    json_decref(cm);
}

static void test_free_drains_queue(void **state)
{
    (void)state;
    json_t *cm = configmap("drain");
    kop_recorder *r2 = NULL;
    assert_int_equal(kop_recorder_new(client, "kopc-test", NULL, &r2), KOP_OK);
    kop_event(r2, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "One"}, "1");
    kop_event(r2, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Two"}, "2");
    kop_event(r2, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Three"}, "3");
    kop_recorder_free(r2); /* sends what is queued before returning */
    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 3);
    /* instance NULL is the host name. */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    assert_string_equal(str(json_array_get(items(list), 0), "reportingInstance"), host);
    json_decref(list);
    json_decref(cm);
}

static void test_invalid_input(void **state)
{
    (void)state;
    kop_recorder *r2 = NULL;
    assert_int_equal(kop_recorder_new(NULL, "x", NULL, &r2), KOP_EINVAL);
    assert_int_equal(kop_recorder_new(client, "", NULL, &r2), KOP_EINVAL);
    assert_int_equal(kop_recorder_new(client, NULL, NULL, &r2), KOP_EINVAL);
    assert_int_equal(kop_recorder_new(client, "x", "", &r2), KOP_EINVAL);
    char big[KOP_EVENT_FIELD_MAX + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(kop_recorder_new(client, big, NULL, &r2), KOP_EINVAL);
    assert_null(r2);

    json_t *noname = json_pack("{s:s, s:s, s:{}}", "apiVersion", "v1", "kind", "ConfigMap",
                               "metadata");
    json_t *cm = configmap("invalid");
    kop_recorder_stats before, after;
    kop_recorder_read_stats(rec, &before);
    kop_event(NULL, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = "Nothing"},
              "no recorder"); /* a no-op */
    kop_event(rec, &(kop_event_req){.object = noname, .type = KOP_EVENT_NORMAL, .reason = "NoName"},
              "x");
    kop_event(rec, &(kop_event_req){.object = NULL, .type = KOP_EVENT_NORMAL, .reason = "NoObject"},
              "x");
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = ""}, "x");
    kop_event(rec, &(kop_event_req){.object = cm, .type = KOP_EVENT_NORMAL, .reason = big}, "x");
    kop_event(rec, &(kop_event_req){.object = cm, .type = (kop_event_type)7, .reason = "BadType"},
              "x");
    kop_event(rec, NULL, "no request");
    flush(rec);
    kop_recorder_read_stats(rec, &after);
    assert_int_equal(after.invalid - before.invalid, 6);
    assert_int_equal(after.recorded, before.recorded);
    json_t *list = events_for(ns, kop_meta_uid(cm));
    assert_int_equal(json_array_size(items(list)), 0);
    json_decref(list);
    json_decref(cm);
    json_decref(noname);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_event_counts),
        cmocka_unit_test(test_reasons_types_and_messages),
        cmocka_unit_test(test_long_message_cut_on_character),
        cmocka_unit_test(test_cluster_scoped_object),
        cmocka_unit_test(test_dedup_window),
        cmocka_unit_test(test_aggregation_and_spam_filter),
        cmocka_unit_test(test_burst_never_blocks),
        cmocka_unit_test(test_free_drains_queue),
        cmocka_unit_test(test_invalid_input),
    };
    return cmocka_run_group_tests_name("events (integration)", tests, setup, teardown);
}

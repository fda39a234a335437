/*
 * test_ctf_api_events.c - what the console shows of an instance's Events
 * (operators/ctf/api/events.c): the Events cache's transform keeps only what
 * a view shows (a message cut on a character boundary, an Event about no
 * object dropped), and the last Events of a Challenge are the newest three,
 * by last time then name, whichever time field the writer filled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/internal.h"
#include "ctf_fixture.h"

static const char *str(const json_t *v, const char *key)
{
    return json_string_value(json_object_get(v, key));
}

static void test_slim_keeps_what_is_shown(void **state)
{
    (void)state;
    json_t *ev = parse(
        "{'apiVersion':'v1','kind':'Event','metadata':{'name':'web-a.1870f0a1b2c3d4e5',"
        "'namespace':'ctf','uid':'e1','resourceVersion':'42','managedFields':[{'manager':'x'}]},"
        "'involvedObject':{'kind':'Challenge','name':'web-a','namespace':'ctf','uid':'c1',"
        "'apiVersion':'ctf.kopc.io/v1alpha1','resourceVersion':'7'},'type':'Warning',"
        "'reason':'ImagePullFailed','message':'Error: the image cannot be pulled','count':4,"
        "'firstTimestamp':'2026-11-21T10:00:00Z','lastTimestamp':'2026-11-21T10:05:00Z',"
        "'source':{'component':'kopc-ctf','host':'op-0'},'reportingComponent':'kopc-ctf'}");
    json_t *kept = ctf_api_event_slim(ev, NULL); /* takes ev */
    assert_non_null(kept);
    json_t *want = parse(
        "{'metadata':{'name':'web-a.1870f0a1b2c3d4e5','namespace':'ctf','uid':'e1',"
        "'resourceVersion':'42'},'involvedObject':{'name':'web-a','uid':'c1'},'type':'Warning',"
        "'reason':'ImagePullFailed','message':'Error: the image cannot be pulled','count':4,"
        "'lastSeen':'2026-11-21T10:05:00Z'}");
    assert_true(json_equal(kept, want));
    json_decref(kept);
    json_decref(want);

    /* An Event about no object's uid is dropped: no view could show it. */
    assert_null(ctf_api_event_slim(parse("{'metadata':{'name':'x','namespace':'ctf'},"
                                         "'involvedObject':{'name':'web-a'},'reason':'R'}"),
                                   NULL));
    /* eventTime stands in for a missing lastTimestamp, then firstTimestamp. */
    kept = ctf_api_event_slim(parse("{'metadata':{'name':'x'},'involvedObject':{'uid':'c1'},"
                                    "'eventTime':'2026-11-21T10:00:01.123456Z',"
                                    "'firstTimestamp':'2026-11-21T09:00:00Z'}"),
                              NULL);
    assert_string_equal(str(kept, "lastSeen"), "2026-11-21T10:00:01.123456Z");
    assert_string_equal(str(kept, "message"), "");
    json_decref(kept);
}

static void test_slim_cuts_long_messages_on_a_character(void **state)
{
    (void)state;
    /* 255 ASCII bytes, then "é" (2 bytes) across the 256-byte cut: it goes whole. */
    char msg[600];
    memset(msg, 'a', 255);
    strcpy(msg + 255, "\xc3\xa9 and more text after the cut");
    json_t *ev = json_pack("{s:{s:s}, s:{s:s}, s:s}", "metadata", "name", "x", "involvedObject",
                           "uid", "c1", "message", msg);
    json_t *kept = ctf_api_event_slim(ev, NULL);
    const char *m = str(kept, "message");
    assert_int_equal(strlen(m), 255 + strlen("…"));
    assert_memory_equal(m, msg, 255);
    assert_string_equal(m + 255, "…");
    json_decref(kept);

    /* At most the cap: kept as it is. */
    memset(msg, 'b', CTF_EVENT_MESSAGE_MAX);
    msg[CTF_EVENT_MESSAGE_MAX] = '\0';
    ev = json_pack("{s:{s:s}, s:{s:s}, s:s}", "metadata", "name", "x", "involvedObject", "uid",
                   "c1", "message", msg);
    kept = ctf_api_event_slim(ev, NULL);
    assert_string_equal(str(kept, "message"), msg);
    json_decref(kept);
}

static void test_shown_newest_three(void **state)
{
    (void)state;
    json_t *cached = parse(
        "[{'metadata':{'name':'web-a.01'},'type':'Normal','reason':'Pending','message':'m1',"
        "'count':1,'lastSeen':'2026-11-21T10:00:00Z'},"
        " {'metadata':{'name':'web-a.04'},'type':'Normal','reason':'AdminExtend','message':'m4',"
        "'count':1,'lastSeen':'2026-11-21T10:09:00Z'},"
        " {'metadata':{'name':'web-a.02'},'type':'Normal','reason':'Running','message':'m2',"
        "'count':1,'lastSeen':'2026-11-21T10:01:00Z'},"
        " {'metadata':{'name':'web-a.03'},'type':'Warning','reason':'Flapping','message':'m3',"
        "'count':7,'lastSeen':'2026-11-21T10:01:00Z'}]");
    json_t *shown = ctf_api_events_shown(cached);
    assert_int_equal(json_array_size(shown), CTF_EVENTS_SHOWN);
    /* Newest first; at the same second the later name (the recorder's clock) first. */
    assert_string_equal(str(json_array_get(shown, 0), "reason"), "AdminExtend");
    assert_string_equal(str(json_array_get(shown, 1), "reason"), "Flapping");
    assert_string_equal(str(json_array_get(shown, 2), "reason"), "Running");
    json_t *want = parse("{'type':'Warning','reason':'Flapping','message':'m3','count':7,"
                         "'lastSeen':'2026-11-21T10:01:00Z'}");
    assert_true(json_equal(json_array_get(shown, 1), want));
    json_decref(want);
    json_decref(shown);
    json_decref(cached);

    /* None cached: an empty list; an Event missing fields is shown with defaults. */
    cached = parse("[]");
    shown = ctf_api_events_shown(cached);
    assert_int_equal(json_array_size(shown), 0);
    json_decref(shown);
    json_decref(cached);
    cached = parse("[{'metadata':{'name':'x'}}]");
    shown = ctf_api_events_shown(cached);
    want = parse("[{'type':'Normal','reason':'','message':'','count':0,'lastSeen':null}]");
    assert_true(json_equal(shown, want));
    json_decref(want);
    json_decref(shown);
    json_decref(cached);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slim_keeps_what_is_shown),
        cmocka_unit_test(test_slim_cuts_long_messages_on_a_character),
        cmocka_unit_test(test_shown_newest_three),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

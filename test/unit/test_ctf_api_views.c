/*
 * test_ctf_api_views.c - what a page is shown (operators/ctf/api/views.c): a
 * Challenge's state, the Instance view of a running, renewed, failed or
 * stopped instance (times from the definition's lifetime, endpoints, a key
 * that ignores the clock), and the Challenge view, public fields only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/views.h"
#include "ctf_fixture.h"

static const char *str(const json_t *v, const char *key)
{
    return json_string_value(json_object_get(v, key));
}

static const char DEF[] =
    "{'metadata':{'name':'web','namespace':'ctf'},'spec':{'title':'Cookie Monster',"
    "'category':'web','description':'Cookies.','points':100,"
    "'pods':[{'name':'web','template':{'containers':[{'name':'web','image':'secret-image:1'}]}}],"
    "'expose':[{'name':'http','pod':'web','port':8080,'type':'HTTP'},"
    "{'name':'shell','pod':'web','port':22}],"
    "'flag':{'static':'flag{never_shown}'},"
    "'lifetime':{'default':'30m','max':'2h','renewBy':'30m'}}}";

/* A Challenge created at T0 by the API. */
static json_t *challenge(const char *status, const char *extra_meta)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{'metadata':{'name':'web-team-a-x','namespace':'ctf',"
             "'creationTimestamp':'2026-11-21T10:00:00Z'%s},"
             "'spec':{'definition':'web','team':'team-a'}%s%s}",
             extra_meta, status ? ",'status':" : "", status ? status : "");
    return parse(text);
}

static void test_state(void **state)
{
    (void)state;
    static const struct {
        const char *status, *meta, *want;
    } cases[] = {
        {NULL, "", CTF_STATE_STARTING},
        {"{}", "", CTF_STATE_STARTING},
        {"{'currentStatus':'None'}", "", CTF_STATE_STARTING},
        {"{'currentStatus':'Pending'}", "", CTF_STATE_STARTING},
        {"{'currentStatus':'Running'}", "", CTF_STATE_RUNNING},
        {"{'currentStatus':'Error','reason':'CrashLoop'}", "", CTF_STATE_ERROR},
        {"{'currentStatus':'Terminating'}", "", CTF_STATE_STOPPING},
        {"{'currentStatus':'Running'}", ",'deletionTimestamp':'2026-11-21T10:05:00Z'",
         CTF_STATE_STOPPING},
        {"{'currentStatus':'Error'}", ",'deletionTimestamp':'2026-11-21T10:05:00Z'",
         CTF_STATE_STOPPING},
    };
    for (size_t i = 0; i < LEN(cases); i++) {
        json_t *c = challenge(cases[i].status, cases[i].meta);
        if (strcmp(ctf_api_state(c), cases[i].want) != 0)
            fail_msg("case %zu: got %s, want %s", i, ctf_api_state(c), cases[i].want);
        json_decref(c);
    }
}

static void test_instance_view_running(void **state)
{
    (void)state;
    json_t *def = parse(DEF);
    json_t *c = challenge("{'currentStatus':'Running','message':'instance running',"
                          "'startedAt':'2026-11-21T10:00:05Z',"
                          "'endpoints':[{'name':'http','type':'HTTP','address':'http://h:30001'}]}",
                          "");
    json_t *v = ctf_api_instance_view(c, def, T0 + 600);
    assert_non_null(v);
    assert_string_equal(str(v, "team"), "team-a");
    assert_string_equal(str(v, "challenge"), "web");
    assert_string_equal(str(v, "name"), "web-team-a-x");
    assert_string_equal(str(v, "state"), "Running");
    assert_string_equal(str(v, "status"), "Running");
    assert_true(json_is_null(json_object_get(v, "reason")));
    assert_string_equal(str(v, "createdAt"), "2026-11-21T10:00:00Z");
    assert_string_equal(str(v, "startedAt"), "2026-11-21T10:00:05Z");
    assert_string_equal(str(v, "expiresAt"), "2026-11-21T10:30:00Z"); /* default 30m */
    assert_string_equal(str(v, "maxExpiresAt"), "2026-11-21T12:00:00Z"); /* max 2h */
    assert_int_equal(json_integer_value(json_object_get(v, "secondsLeft")), 1200);
    assert_true(json_is_true(json_object_get(v, "renewable")));
    json_t *ep = json_array_get(json_object_get(v, "endpoints"), 0);
    assert_string_equal(str(ep, "address"), "http://h:30001");
    /* Past the expiry, no negative time left. */
    json_decref(v);
    v = ctf_api_instance_view(c, def, T0 + 3600);
    assert_int_equal(json_integer_value(json_object_get(v, "secondsLeft")), 0);
    json_decref(v);
    json_decref(c);
    json_decref(def);
}

/* In the gateway mode, the view carries each endpoint's host and port (443). */
static void test_instance_view_gateway(void **state)
{
    (void)state;
    json_t *def = parse(DEF);
    json_t *c = challenge("{'currentStatus':'Running','endpoints':["
                          "{'name':'http','type':'HTTP','address':'https://abcdefghijklmnop.ctf.test',"
                          "'host':'abcdefghijklmnop.ctf.test','port':443},"
                          "{'name':'shell','type':'TCP','address':'qrstuvwxyz234567.ctf.test:443',"
                          "'host':'qrstuvwxyz234567.ctf.test','port':443}]}",
                          "");
    json_t *v = ctf_api_instance_view(c, def, T0 + 60);
    json_t *eps = json_object_get(v, "endpoints");
    assert_int_equal(json_array_size(eps), 2);
    json_t *tcp = json_array_get(eps, 1);
    assert_string_equal(str(tcp, "host"), "qrstuvwxyz234567.ctf.test");
    assert_int_equal(json_integer_value(json_object_get(tcp, "port")), 443);
    assert_string_equal(str(tcp, "address"), "qrstuvwxyz234567.ctf.test:443");
    assert_string_equal(str(json_array_get(eps, 0), "address"), "https://abcdefghijklmnop.ctf.test");
    json_decref(v);
    json_decref(c);
    json_decref(def);
}

static void test_instance_view_renewed_and_error(void **state)
{
    (void)state;
    json_t *def = parse(DEF);
    /* spec.expiresAt at created + max: nothing left to renew. */
    json_t *c = parse("{'metadata':{'name':'n','namespace':'ctf','creationTimestamp':"
                      "'2026-11-21T10:00:00Z'},'spec':{'definition':'web','team':'team-a',"
                      "'expiresAt':'2026-11-21T12:00:00Z'},'status':{'currentStatus':'Error',"
                      "'reason':'ImagePullFailed','message':'cannot pull'}}");
    json_t *v = ctf_api_instance_view(c, def, T0);
    assert_string_equal(str(v, "state"), "Error");
    assert_string_equal(str(v, "reason"), "ImagePullFailed");
    assert_string_equal(str(v, "message"), "cannot pull");
    assert_string_equal(str(v, "expiresAt"), "2026-11-21T12:00:00Z");
    assert_true(json_is_false(json_object_get(v, "renewable")));
    json_decref(v);
    /* Without its definition, the expiry comes from status, and no renewal is offered. */
    json_object_set_new(json_object_get(c, "status"), "expiresAt",
                        json_string("2026-11-21T11:00:00Z"));
    v = ctf_api_instance_view(c, NULL, T0);
    assert_string_equal(str(v, "expiresAt"), "2026-11-21T11:00:00Z");
    assert_true(json_is_null(json_object_get(v, "maxExpiresAt")));
    assert_true(json_is_false(json_object_get(v, "renewable")));
    json_decref(v);
    json_decref(c);
    json_decref(def);
}

static void test_stopped_view_and_key(void **state)
{
    (void)state;
    json_t *v = ctf_api_stopped_view("team-a", "web");
    assert_string_equal(str(v, "state"), "Stopped");
    assert_string_equal(str(v, "team"), "team-a");
    assert_string_equal(str(v, "challenge"), "web");
    assert_int_equal(json_array_size(json_object_get(v, "endpoints")), 0);
    json_decref(v);

    /* The key ignores secondsLeft only. */
    json_t *def = parse(DEF), *c = challenge("{'currentStatus':'Running'}", "");
    json_t *a = ctf_api_instance_view(c, def, T0), *b = ctf_api_instance_view(c, def, T0 + 10);
    char *ka = ctf_api_view_key(a), *kb = ctf_api_view_key(b);
    assert_string_equal(ka, kb);
    assert_null(strstr(ka, "secondsLeft"));
    json_object_set_new(json_object_get(c, "status"), "currentStatus", json_string("Error"));
    json_t *e = ctf_api_instance_view(c, def, T0);
    char *ke = ctf_api_view_key(e);
    assert_string_not_equal(ka, ke);
    free(ka);
    free(kb);
    free(ke);
    json_decref(a);
    json_decref(b);
    json_decref(e);
    json_decref(c);
    json_decref(def);
}

static void test_challenge_view_public_only(void **state)
{
    (void)state;
    json_t *def = parse(DEF);
    json_t *v = ctf_api_challenge_view(def);
    assert_string_equal(str(v, "name"), "web");
    assert_string_equal(str(v, "title"), "Cookie Monster");
    assert_string_equal(str(v, "category"), "web");
    assert_string_equal(str(v, "description"), "Cookies.");
    assert_int_equal(json_integer_value(json_object_get(v, "points")), 100);
    json_t *ex = json_object_get(v, "expose");
    assert_int_equal(json_array_size(ex), 2);
    assert_string_equal(str(json_array_get(ex, 0), "type"), "HTTP");
    assert_string_equal(str(json_array_get(ex, 1), "type"), "TCP");
    json_t *lt = json_object_get(v, "lifetimeSeconds");
    assert_int_equal(json_integer_value(json_object_get(lt, "default")), 1800);
    assert_int_equal(json_integer_value(json_object_get(lt, "max")), 7200);
    assert_int_equal(json_integer_value(json_object_get(lt, "renewBy")), 1800);
    char *text = json_dumps(v, 0);
    assert_null(strstr(text, "never_shown"));
    assert_null(strstr(text, "secret-image"));
    assert_null(strstr(text, "pods"));
    free(text);
    json_decref(v);
    json_decref(def);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_instance_view_running),
        cmocka_unit_test(test_instance_view_gateway),
        cmocka_unit_test(test_instance_view_renewed_and_error),
        cmocka_unit_test(test_stopped_view_and_key),
        cmocka_unit_test(test_challenge_view_public_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_ctf_api.c - the instance API's pure part: routes (with the hostile
 * paths the issue names), request bodies, the Instance and Challenge views
 * a team sees, bearer tokens, the write budget and event formatting.
 * Route and body cases are tables: one row per path or body.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "api/auth.h"
#include "api/routes.h"
#include "api/stream.h"
#include "api/views.h"
#include "ctf_fixture.h"
#include "core/duration.h"
#include "core/names.h"

static const char *str(const json_t *v, const char *key)
{
    return json_string_value(json_object_get(v, key));
}

/* ---- routes ------------------------------------------------------------- */

static const struct {
    const char *path;
    kop_err err;
    ctf_route_kind kind;
    const char *team, *challenge, *asset;
} ROUTES[] = {
    {"/", KOP_OK, CTF_ROUTE_ASSET, "", "", "index.html"},
    {"/app.js", KOP_OK, CTF_ROUTE_ASSET, "", "", "app.js"},
    {"/style.css", KOP_OK, CTF_ROUTE_ASSET, "", "", "style.css"},
    {"/api/openapi.json", KOP_OK, CTF_ROUTE_OPENAPI, "", "", ""},
    {"/api/v1/whoami", KOP_OK, CTF_ROUTE_WHOAMI, "", "", ""},
    {"/api/v1/challenges", KOP_OK, CTF_ROUTE_CHALLENGES, "", "", ""},
    {"/api/v1/teams/team-a/instances", KOP_OK, CTF_ROUTE_INSTANCES, "team-a", "", ""},
    {"/api/v1/teams/team-a/instances/web", KOP_OK, CTF_ROUTE_INSTANCE, "team-a", "web", ""},
    {"/api/v1/teams/t1/instances/web.v2", KOP_OK, CTF_ROUTE_INSTANCE, "t1", "web.v2", ""},
    {"/api/v1/teams/team-a/instances/web/renew", KOP_OK, CTF_ROUTE_RENEW, "team-a", "web", ""},
    {"/api/v1/teams/team-a/events", KOP_OK, CTF_ROUTE_EVENTS, "team-a", "", ""},
    {"/api/v1/teams/team-a/instances/web/flag", KOP_OK, CTF_ROUTE_FLAG, "team-a", "web", ""},
    /* Not routes. */
    {"", KOP_ENOTFOUND, 0, "", "", ""},
    {"api/v1/whoami", KOP_ENOTFOUND, 0, "", "", ""},
    {"/.env", KOP_ENOTFOUND, 0, "", "", ""},
    {"/App.js", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/whoami/", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v2/challenges", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/secrets", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/web/stop", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/web/renew/x", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/web/flags", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/web/fla", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/web/flag/x", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/flag", KOP_OK, CTF_ROUTE_INSTANCE, "team-a", "flag", ""},
    {"/api/v1/teams/team-a/events/x", KOP_ENOTFOUND, 0, "", "", ""},
    /* Routes with bad names: refused, never decoded. */
    {"/api/v1/teams/Team_A/instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/../instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/a%2Fb/instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams//instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/-a/events", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/..", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/%2e%2e", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/WEB", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/team-a/instances/", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/teams/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/events",
     KOP_EINVAL, 0, "", "", ""}, /* 64 characters */
};

static void test_route_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(ROUTES); i++) {
        ctf_route r;
        kop_status st;
        kop_status_clear(&st);
        kop_err err = ctf_route_parse(ROUTES[i].path, &r, &st);
        if (err != ROUTES[i].err)
            fail_msg("%s: got %s, want %s", ROUTES[i].path, kop_strerror(err),
                     kop_strerror(ROUTES[i].err));
        if (err == KOP_EINVAL) {
            assert_int_equal(st.code, 400);
            assert_string_equal(st.reason, "BadRequest");
            assert_true(st.message[0] != '\0');
        }
        if (err != KOP_OK)
            continue;
        assert_int_equal(r.kind, ROUTES[i].kind);
        assert_string_equal(r.team, ROUTES[i].team);
        assert_string_equal(r.challenge, ROUTES[i].challenge);
        assert_string_equal(r.asset, ROUTES[i].asset);
        assert_non_null(r.name);
        assert_non_null(r.allow);
    }
}

static void test_route_allows(void **state)
{
    (void)state;
    ctf_route r;
    assert_int_equal(ctf_route_parse("/api/v1/teams/a/instances/web", &r, NULL), KOP_OK);
    assert_true(ctf_route_allows(&r, "GET"));
    assert_true(ctf_route_allows(&r, "HEAD"));
    assert_true(ctf_route_allows(&r, "PUT"));
    assert_true(ctf_route_allows(&r, "DELETE"));
    assert_false(ctf_route_allows(&r, "POST"));
    assert_false(ctf_route_allows(&r, "PATCH"));
    assert_false(ctf_route_allows(&r, "PU")); /* a prefix of a method is not one */
    assert_false(ctf_route_allows(&r, "ET"));
    assert_false(ctf_route_allows(&r, "")); /* looped forever before 0.2 */
    assert_false(ctf_route_allows(&r, "GET,"));
    assert_false(ctf_route_allows(&r, " GET"));
    assert_int_equal(ctf_route_parse("/api/v1/teams/a/instances/web/renew", &r, NULL), KOP_OK);
    assert_true(ctf_route_allows(&r, "POST"));
    assert_false(ctf_route_allows(&r, "GET"));
    assert_int_equal(ctf_route_parse("/api/v1/teams/a/instances/web/flag", &r, NULL), KOP_OK);
    assert_true(ctf_route_allows(&r, "POST"));
    assert_false(ctf_route_allows(&r, "GET"));
    assert_false(ctf_route_allows(&r, "PUT"));
    assert_int_equal(ctf_route_parse("/api/v1/challenges", &r, NULL), KOP_OK);
    assert_false(ctf_route_allows(&r, "PUT"));
}

/* A flag check's body: exactly {"flag": "<1 to CTF_FLAG_MAX bytes>"}. */
static void test_flag_body(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *flag; /* NULL: refused with 400 */
    } cases[] = {
        {"{\"flag\":\"flag{abc}\"}", "flag{abc}"},
        {" {\"flag\" : \"x\"} ", "x"},
        {"{\"flag\":\"caf\u00e9 \\\"q\\\"\"}", "caf\xc3\xa9 \"q\""},
        {"", NULL},
        {"{}", NULL},
        {"{\"flag\":\"\"}", NULL},
        {"{\"flag\":null}", NULL},
        {"{\"flag\":5}", NULL},
        {"{\"flag\":[\"a\"]}", NULL},
        {"{\"flag\":\"a\",\"team\":\"b\"}", NULL},
        {"{\"flag\":\"a\",\"flag\":\"b\"}", NULL},
        {"{\"flag\":\"a\\u0000b\"}", NULL}, /* an embedded NUL could cut a comparison */
        {"[\"flag\"]", NULL},
        {"{\"flag\":\"a\"", NULL},
    };
    for (size_t i = 0; i < LEN(cases); i++) {
        ctf_flag_body b;
        kop_status st;
        kop_status_clear(&st);
        kop_err err = ctf_api_parse_flag(cases[i].body, strlen(cases[i].body), &b, &st);
        if ((err == KOP_OK) != (cases[i].flag != NULL))
            fail_msg("flag body %s: got %s", cases[i].body, kop_strerror(err));
        if (err) {
            assert_int_equal(st.code, 400);
            assert_true(st.message[0] != '\0');
        } else {
            assert_string_equal(b.flag, cases[i].flag);
        }
    }
    /* The longest flag is CTF_FLAG_MAX bytes; one more is refused. */
    char body[CTF_FLAG_MAX + 32];
    for (int n = CTF_FLAG_MAX; n <= CTF_FLAG_MAX + 1; n++) {
        int len = snprintf(body, sizeof body, "{\"flag\":\"%0*d\"}", n, 0);
        ctf_flag_body b;
        kop_status st;
        kop_status_clear(&st);
        kop_err err = ctf_api_parse_flag(body, (size_t)len, &b, &st);
        assert_int_equal(err, n == CTF_FLAG_MAX ? KOP_OK : KOP_EINVAL);
        if (!err)
            assert_int_equal(strlen(b.flag), CTF_FLAG_MAX);
    }
}

/* ---- bodies ------------------------------------------------------------- */

static const struct {
    const char *body;
    bool put_ok, empty_ok;
    const char *expires;
} BODIES[] = {
    {"", true, true, ""},
    {" \r\n\t", true, true, ""},
    {"{}", true, true, ""},
    {" { } ", true, true, ""},
    {"{\"expiresAt\":\"2026-11-21T10:30:00Z\"}", true, false, "2026-11-21T10:30:00Z"},
    {"{\"expiresAt\":null}", true, false, ""},
    {"{\"expiresAt\":5}", false, false, ""},
    {"{\"expiresAt\":\"tomorrow\"}", false, false, ""},
    {"{\"expiresAt\":\"2026-11-21T10:30:00Z\",\"expiresAt\":\"2026-11-21T10:40:00Z\"}", false,
     false, ""},
    {"{\"foo\":1}", false, false, ""},
    {"{\"ExpiresAt\":\"2026-11-21T10:30:00Z\"}", false, false, ""},
    {"[]", false, false, ""},
    {"null", false, false, ""},
    {"\"{}\"", false, false, ""},
    {"{", false, false, ""},
    {"{} {}", false, false, ""},
    {"{\"a\":", false, false, ""},
};

static void test_body_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(BODIES); i++) {
        ctf_put_body b;
        kop_status st;
        kop_status_clear(&st);
        const char *s = BODIES[i].body;
        kop_err err = ctf_api_parse_put(s, strlen(s), &b, &st);
        if ((err == KOP_OK) != BODIES[i].put_ok)
            fail_msg("PUT body %s: got %s", s, kop_strerror(err));
        if (err) {
            assert_int_equal(st.code, 400);
            assert_true(st.message[0] != '\0');
        } else {
            assert_string_equal(b.expires_at, BODIES[i].expires);
        }
        kop_status_clear(&st);
        err = ctf_api_parse_empty(s, strlen(s), &st);
        if ((err == KOP_OK) != BODIES[i].empty_ok)
            fail_msg("empty body %s: got %s", s, kop_strerror(err));
    }
}

static void test_body_too_big(void **state)
{
    (void)state;
    size_t n = CTF_API_BODY_MAX + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    ctf_put_body b;
    kop_status st;
    kop_status_clear(&st);
    assert_int_equal(ctf_api_parse_put(big, n, &b, &st), KOP_EINVAL);
    assert_int_equal(st.code, 413);
    assert_string_equal(st.reason, "PayloadTooLarge");
    /* Even blank, a body over the cap is refused. */
    memset(big, ' ', n);
    assert_int_equal(ctf_api_parse_empty(big, n, &st), KOP_EINVAL);
    assert_int_equal(st.code, 413);
    /* At the cap exactly, fine. */
    assert_int_equal(ctf_api_parse_put(big, n - 1, &b, &st), KOP_OK);
    free(big);
}

/* ---- views -------------------------------------------------------------- */

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

static void test_instance_name(void **state)
{
    (void)state;
    char a[64], b[64], c[64];
    assert_int_equal(ctf_challenge_name("team-a", "web", a, sizeof a), KOP_OK);
    assert_int_equal(ctf_challenge_name("team-a", "web", b, sizeof b), KOP_OK);
    assert_string_equal(a, b); /* deterministic */
    assert_true(kop_meta_is_valid_dns1123_label(a));
    /* "web-team" + "a" must not meet "web" + "team-a". */
    assert_int_equal(ctf_challenge_name("a", "web-team", c, sizeof c), KOP_OK);
    assert_string_not_equal(a, c);
    /* A long challenge name still gives a label. */
    char longname[254];
    memset(longname, 'x', 253);
    longname[253] = '\0';
    assert_int_equal(ctf_challenge_name("team-a", longname, c, sizeof c), KOP_OK);
    assert_true(kop_meta_is_valid_dns1123_label(c));
}

/* ---- tokens ------------------------------------------------------------- */

static void test_bearer(void **state)
{
    (void)state;
    char t[CTF_API_TOKEN_MAX + 1];
    assert_true(ctf_api_bearer("Bearer abc", t, sizeof t));
    assert_string_equal(t, "abc");
    assert_true(ctf_api_bearer("bearer  abc ", t, sizeof t));
    assert_string_equal(t, "abc");
    assert_false(ctf_api_bearer(NULL, t, sizeof t));
    assert_false(ctf_api_bearer("", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer ", t, sizeof t));
    assert_false(ctf_api_bearer("Basic YWJj", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer a b", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer a\tb", t, sizeof t));
    char big[CTF_API_TOKEN_MAX + 20];
    snprintf(big, sizeof big, "Bearer ");
    memset(big + 7, 'a', CTF_API_TOKEN_MAX + 1);
    big[7 + CTF_API_TOKEN_MAX + 1] = '\0';
    assert_false(ctf_api_bearer(big, t, sizeof t));
    big[7 + CTF_API_TOKEN_MAX] = '\0';
    assert_true(ctf_api_bearer(big, t, sizeof t));
}

static void test_token_equal(void **state)
{
    (void)state;
    const unsigned char want[] = "s3cret";
    assert_true(ctf_api_token_equal("s3cret", want, 6));
    assert_false(ctf_api_token_equal("s3cre", want, 6));
    assert_false(ctf_api_token_equal("s3cret!", want, 6));
    assert_false(ctf_api_token_equal("S3cret", want, 6));
    assert_false(ctf_api_token_equal("", (const unsigned char *)"", 0));
    assert_false(ctf_api_token_equal("x", NULL, 0));
    assert_false(ctf_api_token_equal(NULL, want, 6));
}

/* secret_of makes a Secret with base64 data from pairs (key, value), NULL-ended. */
static json_t *secret_of(const char *const *kv)
{
    json_t *data = json_object();
    for (size_t i = 0; kv[i]; i += 2) {
        unsigned char b64[256];
        int n = EVP_EncodeBlock(b64, (const unsigned char *)kv[i + 1], (int)strlen(kv[i + 1]));
        json_object_set_new(data, kv[i], json_stringn((const char *)b64, (size_t)n));
    }
    return json_pack("{s:o}", "data", data);
}

static void test_token_table(void **state)
{
    (void)state;
    const char *admin_kv[] = {"token", "admin-tok", NULL};
    const char *teams_kv[] = {"team-a",     "tok-a",     "team-b",     "tok-b",
                              "Not_A_Team", "tok-x",     "team-empty", "",
                              "team-same",  "admin-tok", NULL};
    json_t *admin = secret_of(admin_kv), *teams = secret_of(teams_kv);
    json_object_set_new(json_object_get(teams, "data"), "team-bad64", json_string("!!!"));
    ctf_token_table *t = NULL;
    bool is_admin;
    char team[CTF_TEAM_SIZE];

    assert_int_equal(ctf_token_table_build(admin, teams, &t), KOP_OK);
    assert_true(ctf_token_table_match(t, "admin-tok", &is_admin, team));
    assert_true(is_admin); /* the admin wins over a team holding the same token */
    assert_string_equal(team, "");
    assert_true(ctf_token_table_match(t, "tok-b", &is_admin, team));
    assert_false(is_admin);
    assert_string_equal(team, "team-b");
    assert_true(ctf_token_table_match(t, "tok-a", &is_admin, team));
    assert_string_equal(team, "team-a");
    /* a key that is no team name, an empty or undecodable token: never anyone's */
    assert_false(ctf_token_table_match(t, "tok-x", &is_admin, team));
    assert_false(ctf_token_table_match(t, "", &is_admin, team));
    assert_false(ctf_token_table_match(t, "!!!", &is_admin, team));
    assert_false(ctf_token_table_match(t, "tok-", &is_admin, team));
    assert_false(ctf_token_table_match(t, NULL, &is_admin, team));
    assert_false(is_admin);
    assert_string_equal(team, "");
    ctf_token_table_free(t);

    /* no Secrets at all: nobody; no admin Secret: the teams still */
    assert_int_equal(ctf_token_table_build(NULL, NULL, &t), KOP_OK);
    assert_false(ctf_token_table_match(t, "admin-tok", &is_admin, team));
    ctf_token_table_free(t);
    assert_int_equal(ctf_token_table_build(NULL, teams, &t), KOP_OK);
    assert_true(ctf_token_table_match(t, "admin-tok", &is_admin, team)); /* team-same's now */
    assert_false(is_admin);
    assert_string_equal(team, "team-same");
    assert_true(ctf_token_table_match(t, "tok-a", &is_admin, team));
    ctf_token_table_free(t);
    assert_false(ctf_token_table_match(NULL, "tok-a", &is_admin, team));
    json_decref(admin);
    json_decref(teams);
}

/* ---- write budget ------------------------------------------------------- */

static void test_bucket(void **state)
{
    (void)state;
    ctf_bucket b = {0};
    int retry = 0;
    int64_t t = 1000;
    for (int i = 0; i < 3; i++)
        assert_true(ctf_bucket_take(&b, 3, 60, t, &retry)); /* the burst */
    assert_false(ctf_bucket_take(&b, 3, 60, t, &retry));
    assert_int_equal(retry, 1); /* 60/min: one per second */
    assert_false(ctf_bucket_full(&b, 3, 60, t));
    assert_true(ctf_bucket_take(&b, 3, 60, t + 1000, &retry)); /* refilled one */
    assert_false(ctf_bucket_take(&b, 3, 60, t + 1000, &retry));
    assert_true(ctf_bucket_full(&b, 3, 60, t + 1000 + 3000));
    /* A slow rate gives a long Retry-After. */
    ctf_bucket s = {0};
    assert_true(ctf_bucket_take(&s, 1, 2, t, &retry));
    assert_false(ctf_bucket_take(&s, 1, 2, t, &retry));
    assert_int_equal(retry, 30);
    /* A clock that goes back does not mint writes. */
    assert_false(ctf_bucket_take(&s, 1, 2, t - 500000, &retry));
}

/* ---- events ------------------------------------------------------------- */

static void test_sse_event(void **state)
{
    (void)state;
    json_t *d = parse("{'message':'two\\nlines'}");
    char *ev = NULL;
    size_t n = 0;
    assert_int_equal(ctf_sse_event("instance", d, &ev, &n), KOP_OK);
    assert_string_equal(ev, "event: instance\ndata: {\"message\":\"two\\nlines\"}\n\n");
    assert_int_equal(n, strlen(ev));
    free(ev);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_table),
        cmocka_unit_test(test_route_allows),
        cmocka_unit_test(test_body_table),
        cmocka_unit_test(test_body_too_big),
        cmocka_unit_test(test_flag_body),
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_instance_view_running),
        cmocka_unit_test(test_instance_view_renewed_and_error),
        cmocka_unit_test(test_stopped_view_and_key),
        cmocka_unit_test(test_challenge_view_public_only),
        cmocka_unit_test(test_instance_name),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_token_equal),
        cmocka_unit_test(test_token_table),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_sse_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

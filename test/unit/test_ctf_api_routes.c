/*
 * test_ctf_api_routes.c - what a request names and carries (operators/ctf/
 * api/routes.c): the route table (with the hostile paths the issue names:
 * refused, never decoded), the methods each route allows, and the PUT and
 * flag-check bodies, capped. Route and body cases are tables: one row per
 * path or body.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/routes.h"
#include "ctf_fixture.h"

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
    /* The admin console's routes. */
    {"/api/v1/admin/instances", KOP_OK, CTF_ROUTE_ADMIN_INSTANCES, "", "", ""},
    {"/api/v1/admin/events", KOP_OK, CTF_ROUTE_ADMIN_EVENTS, "", "", ""},
    {"/api/v1/admin/summary", KOP_OK, CTF_ROUTE_ADMIN_SUMMARY, "", "", ""},
    {"/api/v1/admin/summary/", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/summary/web", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a/instances", KOP_OK, CTF_ROUTE_ADMIN_STOP_TEAM, "team-a", "", ""},
    {"/api/v1/admin/teams/team-a/instances/web", KOP_OK, CTF_ROUTE_ADMIN_STOP, "team-a", "web", ""},
    {"/api/v1/admin/teams/team-a/instances/web/renew", KOP_OK, CTF_ROUTE_ADMIN_RENEW, "team-a",
     "web", ""},
    {"/api/v1/admin/challenges/web.v2/instances", KOP_OK, CTF_ROUTE_ADMIN_STOP_CHALLENGE, "",
     "web.v2", ""},
    {"/api/v1/admin", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/instances/x", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/events/", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a/events", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a/instances/web/flag", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a/instances/web/renew/x", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/challenges/web", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/challenges/web/instances/x", KOP_ENOTFOUND, 0, "", "", ""},
    {"/api/v1/admin/challenges/WEB/instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/admin/challenges/%2e%2e/instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/admin/teams/Team_A/instances", KOP_EINVAL, 0, "", "", ""},
    {"/api/v1/admin/teams/team-a/instances/..", KOP_EINVAL, 0, "", "", ""},
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
    assert_false(ctf_route_is_admin(r.kind));
    /* The admin routes: bulk and single stops take DELETE alone, extend POST, reads GET. */
    assert_int_equal(ctf_route_parse("/api/v1/admin/teams/a/instances", &r, NULL), KOP_OK);
    assert_true(ctf_route_is_admin(r.kind));
    assert_true(ctf_route_allows(&r, "DELETE"));
    assert_false(ctf_route_allows(&r, "GET"));
    assert_int_equal(ctf_route_parse("/api/v1/admin/challenges/web/instances", &r, NULL), KOP_OK);
    assert_true(ctf_route_is_admin(r.kind));
    assert_true(ctf_route_allows(&r, "DELETE"));
    assert_false(ctf_route_allows(&r, "PUT"));
    assert_int_equal(ctf_route_parse("/api/v1/admin/teams/a/instances/web/renew", &r, NULL),
                     KOP_OK);
    assert_true(ctf_route_allows(&r, "POST"));
    assert_false(ctf_route_allows(&r, "DELETE"));
    assert_int_equal(ctf_route_parse("/api/v1/admin/events", &r, NULL), KOP_OK);
    assert_true(ctf_route_is_admin(r.kind));
    assert_true(ctf_route_allows(&r, "GET"));
    assert_false(ctf_route_allows(&r, "DELETE"));
    assert_int_equal(ctf_route_parse("/api/v1/admin/summary", &r, NULL), KOP_OK);
    assert_true(ctf_route_is_admin(r.kind));
    assert_true(ctf_route_allows(&r, "GET"));
    assert_false(ctf_route_allows(&r, "DELETE"));
    assert_int_equal(ctf_route_parse("/api/v1/teams/a/events", &r, NULL), KOP_OK);
    assert_false(ctf_route_is_admin(r.kind));
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

/* A create the operator's webhook refused is answered as the API's own refusal. */
static void test_webhook_refusal(void **state)
{
    (void)state;
    kop_status st = {.code = 403};
    ctf_api_refusal r;
    snprintf(st.reason, sizeof st.reason, "QuotaExceeded");
    snprintf(st.message, sizeof st.message,
             "admission webhook \"validate-challenge.ctf.kopc.io\" denied the request: team a "
             "already runs 3 instances");
    assert_true(ctf_api_webhook_refusal(KOP_EFORBIDDEN, &st, &r));
    assert_int_equal(r.code, 409);
    assert_string_equal(r.reason, "QuotaExceeded");
    assert_string_equal(r.message, "team a already runs 3 instances");
    snprintf(st.reason, sizeof st.reason, "DefinitionNotFound");
    snprintf(st.message, sizeof st.message, "no prefix here");
    assert_true(ctf_api_webhook_refusal(KOP_EFORBIDDEN, &st, &r));
    assert_int_equal(r.code, 404);
    assert_string_equal(r.message, "no prefix here");
    /* Anything else is not the webhook's refusal: RBAC's Forbidden, other errors. */
    snprintf(st.reason, sizeof st.reason, "Forbidden");
    assert_false(ctf_api_webhook_refusal(KOP_EFORBIDDEN, &st, &r));
    snprintf(st.reason, sizeof st.reason, "QuotaExceeded");
    assert_false(ctf_api_webhook_refusal(KOP_ECONFLICT, &st, &r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_table),
        cmocka_unit_test(test_route_allows),
        cmocka_unit_test(test_body_table),
        cmocka_unit_test(test_body_too_big),
        cmocka_unit_test(test_flag_body),
        cmocka_unit_test(test_webhook_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

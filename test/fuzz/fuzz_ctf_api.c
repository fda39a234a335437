/*
 * fuzz_ctf_api.c - libFuzzer target for what the instance API parses from
 * a request before anything else looks at it (operators/ctf/api/: routes.h,
 * auth.h, views.h, stream.h):
 * the path, the Authorization header and the JSON bodies; and for the view
 * built from a Challenge object, which comes from the cluster.
 *
 * Input layout: the first byte picks the parser, the rest is its input.
 *   0  a request path for ctf_route_parse (NUL-terminated copy)
 *   1  a PUT body for ctf_api_parse_put, and the same for ctf_api_parse_empty
 *      and ctf_api_parse_flag
 *   2  an Authorization header value for ctf_api_bearer
 *   3  a Challenge (JSON) for ctf_api_state / ctf_api_instance_view / the key
 *   4  an HTTP method for ctf_route_allows, on each kind of route
 * Invariants checked, abort() on violation:
 *  - a parsed route names a valid team (a DNS label) and challenge (a DNS
 *    subdomain) or none, and always has a name and allowed methods; a
 *    refused name is a 400 with a message;
 *  - an accepted PUT body's expiresAt is "" or a time ctf_parse_time reads;
 *    ctf_api_parse_empty never accepts what ctf_api_parse_put refuses;
 *    every refusal carries 400 or 413 and a message; an accepted flag
 *    check holds 1..CTF_FLAG_MAX bytes with no NUL, and no body is both a
 *    flag check and empty;
 *  - an extracted token is 1..CTF_API_TOKEN_MAX visible ASCII bytes that
 *    occur in the header;
 *  - a view is an object whose state is the one ctf_api_state derives, of
 *    the four a Challenge can be in; its event is exactly three lines;
 *  - ctf_route_allows returns for any method (the empty one too) and says
 *    yes exactly for a method the route's Allow value lists (HEAD as GET).
 */
#include "fuzz_check.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/routes.h"
#include "api/stream.h"
#include "api/views.h"
#include "core/duration.h"

#define T0 ((time_t)1795255200) /* 2026-11-21T10:00:00Z */

static void route(const char *s)
{
    ctf_route r;
    kop_status st;
    kop_status_clear(&st);
    kop_err err = ctf_route_parse(s, &r, &st);
    if (err == KOP_EINVAL) {
        FUZZ_CHECK(st.code == 400 && st.message[0]);
        return;
    }
    if (err)
        return;
    FUZZ_CHECK(r.name && r.allow);
    FUZZ_CHECK(!r.team[0] || kop_meta_is_valid_dns1123_label(r.team));
    FUZZ_CHECK(!r.challenge[0] || kop_meta_is_valid_dns1123_subdomain(r.challenge));
    FUZZ_CHECK(ctf_route_allows(&r, "GET") || ctf_route_allows(&r, "POST") ||
               ctf_route_allows(&r, "DELETE"));
    /* Every admin route but the three that cover all instances names a team or a
     * challenge. */
    FUZZ_CHECK(!ctf_route_is_admin(r.kind) || r.kind == CTF_ROUTE_ADMIN_INSTANCES ||
               r.kind == CTF_ROUTE_ADMIN_EVENTS || r.kind == CTF_ROUTE_ADMIN_SUMMARY ||
               r.team[0] || r.challenge[0]);
}

static void body(const char *s, size_t n)
{
    ctf_put_body b;
    kop_status st;
    time_t t;
    kop_status_clear(&st);
    kop_err put = ctf_api_parse_put(s, n, &b, &st);
    if (put)
        FUZZ_CHECK((st.code == 400 || st.code == 413) && st.message[0]);
    else
        FUZZ_CHECK(!b.expires_at[0] || ctf_parse_time(b.expires_at, &t) == KOP_OK);
    kop_status_clear(&st);
    kop_err empty = ctf_api_parse_empty(s, n, &st);
    FUZZ_CHECK(!(put && !empty));
    ctf_flag_body f;
    kop_status_clear(&st);
    kop_err flag = ctf_api_parse_flag(s, n, &f, &st);
    if (flag) {
        FUZZ_CHECK((st.code == 400 || st.code == 413) && st.message[0]);
    } else {
        size_t len = strlen(f.flag);
        FUZZ_CHECK(len >= 1 && len <= CTF_FLAG_MAX && empty);
    }
}

static void bearer(const char *s)
{
    char t[CTF_API_TOKEN_MAX + 1];
    if (!ctf_api_bearer(s, t, sizeof t))
        return;
    size_t n = strlen(t);
    FUZZ_CHECK(n >= 1 && n <= CTF_API_TOKEN_MAX && strstr(s, t));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(t[i] > 0x20 && t[i] < 0x7f);
}

static void view(const char *s, size_t n)
{
    static const char *const states[] = {CTF_STATE_STARTING, CTF_STATE_RUNNING, CTF_STATE_ERROR,
                                         CTF_STATE_STOPPING};
    json_t *chal = json_loadb(s, n, 0, NULL);
    json_t *def = json_loads("{\"spec\":{\"lifetime\":{\"default\":\"30m\",\"max\":\"2h\","
                             "\"renewBy\":\"30m\"}}}", 0, NULL);
    if (!chal) {
        json_decref(def);
        return;
    }
    const char *st = ctf_api_state(chal);
    bool known = false;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        known = known || strcmp(st, states[i]) == 0;
    FUZZ_CHECK(known);
    json_t *v = ctf_api_instance_view(chal, def, T0);
    if (v) {
        FUZZ_CHECK(json_is_object(v) && strcmp(json_string_value(json_object_get(v, "state")), st) == 0);
        free(ctf_api_view_key(v));
        char *ev = NULL;
        size_t len = 0;
        if (ctf_sse_event("instance", v, &ev, &len) == KOP_OK) {
            size_t lines = 0; /* "event: ...\ndata: <one line>\n\n" */
            for (size_t i = 0; i < len; i++)
                lines += ev[i] == '\n';
            FUZZ_CHECK(len == strlen(ev) && lines == 3);
        }
        free(ev);
    }
    json_decref(v);
    json_decref(def);
    json_decref(chal);
}

/* listed: m is one of the comma-separated methods of allow. */
static bool listed(const char *allow, const char *m)
{
    size_t n = strlen(m);
    for (const char *p = allow; *p;) {
        size_t len = strcspn(p, ", ");
        if (n && len == n && memcmp(p, m, n) == 0)
            return true;
        p += len;
        p += strspn(p, ", ");
    }
    return false;
}

static void method(const char *m)
{
    static const char *const paths[] = {"/api/v1/challenges", "/api/v1/teams/a/instances/web",
                                        "/api/v1/teams/a/instances/web/renew",
                                        "/api/v1/admin/teams/a/instances",
                                        "/api/v1/admin/challenges/web/instances"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        ctf_route r;
        FUZZ_CHECK(ctf_route_parse(paths[i], &r, NULL) == KOP_OK);
        const char *as = strcmp(m, "HEAD") == 0 ? "GET" : m;
        FUZZ_CHECK(ctf_route_allows(&r, m) == listed(r.allow, as));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 5) {
    case 0:
        route(s);
        break;
    case 1:
        body(s, size - 1);
        break;
    case 2:
        bearer(s);
        break;
    case 3:
        view(s, size - 1);
        break;
    default:
        method(s);
    }
    free(s);
    return 0;
}

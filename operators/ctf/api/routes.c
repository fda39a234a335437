/*
 * routes.c - what a request to the instance API names and carries: its
 * path parsed into a route, the methods the route takes, and its body
 * parsed into what the route accepts (see routes.h). Pure: no server, no
 * cluster, so unit tests and fuzz targets call it directly; server.c
 * dispatches on what it returns.
 *
 * Paths are parsed as they came on the wire: team and challenge names are
 * DNS names, which never need percent-encoding, so a '%' or a ".." in them
 * is a bad name (400), not something to decode and then trust. Bodies are
 * tiny JSON objects checked field by field; anything unknown is refused, so
 * a typo in a platform's request fails loudly instead of being ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/routes.h"
#include "core/admission.h"
#include "core/duration.h"

/* ---- routes ----------------------------------------------------------------- */

#define GET_ONLY "GET, HEAD"

/* segment copies path segment [s, s+n) into out; false when it does not fit. */
static bool segment(const char *s, size_t n, char *out, size_t size)
{
    if (n == 0 || n >= size)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

/* split cuts path (after its leading '/') at '/' into up to max segments. */
static size_t split(const char *path, const char **seg, size_t *len, size_t max)
{
    size_t n = 0;
    const char *p = path + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        if (n == max)
            return max + 1; /* too many: no route */
        seg[n] = p;
        len[n++] = l;
        if (!slash)
            return n;
        p = slash + 1;
    }
}

static void route_set(ctf_route *r, ctf_route_kind kind, const char *name, const char *allow)
{
    r->kind = kind;
    r->name = name;
    r->allow = allow;
}

/* challenge_segment copies a challenge name from a path segment, or explains in st. */
static kop_err challenge_segment(const char *seg, size_t len, ctf_route *r, kop_status *st)
{
    if (!segment(seg, len, r->challenge, sizeof r->challenge) ||
        !kop_meta_is_valid_dns1123_subdomain(r->challenge)) {
        kop_status_setf(st, 400, "BadRequest",
                        "the challenge must be a DNS name: lower-case letters, digits, '-' "
                        "and '.', at most 253");
        return KOP_EINVAL;
    }
    return KOP_OK;
}

/*
 * team_route parses what follows /api/v1/teams/:
 * {team}/instances[/{challenge}[/renew|/flag]] or {team}/events.
 */
static kop_err team_route(const char **seg, const size_t *len, size_t n, ctf_route *r,
                          kop_status *st)
{
    bool events = n == 2 && len[1] == 6 && memcmp(seg[1], "events", 6) == 0;
    bool instances = n >= 2 && n <= 4 && len[1] == 9 && memcmp(seg[1], "instances", 9) == 0;
    bool renew = n == 4 && len[3] == 5 && memcmp(seg[3], "renew", 5) == 0;
    bool flag = n == 4 && len[3] == 4 && memcmp(seg[3], "flag", 4) == 0;
    if (n == 4 && !renew && !flag)
        instances = false;
    if (!events && !instances)
        return KOP_ENOTFOUND;
    if (!segment(seg[0], len[0], r->team, sizeof r->team) ||
        !kop_meta_is_valid_dns1123_label(r->team)) {
        kop_status_setf(st, 400, "BadRequest",
                        "the team must be a DNS label: lower-case letters, digits and '-', "
                        "at most 63");
        return KOP_EINVAL;
    }
    if (n >= 3 && challenge_segment(seg[2], len[2], r, st) != KOP_OK)
        return KOP_EINVAL;
    if (events)
        route_set(r, CTF_ROUTE_EVENTS, "events", GET_ONLY);
    else if (n == 2)
        route_set(r, CTF_ROUTE_INSTANCES, "instances", GET_ONLY);
    else if (n == 3)
        route_set(r, CTF_ROUTE_INSTANCE, "instance", "GET, HEAD, PUT, DELETE");
    else if (renew)
        route_set(r, CTF_ROUTE_RENEW, "renew", "POST");
    else
        route_set(r, CTF_ROUTE_FLAG, "flag", "POST");
    return KOP_OK;
}

/*
 * admin_route parses what follows /api/v1/admin/: instances, events, summary,
 * teams/{team}/instances[/{challenge}[/renew]] and
 * challenges/{challenge}/instances. The team paths are the team routes'
 * shapes under admin/, so the same names are checked the same way.
 */
static kop_err admin_route(const char *rest, ctf_route *r, kop_status *st)
{
    const char *seg[8];
    size_t len[8];
    if (strcmp(rest, "instances") == 0) {
        route_set(r, CTF_ROUTE_ADMIN_INSTANCES, "admin-instances", GET_ONLY);
        return KOP_OK;
    }
    if (strcmp(rest, "events") == 0) {
        route_set(r, CTF_ROUTE_ADMIN_EVENTS, "admin-events", GET_ONLY);
        return KOP_OK;
    }
    if (strcmp(rest, "summary") == 0) {
        route_set(r, CTF_ROUTE_ADMIN_SUMMARY, "admin-summary", GET_ONLY);
        return KOP_OK;
    }
    if (strncmp(rest, "challenges/", 11) == 0) {
        size_t n = split(rest + 10, seg, len, 2); /* from the '/' before {challenge} */
        if (n != 2 || len[1] != 9 || memcmp(seg[1], "instances", 9) != 0)
            return KOP_ENOTFOUND;
        kop_err err = challenge_segment(seg[0], len[0], r, st);
        if (!err)
            route_set(r, CTF_ROUTE_ADMIN_STOP_CHALLENGE, "admin-stop-challenge", "DELETE");
        return err;
    }
    if (strncmp(rest, "teams/", 6) != 0)
        return KOP_ENOTFOUND;
    size_t n = split(rest + 5, seg, len, 4); /* from the '/' before {team} */
    if (n < 2 || n > 4 || len[1] != 9 || memcmp(seg[1], "instances", 9) != 0)
        return KOP_ENOTFOUND;
    if (n == 4 && (len[3] != 5 || memcmp(seg[3], "renew", 5) != 0))
        return KOP_ENOTFOUND;
    kop_err err = team_route(seg, len, n, r, st);
    if (err)
        return err;
    if (n == 2)
        route_set(r, CTF_ROUTE_ADMIN_STOP_TEAM, "admin-stop-team", "DELETE");
    else if (n == 3)
        route_set(r, CTF_ROUTE_ADMIN_STOP, "admin-stop", "DELETE");
    else
        route_set(r, CTF_ROUTE_ADMIN_RENEW, "admin-renew", "POST");
    return KOP_OK;
}

/* asset_route: "/" is the page; "/<file>" one of its files (respond.c knows which exist). */
static kop_err asset_route(const char *path, ctf_route *r)
{
    const char *name = path[1] ? path + 1 : "index.html";
    size_t n = strlen(name);
    if (n >= sizeof r->asset || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n ||
        name[0] == '.')
        return KOP_ENOTFOUND;
    memcpy(r->asset, name, n + 1);
    route_set(r, CTF_ROUTE_ASSET, "page", GET_ONLY);
    return KOP_OK;
}

kop_err ctf_route_parse(const char *path, ctf_route *out, kop_status *st)
{
    const char *seg[8];
    size_t len[8];
    if (!path || !out || path[0] != '/')
        return KOP_ENOTFOUND;
    memset(out, 0, sizeof *out);
    if (!strchr(path + 1, '/'))
        return asset_route(path, out);
    if (strcmp(path, "/api/openapi.json") == 0) {
        route_set(out, CTF_ROUTE_OPENAPI, "openapi", GET_ONLY);
        return KOP_OK;
    }
    if (strncmp(path, "/api/v1/", 8) != 0)
        return KOP_ENOTFOUND;
    if (strcmp(path + 8, "whoami") == 0) {
        route_set(out, CTF_ROUTE_WHOAMI, "whoami", GET_ONLY);
        return KOP_OK;
    }
    if (strcmp(path + 8, "challenges") == 0) {
        route_set(out, CTF_ROUTE_CHALLENGES, "challenges", GET_ONLY);
        return KOP_OK;
    }
    if (strncmp(path + 8, "admin/", 6) == 0)
        return admin_route(path + 14, out, st);
    if (strncmp(path + 8, "teams/", 6) != 0)
        return KOP_ENOTFOUND;
    size_t n = split(path + 13, seg, len, 4); /* from the '/' before {team} */
    if (n > 4)
        return KOP_ENOTFOUND;
    return team_route(seg, len, n, out, st);
}

bool ctf_route_allows(const ctf_route *r, const char *method)
{
    if (!r || !r->allow || !method)
        return false;
    if (strcmp(method, "HEAD") == 0)
        method = "GET";
    size_t n = strlen(method);
    if (n == 0) /* strstr(p, "") is p: the loop below would never advance */
        return false;
    for (const char *p = r->allow; (p = strstr(p, method)); p += n)
        if ((p == r->allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* ---- bodies ----------------------------------------------------------------- */

/* blank tells whether body holds only whitespace. */
static bool blank(const char *body, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r\n", body[i]))
            return false;
    return true;
}

/* parse_object reads body as one JSON object into *out (owned), or explains in st. */
static kop_err parse_object(const char *body, size_t len, json_t **out, kop_status *st)
{
    json_error_t jerr;
    *out = NULL;
    if (len > CTF_API_BODY_MAX) {
        kop_status_setf(st, 413, "PayloadTooLarge", "the request body is over %d bytes",
                        CTF_API_BODY_MAX);
        return KOP_EINVAL;
    }
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        kop_status_setf(st, 400, "BadRequest", "the body is not JSON: %s (at byte %d)", jerr.text,
                        jerr.position);
        return KOP_EINVAL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        kop_status_setf(st, 400, "BadRequest", "the body must be a JSON object");
        return KOP_EINVAL;
    }
    *out = v;
    return KOP_OK;
}

/* unknown_field refuses the first key of obj not in known (NULL-terminated). */
static kop_err unknown_field(const json_t *obj, const char *const *known, kop_status *st)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        bool ok = false;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strcmp(key, known[i]) == 0;
        if (!ok) {
            kop_status_setf(st, 400, "BadRequest", "unknown field \"%.64s\"", key);
            return KOP_EINVAL;
        }
    }
    return KOP_OK;
}

kop_err ctf_api_parse_put(const char *body, size_t len, ctf_put_body *out, kop_status *st)
{
    static const char *const known[] = {"expiresAt", NULL};
    json_t *obj = NULL;
    time_t t;
    kop_err err = KOP_OK;

    if (!out)
        return KOP_EINVAL;
    out->expires_at[0] = '\0';
    if (len == 0 || (len <= CTF_API_BODY_MAX && blank(body, len)))
        return KOP_OK;
    if ((err = parse_object(body, len, &obj, st)) || (err = unknown_field(obj, known, st)))
        goto out;
    const json_t *exp = json_object_get(obj, "expiresAt");
    if (exp && !json_is_null(exp)) {
        const char *s = json_string_value(exp);
        if (!s || strlen(s) >= sizeof out->expires_at || ctf_parse_time(s, &t) != KOP_OK) {
            kop_status_setf(st, 400, "BadRequest",
                            "expiresAt must be an RFC 3339 time such as 2026-11-22T10:00:00Z");
            err = KOP_EINVAL;
            goto out;
        }
        snprintf(out->expires_at, sizeof out->expires_at, "%s", s);
    }
out:
    json_decref(obj);
    return err;
}

kop_err ctf_api_parse_flag(const char *body, size_t len, ctf_flag_body *out, kop_status *st)
{
    static const char *const known[] = {"flag", NULL};
    json_t *obj = NULL;
    kop_err err;

    if (!out)
        return KOP_EINVAL;
    out->flag[0] = '\0';
    if ((err = parse_object(body, len, &obj, st)) || (err = unknown_field(obj, known, st)))
        goto out;
    const json_t *flag = json_object_get(obj, "flag");
    size_t n = json_is_string(flag) ? json_string_length(flag) : 0;
    if (n == 0 || n > CTF_FLAG_MAX || strlen(json_string_value(flag)) != n) {
        kop_status_setf(st, 400, "BadRequest",
                        "the body must be {\"flag\": \"...\"}, a string of 1 to %d bytes",
                        CTF_FLAG_MAX);
        err = KOP_EINVAL;
        goto out;
    }
    memcpy(out->flag, json_string_value(flag), n + 1);
out:
    json_decref(obj);
    return err;
}

kop_err ctf_api_parse_empty(const char *body, size_t len, kop_status *st)
{
    static const char *const none[] = {NULL};
    json_t *obj = NULL;
    kop_err err = KOP_OK;
    if (len == 0 || (len <= CTF_API_BODY_MAX && blank(body, len)))
        return KOP_OK;
    if (!(err = parse_object(body, len, &obj, st)))
        err = unknown_field(obj, none, st);
    json_decref(obj);
    return err;
}

bool ctf_api_webhook_refusal(kop_err err, const kop_status *st, ctf_api_refusal *out)
{
    static const char said[] = "denied the request: ";
    if (err != KOP_EFORBIDDEN)
        return false;
    const char *msg = strstr(st->message, said);
    out->message = msg ? msg + sizeof said - 1 : st->message;
    if (strcmp(st->reason, CTF_REASON_QUOTA) == 0)
        *out = (ctf_api_refusal){409, "QuotaExceeded", out->message};
    else if (strcmp(st->reason, CTF_REASON_DEFINITION_NOT_FOUND) == 0)
        *out = (ctf_api_refusal){404, "NotFound", out->message};
    else
        return false;
    return true;
}

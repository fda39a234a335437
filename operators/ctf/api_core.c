/*
 * api_core.c - the instance API's pure part (see api_core.h).
 *
 * Paths are parsed as they came on the wire: team and challenge names are
 * DNS names, which never need percent-encoding, so a '%' or a ".." in them
 * is a bad name (400), not something to decode and then trust. Bodies are
 * tiny JSON objects checked field by field; anything unknown is refused, so
 * a typo in a platform's request fails loudly instead of being ignored.
 *
 * The Instance view is the one place where a Challenge becomes what a page
 * shows; the event stream, the GET routes and the writes all use it, so the
 * page sees the same thing whichever way it asked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "api_core.h"
#include "core/json.h"
#include "core/duration.h"
#include "core/flag.h"

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
    if (n >= 3 && (!segment(seg[2], len[2], r->challenge, sizeof r->challenge) ||
                   !kop_meta_is_valid_dns1123_subdomain(r->challenge))) {
        kop_status_setf(st, 400, "BadRequest",
                        "the challenge must be a DNS name: lower-case letters, digits, '-' "
                        "and '.', at most 253");
        return KOP_EINVAL;
    }
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

/* asset_route: "/" is the page; "/<file>" one of its files (api.c knows which exist). */
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

/* ---- views ------------------------------------------------------------------ */

const char *ctf_api_state(const json_t *chal)
{
    const char *phase = ctf_str2(chal, "status", "currentStatus");
    if (kop_meta_is_deleting(chal) || (phase && (strcmp(phase, "Terminating") == 0 ||
                                                 strcmp(phase, "Deleted") == 0)))
        return CTF_STATE_STOPPING;
    if (phase && strcmp(phase, "Error") == 0)
        return CTF_STATE_ERROR;
    if (phase && strcmp(phase, "Running") == 0)
        return CTF_STATE_RUNNING;
    return CTF_STATE_STARTING;
}

/* time_or_null returns t as an RFC 3339 JSON string, or null when t <= 0. */
static json_t *time_or_null(time_t t)
{
    char ts[CTF_TIME_SIZE];
    if (t <= 0 || ctf_format_time(t, ts) != KOP_OK)
        return json_null();
    return json_string(ts);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* expiry_of finds chal's expiry and its furthest renewal (0 when unknown). */
static void expiry_of(const json_t *chal, const json_t *def, time_t *expires, time_t *max)
{
    const json_t *spec = json_object_get(def, "spec");
    const char *created_s = ctf_str2(chal, "metadata", "creationTimestamp");
    const char *status_exp = ctf_str2(chal, "status", "expiresAt");
    time_t created = 0;
    ctf_lifetime lt;
    *expires = *max = 0;
    if (def && created_s && ctf_parse_time(created_s, &created) == KOP_OK &&
        ctf_lifetime_parse(spec, &lt, NULL) == KOP_OK &&
        ctf_expiry(created, spec, ctf_str2(chal, "spec", "expiresAt"), expires, NULL) == KOP_OK) {
        *max = created + (time_t)(lt.max_ms / 1000);
        return;
    }
    if (!status_exp || ctf_parse_time(status_exp, expires) != KOP_OK)
        *expires = 0;
}

json_t *ctf_api_instance_view(const json_t *chal, const json_t *def, time_t now)
{
    const json_t *status = json_object_get(chal, "status");
    const json_t *eps = json_object_get(status, "endpoints");
    const char *state = ctf_api_state(chal);
    const char *phase = json_string_value(json_object_get(status, "currentStatus"));
    time_t expires, max;
    expiry_of(chal, def, &expires, &max);
    bool renewable = max > 0 && expires < max && strcmp(state, CTF_STATE_STOPPING) != 0;

    return json_pack(
        "{s:o, s:o, s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "team",
        str_or_null(ctf_str2(chal, "spec", "team")), "challenge",
        str_or_null(ctf_str2(chal, "spec", "definition")), "name", str_or_null(kop_meta_name(chal)),
        "state", state, "status", phase ? phase : "None", "reason",
        str_or_null(json_string_value(json_object_get(status, "reason"))), "message",
        str_or_null(json_string_value(json_object_get(status, "message"))), "endpoints",
        json_is_array(eps) ? json_deep_copy(eps) : json_array(), "createdAt",
        str_or_null(ctf_str2(chal, "metadata", "creationTimestamp")), "startedAt",
        str_or_null(json_string_value(json_object_get(status, "startedAt"))), "expiresAt",
        time_or_null(expires), "maxExpiresAt", time_or_null(max), "secondsLeft",
        expires > 0 ? json_integer(expires > now ? (json_int_t)(expires - now) : 0) : json_null(),
        "renewable", renewable);
}

json_t *ctf_api_stopped_view(const char *team, const char *challenge)
{
    return json_pack("{s:s, s:s, s:n, s:s, s:n, s:n, s:n, s:[], s:n, s:n, s:n, s:n, s:n, s:b}",
                     "team", team, "challenge", challenge, "name", "state", CTF_STATE_STOPPED,
                     "status", "reason", "message", "endpoints", "createdAt", "startedAt",
                     "expiresAt", "maxExpiresAt", "secondsLeft", "renewable", 0);
}

char *ctf_api_view_key(const json_t *view)
{
    json_t *copy = json_copy((json_t *)view);
    if (!copy)
        return NULL;
    json_object_del(copy, "secondsLeft");
    char *key = kop_meta_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return key;
}

json_t *ctf_api_challenge_view(const json_t *def)
{
    const json_t *spec = json_object_get(def, "spec");
    const json_t *points = json_object_get(spec, "points");
    json_t *expose = json_array(), *lifetime = json_null();
    const json_t *e;
    size_t i;
    ctf_lifetime lt;

    json_array_foreach(json_object_get(spec, "expose"), i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type"));
        json_array_append_new(expose, json_pack("{s:o, s:s}", "name",
                                                str_or_null(json_string_value(
                                                    json_object_get(e, "name"))),
                                                "type", type ? type : "TCP"));
    }
    if (ctf_lifetime_parse(spec, &lt, NULL) == KOP_OK) {
        json_decref(lifetime);
        lifetime = json_pack("{s:I, s:I, s:I}", "default", (json_int_t)(lt.default_ms / 1000),
                             "max", (json_int_t)(lt.max_ms / 1000), "renewBy",
                             (json_int_t)(lt.renew_ms / 1000));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                     str_or_null(kop_meta_name(def)), "title",
                     str_or_null(json_string_value(json_object_get(spec, "title"))), "category",
                     str_or_null(json_string_value(json_object_get(spec, "category"))),
                     "description",
                     str_or_null(json_string_value(json_object_get(spec, "description"))),
                     "points", json_is_integer(points) ? json_copy((json_t *)points) : json_null(),
                     "expose", expose, "lifetimeSeconds", lifetime);
}

/* ---- tokens ----------------------------------------------------------------- */

bool ctf_api_bearer(const char *header, char *out, size_t size)
{
    if (!out || size == 0)
        return false;
    out[0] = '\0';
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *t = header + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == ' ')
        n--;
    if (n == 0 || n > CTF_API_TOKEN_MAX || n >= size)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    memcpy(out, t, n);
    out[n] = '\0';
    return true;
}

bool ctf_api_token_equal(const char *presented, const unsigned char *expected, size_t expected_len)
{
    unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
    const char *p = presented ? presented : "";
    SHA256((const unsigned char *)p, strlen(p), a);
    SHA256(expected ? expected : (const unsigned char *)"", expected ? expected_len : 0, b);
    bool same = CRYPTO_memcmp(a, b, sizeof a) == 0;
    OPENSSL_cleanse(a, sizeof a);
    OPENSSL_cleanse(b, sizeof b);
    return same && expected_len > 0 && p[0] != '\0';
}

/* ---- the token table ------------------------------------------------------- */

struct token_key {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    bool usable;              /* a non-empty token of a valid name */
    char team[CTF_TEAM_SIZE]; /* "" for the admin's key */
};

struct ctf_token_table {
    size_t n;                /* keys[0] is the admin's */
    struct token_key keys[]; /* n of them */
};

/* set_key hashes data[key] of secret into k; usable only when it decodes to a non-empty token. */
static kop_err set_key(struct token_key *k, const json_t *secret, const char *key, bool valid_name)
{
    unsigned char *tok = NULL;
    size_t len = 0;
    kop_err err = secret ? ctf_secret_value(secret, key, &tok, &len) : KOP_ENOTFOUND;
    if (err == KOP_ENOMEM)
        return err;
    SHA256(tok ? tok : (const unsigned char *)"", tok ? len : 0, k->digest);
    k->usable = err == KOP_OK && len > 0 && valid_name;
    if (tok) {
        OPENSSL_cleanse(tok, len);
        free(tok);
    }
    return KOP_OK;
}

kop_err ctf_token_table_build(const json_t *admin_secret, const json_t *teams_secret,
                              ctf_token_table **out)
{
    const json_t *data = json_object_get(teams_secret, "data");
    size_t nteams = json_is_object(data) ? json_object_size(data) : 0;
    ctf_token_table *t = calloc(1, sizeof *t + (nteams + 1) * sizeof t->keys[0]);
    const char *key;
    const json_t *v;
    kop_err err;
    *out = NULL;
    if (!t)
        return KOP_ENOMEM;
    t->n = 1;
    err = set_key(&t->keys[0], admin_secret, "token", true);
    json_object_foreach((json_t *)data, key, v)
    {
        if (err)
            break;
        struct token_key *k = &t->keys[t->n++];
        bool valid = kop_meta_is_valid_dns1123_label(key);
        snprintf(k->team, sizeof k->team, "%s", valid ? key : "");
        err = set_key(k, teams_secret, key, valid);
    }
    if (err) {
        ctf_token_table_free(t);
        return err;
    }
    *out = t;
    return KOP_OK;
}

bool ctf_token_table_match(const ctf_token_table *t, const char *presented, bool *admin, char *team)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    const char *p = presented ? presented : "";
    bool found = false;
    *admin = false;
    team[0] = '\0';
    if (!t || p[0] == '\0')
        return false;
    SHA256((const unsigned char *)p, strlen(p), d);
    for (size_t i = 0; i < t->n; i++) {
        const struct token_key *k = &t->keys[i];
        bool same = CRYPTO_memcmp(d, k->digest, sizeof d) == 0; /* every key, whichever matches */
        if (same && k->usable && !found) {
            if (i == 0)
                *admin = true;
            else
                snprintf(team, CTF_TEAM_SIZE, "%s", k->team);
            found = true;
        }
    }
    OPENSSL_cleanse(d, sizeof d);
    return found;
}

void ctf_token_table_free(ctf_token_table *t)
{
    if (!t)
        return;
    OPENSSL_cleanse(t->keys, t->n * sizeof t->keys[0]);
    free(t);
}

/* ---- write budget ----------------------------------------------------------- */

/* refill brings b up to now_ms. */
static void refill(ctf_bucket *b, int burst, int per_minute, int64_t now_ms)
{
    if (b->last_ms == 0) {
        b->tokens = burst;
    } else if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * per_minute / 60000.0;
        if (b->tokens > burst)
            b->tokens = burst;
    }
    if (now_ms > b->last_ms || b->last_ms == 0)
        b->last_ms = now_ms > 0 ? now_ms : 1;
}

bool ctf_bucket_take(ctf_bucket *b, int burst, int per_minute, int64_t now_ms, int *retry_after_s)
{
    if (burst < 1)
        burst = 1;
    if (per_minute < 1)
        per_minute = 1;
    refill(b, burst, per_minute, now_ms);
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return true;
    }
    if (retry_after_s) {
        double secs = (1.0 - b->tokens) * 60.0 / per_minute;
        *retry_after_s = secs < 1.0 ? 1 : (int)ceil(secs);
    }
    return false;
}

bool ctf_bucket_full(const ctf_bucket *b, int burst, int per_minute, int64_t now_ms)
{
    ctf_bucket c = *b;
    refill(&c, burst < 1 ? 1 : burst, per_minute < 1 ? 1 : per_minute, now_ms);
    return c.tokens >= burst;
}

/* ---- events ----------------------------------------------------------------- */

kop_err ctf_sse_event(const char *name, const json_t *data, char **out, size_t *len)
{
    char *json = kop_meta_dumps(data, JSON_COMPACT);
    *out = NULL;
    *len = 0;
    if (!json)
        return KOP_ENOMEM;
    size_t n = strlen(name) + strlen(json) + 20;
    char *s = malloc(n);
    if (!s) {
        free(json);
        return KOP_ENOMEM;
    }
    int w = snprintf(s, n, "event: %s\ndata: %s\n\n", name, json);
    free(json);
    *out = s;
    *len = (size_t)w;
    return KOP_OK;
}

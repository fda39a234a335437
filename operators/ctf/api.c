/*
 * api.c - the instance API and the participant page on libmicrohttpd
 * (routes, error shape and semantics: docs/api.md).
 *
 * Threads: MHD runs one thread per connection, so an event stream may
 * block in its content callback waiting for a change, and a write may wait
 * on the apiserver, without holding up anyone else. The connection limit
 * caps the threads.
 *
 * Order of checks, the same for every request, so that a refusal never
 * depends on state the caller may not see: route (404), token (401), names
 * in the path (400), the team's right to the path (403), method (405),
 * body size (413) and shape (400), caches synced (503), the team's write
 * budget (429), then the work. Every refusal happens before any write.
 *
 * Reads come from the manager's informer caches. The event hub is a ring
 * of "team T changed" notes fed by the Challenge informer's handlers; each
 * stream wakes on a new note for its team, recomputes the team's Instances
 * from the cache and sends those whose view changed, so a stream never
 * reorders states, and one that fell behind the ring just sends a fresh
 * snapshot. Locks: api->lock guards the hub, the streams count and the
 * buckets, and is never held while calling into an informer.
 *
 * Secrets: tokens are read from the Secret cache per request, compared in
 * constant time, and cleansed after; no token, flag or Authorization
 * header is ever logged.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "api.h"
#include "api_core.h"

/* From the generated web_data.c: the page's files and openapi.json. */
extern const char *const ctf_web_names[];
extern const char *const ctf_web_data[];
extern const size_t ctf_web_size[];
extern const size_t ctf_web_count;

#define ADMIN_SECRET     "ctf-api-admin"
#define ADMIN_KEY        "token"
#define TEAMS_SECRET     "ctf-team-tokens"
#define CREATED_BY       "app.kubernetes.io/created-by"
#define HUB_RING         1024 /* notes kept; a stream further behind resends a snapshot */
#define MAX_BUCKETS      4096 /* teams with a write budget in use */
#define MAX_CONNECTIONS  512
#define STREAMS_PER_TEAM 8
#define STREAMS_MAX      256
#define STREAM_OUT_MAX   (4u << 20) /* one stream's pending output */
#define RENEW_ATTEMPTS   3
#define RETRY_AFTER_503  "2"

static const char *const SECURITY_HEADERS[][2] = {
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-store"},
};
static const char PAGE_CSP[] =
    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'";

struct note {
    uint64_t seq;
    char team[CTF_TEAM_SIZE];
};

struct team_bucket {
    char team[CTF_TEAM_SIZE];
    ctf_bucket b;
};

struct team_streams {
    char team[CTF_TEAM_SIZE];
    int n;
};

struct ctf_api {
    ctf_operator *op;
    ctf_api_opts opts;
    kop_informer *secrets;
    kop_metric *requests; /* ctf_api_requests_total{route,method,code} */
    struct MHD_Daemon *http;
    int port;

    pthread_mutex_t lock;
    pthread_cond_t changed; /* a note was added, or stopping */
    bool stopping;
    uint64_t seq; /* last note's */
    struct note ring[HUB_RING];
    struct team_bucket *buckets;
    size_t nbuckets;
    struct team_streams streams[STREAMS_MAX];
    int nstreams;
};

/* Who a token belongs to. */
typedef struct principal {
    bool admin;
    char team[CTF_TEAM_SIZE]; /* "" for the admin */
} principal;

/* One request, across MHD's calls of the handler. */
typedef struct request {
    ctf_route route;
    bool routed;
    principal who;
    const char *method;
    char *body;
    size_t len;
    bool too_big;
    bool answered; /* a response is queued */
} request;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- responses -------------------------------------------------------------- */

static const char *method_label(const char *m)
{
    static const char *const known[] = {"GET", "HEAD", "PUT", "POST", "DELETE"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0)
            return known[i];
    return "other";
}

static void count(ctf_api *api, const request *rq, unsigned code)
{
    char c[12];
    snprintf(c, sizeof c, "%u", code);
    const char *route = rq->routed && rq->route.name ? rq->route.name : "none";
    const char *labels[] = {route, method_label(rq->method), c, NULL};
    kop_metric_inc(api->requests, labels);
    if (kop_logv_enabled(1))
        kop_log(KOP_LOG_DEBUG, "api request", KOP_LOG_STR("method", method_label(rq->method)),
                KOP_LOG_STR("route", labels[0]), KOP_LOG_INT("code", code),
                KOP_LOG_STR("team", rq->route.team[0] ? rq->route.team : NULL));
}

/* send queues body (taken: freed by MHD) with code, type and extra headers (pairs, NULL-ended). */
static enum MHD_Result send_body(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                 unsigned code, const char *type, char *body, size_t len,
                                 enum MHD_ResponseMemoryMode mode, const char *const *headers)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    for (size_t i = 0; i < sizeof SECURITY_HEADERS / sizeof SECURITY_HEADERS[0]; i++)
        MHD_add_response_header(r, SECURITY_HEADERS[i][0], SECURITY_HEADERS[i][1]);
    for (size_t i = 0; headers && headers[i]; i += 2)
        MHD_add_response_header(r, headers[i], headers[i + 1]);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    rq->answered = true;
    count(api, rq, code);
    return ret;
}

/* send_json answers v (borrowed). */
static enum MHD_Result send_json(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                 unsigned code, const json_t *v, const char *const *headers)
{
    static const char no_memory[] = "{\"error\":{\"code\":\"Internal\",\"message\":\"out of memory\"}}";
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    if (!text)
        return send_body(api, conn, rq, 500, "application/json", (char *)no_memory,
                         sizeof no_memory - 1, MHD_RESPMEM_PERSISTENT, NULL);
    return send_body(api, conn, rq, code, "application/json", text, strlen(text),
                     MHD_RESPMEM_MUST_FREE, headers);
}

/* send_error answers {"error":{"code","message"}}. */
static enum MHD_Result send_error(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                  unsigned code, const char *reason, const char *message,
                                  const char *const *headers)
{
    json_t *v = json_pack("{s:{s:s, s:s}}", "error", "code", reason, "message", message);
    enum MHD_Result ret = send_json(api, conn, rq, code, v, headers);
    json_decref(v);
    return ret;
}

/* send_status answers the refusal st describes (code and reason set by api_core). */
static enum MHD_Result send_status(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                   const kop_status *st)
{
    unsigned code = st->code ? (unsigned)st->code : 400;
    return send_error(api, conn, rq, code, st->reason[0] ? st->reason : "BadRequest",
                      st->message, NULL);
}

/* send_unavailable: 503 with Retry-After. */
static enum MHD_Result send_unavailable(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                        const char *message)
{
    const char *h[] = {"Retry-After", RETRY_AFTER_503, NULL};
    return send_error(api, conn, rq, 503, "Unavailable", message, h);
}

/* send_apiserver_error maps a failed write to the apiserver onto our codes. */
static enum MHD_Result send_apiserver_error(ctf_api *api, struct MHD_Connection *conn,
                                            request *rq, kop_err err, const kop_status *st)
{
    kop_log(KOP_LOG_WARN, "api write failed", KOP_LOG_STR("route", rq->route.name),
            KOP_LOG_STR("team", rq->route.team), KOP_LOG_ERR(err),
            KOP_LOG_STR("message", st->message));
    if (err == KOP_EINVALID || err == KOP_EBADREQUEST)
        return send_error(api, conn, rq, 400, "BadRequest", st->message, NULL);
    if (err == KOP_ENOTFOUND)
        return send_error(api, conn, rq, 404, "NotFound", "the instance is gone", NULL);
    return send_unavailable(api, conn, rq, "the cluster did not take the request; retry soon");
}

/* ---- the event hub ---------------------------------------------------------- */

/* note records that team's Instances changed, and wakes the streams. */
static void note(ctf_api *api, const json_t *chal)
{
    const char *ns = kop_meta_namespace(chal);
    const char *team = json_string_value(
        json_object_get(json_object_get(chal, "spec"), "team"));
    if (!ns || !team || strcmp(ns, api->opts.challenge_namespace) != 0)
        return;
    pthread_mutex_lock(&api->lock);
    struct note *n = &api->ring[++api->seq % HUB_RING];
    n->seq = api->seq;
    snprintf(n->team, sizeof n->team, "%s", team);
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
}

static void on_add(const json_t *obj, void *user)
{
    note(user, obj);
}

static void on_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    note(user, new_obj);
}

static void on_delete(const json_t *obj, void *user)
{
    note(user, obj);
}

/* ---- reads from the cache --------------------------------------------------- */

static const char *spec_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "spec"), field));
}

static bool synced(ctf_api *api)
{
    return kop_informer_has_synced(api->op->challenges) &&
           kop_informer_has_synced(api->op->definitions) &&
           kop_informer_has_synced(api->secrets);
}

/* rank orders the candidates for a team's instance: live before stopping, sane before duplicate. */
static int rank(const json_t *chal)
{
    const json_t *status = json_object_get(chal, "status");
    const char *reason = json_string_value(json_object_get(status, "reason"));
    if (kop_meta_is_deleting(chal))
        return 0;
    return reason && strcmp(reason, "DuplicateInstance") == 0 ? 1 : 2;
}

/*
 * team_instances returns (owned) the team's Challenges in the challenge
 * namespace, one per definition (the best ranked), as an object keyed by
 * definition. NULL when out of memory.
 */
static json_t *team_instances(ctf_api *api, const char *team)
{
    json_t *all = NULL, *by_def = json_object(), *c;
    size_t i;
    if (!by_def || kop_informer_by_index(api->op->challenges, CTF_INDEX_TEAM, team, &all)) {
        json_decref(by_def);
        return NULL;
    }
    json_array_foreach(all, i, c)
    {
        const char *def = spec_str(c, "definition");
        if (!def || strcmp(kop_meta_namespace(c), api->opts.challenge_namespace) != 0)
            continue;
        json_t *had = json_object_get(by_def, def);
        if (!had || rank(c) > rank(had))
            json_object_set(by_def, def, c);
    }
    json_decref(all);
    return by_def;
}

/* find_instance returns (owned) the team's Challenge for challenge, or NULL. */
static json_t *find_instance(ctf_api *api, const char *team, const char *challenge)
{
    json_t *mine = team_instances(api, team);
    json_t *c = json_incref(json_object_get(mine, challenge));
    json_decref(mine);
    return c;
}

/* definition returns (owned) the ChallengeDefinition named challenge, or NULL. */
static json_t *definition(ctf_api *api, const char *challenge)
{
    json_t *def = NULL;
    if (kop_informer_get(api->op->definitions, api->opts.challenge_namespace, challenge, &def))
        return NULL;
    return def;
}

/* view returns (owned) the Instance of chal, with its definition from the cache. */
static json_t *view(ctf_api *api, const json_t *chal)
{
    const char *d = spec_str(chal, "definition");
    json_t *def = d ? definition(api, d) : NULL;
    json_t *v = ctf_api_instance_view(chal, def, time(NULL));
    json_decref(def);
    return v;
}

/* team_views returns (owned) {"team": team, "instances": [...]} sorted by challenge. */
static json_t *team_views(ctf_api *api, const char *team)
{
    json_t *mine = team_instances(api, team), *list = json_array();
    json_t *out = list ? json_pack("{s:s, s:o}", "team", team, "instances", list) : NULL;
    const char *key;
    json_t *c;
    if (!mine || !out) {
        json_decref(mine);
        json_decref(out);
        return NULL;
    }
    /* jansson keeps insertion order; sort the keys for a stable answer. */
    const char **keys = calloc(json_object_size(mine) + 1, sizeof *keys);
    size_t n = 0;
    json_object_foreach(mine, key, c)
        if (keys)
            keys[n++] = key;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, view(api, json_object_get(mine, keys[i])));
    free(keys);
    json_decref(mine);
    return out;
}

/* ---- auth ------------------------------------------------------------------- */

/* secret_matches tells whether data[key] of secret equals token (constant time). */
static bool secret_matches(const json_t *secret, const char *key, const char *token)
{
    unsigned char *want = NULL;
    size_t len = 0;
    bool same = false;
    if (ctf_secret_value(secret, key, &want, &len) == KOP_OK)
        same = ctf_api_token_equal(token, want, len);
    else
        (void)ctf_api_token_equal(token, NULL, 0); /* the same work either way */
    if (want) {
        OPENSSL_cleanse(want, len);
        free(want);
    }
    return same;
}

/*
 * authenticate finds whose token the Authorization header carries. Every
 * team key is compared, whichever matches, so the time taken does not tell
 * which one did. False when nobody's.
 */
static bool authenticate(ctf_api *api, const char *header, principal *who)
{
    char token[CTF_API_TOKEN_MAX + 1];
    json_t *admin = NULL, *teams = NULL;
    const char *key;
    json_t *v;
    bool found = false;

    memset(who, 0, sizeof *who);
    if (!ctf_api_bearer(header, token, sizeof token))
        return false;
    const char *ns = api->opts.system_namespace;
    if (kop_informer_get(api->secrets, ns, ADMIN_SECRET, &admin) == KOP_OK &&
        secret_matches(admin, ADMIN_KEY, token)) {
        who->admin = true;
        found = true;
    }
    if (kop_informer_get(api->secrets, ns, TEAMS_SECRET, &teams) == KOP_OK) {
        json_object_foreach(json_object_get(teams, "data"), key, v)
        {
            bool valid = kop_meta_is_valid_dns1123_label(key);
            if (secret_matches(teams, key, token) && valid && !found) {
                snprintf(who->team, sizeof who->team, "%s", key);
                found = true;
            }
        }
    }
    OPENSSL_cleanse(token, sizeof token);
    json_decref(admin);
    json_decref(teams);
    return found;
}

/* ---- the write budget ------------------------------------------------------- */

/*
 * spend takes one write from team's bucket; false with *retry_s set when
 * it is empty. Full buckets are forgotten when room is needed: a full
 * bucket is the same as none.
 */
static bool spend(ctf_api *api, const char *team, int *retry_s)
{
    int burst = api->opts.team_burst, rate = api->opts.team_per_minute;
    int64_t now = mono_ms();
    struct team_bucket *tb = NULL;
    bool ok;

    pthread_mutex_lock(&api->lock);
    for (size_t i = 0; i < api->nbuckets && !tb; i++)
        if (strcmp(api->buckets[i].team, team) == 0)
            tb = &api->buckets[i];
    if (!tb && api->nbuckets == MAX_BUCKETS) {
        for (size_t i = 0; i < api->nbuckets; i++)
            if (ctf_bucket_full(&api->buckets[i].b, burst, rate, now))
                api->buckets[i--] = api->buckets[--api->nbuckets];
    }
    if (!tb && api->nbuckets < MAX_BUCKETS) {
        tb = &api->buckets[api->nbuckets++];
        memset(tb, 0, sizeof *tb);
        snprintf(tb->team, sizeof tb->team, "%s", team);
    }
    if (tb) {
        ok = ctf_bucket_take(&tb->b, burst, rate, now, retry_s);
    } else {
        ok = false; /* 4096 teams writing at full speed: shed load */
        *retry_s = 60 / (rate > 0 ? rate : 1) + 1;
    }
    pthread_mutex_unlock(&api->lock);
    return ok;
}

/* ---- handlers --------------------------------------------------------------- */

static enum MHD_Result send_asset(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                  const char *name)
{
    static const char *const types[][2] = {
        {".html", "text/html; charset=utf-8"},   {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},     {".json", "application/json"},
        {".svg", "image/svg+xml"},
    };
    for (size_t i = 0; i < ctf_web_count; i++) {
        if (strcmp(ctf_web_names[i], name) != 0)
            continue;
        const char *type = "application/octet-stream", *dot = strrchr(name, '.');
        for (size_t t = 0; dot && t < sizeof types / sizeof types[0]; t++)
            if (strcmp(dot, types[t][0]) == 0)
                type = types[t][1];
        const char *h[] = {"Content-Security-Policy", PAGE_CSP, "X-Frame-Options", "DENY", NULL};
        return send_body(api, conn, rq, 200, type, (char *)ctf_web_data[i], ctf_web_size[i],
                         MHD_RESPMEM_PERSISTENT, h);
    }
    return send_error(api, conn, rq, 404, "NotFound", "no such page", NULL);
}

static enum MHD_Result get_whoami(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *v = json_pack("{s:o, s:b}", "team",
                          rq->who.admin ? json_null() : json_string(rq->who.team), "admin",
                          rq->who.admin);
    enum MHD_Result ret = send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

static int by_name(const void *a, const void *b)
{
    const char *x = kop_meta_name(*(json_t *const *)a), *y = kop_meta_name(*(json_t *const *)b);
    return strcmp(x ? x : "", y ? y : "");
}

static enum MHD_Result get_challenges(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *defs = NULL, *list = json_array();
    if (!list || kop_informer_list(api->op->definitions, api->opts.challenge_namespace, &defs)) {
        json_decref(list);
        return send_unavailable(api, conn, rq, "cannot read the definitions");
    }
    size_t n = json_array_size(defs);
    json_t **sorted = calloc(n + 1, sizeof *sorted);
    for (size_t i = 0; sorted && i < n; i++)
        sorted[i] = json_array_get(defs, i);
    if (sorted)
        qsort(sorted, n, sizeof *sorted, by_name);
    for (size_t i = 0; sorted && i < n; i++)
        json_array_append_new(list, ctf_api_challenge_view(sorted[i]));
    free(sorted);
    json_decref(defs);
    json_t *v = json_pack("{s:o}", "challenges", list);
    enum MHD_Result ret = send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

static enum MHD_Result get_instances(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *v = team_views(api, rq->route.team);
    enum MHD_Result ret = v ? send_json(api, conn, rq, 200, v, NULL)
                            : send_unavailable(api, conn, rq, "cannot read the instances");
    json_decref(v);
    return ret;
}

static enum MHD_Result no_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    char msg[400];
    snprintf(msg, sizeof msg, "team %s has no instance of %s", rq->route.team,
             rq->route.challenge);
    return send_error(api, conn, rq, 404, "NotFound", msg, NULL);
}

static enum MHD_Result stopping(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    return send_error(api, conn, rq, 409, "InstanceStopping",
                      "the team's previous instance is still stopping; retry in a few seconds",
                      NULL);
}

static enum MHD_Result get_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *chal = find_instance(api, rq->route.team, rq->route.challenge);
    if (!chal)
        return no_instance(api, conn, rq);
    json_t *v = view(api, chal);
    enum MHD_Result ret = send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    json_decref(chal);
    return ret;
}

/* over_quota tells (with a message) whether one more instance for team breaks a quota. */
static bool over_quota(ctf_api *api, const char *team, char *msg, size_t size)
{
    json_t *all = NULL, *c;
    size_t i;
    int mine = 0, total = 0;
    if (kop_informer_list(api->op->challenges, api->opts.challenge_namespace, &all))
        return false; /* the controller's admission still holds */
    json_array_foreach(all, i, c)
    {
        if (kop_meta_is_deleting(c))
            continue;
        total++;
        const char *t = spec_str(c, "team");
        if (t && strcmp(t, team) == 0)
            mine++;
    }
    json_decref(all);
    if (mine >= api->op->max_per_team) {
        snprintf(msg, size, "team %s already runs %d instances, the most a team may; stop one first",
                 team, mine);
        return true;
    }
    if (total >= api->op->max_instances) {
        snprintf(msg, size, "the CTF runs its maximum of %d instances; try again later", total);
        return true;
    }
    return false;
}

/* new_challenge builds the Challenge a PUT creates (owned). */
static json_t *new_challenge(ctf_api *api, const request *rq, const char *name,
                             const ctf_put_body *body)
{
    json_t *spec = json_pack("{s:s, s:s}", "definition", rq->route.challenge, "team",
                             rq->route.team);
    if (spec && body->expires_at[0])
        json_object_set_new(spec, "expiresAt", json_string(body->expires_at));
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:o}", "apiVersion",
                     "ctf.kopc.io/v1alpha1", "kind", "Challenge", "metadata", "name", name,
                     "namespace", api->opts.challenge_namespace, "labels", CREATED_BY,
                     "kopc-ctf-api", "spec", spec);
}

/* existing_answer answers a PUT that found the team's Challenge already there. */
static enum MHD_Result existing_answer(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                       const json_t *chal)
{
    const char *team = spec_str(chal, "team"), *def = spec_str(chal, "definition");
    if (!team || !def || strcmp(team, rq->route.team) || strcmp(def, rq->route.challenge))
        return send_error(api, conn, rq, 409, "Conflict",
                          "another Challenge holds this instance's name", NULL);
    if (kop_meta_is_deleting(chal))
        return stopping(api, conn, rq);
    json_t *v = view(api, chal);
    enum MHD_Result ret = send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

/*
 * put_instance: idempotent create. The name is a function of team and
 * challenge, so of concurrent PUTs the apiserver lets exactly one create
 * and the others find it (AlreadyExists, then a GET that sees it).
 */
static enum MHD_Result put_instance(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                    const ctf_put_body *body)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    const char *ns = api->opts.challenge_namespace;
    char name[KOP_META_DNS1123_LABEL_MAX + 1], msg[300];
    json_t *def = NULL, *chal = NULL, *obj = NULL, *created = NULL;
    kop_status st;
    enum MHD_Result ret;

    if (!(def = definition(api, rq->route.challenge))) {
        snprintf(msg, sizeof msg, "no challenge named %s", rq->route.challenge);
        ret = send_error(api, conn, rq, 404, "NotFound", msg, NULL);
        goto out;
    }
    if ((chal = find_instance(api, rq->route.team, rq->route.challenge))) {
        ret = existing_answer(api, conn, rq, chal);
        goto out;
    }
    if (over_quota(api, rq->route.team, msg, sizeof msg)) {
        ret = send_error(api, conn, rq, 409, "QuotaExceeded", msg, NULL);
        goto out;
    }
    if (ctf_api_instance_name(rq->route.team, rq->route.challenge, name, sizeof name) ||
        !(obj = new_challenge(api, rq, name, body))) {
        ret = send_error(api, conn, rq, 500, "Internal", "cannot build the Challenge", NULL);
        goto out;
    }
    kop_err err = kop_create(c, &CTF_CHALLENGES, ns, obj, NULL, &created, &st);
    if (err == KOP_OK) {
        char location[512];
        snprintf(location, sizeof location, "/api/v1/teams/%s/instances/%s", rq->route.team,
                 rq->route.challenge);
        kop_log(KOP_LOG_INFO, "api created an instance", KOP_LOG_STR("team", rq->route.team),
                KOP_LOG_STR("challenge", rq->route.challenge), KOP_LOG_STR("name", name));
        json_t *v = ctf_api_instance_view(created, def, time(NULL));
        const char *h[] = {"Location", location, NULL};
        ret = send_json(api, conn, rq, 201, v, h);
        json_decref(v);
    } else if (err == KOP_EALREADYEXISTS &&
               kop_get(c, &CTF_CHALLENGES, ns, name, &chal, &st) == KOP_OK) {
        ret = existing_answer(api, conn, rq, chal);
    } else {
        ret = send_apiserver_error(api, conn, rq, err, &st);
    }
out:
    json_decref(created);
    json_decref(obj);
    json_decref(chal);
    json_decref(def);
    return ret;
}

static enum MHD_Result delete_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    json_t *chal = find_instance(api, rq->route.team, rq->route.challenge), *gone = NULL;
    kop_status st;
    enum MHD_Result ret;
    if (!chal)
        return no_instance(api, conn, rq);
    if (!kop_meta_is_deleting(chal)) {
        kop_delete_opts o = {.precondition_uid = kop_meta_uid(chal)};
        kop_err err = kop_delete(c, &CTF_CHALLENGES, kop_meta_namespace(chal), kop_meta_name(chal),
                                 &o, &gone, &st);
        if (err && err != KOP_ENOTFOUND) {
            ret = send_apiserver_error(api, conn, rq, err, &st);
            goto out;
        }
        kop_log(KOP_LOG_INFO, "api stopped an instance", KOP_LOG_STR("team", rq->route.team),
                KOP_LOG_STR("challenge", rq->route.challenge));
    }
    /* The Challenge as deleted (deletionTimestamp set), or else the cached one. */
    const char *kind = json_string_value(json_object_get(gone, "kind"));
    json_t *shown = kind && strcmp(kind, "Challenge") == 0 ? gone : chal;
    json_t *v = view(api, shown);
    if (v && !kop_meta_is_deleting(shown))
        json_object_set_new(v, "state", json_string(CTF_STATE_STOPPING));
    ret = send_json(api, conn, rq, 202, v, NULL);
    json_decref(v);
out:
    json_decref(gone);
    json_decref(chal);
    return ret;
}

/*
 * renew_once computes the next expiry of the Challenge as the apiserver has
 * it and patches it, guarded by its resourceVersion. *at_limit tells a
 * KOP_ECONFLICT of ctf_renew (nothing left to extend) from the apiserver's.
 */
static kop_err renew_once(ctf_api *api, const char *name, const json_t *def, json_t **out,
                          bool *at_limit, kop_status *st)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    const char *ns = api->opts.challenge_namespace;
    const json_t *spec = json_object_get(def, "spec");
    json_t *chal = NULL, *patch = NULL;
    time_t created, expires, next;
    char ts[CTF_TIME_SIZE];
    kop_err err;

    if ((err = kop_get(c, &CTF_CHALLENGES, ns, name, &chal, st)))
        goto out;
    if (kop_meta_is_deleting(chal)) {
        err = KOP_ESHUTDOWN;
        goto out;
    }
    const char *cs = json_string_value(
        json_object_get(json_object_get(chal, "metadata"), "creationTimestamp"));
    if (!cs || ctf_parse_time(cs, &created) != KOP_OK) {
        err = KOP_EPARSE;
        goto out;
    }
    if ((err = ctf_expiry(created, spec, spec_str(chal, "expiresAt"), &expires, st)))
        goto out;
    if ((err = ctf_renew(created, expires, spec, &next, st))) {
        *at_limit = err == KOP_ECONFLICT;
        goto out;
    }
    if ((err = ctf_format_time(next, ts)))
        goto out;
    patch = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "resourceVersion",
                      kop_meta_resource_version(chal), "spec", "expiresAt", ts);
    err = patch ? kop_patch(c, &CTF_CHALLENGES, ns, name, KOP_PATCH_MERGE, patch, NULL, out, st)
                : KOP_ENOMEM;
out:
    json_decref(patch);
    json_decref(chal);
    return err;
}

static enum MHD_Result renew_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *chal = find_instance(api, rq->route.team, rq->route.challenge), *def = NULL,
           *renewed = NULL;
    kop_status st;
    kop_err err = KOP_ECONFLICT;
    bool at_limit = false;
    enum MHD_Result ret;
    if (!chal)
        return no_instance(api, conn, rq);
    if (kop_meta_is_deleting(chal)) {
        ret = stopping(api, conn, rq);
        goto out;
    }
    if (!(def = definition(api, rq->route.challenge))) {
        ret = send_error(api, conn, rq, 404, "NotFound", "the challenge is gone", NULL);
        goto out;
    }
    /* A conflict here is the apiserver's (someone wrote in between): try again. */
    for (int i = 0; i < RENEW_ATTEMPTS && err == KOP_ECONFLICT && !at_limit; i++) {
        kop_status_clear(&st);
        err = renew_once(api, kop_meta_name(chal), def, &renewed, &at_limit, &st);
    }
    if (err == KOP_OK) {
        json_t *v = ctf_api_instance_view(renewed, def, time(NULL));
        ret = send_json(api, conn, rq, 200, v, NULL);
        json_decref(v);
    } else if (at_limit) {
        ret = send_error(api, conn, rq, 409, "RenewLimitReached",
                         "the instance already runs until the latest time its challenge allows",
                         NULL);
    } else if (err == KOP_ESHUTDOWN) {
        ret = stopping(api, conn, rq);
    } else {
        ret = send_apiserver_error(api, conn, rq, err, &st);
    }
out:
    json_decref(renewed);
    json_decref(def);
    json_decref(chal);
    return ret;
}

/* ---- event streams ---------------------------------------------------------- */

typedef struct stream {
    ctf_api *api;
    char team[CTF_TEAM_SIZE];
    uint64_t seq;      /* the last note seen */
    bool started;      /* the snapshot went out */
    json_t *sent;      /* challenge -> view key last sent */
    char *out;         /* pending output */
    size_t len, off;
    int64_t heartbeat_ms; /* when the next one is due */
} stream;

/* append adds text to s's pending output (capped). */
static bool append(stream *s, const char *text, size_t n)
{
    if (s->len + n > STREAM_OUT_MAX)
        return false;
    char *grown = realloc(s->out, s->len + n + 1);
    if (!grown)
        return false;
    memcpy(grown + s->len, text, n);
    s->out = grown;
    s->len += n;
    s->out[s->len] = '\0';
    return true;
}

static bool append_event(stream *s, const char *name, const json_t *data)
{
    char *ev = NULL;
    size_t n = 0;
    bool ok = ctf_sse_event(name, data, &ev, &n) == KOP_OK && append(s, ev, n);
    free(ev);
    return ok;
}

/* remember records what was sent of the team's views (keys), replacing all. */
static void remember(stream *s, const json_t *views)
{
    json_t *v;
    size_t i;
    json_object_clear(s->sent);
    json_array_foreach(json_object_get(views, "instances"), i, v)
    {
        char *key = ctf_api_view_key(v);
        const char *ch = json_string_value(json_object_get(v, "challenge"));
        if (key && ch)
            json_object_set_new(s->sent, ch, json_string(key));
        free(key);
    }
}

static bool send_snapshot(stream *s)
{
    json_t *views = team_views(s->api, s->team);
    bool ok = views && append_event(s, "snapshot", views);
    if (ok)
        remember(s, views);
    json_decref(views);
    return ok;
}

/* send_changes sends an instance event for each of the team's views that changed. */
static bool send_changes(stream *s)
{
    json_t *views = team_views(s->api, s->team), *v, *now = json_object();
    size_t i;
    const char *ch;
    json_t *old;
    bool ok = views && now;
    json_array_foreach(json_object_get(views, "instances"), i, v)
    {
        char *key = ok ? ctf_api_view_key(v) : NULL;
        const char *c = json_string_value(json_object_get(v, "challenge"));
        if (!key || !c) {
            free(key);
            ok = false;
            break;
        }
        const char *was = json_string_value(json_object_get(s->sent, c));
        if (!was || strcmp(was, key) != 0)
            ok = append_event(s, "instance", v);
        json_object_set_new(now, c, json_string(key));
        free(key);
    }
    json_object_foreach(s->sent, ch, old)
    {
        if (!ok || json_object_get(now, ch))
            continue;
        json_t *stopped = ctf_api_stopped_view(s->team, ch);
        ok = stopped && append_event(s, "instance", stopped);
        json_decref(stopped);
    }
    if (ok) {
        json_object_clear(s->sent);
        json_object_update(s->sent, now);
    }
    json_decref(now);
    json_decref(views);
    return ok;
}

/*
 * wait_change blocks until the team has a note after s->seq, the heartbeat
 * is due or the API stops. Returns 1 for a change, 2 for a lost track
 * (the ring moved past s->seq: resend a snapshot), 0 for a heartbeat, -1
 * when stopping.
 */
static int wait_change(stream *s)
{
    ctf_api *api = s->api;
    int r = -1;
    pthread_mutex_lock(&api->lock);
    for (;;) {
        if (api->stopping)
            break;
        if (api->seq != s->seq) {
            bool lost = api->seq - s->seq > HUB_RING;
            bool mine = false;
            for (uint64_t q = s->seq + 1; !lost && q <= api->seq; q++)
                mine = mine || strcmp(api->ring[q % HUB_RING].team, s->team) == 0;
            s->seq = api->seq;
            if (lost || mine) {
                r = lost ? 2 : 1;
                break;
            }
        }
        int64_t now = mono_ms();
        if (now >= s->heartbeat_ms) {
            r = 0;
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t wait = s->heartbeat_ms - now;
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&api->changed, &api->lock, &until);
    }
    pthread_mutex_unlock(&api->lock);
    return r;
}

/* stream_next fills s's pending output with what comes next; false ends the stream. */
static bool stream_next(stream *s)
{
    static const char hello[] = "retry: 2000\n\n", beat[] = ": heartbeat\n\n";
    if (!s->started) {
        s->started = true;
        return append(s, hello, sizeof hello - 1) && send_snapshot(s);
    }
    while (s->len == 0) {
        switch (wait_change(s)) {
        case -1:
            return false;
        case 0:
            s->heartbeat_ms = mono_ms() + s->api->opts.heartbeat_s * 1000L;
            if (!append(s, beat, sizeof beat - 1))
                return false;
            break;
        case 2:
            if (!send_snapshot(s))
                return false;
            break;
        default:
            if (!send_changes(s))
                return false;
        }
    }
    return true;
}

/* stream_read is MHD's content callback: hand out pending output, or wait for more. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *s = cls;
    (void)pos;
    if (s->off == s->len) {
        free(s->out);
        s->out = NULL;
        s->len = s->off = 0;
        if (!stream_next(s))
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->out + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* streams_adjust counts team's open streams by delta; false when +1 would pass a cap. */
static bool streams_adjust(ctf_api *api, const char *team, int delta)
{
    struct team_streams *ts = NULL, *free_slot = NULL;
    bool ok = true;
    pthread_mutex_lock(&api->lock);
    for (int i = 0; i < STREAMS_MAX; i++) {
        if (api->streams[i].n > 0 && strcmp(api->streams[i].team, team) == 0)
            ts = &api->streams[i];
        else if (api->streams[i].n == 0 && !free_slot)
            free_slot = &api->streams[i];
    }
    if (delta > 0) {
        if ((ts && ts->n >= STREAMS_PER_TEAM) || api->nstreams >= STREAMS_MAX || (!ts && !free_slot)) {
            ok = false;
        } else {
            if (!ts) {
                ts = free_slot;
                snprintf(ts->team, sizeof ts->team, "%s", team);
            }
            ts->n++;
            api->nstreams++;
        }
    } else if (ts) {
        ts->n--;
        api->nstreams--;
    }
    pthread_mutex_unlock(&api->lock);
    return ok;
}

static void stream_free(void *cls)
{
    stream *s = cls;
    streams_adjust(s->api, s->team, -1);
    json_decref(s->sent);
    free(s->out);
    free(s);
}

static enum MHD_Result get_events(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    stream *s = calloc(1, sizeof *s);
    if (!s || !(s->sent = json_object())) {
        free(s);
        return send_unavailable(api, conn, rq, "out of memory");
    }
    if (!streams_adjust(api, rq->route.team, +1)) {
        json_decref(s->sent);
        free(s);
        const char *h[] = {"Retry-After", "10", NULL};
        return send_error(api, conn, rq, 429, "TooManyRequests",
                          "this team has too many event streams open", h);
    }
    s->api = api;
    snprintf(s->team, sizeof s->team, "%s", rq->route.team);
    s->heartbeat_ms = mono_ms() + api->opts.heartbeat_s * 1000L;
    pthread_mutex_lock(&api->lock);
    s->seq = api->seq; /* the snapshot covers everything before */
    pthread_mutex_unlock(&api->lock);

    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    rq->answered = true;
    count(api, rq, 200);
    return ret;
}

/* ---- dispatch --------------------------------------------------------------- */

/* is_api tells whether the route needs a token. */
static bool is_api(const ctf_route *r)
{
    return r->kind != CTF_ROUTE_ASSET && r->kind != CTF_ROUTE_OPENAPI;
}

static bool is_write(const request *rq)
{
    return strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "DELETE") == 0 ||
           strcmp(rq->method, "POST") == 0;
}

/*
 * check_headers runs every check that needs no body, on the first call of
 * a request. Returns true when the request may go on; else a refusal is
 * queued (*ret).
 */
static bool check_headers(ctf_api *api, struct MHD_Connection *conn, request *rq,
                          const char *url, enum MHD_Result *ret)
{
    kop_status st;
    kop_status_clear(&st);
    kop_err err = ctf_route_parse(url, &rq->route, &st);
    rq->routed = err != KOP_ENOTFOUND;
    if (err == KOP_ENOTFOUND) {
        *ret = send_error(api, conn, rq, 404, "NotFound", "no such route", NULL);
        return false;
    }
    if (is_api(&rq->route)) {
        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_AUTHORIZATION);
        if (!authenticate(api, auth, &rq->who)) {
            const char *h[] = {"WWW-Authenticate", "Bearer realm=\"kopc-ctf\"", NULL};
            *ret = send_error(api, conn, rq, 401, "Unauthorized",
                              "a valid Authorization: Bearer token is needed", h);
            return false;
        }
    }
    if (err) {
        *ret = send_status(api, conn, rq, &st);
        return false;
    }
    if (rq->route.team[0] && !rq->who.admin && strcmp(rq->route.team, rq->who.team) != 0) {
        *ret = send_error(api, conn, rq, 403, "Forbidden", "this token is not this team's", NULL);
        return false;
    }
    if (!ctf_route_allows(&rq->route, rq->method)) {
        const char *h[] = {"Allow", rq->route.allow, NULL};
        *ret = send_error(api, conn, rq, 405, "MethodNotAllowed",
                          "the route does not take this method", h);
        return false;
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > CTF_API_BODY_MAX) {
        *ret = send_error(api, conn, rq, 413, "PayloadTooLarge",
                          "the request body is over 65536 bytes", NULL);
        return false;
    }
    return true;
}

/* take_body appends a chunk of the upload, up to the cap (past it, the rest is dropped). */
static void take_body(request *rq, const char *data, size_t n)
{
    if (rq->too_big || rq->len + n > CTF_API_BODY_MAX) {
        rq->too_big = true;
        return;
    }
    char *grown = realloc(rq->body, rq->len + n + 1);
    if (!grown) {
        rq->too_big = true;
        return;
    }
    memcpy(grown + rq->len, data, n);
    rq->body = grown;
    rq->len += n;
}

/* dispatch answers a request whose headers and body are in. */
static enum MHD_Result dispatch(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    kop_status st;
    ctf_put_body put;
    int retry_s = 1;
    kop_status_clear(&st);

    if (rq->too_big)
        return send_error(api, conn, rq, 413, "PayloadTooLarge",
                          "the request body is over 65536 bytes", NULL);
    if (rq->route.kind == CTF_ROUTE_ASSET)
        return send_asset(api, conn, rq, rq->route.asset);
    if (rq->route.kind == CTF_ROUTE_OPENAPI)
        return send_asset(api, conn, rq, "openapi.json");
    bool is_put = strcmp(rq->method, "PUT") == 0;
    kop_err err = is_put ? ctf_api_parse_put(rq->body, rq->len, &put, &st)
                : is_write(rq) ? ctf_api_parse_empty(rq->body, rq->len, &st)
                               : KOP_OK;
    if (err)
        return send_status(api, conn, rq, &st);
    if (!synced(api))
        return send_unavailable(api, conn, rq, "the operator is starting; its caches are not ready");
    if (is_write(rq) && !spend(api, rq->route.team, &retry_s)) {
        char after[16];
        snprintf(after, sizeof after, "%d", retry_s);
        const char *h[] = {"Retry-After", after, NULL};
        return send_error(api, conn, rq, 429, "TooManyRequests",
                          "this team is writing too fast; wait and retry", h);
    }
    switch (rq->route.kind) {
    case CTF_ROUTE_WHOAMI:
        return get_whoami(api, conn, rq);
    case CTF_ROUTE_CHALLENGES:
        return get_challenges(api, conn, rq);
    case CTF_ROUTE_INSTANCES:
        return get_instances(api, conn, rq);
    case CTF_ROUTE_EVENTS:
        return get_events(api, conn, rq);
    case CTF_ROUTE_RENEW:
        return renew_instance(api, conn, rq);
    default:
        break;
    }
    if (is_put)
        return put_instance(api, conn, rq, &put);
    if (strcmp(rq->method, "DELETE") == 0)
        return delete_instance(api, conn, rq);
    return get_instance(api, conn, rq);
}

/* on_request is MHD's access handler: called once with the headers, then per body chunk, then once more. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    ctf_api *api = cls;
    request *rq = *con_cls;
    enum MHD_Result ret = MHD_YES;
    (void)version;

    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq)))
            return MHD_NO;
        *con_cls = rq;
        rq->method = method;
        if (!check_headers(api, conn, rq, url, &ret))
            return ret;
        return MHD_YES;
    }
    if (rq->answered) {
        *data_size = 0; /* refused before the body: drop it */
        return MHD_YES;
    }
    if (*data_size) {
        take_body(rq, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    return dispatch(api, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)conn;
    (void)why;
    request *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

/* raw_path makes MHD leave the path as it came: names are checked, never decoded. */
static size_t raw_path(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    return strlen(s);
}

/* ---- life cycle ------------------------------------------------------------- */

/* resolve_bind reads "host:port" (a numeric IPv4 or [IPv6] host, or a name) into ss. */
static kop_err resolve_bind(const char *bind, struct sockaddr_storage *ss, kop_status *st)
{
    char host[256];
    const char *colon = strrchr(bind, ':');
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (!colon || (size_t)(colon - bind) >= sizeof host || !colon[1])
        goto bad;
    snprintf(host, sizeof host, "%.*s", (int)(colon - bind), bind);
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    if (getaddrinfo(h[0] ? h : NULL, colon + 1, &hints, &res) != 0 || !res)
        goto bad;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return KOP_OK;
bad:
    kop_status_setf(st, 0, NULL, "--api-bind \"%s\": want HOST:PORT", bind);
    return KOP_EINVAL;
}

kop_err ctf_api_new(ctf_operator *op, const ctf_api_opts *opts, ctf_api **out, kop_status *st)
{
    static const char *const labels[] = {"route", "method", "code", NULL};
    kop_err err;
    *out = NULL;
    if (opts->bind && strcmp(opts->bind, "0") == 0)
        return KOP_OK;
    if (op->watch_namespace && strcmp(op->watch_namespace, opts->challenge_namespace) != 0) {
        kop_status_setf(st, 0, NULL,
                        "--namespace %s leaves out --challenge-namespace %s, where the API "
                        "creates Challenges; drop one or make them equal",
                        op->watch_namespace, opts->challenge_namespace);
        return KOP_EINVAL;
    }
    ctf_api *api = calloc(1, sizeof *api);
    if (!api)
        return KOP_ENOMEM;
    api->op = op;
    api->opts = *opts;
    pthread_mutex_init(&api->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&api->changed, &ca);
    pthread_condattr_destroy(&ca);
    api->buckets = calloc(MAX_BUCKETS, sizeof *api->buckets);
    err = api->buckets ? KOP_OK : KOP_ENOMEM;
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_SECRETS, opts->system_namespace, NULL,
                                   &api->secrets);
    kop_informer_handler h = {on_add, on_update, on_delete, api};
    if (!err)
        err = kop_informer_add_handler(op->challenges, &h);
    if (!err)
        err = kop_metrics_counter(kop_manager_metrics(op->mgr), "ctf_api_requests_total",
                                  "Instance API requests by route, method and HTTP code", labels,
                                  &api->requests);
    if (err) {
        kop_status_setf(st, 0, NULL, "instance API: %s", kop_strerror(err));
        ctf_api_free(api);
        return err;
    }
    *out = api;
    return KOP_OK;
}

kop_err ctf_api_start(ctf_api *api, kop_status *st)
{
    struct sockaddr_storage ss;
    if (!api)
        return KOP_OK;
    kop_err err = resolve_bind(api->opts.bind, &ss, st);
    if (err)
        return err;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    api->http = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)60, MHD_OPTION_NOTIFY_COMPLETED, on_completed, api,
        MHD_OPTION_UNESCAPE_CALLBACK, raw_path, NULL, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)(1u << 20), MHD_OPTION_END);
    if (!api->http) {
        kop_status_setf(st, 0, NULL, "cannot serve the API on %s: %s", api->opts.bind,
                        strerror(errno));
        return KOP_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(api->http, MHD_DAEMON_INFO_BIND_PORT);
    api->port = info ? info->port : 0;
    kop_log(KOP_LOG_INFO, "serving the instance API and the page",
            KOP_LOG_STR("bind", api->opts.bind), KOP_LOG_INT("port", api->port),
            KOP_LOG_STR("challenge_namespace", api->opts.challenge_namespace),
            KOP_LOG_STR("system_namespace", api->opts.system_namespace));
    return KOP_OK;
}

int ctf_api_bound_port(const ctf_api *api)
{
    return api ? api->port : 0;
}

void ctf_api_free(ctf_api *api)
{
    if (!api)
        return;
    pthread_mutex_lock(&api->lock);
    api->stopping = true;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
    if (api->http)
        MHD_stop_daemon(api->http);
    pthread_cond_destroy(&api->changed);
    pthread_mutex_destroy(&api->lock);
    free(api->buckets);
    free(api);
}

/*
 * server.c - the instance API and the participant page on libmicrohttpd: the
 * server and the order of checks (routes, error shape and semantics:
 * docs/api.md; the files of the API: api_internal.h).
 *
 * Connections: a pool of POOL_THREADS threads polls them all (epoll), so
 * an idle or slow connection costs a descriptor and a few KiB, not a
 * thread: thousands can wait without starving anyone. An event stream
 * with nothing to send parks (stream.c). A client address may hold
 * --api-per-address connections (64; 0: no cap, for an API behind a proxy,
 * where every client has the proxy's address), all of them MAX_CONNECTIONS (or what the
 * descriptor limit allows), and a connection idle for IDLE_TIMEOUT_S is
 * closed, as is one still sending its body BODY_DEADLINE_MS after its
 * headers. (libmicrohttpd has no deadline for the headers themselves: the
 * idle timeout, its 32 KiB header cap and the per-address cap bound what a
 * client dripping headers can hold.) A write waits on the apiserver in its pool thread; the pool is
 * sized so that a few slow writes leave the others serving.
 *
 * Order of checks, the same for every request, so that a refusal never
 * depends on state the caller may not see: route (404), token (401), names
 * in the path (400), the team's right to the path (403), method (405),
 * body size (413) and shape (400), caches synced (503), the team's write
 * budget (429), then the work. Every refusal happens before any write.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <kop/http.h>
#include <openssl/crypto.h>

#include "api/internal.h"

/* ---- dispatch --------------------------------------------------------------- */

/* is_api tells whether the route needs a token. */
static bool is_api(const ctf_route *r)
{
    return r->kind != CTF_ROUTE_ASSET && r->kind != CTF_ROUTE_OPENAPI;
}

/* is_write: the request changes the cluster (a flag check is a POST that does not). */
static bool is_write(const request *rq)
{
    if (rq->route.kind == CTF_ROUTE_FLAG)
        return false;
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
        *ret = ctf_api_send_error(api, conn, rq, 404, "NotFound", "no such route", NULL);
        return false;
    }
    if (is_api(&rq->route)) {
        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_AUTHORIZATION);
        if (!ctf_api_authenticate(api, auth, &rq->who)) {
            const char *h[] = {"WWW-Authenticate", "Bearer realm=\"kopc-ctf\"", NULL};
            *ret = ctf_api_send_error(api, conn, rq, 401, "Unauthorized",
                                      "a valid Authorization: Bearer token is needed", h);
            return false;
        }
    }
    if (err) {
        *ret = ctf_api_send_status(api, conn, rq, &st);
        return false;
    }
    if (ctf_route_is_admin(rq->route.kind) && !rq->who.admin) {
        *ret = ctf_api_send_error(api, conn, rq, 403, "Forbidden",
                                  "only the admin token may use the admin routes", NULL);
        return false;
    }
    if (rq->route.team[0] && !rq->who.admin && strcmp(rq->route.team, rq->who.team) != 0) {
        *ret = ctf_api_send_error(api, conn, rq, 403, "Forbidden", "this token is not this team's",
                                  NULL);
        return false;
    }
    if (rq->route.kind == CTF_ROUTE_FLAG && !rq->who.admin) {
        *ret = ctf_api_send_error(api, conn, rq, 403, "Forbidden",
                                  "only the admin token may check flags", NULL);
        return false;
    }
    if (!ctf_route_allows(&rq->route, rq->method)) {
        const char *h[] = {"Allow", rq->route.allow, NULL};
        *ret = ctf_api_send_error(api, conn, rq, 405, "MethodNotAllowed",
                                  "the route does not take this method", h);
        return false;
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > CTF_API_BODY_MAX) {
        *ret = ctf_api_send_error(api, conn, rq, 413, "PayloadTooLarge",
                                  "the request body is over 65536 bytes", NULL);
        return false;
    }
    return true;
}

/* take_body appends a chunk of the upload, up to the cap (past it, the rest is dropped). */
static void take_body(request *rq, const char *data, size_t n)
{
    if (!rq->too_big && kop_buf_append(&rq->body, data, n) != KOP_OK)
        rq->too_big = true;
}

/* dispatch answers a request whose headers and body are in. */
static enum MHD_Result dispatch(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    kop_status st;
    ctf_put_body put;
    ctf_flag_body flag;
    int retry_s = 1;
    kop_status_clear(&st);

    if (rq->too_big)
        return ctf_api_send_error(api, conn, rq, 413, "PayloadTooLarge",
                                  "the request body is over 65536 bytes", NULL);
    if (rq->route.kind == CTF_ROUTE_ASSET)
        return ctf_api_send_asset(api, conn, rq, rq->route.asset);
    if (rq->route.kind == CTF_ROUTE_OPENAPI)
        return ctf_api_send_asset(api, conn, rq, "openapi.json");
    bool is_put = strcmp(rq->method, "PUT") == 0;
    bool is_flag = rq->route.kind == CTF_ROUTE_FLAG;
    kop_err err = is_put         ? ctf_api_parse_put(rq->body.data, rq->body.len, &put, &st)
                  : is_flag      ? ctf_api_parse_flag(rq->body.data, rq->body.len, &flag, &st)
                  : is_write(rq) ? ctf_api_parse_empty(rq->body.data, rq->body.len, &st)
                                 : KOP_OK;
    if (err)
        return ctf_api_send_status(api, conn, rq, &st);
    if (!ctf_api_synced(api))
        return ctf_api_send_unavailable(api, conn, rq,
                                        "the operator is starting; its caches are not ready");
    /* An admin write without a team (a challenge's bulk stop) spends the admin's own budget. */
    const char *payer = rq->route.team[0] ? rq->route.team : ADMIN_BUCKET;
    if (is_write(rq) && !ctf_api_spend(api, payer, &retry_s)) {
        char after[16];
        snprintf(after, sizeof after, "%d", retry_s);
        const char *h[] = {"Retry-After", after, NULL};
        return ctf_api_send_error(api, conn, rq, 429, "TooManyRequests",
                                  "this team is writing too fast; wait and retry", h);
    }
    switch (rq->route.kind) {
    case CTF_ROUTE_WHOAMI:
        return ctf_api_get_whoami(api, conn, rq);
    case CTF_ROUTE_CHALLENGES:
        return ctf_api_get_challenges(api, conn, rq);
    case CTF_ROUTE_INSTANCES:
        return ctf_api_get_instances(api, conn, rq);
    case CTF_ROUTE_EVENTS:
    case CTF_ROUTE_ADMIN_EVENTS:
        return ctf_api_get_events(api, conn, rq);
    case CTF_ROUTE_ADMIN_INSTANCES:
        return ctf_api_get_admin_instances(api, conn, rq);
    case CTF_ROUTE_ADMIN_SUMMARY:
        return ctf_api_get_admin_summary(api, conn, rq);
    case CTF_ROUTE_ADMIN_STOP:
        return ctf_api_delete_instance(api, conn, rq);
    case CTF_ROUTE_ADMIN_RENEW:
        return ctf_api_renew_instance(api, conn, rq);
    case CTF_ROUTE_ADMIN_STOP_TEAM:
    case CTF_ROUTE_ADMIN_STOP_CHALLENGE:
        return ctf_api_admin_stop_many(api, conn, rq);
    case CTF_ROUTE_RENEW:
        return ctf_api_renew_instance(api, conn, rq);
    case CTF_ROUTE_FLAG: {
        enum MHD_Result r = ctf_api_check_flag(api, conn, rq, flag.flag);
        OPENSSL_cleanse(flag.flag, sizeof flag.flag);
        return r;
    }
    default:
        break;
    }
    if (is_put)
        return ctf_api_put_instance(api, conn, rq, &put);
    if (strcmp(rq->method, "DELETE") == 0)
        return ctf_api_delete_instance(api, conn, rq);
    return ctf_api_get_instance(api, conn, rq);
}

/* on_request is MHD's access handler: called once with the headers, then per body chunk,
 * then once more. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    ctf_api *api = cls;
    request *rq = *con_cls;
    enum MHD_Result ret = MHD_YES;

    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq)))
            return MHD_NO;
        *con_cls = rq;
        kop_buf_init(&rq->body, CTF_API_BODY_MAX);
        rq->method = method;
        rq->started_ms = kop_mono_ms();
        /* RFC 9112: an HTTP/1.1 request without Host is a 400 (libmicrohttpd lets it through). */
        if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
            !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
            return ctf_api_send_error(api, conn, rq, 400, "BadRequest",
                                      "an HTTP/1.1 request needs a Host header", NULL);
        if (!check_headers(api, conn, rq, url, &ret))
            return ret;
        return MHD_YES;
    }
    if (rq->answered) {
        *data_size = 0; /* refused before the body: drop it */
        return MHD_YES;
    }
    if (*data_size) {
        /* A body dripped in byte by byte holds a connection: past the deadline, close it. */
        if (kop_mono_ms() - rq->started_ms > BODY_DEADLINE_MS)
            return MHD_NO;
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
        kop_buf_fini(&rq->body);
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

kop_err ctf_api_new(ctf_operator *op, const ctf_api_opts *opts, ctf_api **out, kop_status *st)
{
    static const char *const labels[] = {"route", "method", "code", NULL};
    static const char *const shared_labels[] = {"challenge", NULL};
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
    if (api->opts.max_streams <= 0)
        api->opts.max_streams = 2048;
    pthread_mutex_init(&api->lock, NULL);
    pthread_rwlock_init(&api->tokens_lock, NULL);
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
    kop_informer_handler h = ctf_api_hub_handler(api), th = ctf_api_token_handler(api);
    kop_informer_handler vc = ctf_api_views_challenge_handler(api),
                         vd = ctf_api_views_definition_handler(api),
                         sd = ctf_api_summary_handler(api);
    if (!err)
        err = ctf_api_views_new(&api->views);
    if (!err)
        err = kop_informer_add_handler(op->challenges, &h);
    if (!err)
        err = kop_informer_add_handler(op->challenges, &vc);
    if (!err)
        err = kop_informer_add_handler(op->definitions, &vd);
    if (!err)
        err = kop_informer_add_handler(op->definitions, &sd);
    if (!err)
        err = ctf_api_events_new(api);
    if (!err)
        err = kop_informer_add_handler(api->secrets, &th);
    if (!err)
        err = kop_metrics_counter(kop_manager_metrics(op->mgr), "ctf_api_requests_total",
                                  "Instance API requests by route, method and HTTP code", labels,
                                  &api->requests);
    if (!err)
        err = kop_metrics_counter(kop_manager_metrics(op->mgr), "ctf_flag_shared_total",
                                  "Wrong flag submissions that were another team's flag, by "
                                  "challenge",
                                  shared_labels, &api->flag_shared);
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
    kop_status why = {0};
    kop_err err = kop_http_parse_bind(api->opts.bind, &ss, NULL, &why);
    if (err) {
        kop_status_setf(st, 0, NULL, "--api-bind: %s", why.message);
        return err;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if ((err = ctf_api_events_start(api)) != KOP_OK) {
        kop_status_setf(st, 0, NULL, "instance API: cannot start the Events cache");
        return err;
    }
    if ((err = ctf_api_streamer_start(api)) != KOP_OK) {
        kop_status_setf(st, 0, NULL, "instance API: cannot start the stream thread");
        return err;
    }
    api->http = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL_THREADS, MHD_OPTION_CONNECTION_LIMIT,
        kop_http_connection_limit(MAX_CONNECTIONS), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)api->opts.per_address, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, api, MHD_OPTION_UNESCAPE_CALLBACK, raw_path,
        NULL, MHD_OPTION_END);
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
    ctf_api_events_free(api); /* its handler wakes streams: gone before they are */
    ctf_api_streamer_stop(api); /* every parked stream resumed, to end */
    if (api->http)
        MHD_stop_daemon(api->http);
    pthread_cond_destroy(&api->changed);
    pthread_mutex_destroy(&api->lock);
    ctf_token_table_free(api->tokens);
    pthread_rwlock_destroy(&api->tokens_lock);
    ctf_api_views_free(api->views);
    free(api->buckets);
    free(api);
}

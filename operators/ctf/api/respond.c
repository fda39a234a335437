/*
 * respond.c - the instance API's answers. Every response goes through
 * ctf_api_send_body, which adds the security headers, queues it, marks the
 * request answered and counts it in ctf_api_requests_total, so no answer
 * can skip a header or the metric. Errors have one shape,
 * {"error":{"code","message"}} (docs/api.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "web/web.h"

/* From the generated web_data.c: the page's files and openapi.json. */

static const char *const SECURITY_HEADERS[][2] = {
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-store"},
};
static const char PAGE_CSP[] =
    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'";

static const char *method_label(const char *m)
{
    static const char *const known[] = {"GET", "HEAD", "PUT", "POST", "DELETE"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0)
            return known[i];
    return "other";
}

void ctf_api_count(ctf_api *api, const request *rq, unsigned code)
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
enum MHD_Result ctf_api_send_body(ctf_api *api, struct MHD_Connection *conn, request *rq,
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
    ctf_api_count(api, rq, code);
    return ret;
}

/* send_json answers v (borrowed). */
enum MHD_Result ctf_api_send_json(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                  unsigned code, const json_t *v, const char *const *headers)
{
    static const char no_memory[] =
        "{\"error\":{\"code\":\"Internal\",\"message\":\"out of memory\"}}";
    char *text = v ? kop_meta_dumps(v, JSON_COMPACT) : NULL;
    if (!text)
        return ctf_api_send_body(api, conn, rq, 500, "application/json", (char *)no_memory,
                                 sizeof no_memory - 1, MHD_RESPMEM_PERSISTENT, NULL);
    return ctf_api_send_body(api, conn, rq, code, "application/json", text, strlen(text),
                             MHD_RESPMEM_MUST_FREE, headers);
}

/* send_error answers {"error":{"code","message"}}. */
enum MHD_Result ctf_api_send_error(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                   unsigned code, const char *reason, const char *message,
                                   const char *const *headers)
{
    json_t *v = json_pack("{s:{s:s, s:s}}", "error", "code", reason, "message", message);
    enum MHD_Result ret = ctf_api_send_json(api, conn, rq, code, v, headers);
    json_decref(v);
    return ret;
}

/* send_status answers the refusal st describes (code and reason set by routes.c and auth.c). */
enum MHD_Result ctf_api_send_status(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                    const kop_status *st)
{
    unsigned code = st->code ? (unsigned)st->code : 400;
    return ctf_api_send_error(api, conn, rq, code, st->reason[0] ? st->reason : "BadRequest",
                              st->message, NULL);
}

/* send_unavailable: 503 with Retry-After. */
enum MHD_Result ctf_api_send_unavailable(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                         const char *message)
{
    const char *h[] = {"Retry-After", RETRY_AFTER_503, NULL};
    return ctf_api_send_error(api, conn, rq, 503, "Unavailable", message, h);
}

/* send_apiserver_error maps a failed write to the apiserver onto our codes. */
enum MHD_Result ctf_api_send_apiserver_error(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                             kop_err err, const kop_status *st)
{
    kop_log(KOP_LOG_WARN, "api write failed", KOP_LOG_STR("route", rq->route.name),
            KOP_LOG_STR("team", rq->route.team), KOP_LOG_ERR(err),
            KOP_LOG_STR("message", st->message));
    if (err == KOP_EINVALID || err == KOP_EBADREQUEST)
        return ctf_api_send_error(api, conn, rq, 400, "BadRequest", st->message, NULL);
    if (err == KOP_ENOTFOUND)
        return ctf_api_send_error(api, conn, rq, 404, "NotFound", "the instance is gone", NULL);
    return ctf_api_send_unavailable(api, conn, rq,
                                    "the cluster did not take the request; retry soon");
}

enum MHD_Result ctf_api_send_asset(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                   const char *name)
{
    static const char *const types[][2] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
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
        return ctf_api_send_body(api, conn, rq, 200, type, (char *)ctf_web_data[i], ctf_web_size[i],
                                 MHD_RESPMEM_PERSISTENT, h);
    }
    return ctf_api_send_error(api, conn, rq, 404, "NotFound", "no such page", NULL);
}

enum MHD_Result ctf_api_no_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    char msg[400];
    snprintf(msg, sizeof msg, "team %s has no instance of %s", rq->route.team, rq->route.challenge);
    return ctf_api_send_error(api, conn, rq, 404, "NotFound", msg, NULL);
}

enum MHD_Result ctf_api_stopping(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    return ctf_api_send_error(
        api, conn, rq, 409, "InstanceStopping",
        "the team's previous instance is still stopping; retry in a few seconds", NULL);
}

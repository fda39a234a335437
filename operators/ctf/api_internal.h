/*
 * api_internal.h - what the instance API's files share (docs/api.md is the
 * contract; docs/architecture.md the map):
 *
 *   api.c         the server: MHD callbacks, the order of checks, dispatch,
 *                 start and stop
 *   api_respond.c answers: JSON bodies, errors, the page's assets, metrics
 *   api_auth.c    who a token belongs to, and each team's write budget
 *   api_read.c    reads from the caches: a team's Instances, the GET routes
 *   api_write.c   PUT (create), POST renew, DELETE (stop)
 *   api_stream.c  the event hub and the event streams
 *   api_flag.c    the flag check (admin only)
 *
 * Locks: api->lock guards the hub, the stream counts and the buckets, and
 * is never held while calling into an informer.
 */
#ifndef CTF_API_INTERNAL_H
#define CTF_API_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <microhttpd.h>

#include "api.h"
#include "api_core.h"

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

/* One "team T changed" note of the hub's ring. */
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
    kop_buf body; /* capped at CTF_API_BODY_MAX */
    bool too_big;
    bool answered; /* a response is queued */
} request;

typedef struct MHD_Connection mhd_conn;

/* ---- api_respond.c: every answer queues its response and counts it ---- */

/* ctf_api_count counts the answer in ctf_api_requests_total (and logs it at -v 1). */
void ctf_api_count(ctf_api *api, const request *rq, unsigned code);
/* ctf_api_send_body queues body (taken when mode is MHD_RESPMEM_MUST_FREE)
 * with code, type and extra headers (pairs, NULL-ended). */
enum MHD_Result ctf_api_send_body(ctf_api *api, mhd_conn *conn, request *rq, unsigned code,
                                  const char *type, char *body, size_t len,
                                  enum MHD_ResponseMemoryMode mode, const char *const *headers);
/* ctf_api_send_json answers v (borrowed). */
enum MHD_Result ctf_api_send_json(ctf_api *api, mhd_conn *conn, request *rq, unsigned code,
                                  const json_t *v, const char *const *headers);
/* ctf_api_send_error answers {"error":{"code","message"}}. */
enum MHD_Result ctf_api_send_error(ctf_api *api, mhd_conn *conn, request *rq, unsigned code,
                                   const char *reason, const char *message,
                                   const char *const *headers);
/* ctf_api_send_status answers the refusal st describes (code and reason from api_core). */
enum MHD_Result ctf_api_send_status(ctf_api *api, mhd_conn *conn, request *rq,
                                    const kop_status *st);
/* ctf_api_send_unavailable: 503 with Retry-After. */
enum MHD_Result ctf_api_send_unavailable(ctf_api *api, mhd_conn *conn, request *rq,
                                         const char *message);
/* ctf_api_send_apiserver_error maps a failed write to the apiserver onto our codes. */
enum MHD_Result ctf_api_send_apiserver_error(ctf_api *api, mhd_conn *conn, request *rq, kop_err err,
                                             const kop_status *st);
/* ctf_api_send_asset answers one of the page's files (or openapi.json). */
enum MHD_Result ctf_api_send_asset(ctf_api *api, mhd_conn *conn, request *rq, const char *name);
/* ctf_api_no_instance: 404, the team has no instance of the route's challenge. */
enum MHD_Result ctf_api_no_instance(ctf_api *api, mhd_conn *conn, request *rq);
/* ctf_api_stopping: 409 InstanceStopping. */
enum MHD_Result ctf_api_stopping(ctf_api *api, mhd_conn *conn, request *rq);

/* ---- api_auth.c ---- */

/*
 * ctf_api_authenticate finds whose token the Authorization header carries,
 * comparing every key in constant time. False when nobody's.
 */
bool ctf_api_authenticate(ctf_api *api, const char *header, principal *who);
/* ctf_api_spend takes one write from team's bucket; false with *retry_s set when empty. */
bool ctf_api_spend(ctf_api *api, const char *team, int *retry_s);

/* ---- api_read.c ---- */

/* ctf_api_synced: every cache the API reads has synced. */
bool ctf_api_synced(ctf_api *api);
/* ctf_api_find_instance returns (owned) the team's Challenge for challenge, or NULL. */
json_t *ctf_api_find_instance(ctf_api *api, const char *team, const char *challenge);
/* ctf_api_definition returns (owned) the ChallengeDefinition named challenge, or NULL. */
json_t *ctf_api_definition(ctf_api *api, const char *challenge);
/* ctf_api_view returns (owned) the Instance of chal, with its definition from the cache. */
json_t *ctf_api_view(ctf_api *api, const json_t *chal);
/* ctf_api_team_views returns (owned) {"team", "instances": [...]} sorted by challenge. */
json_t *ctf_api_team_views(ctf_api *api, const char *team);
enum MHD_Result ctf_api_get_whoami(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_challenges(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_instances(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_instance(ctf_api *api, mhd_conn *conn, request *rq);

/* ---- api_write.c ---- */

enum MHD_Result ctf_api_put_instance(ctf_api *api, mhd_conn *conn, request *rq,
                                     const ctf_put_body *body);
enum MHD_Result ctf_api_delete_instance(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_renew_instance(ctf_api *api, mhd_conn *conn, request *rq);

/* ---- api_flag.c ---- */

/* ctf_api_check_flag answers {"correct": bool}: is submission the route's team's flag? */
enum MHD_Result ctf_api_check_flag(ctf_api *api, mhd_conn *conn, request *rq,
                                   const char *submission);

/* ---- api_stream.c ---- */

/* ctf_api_hub_handler: the Challenge cache's events, noted in the hub (register once). */
kop_informer_handler ctf_api_hub_handler(ctf_api *api);
enum MHD_Result ctf_api_get_events(ctf_api *api, mhd_conn *conn, request *rq);

#endif /* CTF_API_INTERNAL_H */

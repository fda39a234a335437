/*
 * api/internal.h - what the instance API's files share (docs/api.md is the
 * contract; docs/architecture.md the map):
 *
 *   server.c   the server: MHD callbacks, the order of checks, dispatch,
 *              start and stop
 *   routes.c   what a request names (its route) and carries (its body); pure
 *   respond.c  answers: JSON bodies, errors, the page's assets (web/), metrics
 *   auth.c     who a token belongs to (the token table), and each team's
 *              write budget
 *   read.c     reads from the caches: a team's Instances, the GET routes
 *   write.c    PUT (create), POST renew, DELETE (stop)
 *   stream.c   the event streams: parked while idle, woken by changes
 *   flag.c     the flag check (admin only)
 *   events.c   the last Events of each instance (the console's column)
 *   views.c    the Instance view, and the views answered lately, kept
 *              until their Challenge or any definition changes
 *
 * Of the controller layer the API uses only its declared interface,
 * controller/operator.h (the caches, the admission, a team's flag).
 *
 * Locks: api->lock guards the streams and the buckets, and is never held
 * while calling into an informer; MHD's suspend and resume are called with
 * it held (stream.c). api->tokens_lock (a rwlock) guards the token
 * table and is held while rebuilding it from the Secret cache; the view
 * cache has a lock of its own. Neither is taken with api->lock held.
 */
#ifndef CTF_API_INTERNAL_H
#define CTF_API_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <microhttpd.h>

#include "api/api.h"
#include "api/auth.h"
#include "api/routes.h"
#include "api/stream.h"
#include "api/views.h"

#define ADMIN_SECRET     "ctf-api-admin"
#define ADMIN_KEY        "token"
#define TEAMS_SECRET     "ctf-team-tokens"
#define CREATED_BY       "app.kubernetes.io/created-by"
#define MAX_BUCKETS      4096 /* teams with a write budget in use */
#define ADMIN_BUCKET     "(admin)" /* the admin's own write budget and stream count: no team's name */
#define MAX_CONNECTIONS   4096       /* lowered to what the descriptor limit allows */
#define POOL_THREADS      8          /* threads polling the connections */
#define IDLE_TIMEOUT_S    20         /* idle this long: closed (a parked stream is not idle) */
#define BODY_DEADLINE_MS  10000      /* a body still coming this long after the headers: closed */
#define STREAMS_PER_TEAM  8
#define STREAM_LIFETIME_S 3600       /* then a stream ends; its client reconnects */
#define STREAM_OUT_MAX    (4u << 20) /* one stream's pending output */
#define RENEW_ATTEMPTS   3
#define RETRY_AFTER_503  "2"
#define CTF_EVENTS_SHOWN      3    /* an admin view's last Events */
#define CTF_EVENT_MESSAGE_MAX 256  /* bytes of an Event's message kept and shown */
#define SUMMARY_EVERY_MS      1000 /* an admin stream sends its summary at most this often */
#define QUOTA_TEAMS_MAX       200  /* teams at their quota named in a summary (all counted) */

struct team_bucket {
    char team[CTF_TEAM_SIZE];
    ctf_bucket b;
};

typedef struct stream stream;               /* stream.c */
typedef struct ctf_api_views ctf_api_views; /* views.c */

struct ctf_api {
    ctf_operator *op;
    ctf_api_opts opts;
    kop_informer *secrets;
    kop_informer *events; /* Events about Challenges (events.c); not waited for */
    kop_metric *requests; /* ctf_api_requests_total{route,method,code} */
    kop_metric *flag_shared; /* ctf_flag_shared_total{challenge} (flag.c) */
    struct MHD_Daemon *http;
    int port;

    pthread_mutex_t lock;
    pthread_cond_t changed; /* the token Secrets changed, or stopping: the streamer wakes */
    bool stopping;
    struct team_bucket *buckets;
    size_t nbuckets;
    stream *streams, *streams_tail; /* every open event stream, oldest first */
    int nstreams;
    uint64_t token_gen; /* bumped by every change of the token Secrets */

    pthread_rwlock_t tokens_lock; /* guards tokens and tokens_gen (auth.c) */
    ctf_token_table *tokens;      /* the token Secrets' digests; NULL: to be built */
    uint64_t tokens_gen;          /* the token_gen tokens were built at */
    ctf_api_views *views;         /* the Instance views answered lately (views.c) */
    pthread_t streamer;
    bool streamer_running;
};

/* Who a token belongs to. */
typedef struct principal {
    bool admin;
    char team[CTF_TEAM_SIZE]; /* "" for the admin */
    uint64_t token_gen;       /* the token table's generation the token matched at */
} principal;

/* One request, across MHD's calls of the handler. */
typedef struct request {
    ctf_route route;
    bool routed;
    principal who;
    const char *method;
    kop_buf body; /* capped at CTF_API_BODY_MAX */
    bool too_big;
    int64_t started_ms; /* when its headers were in */
    bool answered; /* a response is queued */
} request;

typedef struct MHD_Connection mhd_conn;

/* ---- respond.c: every answer queues its response and counts it ---- */

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
/* ctf_api_send_status answers the refusal st describes (its code and reason are set by
 * routes.c and auth.c). */
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

/* ---- auth.c ---- */

/*
 * ctf_api_authenticate finds whose token the Authorization header carries
 * (its digest's keys in the token table, compared in constant time). False
 * when nobody's. who->token_gen is the generation of the token Secrets the
 * match was made against: what a stream opened with these credentials is
 * stamped with, so a change of the Secrets after this check makes the
 * stream check its token again.
 */
bool ctf_api_authenticate(ctf_api *api, const char *header, principal *who);
/* ctf_api_spend takes one write from team's bucket; false with *retry_s set when empty. */
bool ctf_api_spend(ctf_api *api, const char *team, int *retry_s);

/* ---- views.c ---- */

/* ctf_api_views_new makes an empty view cache (*out owned: ctf_api_views_free). */
KOP_NODISCARD kop_err ctf_api_views_new(ctf_api_views **out);
/* ctf_api_views_free frees v. NULL is ok. */
void ctf_api_views_free(ctf_api_views *v);
/* ctf_api_views_challenge_handler forgets the views a Challenge's change may alter. */
kop_informer_handler ctf_api_views_challenge_handler(ctf_api *api);
/* ctf_api_views_definition_handler forgets every view when a definition changes. */
kop_informer_handler ctf_api_views_definition_handler(ctf_api *api);
/*
 * ctf_api_views_answer returns (owned, NUL-ended) the JSON text of team's
 * Instance of challenge as of now, from the cache of views or rendered from
 * the informers and kept; NULL with *missing set when the team has none,
 * NULL alone when out of memory.
 */
char *ctf_api_views_answer(ctf_api *api, const char *team, const char *challenge, bool *missing);

/* ---- read.c ---- */

/* ctf_api_synced: every cache the API reads has synced. */
bool ctf_api_synced(ctf_api *api);
/* ctf_api_find_instance returns (owned) the team's Challenge for challenge, or NULL. */
json_t *ctf_api_find_instance(ctf_api *api, const char *team, const char *challenge);
/* ctf_api_definition returns (owned) the ChallengeDefinition named challenge, or NULL. */
json_t *ctf_api_definition(ctf_api *api, const char *challenge);
/* ctf_api_view returns (owned) the Instance of chal, with its definition from the cache. */
json_t *ctf_api_view(ctf_api *api, const json_t *chal);
/*
 * ctf_api_team_views returns (owned) {"team", "instances": [...]} sorted by
 * challenge. admin: each Instance also carries "events", its Challenge's
 * last Events (events.c), which only the admin routes show.
 */
json_t *ctf_api_team_views(ctf_api *api, const char *team, bool admin);
enum MHD_Result ctf_api_get_whoami(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_challenges(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_instances(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_get_instance(ctf_api *api, mhd_conn *conn, request *rq);
/*
 * ctf_api_all_views returns (owned) {"instances": [...]}: every team's
 * Instances in the challenge namespace (as ctf_api_team_views gives them),
 * sorted by team, then challenge. NULL when out of memory.
 */
json_t *ctf_api_all_views(ctf_api *api);
/* GET /api/v1/admin/instances: ctf_api_all_views, the operator's limits and the summary. */
enum MHD_Result ctf_api_get_admin_instances(ctf_api *api, mhd_conn *conn, request *rq);
/*
 * ctf_api_admin_summary returns (owned) what the console's panel shows,
 * from the caches and the quotas' ledger: per definition its instances by
 * state and its warm pool (status.pool), the totals against
 * --max-instances, and the teams at --max-instances-per-team (docs/api.md,
 * AdminSummary). NULL when out of memory.
 */
json_t *ctf_api_admin_summary(ctf_api *api);
/* GET /api/v1/admin/summary: ctf_api_admin_summary. */
enum MHD_Result ctf_api_get_admin_summary(ctf_api *api, mhd_conn *conn, request *rq);

/* ---- write.c ---- */

enum MHD_Result ctf_api_put_instance(ctf_api *api, mhd_conn *conn, request *rq,
                                     const ctf_put_body *body);
enum MHD_Result ctf_api_delete_instance(ctf_api *api, mhd_conn *conn, request *rq);
enum MHD_Result ctf_api_renew_instance(ctf_api *api, mhd_conn *conn, request *rq);
/*
 * ctf_api_stop deletes chal (guarded by its uid); *gone (owned, may be
 * NULL) is the Challenge as deleted. A Challenge already gone is KOP_OK.
 * Errors are the apiserver's, explained in st.
 */
KOP_NODISCARD kop_err ctf_api_stop(ctf_api *api, const json_t *chal, json_t **gone,
                                   kop_status *st);
/* DELETE /api/v1/admin/teams/{team}/instances and .../admin/challenges/{challenge}/instances. */
enum MHD_Result ctf_api_admin_stop_many(ctf_api *api, mhd_conn *conn, request *rq);

/* ---- flag.c ---- */

/* ctf_api_check_flag answers {"correct": bool}: is submission the route's team's flag? */
enum MHD_Result ctf_api_check_flag(ctf_api *api, mhd_conn *conn, request *rq,
                                   const char *submission);

/* ---- events.c ---- */

/* ctf_api_events_new makes the Events cache (api->events), its index and handler. */
KOP_NODISCARD kop_err ctf_api_events_new(ctf_api *api);
/* ctf_api_events_start starts it (with the API; it is not one the API waits for). */
KOP_NODISCARD kop_err ctf_api_events_start(ctf_api *api);
/* ctf_api_events_free stops and frees it; idempotent. */
void ctf_api_events_free(ctf_api *api);
/*
 * ctf_api_recent_events returns (owned) the newest CTF_EVENTS_SHOWN Events
 * about the Challenge with uid, newest first, each {type, reason, message,
 * count, lastSeen}; an empty array when none or the cache is not synced.
 */
json_t *ctf_api_recent_events(ctf_api *api, const char *uid);
/*
 * ctf_api_event_slim is the Events cache's transform: it takes obj (an
 * Event) and returns (owned) what is kept of it, {metadata {name,
 * namespace, uid, resourceVersion}, involvedObject {name, uid}, type,
 * reason, message (cut at CTF_EVENT_MESSAGE_MAX bytes on a UTF-8 boundary,
 * then "…"), count, lastSeen}, or NULL (dropped) when it names no object
 * uid. Pure.
 */
json_t *ctf_api_event_slim(json_t *obj, void *user);
/*
 * ctf_api_events_shown returns (owned) what a view shows of cached (an
 * array of slimmed Events, borrowed): the newest CTF_EVENTS_SHOWN, by
 * lastSeen then name, newest first, each {type, reason, message, count,
 * lastSeen}. Pure; an empty array when out of memory.
 */
json_t *ctf_api_events_shown(const json_t *cached);

/* ---- stream.c ---- */

/*
 * ctf_api_note_admin wakes the admin streams: team's Instances changed in
 * what only an admin sees (its Events), or with team NULL, the summary may
 * have (a definition's pool).
 */
void ctf_api_note_admin(ctf_api *api, const char *team);
/* ctf_api_admin_streams tells whether any admin stream is open. */
bool ctf_api_admin_streams(ctf_api *api);
/* ctf_api_summary_handler: the definitions' events wake the admin streams' summary. */
kop_informer_handler ctf_api_summary_handler(ctf_api *api);

/* ctf_api_hub_handler: the Challenge cache's events wake the team's streams (register once). */
kop_informer_handler ctf_api_hub_handler(ctf_api *api);
/* ctf_api_token_handler: the token Secrets' events make every stream check its token. */
kop_informer_handler ctf_api_token_handler(ctf_api *api);
/* ctf_api_streamer_start runs the thread that wakes parked streams when a timer is due. */
KOP_NODISCARD kop_err ctf_api_streamer_start(ctf_api *api);
/* ctf_api_streamer_stop ends every stream (stopping) and joins the thread; idempotent. */
void ctf_api_streamer_stop(ctf_api *api);
enum MHD_Result ctf_api_get_events(ctf_api *api, mhd_conn *conn, request *rq);

#endif /* CTF_API_INTERNAL_H */

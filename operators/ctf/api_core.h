/*
 * api_core.h - the instance API's pure part: routes, request bodies, the
 * views a team sees, token comparison and the per-team write budget. No
 * network and no cluster, so unit tests and fuzz targets call it directly;
 * api.c puts it on an HTTP server. The contract is docs/api.md.
 */
#ifndef CTF_API_CORE_H
#define CTF_API_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <kop/kop.h>

#define CTF_API_BODY_MAX  (64 * 1024) /* request bodies; more is 413 */
#define CTF_API_TOKEN_MAX 512         /* bearer tokens; longer ones match nothing */
#define CTF_TEAM_SIZE     (KOP_META_DNS1123_LABEL_MAX + 1)
#define CTF_CHALLENGE_SIZE (KOP_META_DNS1123_SUBDOMAIN_MAX + 1)

/* What a request path names. */
typedef enum ctf_route_kind {
    CTF_ROUTE_ASSET = 1,  /* the page: "/", "/app.js", ... (ctf_route.asset) */
    CTF_ROUTE_OPENAPI,    /* /api/openapi.json */
    CTF_ROUTE_WHOAMI,     /* /api/v1/whoami */
    CTF_ROUTE_CHALLENGES, /* /api/v1/challenges */
    CTF_ROUTE_INSTANCES,  /* /api/v1/teams/{team}/instances */
    CTF_ROUTE_INSTANCE,   /* /api/v1/teams/{team}/instances/{challenge} */
    CTF_ROUTE_RENEW,      /* /api/v1/teams/{team}/instances/{challenge}/renew */
    CTF_ROUTE_EVENTS,     /* /api/v1/teams/{team}/events */
    CTF_ROUTE_FLAG,       /* /api/v1/teams/{team}/instances/{challenge}/flag (admin) */
} ctf_route_kind;

/* ctf_route: a parsed path. Plain value type. */
typedef struct ctf_route {
    ctf_route_kind kind;
    const char *name;  /* the route's name for metrics and logs (static) */
    const char *allow; /* the methods it takes, for 405's Allow (static) */
    char team[CTF_TEAM_SIZE];           /* "" when the route has none */
    char challenge[CTF_CHALLENGE_SIZE]; /* "" when the route has none */
    char asset[32];                     /* CTF_ROUTE_ASSET: "index.html", "app.js", ... */
} ctf_route;

/*
 * ctf_route_parse reads a request path as it came on the wire (not
 * percent-decoded; the query string already cut off). Returns KOP_OK,
 * KOP_ENOTFOUND for a path that is no route, or KOP_EINVAL (st says which
 * part) when a route's team or challenge is not a valid name: a team is a
 * DNS-1123 label, a challenge a DNS-1123 subdomain, so neither ever needs
 * escaping and any '%', "..", or other byte is refused rather than decoded.
 */
KOP_NODISCARD kop_err ctf_route_parse(const char *path, ctf_route *out, kop_status *st);

/* ctf_route_allows tells whether method is one r->allow lists (HEAD counts as GET). */
bool ctf_route_allows(const ctf_route *r, const char *method);

/* ctf_put_body: what a PUT may carry. expires_at is "" when not given. */
typedef struct ctf_put_body {
    char expires_at[40];
} ctf_put_body;

/*
 * ctf_api_parse_put reads a PUT body (len bytes, not NUL-terminated): empty
 * or blank, "{}", or {"expiresAt": "<RFC 3339>"}. Any other field, a wrong
 * type, malformed JSON or a body over CTF_API_BODY_MAX is KOP_EINVAL with a
 * one-sentence message in st.
 */
KOP_NODISCARD kop_err ctf_api_parse_put(const char *body, size_t len, ctf_put_body *out,
                                        kop_status *st);

/* CTF_FLAG_MAX: the longest flag a check takes (a longer one is 400). */
#define CTF_FLAG_MAX 1024

/* ctf_flag_body: what a flag check carries, {"flag": "..."}. */
typedef struct ctf_flag_body {
    char flag[CTF_FLAG_MAX + 1];
} ctf_flag_body;

/*
 * ctf_api_parse_flag reads a flag check's body: exactly {"flag": "<1 to
 * CTF_FLAG_MAX bytes>"}. Anything else is KOP_EINVAL with a one-sentence
 * message in st.
 */
KOP_NODISCARD kop_err ctf_api_parse_flag(const char *body, size_t len, ctf_flag_body *out,
                                         kop_status *st);

/* ctf_api_parse_empty reads a body that may only be empty, blank or "{}". */
KOP_NODISCARD kop_err ctf_api_parse_empty(const char *body, size_t len, kop_status *st);

/* The states a page shows (docs/api.md). */
#define CTF_STATE_STOPPED  "Stopped"
#define CTF_STATE_STARTING "Starting"
#define CTF_STATE_RUNNING  "Running"
#define CTF_STATE_ERROR    "Error"
#define CTF_STATE_STOPPING "Stopping"

/* ctf_api_state derives a Challenge's page state (static string). */
const char *ctf_api_state(const json_t *chal);

/*
 * ctf_api_instance_view returns (owned) the Instance a team sees of chal
 * at time now. def is the Challenge's ChallengeDefinition or NULL when it
 * is gone (the expiry then comes from status alone). NULL when out of memory.
 */
json_t *ctf_api_instance_view(const json_t *chal, const json_t *def, time_t now);

/*
 * ctf_api_stopped_view returns (owned) the Instance of a team's challenge
 * that has none: state Stopped, every other field null or empty.
 */
json_t *ctf_api_stopped_view(const char *team, const char *challenge);

/*
 * ctf_api_view_key returns (owned, free()) what of a view an event stream
 * compares to decide whether it changed: the view without secondsLeft.
 */
char *ctf_api_view_key(const json_t *view);

/* ctf_api_challenge_view returns (owned) the public fields of a definition. */
json_t *ctf_api_challenge_view(const json_t *def);

/*
 * ctf_api_bearer extracts the token of an "Authorization: Bearer <token>"
 * header value (NULL: no header) into out (CTF_API_TOKEN_MAX + 1 bytes).
 * False when the header is missing, of another scheme, or the token empty,
 * too long or holding spaces or control bytes.
 */
bool ctf_api_bearer(const char *header, char *out, size_t size);

/*
 * ctf_api_token_equal compares a presented token with an expected one in
 * time independent of their contents and lengths (both are hashed with
 * SHA-256, then compared with CRYPTO_memcmp). An empty expected token
 * equals nothing.
 */
bool ctf_api_token_equal(const char *presented, const unsigned char *expected, size_t expected_len);

/*
 * ctf_token_table: the API's tokens (the admin's and every team's), kept
 * as SHA-256 digests, built once per change of the token Secrets so that a
 * request hashes the token it presents once and compares digests only.
 * Opaque; not thread-safe (the API guards it). The raw tokens are not kept.
 */
typedef struct ctf_token_table ctf_token_table;

/*
 * ctf_token_table_build decodes the admin Secret's data.token and every
 * data[team] of the teams Secret (either Secret NULL: none) into *out
 * (owned: ctf_token_table_free). A key that is not a team name, or a value
 * that is empty or not base64, is kept as a key that matches nothing, so
 * every request compares the same number of digests. KOP_ENOMEM only.
 */
KOP_NODISCARD kop_err ctf_token_table_build(const json_t *admin_secret, const json_t *teams_secret,
                                            ctf_token_table **out);

/*
 * ctf_token_table_match finds whose token presented is, comparing its
 * digest with every key in constant time (whichever matches, all are
 * compared). Sets *admin, or the team into team (CTF_TEAM_SIZE bytes; the
 * admin wins when a team holds the same token). False when nobody's.
 */
bool ctf_token_table_match(const ctf_token_table *t, const char *presented, bool *admin,
                           char *team);

/* ctf_token_table_free cleanses and frees t. NULL is ok. */
void ctf_token_table_free(ctf_token_table *t);

/*
 * ctf_bucket: one team's write budget, a token bucket of `burst` writes
 * refilled at `per_minute`. Plain value type; zero it to start full.
 */
typedef struct ctf_bucket {
    double tokens;
    int64_t last_ms; /* 0: never used (full) */
} ctf_bucket;

/*
 * ctf_bucket_take spends one write at now_ms (a monotonic clock). True
 * when allowed; else false and *retry_after_s (>= 1) says when the next
 * write will be.
 */
bool ctf_bucket_take(ctf_bucket *b, int burst, int per_minute, int64_t now_ms,
                     int *retry_after_s);

/* ctf_bucket_full tells whether b has refilled to burst at now_ms (it can be forgotten). */
bool ctf_bucket_full(const ctf_bucket *b, int burst, int per_minute, int64_t now_ms);

/*
 * ctf_sse_event formats one Server-Sent Event, "event: NAME\ndata: JSON\n\n",
 * into *out (owned, free()); the JSON is compact, on one line. KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_sse_event(const char *name, const json_t *data, char **out,
                                    size_t *len);

#endif /* CTF_API_CORE_H */

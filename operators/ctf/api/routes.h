/*
 * api/routes.h - what a request to the instance API names and carries
 * (routes.c): routes parsed from paths, and request bodies. Pure, so unit
 * tests and fuzz targets call it directly; server.c dispatches on it. The
 * contract is docs/api.md.
 */
#ifndef CTF_API_ROUTES_H
#define CTF_API_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <kop/err.h>
#include <kop/meta.h>

#define CTF_API_BODY_MAX  (64 * 1024) /* request bodies; more is 413 */
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
    /* The admin console's routes, /api/v1/admin/... (admin token only): */
    CTF_ROUTE_ADMIN_INSTANCES,      /* /api/v1/admin/instances: every instance */
    CTF_ROUTE_ADMIN_EVENTS,         /* /api/v1/admin/events: every instance's changes */
    CTF_ROUTE_ADMIN_STOP,           /* /api/v1/admin/teams/{team}/instances/{challenge} */
    CTF_ROUTE_ADMIN_RENEW,          /* /api/v1/admin/teams/{team}/instances/{challenge}/renew */
    CTF_ROUTE_ADMIN_STOP_TEAM,      /* /api/v1/admin/teams/{team}/instances */
    CTF_ROUTE_ADMIN_STOP_CHALLENGE, /* /api/v1/admin/challenges/{challenge}/instances */
    CTF_ROUTE_ADMIN_SUMMARY,        /* /api/v1/admin/summary: the console's panel */
} ctf_route_kind;

/* ctf_route_is_admin tells whether a route is one of /api/v1/admin/ (admin token only). */
#define ctf_route_is_admin(kind) ((kind) >= CTF_ROUTE_ADMIN_INSTANCES)

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

/* ctf_api_refusal: what the API answers for a refusal (code, reason, message: borrowed). */
typedef struct ctf_api_refusal {
    int code;
    const char *reason, *message;
} ctf_api_refusal;

/*
 * ctf_api_webhook_refusal reads a create the apiserver refused (err, st)
 * for the operator's validating webhook's refusal (--webhook-bind: the
 * ledger of a replica saw the quota full, or the definition gone, a moment
 * after the API checked) and fills *out with the answer the API gives when
 * it refuses itself: 409 QuotaExceeded or 404 NotFound, in the operator's
 * words (what follows the apiserver's "denied the request: "; borrowed from
 * st). false when it is no such refusal.
 */
bool ctf_api_webhook_refusal(kop_err err, const kop_status *st, ctf_api_refusal *out);

#endif /* CTF_API_ROUTES_H */

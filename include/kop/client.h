/*
 * kop/client.h - the REST client: every libkop call to the apiserver.
 *
 * Objects are JSON documents (jansson json_t), never lossy C structs, so
 * fields the caller does not know survive a read-modify-write. Resources are
 * named by group/version/resource (kop_resource), or found by kind through
 * discovery (kop_client_resource_for_kind, cached, refreshed on a miss).
 *
 * Every call returns a kop_err and, on an API failure, fills the caller's
 * kop_status with the apiserver's Status (code, reason, message); st may be
 * NULL. Objects returned through json_t **out are new references the caller
 * owns and releases with json_decref.
 *
 * A kop_client is thread-safe: many threads may issue requests on one client
 * at once; connections are kept warm in a pool of handles and reused (HTTP/1.1
 * keep-alive). Safe verbs (GET, LIST) are retried with backoff on 429 and 5xx,
 * honouring Retry-After. TLS is always verified unless the kubeconfig itself
 * says insecure-skip-tls-verify: against the kubeconfig's CA alone when it
 * gives one (never the system's store besides), the system's roots when it
 * gives none, and against tls-server-name when it sets one, as kubectl does.
 */
#ifndef KOP_CLIENT_H
#define KOP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

typedef struct kop_config kop_config;
typedef struct kop_client kop_client;
typedef struct kop_watch kop_watch;

/*
 * kop_resource names a resource type. All strings are borrowed for the
 * duration of a call. group is "" for the core API.
 */
typedef struct kop_resource {
    const char *group;    /* "" for core (/api/v1), e.g. "apps" */
    const char *version;  /* e.g. "v1" */
    const char *resource; /* lower-case plural, e.g. "configmaps" */
    const char *kind;     /* e.g. "ConfigMap"; used in error text and apply */
    bool namespaced;
} kop_resource;

/* Watch event types, as the apiserver names them. */
typedef enum kop_watch_type {
    KOP_WATCH_ADDED = 1,
    KOP_WATCH_MODIFIED,
    KOP_WATCH_DELETED,
    KOP_WATCH_BOOKMARK,
    KOP_WATCH_ERROR, /* object is a metav1.Status */
} kop_watch_type;

/* kop_watch_event: one event; object is owned by the event. */
typedef struct kop_watch_event {
    kop_watch_type type;
    json_t *object;
} kop_watch_event;

/* ---- client ------------------------------------------------------------ */

/* Defaults applied to zero fields of kop_client_opts. */
#define KOP_CLIENT_DEFAULT_TIMEOUT_MS  30000
#define KOP_CLIENT_DEFAULT_MAX_BODY    (128u << 20) /* response bodies */
#define KOP_CLIENT_DEFAULT_MAX_LINE    (16u << 20)  /* one watch event */
#define KOP_CLIENT_DEFAULT_MAX_RETRIES 5

/*
 * kop_client_opts: zero means the default for every field.
 * Client-side rate limiting is off unless qps > 0, as in controller-runtime:
 * the apiserver's priority and fairness is the real limiter.
 */
typedef struct kop_client_opts {
    double qps;             /* sustained requests per second; <= 0: no limit */
    int burst;              /* bucket size; default max(1, qps) */
    long timeout_ms;        /* whole request, not watches; default 30 s */
    size_t max_body;        /* response body cap; default 128 MiB */
    size_t max_watch_line;  /* one watch event cap; default 16 MiB */
    int max_retries;        /* retries of a retryable failure; default 5, < 0: none */
    const char *user_agent; /* default "kopc/VERSION (libkop)" */
    /* Called after every HTTP attempt (retries included) with the method and
     * the status code, 0 when no response arrived: the manager counts
     * rest_client_requests_total with it. Must be quick and thread-safe. */
    void (*on_response)(const char *method, int code, void *user);
    void *on_response_user;
} kop_client_opts;

/*
 * kop_client_new makes a client for cfg, which is borrowed and must outlive
 * the client. opts may be NULL. *out is owned by the caller: kop_client_free.
 */
KOP_API KOP_NODISCARD kop_err kop_client_new(kop_config *cfg, const kop_client_opts *opts,
                                             kop_client **out, kop_status *st);

/* kop_client_free closes every pooled connection and frees c. NULL is ok. */
KOP_API void kop_client_free(kop_client *c);

/* kop_client_config returns the configuration c was made with (borrowed). */
KOP_API kop_config *kop_client_config(const kop_client *c);

/* ---- discovery --------------------------------------------------------- */

/*
 * kop_client_resource_for_kind finds the resource serving kind in
 * api_version ("v1", "apps/v1", "ctf.kopc.io/v1alpha1") through discovery.
 * The mapping is cached; a miss refreshes that group version once, so a CRD
 * installed after the first lookup is found. The strings in *out are owned
 * by c and stay valid until kop_client_free.
 */
KOP_API KOP_NODISCARD kop_err kop_client_resource_for_kind(kop_client *c, const char *api_version,
                                                           const char *kind, kop_resource *out,
                                                           kop_status *st);

/*
 * kop_get_path GETs an absolute path ("/version", "/readyz") and returns its
 * body parsed as JSON in *out (owned), or as a JSON string when the body is
 * not JSON.
 */
KOP_API KOP_NODISCARD kop_err kop_get_path(kop_client *c, const char *path, json_t **out,
                                           kop_status *st);

/* ---- reads ------------------------------------------------------------- */

/* kop_get reads one object into *out (owned). ns is ignored if cluster-scoped. */
KOP_API KOP_NODISCARD kop_err kop_get(kop_client *c, const kop_resource *r, const char *ns,
                                      const char *name, json_t **out, kop_status *st);

typedef struct kop_list_opts {
    const char *label_selector;   /* e.g. "app=ctf,tier in (a,b)" */
    const char *field_selector;   /* e.g. "metadata.name=x" */
    long limit;                   /* page size; 0: the server's choice (all) */
    const char *continue_token;   /* from a previous page's metadata.continue */
    const char *resource_version; /* "0": any cached version; NULL: most recent */
    const char *resource_version_match; /* "NotOlderThan" or "Exact" */
} kop_list_opts;

/*
 * kop_list reads one page of a list into *out (owned): the List object with
 * items[] and metadata.resourceVersion / metadata.continue. ns NULL or ""
 * lists all namespaces. A continue token that expired gives KOP_EEXPIRED.
 */
KOP_API KOP_NODISCARD kop_err kop_list(kop_client *c, const kop_resource *r, const char *ns,
                                       const kop_list_opts *opts, json_t **out, kop_status *st);

/*
 * kop_list_page_fn is called by kop_list_each with each page (borrowed: take
 * a reference with json_incref to keep anything). A non-zero return stops
 * the iteration and is returned by kop_list_each.
 */
typedef kop_err (*kop_list_page_fn)(json_t *page, void *user);

/*
 * kop_list_req: what kop_list_each lists. resource, namespace and user are
 * borrowed for the call; the zero value of every other field is the
 * default (opts zero: every object, 500 per page).
 */
typedef struct kop_list_req {
    const kop_resource *resource; /* required */
    const char *namespace;        /* NULL or "": all namespaces */
    kop_list_opts opts;           /* selectors, page size (0: 500), start version */
    kop_list_page_fn fn;          /* required: called with each page, in order */
    void *user;                   /* passed to fn */
} kop_list_req;

/*
 * kop_list_each lists every page (req->opts.limit per page, 500 if 0),
 * calling req->fn with each in order, so that a large list never has to be
 * held whole. *resource_version_out, if not NULL, receives the list's
 * resourceVersion (malloc'd; the caller frees it): the point to start a
 * watch from. KOP_EINVAL (explained in st) without a resource or fn.
 *
 *   kop_list_each(c, &(kop_list_req){.resource = &PODS, .namespace = "ctf",
 *       .opts = {.label_selector = "app=web"}, .fn = count_page, .user = &n}, NULL, &st);
 */
KOP_API KOP_NODISCARD kop_err kop_list_each(kop_client *c, const kop_list_req *req,
                                            char **resource_version_out, kop_status *st);

/* ---- writes ------------------------------------------------------------ */

typedef struct kop_write_opts {
    const char *subresource;   /* e.g. "status"; NULL for the object itself */
    const char *field_manager; /* required for server-side apply */
    bool force;                /* server-side apply: take conflicting fields */
    bool dry_run;              /* dryRun=All: validate and admit, persist nothing */
} kop_write_opts;

typedef enum kop_patch_type {
    KOP_PATCH_MERGE = 1, /* application/merge-patch+json (RFC 7386) */
    KOP_PATCH_JSON,      /* application/json-patch+json (RFC 6902): patch is an array */
    KOP_PATCH_STRATEGIC, /* application/strategic-merge-patch+json: built-in types only */
    KOP_PATCH_APPLY,     /* server-side apply: patch is the full intent; needs field_manager */
} kop_patch_type;

/* kop_target names one object: its resource, its namespace (ignored for a
 * cluster-scoped resource) and its name. All borrowed. */
typedef struct kop_target {
    const kop_resource *resource;
    const char *namespace;
    const char *name;
} kop_target;

/*
 * What kop_create_object and kop_update_object send. object is borrowed for
 * the call and sent whole. target.namespace NULL (or "") takes the
 * object's metadata.namespace, as kubectl does; target.name NULL takes its
 * metadata.name, and a target name that is not the object's metadata.name
 * is KOP_EINVAL (the body, not the URL, names a created object).
 */
typedef struct kop_write_req {
    kop_target target;   /* .resource required; namespace and name may be NULL */
    json_t *object;      /* borrowed; required */
    kop_write_opts opts; /* subresource (update only), field manager, dry run */
} kop_write_req;

/*
 * kop_create_object creates req->object (POST). *out, if out is not NULL,
 * receives the object as stored (owned). Writes are never retried except on
 * 429, which the apiserver answers before acting. An object with only
 * metadata.generateName gets its name from the server.
 *
 *   kop_create_object(c, &(kop_write_req){.target = {&CONFIGMAPS, "default", NULL},
 *       .object = cm}, &stored, &st);
 */
KOP_API KOP_NODISCARD kop_err kop_create_object(kop_client *c, const kop_write_req *req,
                                                json_t **out, kop_status *st);

/*
 * kop_update_object replaces one object (PUT), named by target.name or the
 * object's metadata.name. If the object carries metadata.resourceVersion, a
 * newer version on the server gives KOP_ECONFLICT. opts.subresource
 * "status" updates the status only. *out (optional, owned) as for create.
 */
KOP_API KOP_NODISCARD kop_err kop_update_object(kop_client *c, const kop_write_req *req,
                                                json_t **out, kop_status *st);

/* What kop_patch_object sends. */
typedef struct kop_patch_req {
    kop_target target;
    kop_patch_type type;
    json_t *patch;       /* borrowed; an array for KOP_PATCH_JSON, else an object */
    kop_write_opts opts; /* subresource, field manager (needed by apply), force, dry run */
} kop_patch_req;

/*
 * kop_patch_object patches one object; fields the patch does not name are
 * kept. *out, if out is not NULL, receives the object as stored (owned).
 * KOP_EINVAL (explained in st) for a patch of the wrong shape, an apply
 * without a field manager, or no target.
 *
 *   kop_patch_object(c, &(kop_patch_req){
 *       .target = {&CONFIGMAPS, "default", "pass"}, .type = KOP_PATCH_APPLY,
 *       .patch = cm, .opts = {.field_manager = "my-operator", .force = true}}, NULL, &st);
 */
KOP_API KOP_NODISCARD kop_err kop_patch_object(kop_client *c, const kop_patch_req *req,
                                               json_t **out, kop_status *st);

/*
 * kop_patch_status merge-patches obj's status subresource to status: only
 * the fields given change, and no resourceVersion is sent, so the write
 * never conflicts with another writer of other fields. obj (borrowed) names
 * the object; *out (optional, owned) receives the stored object.
 */
KOP_API KOP_NODISCARD kop_err kop_patch_status(kop_client *c, const kop_resource *r,
                                               const json_t *obj, json_t *status, json_t **out,
                                               kop_status *st);

typedef enum kop_propagation {
    KOP_PROPAGATION_DEFAULT = 0, /* the resource's default policy */
    KOP_PROPAGATION_BACKGROUND,
    KOP_PROPAGATION_FOREGROUND,
    KOP_PROPAGATION_ORPHAN,
} kop_propagation;

typedef struct kop_delete_opts {
    kop_propagation propagation;
    const char *precondition_uid;              /* refuse unless the UID matches */
    const char *precondition_resource_version; /* refuse unless the version matches */
    long grace_period_seconds;                 /* 0 means "not set"; use -1 for "now" */
    bool dry_run;
} kop_delete_opts;

/* What kop_delete_object deletes, and how. */
typedef struct kop_delete_req {
    kop_target target;
    kop_delete_opts opts;
} kop_delete_req;

/*
 * kop_delete_object deletes one object. A failed precondition gives
 * KOP_ECONFLICT; a missing object KOP_ENOTFOUND. *out, if out is not NULL,
 * receives what the server returned (the object being finalized, or a
 * Status).
 *
 *   kop_delete_object(c, &(kop_delete_req){.target = {&PODS, "default", "p"},
 *       .opts = {.precondition_resource_version = rv}}, NULL, &st);
 */
KOP_API KOP_NODISCARD kop_err kop_delete_object(kop_client *c, const kop_delete_req *req,
                                                json_t **out, kop_status *st);

/* ---- watch ------------------------------------------------------------- */

typedef struct kop_watch_opts {
    const char *resource_version; /* start after this version; NULL: from now */
    const char *label_selector;
    const char *field_selector;
    long timeout_seconds;         /* server ends the stream after this; 0: server default */
    bool allow_bookmarks;         /* ask for BOOKMARK events */
    /*
     * Objects arrive without metadata.managedFields: the member is cut from
     * each event's text before it is parsed, which costs far less than
     * parsing it and dropping it after (informers with the default
     * transform ask for this).
     */
    bool drop_managed_fields;
} kop_watch_opts;

/*
 * kop_watch_open starts a watch stream. *out is owned: kop_watch_free.
 * Events are read with kop_watch_next on one thread at a time.
 */
KOP_API KOP_NODISCARD kop_err kop_watch_open(kop_client *c, const kop_resource *r, const char *ns,
                                             const kop_watch_opts *opts, kop_watch **out,
                                             kop_status *st);

/*
 * kop_watch_next blocks for the next event and fills *ev (the caller calls
 * kop_watch_event_fini). Returns KOP_EEOF when the server ended the stream
 * (a timeout: reconnect from the last resourceVersion seen), KOP_ECANCELED
 * after kop_watch_cancel, KOP_EGONE when the resourceVersion is too old
 * (relist; the apiserver's reason may be Gone or Expired), and other errors for a broken stream. ERROR events are returned
 * as errors with the Status in st, never as events; after any non-OK return
 * the stream is finished.
 */
KOP_API KOP_NODISCARD kop_err kop_watch_next(kop_watch *w, kop_watch_event *ev, kop_status *st);

/*
 * kop_watch_cancel makes a blocked or later kop_watch_next return
 * KOP_ECANCELED promptly. Safe to call from any thread and from a signal
 * handler's deferred work; the watch must still be freed by its owner.
 */
KOP_API void kop_watch_cancel(kop_watch *w);

/* kop_watch_free closes the stream. NULL is ok. */
KOP_API void kop_watch_free(kop_watch *w);

/* kop_watch_event_fini releases ev's object. ev may be NULL. */
KOP_API void kop_watch_event_fini(kop_watch_event *ev);

/* kop_watch_type_name returns "ADDED", "MODIFIED", ... or "UNKNOWN". */
KOP_API const char *kop_watch_type_name(kop_watch_type type);

KOP_END_DECLS

#endif /* KOP_CLIENT_H */

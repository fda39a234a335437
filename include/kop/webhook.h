/*
 * kop/webhook.h - the webhook server: admission (validating and mutating)
 * and CRD conversion, as controller-runtime's webhook server serves them.
 *
 * The kube-apiserver calls webhooks over HTTPS. The server listens on its
 * own port (not the metrics one), reads its certificate and key from files
 * and notices when they change: a cert-manager Secret mounted as a volume
 * is updated in place (the kubelet swaps a symlink), and the next TLS
 * handshake presents the new certificate, without a restart. A reload that
 * finds a certificate and key that do not match keeps the old pair and
 * tries again later (the files may be half written).
 *
 * Two kinds of handler:
 *   - admission (kop_webhook_admission): an AdmissionReview v1 POSTed to
 *     the handler's path. The handler allows (KOP_OK) or denies (an error,
 *     with the code, reason and message kubectl prints), may add warnings,
 *     and, when registered as mutating, changes req->object: the server
 *     answers the difference as a JSON patch.
 *   - conversion (kop_webhook_converter): a ConversionReview v1 POSTed to
 *     the conversion path ("/convert"), one converter per CRD (group and
 *     kind), called for each object of the request. One failure fails the
 *     whole review (status Failure with the converter's message), as the
 *     apiserver requires.
 *
 * Limits: request bodies are capped (max_body, 413 past it), reading a
 * request has a time limit (a 408, or the connection closed when the body
 * is still coming), connections are capped (kop/http.h) and idle ones
 * closed. A body that is not a review is a 400, never a crash.
 *
 * Metrics, with controller-runtime's names, the label webhook being the path:
 * controller_runtime_webhook_requests_total{webhook,code},
 * controller_runtime_webhook_latency_seconds{webhook} (histogram) and
 * controller_runtime_webhook_requests_in_flight{webhook}.
 *
 * Threads: handlers run on the server's threads (opts.threads of them), any
 * number at once; what they read must be thread-safe (informer caches are).
 * Register every handler before the server starts.
 */
#ifndef KOP_WEBHOOK_H
#define KOP_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/common.h"
#include "kop/err.h"
#include "kop/manager.h"
#include "kop/metrics.h"

KOP_BEGIN_DECLS

typedef struct kop_webhook_server kop_webhook_server;

#define KOP_WEBHOOK_DEFAULT_BIND      ":9443"
#define KOP_WEBHOOK_DEFAULT_CERT_DIR  "/tmp/k8s-webhook-server/serving-certs"
#define KOP_WEBHOOK_DEFAULT_MAX_BODY  (7u << 20) /* controller-runtime's 7 MiB */
#define KOP_WEBHOOK_MAX_HANDLERS      32         /* admission paths and converters, each */
#define KOP_WEBHOOK_PATH_MAX          256

/*
 * kop_webhook_server_opts: zero fields take the defaults. Strings are
 * copied.
 */
typedef struct kop_webhook_server_opts {
    const char *bind;        /* "HOST:PORT" (kop_http_parse_bind); default ":9443" */
    const char *cert_dir;    /* holds tls.crt and tls.key; default KOP_WEBHOOK_DEFAULT_CERT_DIR */
    const char *cert_file;   /* PEM chain, leaf first; default cert_dir/tls.crt */
    const char *key_file;    /* PEM private key; default cert_dir/tls.key */
    const char *conversion_path; /* default "/convert" */
    size_t max_body;         /* request body cap; default 7 MiB */
    long request_timeout_ms; /* to read a whole request; default 30 s */
    unsigned max_connections;    /* default 256, fewer if descriptors are short */
    unsigned threads;            /* handler threads; default 2 */
    long cert_check_ms;      /* how often a handshake looks at the files; default 1 s */
    kop_metrics *metrics;    /* borrowed; NULL: no metrics */
} kop_webhook_server_opts;

/* ---- admission ----------------------------------------------------------- */

/*
 * kop_admission_request is what a handler sees of an AdmissionReview's
 * request; every field is read-only except object. Strings are "" when the
 * review does not have them, never NULL; they live as long as the call.
 */
typedef struct kop_admission_request {
    const char *uid;
    const char *operation;  /* CREATE, UPDATE, DELETE or CONNECT */
    const char *group, *version, *kind; /* request.kind */
    const char *resource, *subresource;
    const char *namespace, *name;
    const char *username;   /* request.userInfo.username */
    bool dry_run;
    /* request.object, a copy: a mutating handler changes it and the change
     * is the patch; a validating handler's changes are ignored. NULL on
     * DELETE. Borrowed. */
    json_t *object;
    const json_t *old_object; /* request.oldObject (UPDATE, DELETE); else NULL */
    const json_t *request;    /* the whole request, for any other field */
} kop_admission_request;

#define KOP_ADMISSION_MAX_WARNINGS 8
#define KOP_ADMISSION_WARNING_MAX  256

/*
 * kop_admission_response is the handler's answer beyond allow or deny,
 * caller storage zeroed by the server before the call.
 */
typedef struct kop_admission_response {
    /* A denial: code (0: from the error, else 403), reason ("": from the
     * code) and the message kubectl prints after "denied the request: ". */
    kop_status status;
    int nwarnings;
    char warnings[KOP_ADMISSION_MAX_WARNINGS][KOP_ADMISSION_WARNING_MAX];
} kop_admission_response;

/*
 * kop_admission_fn decides on one request: KOP_OK allows it, an error
 * denies it with resp->status (an empty message becomes kop_strerror(err)).
 */
typedef kop_err (*kop_admission_fn)(kop_admission_request *req, kop_admission_response *resp,
                                    void *user);

typedef struct kop_webhook_admission {
    const char *path;  /* "/validate-flights-com-v1-flightticket"; copied */
    bool mutating;     /* answer changes to req->object as a JSON patch */
    kop_admission_fn handle;
    void *user;        /* borrowed for the server's life */
} kop_webhook_admission;

/*
 * kop_admission_deny denies with 403 Forbidden and a printf-style message;
 * returns KOP_EFORBIDDEN, for `return kop_admission_deny(resp, ...)`.
 */
KOP_API kop_err kop_admission_deny(kop_admission_response *resp, const char *fmt, ...)
    KOP_PRINTF(2, 3);

/* kop_admission_warn adds a warning kubectl shows (past the cap, dropped). */
KOP_API void kop_admission_warn(kop_admission_response *resp, const char *fmt, ...)
    KOP_PRINTF(2, 3);

/* ---- conversion ---------------------------------------------------------- */

/*
 * kop_conversion_fn converts obj (a copy, changed in place) from
 * from_version to to_version of its group; the server sets apiVersion
 * afterwards. KOP_OK, or an error explained in st (the review fails with
 * st->message).
 */
typedef kop_err (*kop_conversion_fn)(json_t *obj, const char *from_version,
                                     const char *to_version, kop_status *st, void *user);

typedef struct kop_webhook_converter {
    const char *group; /* "ctf.kopc.io"; copied */
    const char *kind;  /* "Challenge"; copied */
    kop_conversion_fn convert;
    void *user;        /* borrowed for the server's life */
} kop_webhook_converter;

/* ---- the server ---------------------------------------------------------- */

/*
 * kop_webhook_server_new makes a server that does not listen yet. *out is
 * owned: kop_webhook_server_free. KOP_EINVAL for a bad option (st says
 * which).
 */
KOP_API KOP_NODISCARD kop_err kop_webhook_server_new(const kop_webhook_server_opts *opts,
                                                     kop_webhook_server **out, kop_status *st);

/* kop_webhook_server_free stops the server and frees it. NULL is ok. */
KOP_API void kop_webhook_server_free(kop_webhook_server *s);

/*
 * kop_webhook_add_admission registers an admission handler at w->path
 * (copied). KOP_EINVAL for a missing field, a path already taken or a
 * server already started; KOP_ETOOBIG past KOP_WEBHOOK_MAX_HANDLERS. A NULL
 * server (webhooks turned off) takes nothing and returns KOP_OK.
 */
KOP_API KOP_NODISCARD kop_err kop_webhook_add_admission(kop_webhook_server *s,
                                                        const kop_webhook_admission *w);

/* kop_webhook_add_converter registers the converter of one CRD; as above. */
KOP_API KOP_NODISCARD kop_err kop_webhook_add_converter(kop_webhook_server *s,
                                                        const kop_webhook_converter *c);

/*
 * kop_webhook_server_start loads the certificate and starts listening.
 * KOP_ETLS when the certificate or key cannot be read or do not match,
 * KOP_EIO when the address cannot be bound (st says which).
 */
KOP_API KOP_NODISCARD kop_err kop_webhook_server_start(kop_webhook_server *s, kop_status *st);

/* kop_webhook_server_stop closes the listener and waits for requests in flight. */
KOP_API void kop_webhook_server_stop(kop_webhook_server *s);

/* kop_webhook_server_is_serving tells whether it listens with a certificate. */
KOP_API bool kop_webhook_server_is_serving(kop_webhook_server *s);

/* kop_webhook_server_port returns the bound port (0 before start). */
KOP_API int kop_webhook_server_port(kop_webhook_server *s);

/*
 * kop_manager_webhook_server returns the manager's webhook server, making
 * it on first use from the manager's --webhook-bind and --webhook-cert-dir
 * and its metrics registry. The manager starts it before its caches (a
 * conversion webhook must answer before a cache of a converted CRD can
 * list), keeps /readyz at 503 until it serves, and stops it last. *out is
 * borrowed. With --webhook-bind 0 (the default) webhooks are off: KOP_OK
 * and *out NULL, which the add functions accept and ignore.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_webhook_server(kop_manager *m, kop_webhook_server **out,
                                                         kop_status *st);

KOP_END_DECLS

#endif /* KOP_WEBHOOK_H */

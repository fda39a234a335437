/*
 * client_request_internal.h - the request engine of the REST client
 * (client.c), shared with the watch stream (client_stream.c) and discovery
 * (client_discovery.c); not installed.
 */
#ifndef KOP_CLIENT_REQUEST_INTERNAL_H
#define KOP_CLIENT_REQUEST_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <curl/curl.h>
#include <jansson.h>

#include "kop/buf.h"
#include "kop/client.h"

/* kop__request: one HTTP request; all strings borrowed. */
typedef struct kop__request {
    const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *url;          /* absolute */
    const char *content_type; /* of body; ignored without one */
    const char *body;         /* NULL: none */
    size_t body_len;
    bool safe; /* idempotent read: may be retried on 5xx and lost connections */
} kop__request;

/* kop__response: caller storage; body is capped at the client's max_body. */
typedef struct kop__response {
    long code;          /* HTTP status; 0 if no response arrived */
    kop_buf body;       /* owned: kop_buf_fini */
    long retry_after_s; /* Retry-After in seconds, 0 if absent */
    kop_err write_err;  /* set when the body overflowed its cap */
} kop__response;

/* kop__client_server returns the apiserver's URL the client talks to (borrowed). */
const char *kop__client_server(const kop_client *c);

/*
 * kop__client_do sends req with throttling, re-authentication on 401 and
 * retries (see client.c), initialising resp->body. On a non-2xx answer
 * returns the error decoded from the Status body, with st filled; resp keeps
 * the code and body either way. The caller calls kop_buf_fini(&resp->body).
 */
KOP_NODISCARD kop_err kop__client_do(kop_client *c, const kop__request *req, kop__response *resp,
                                     kop_status *st);

/*
 * kop__client_setup applies URL, TLS, credentials, headers and connection
 * sharing to h. errbuf (CURL_ERROR_SIZE bytes) must outlive the transfer, as
 * must *headers_out, which the caller frees with curl_slist_free_all.
 */
KOP_NODISCARD kop_err kop__client_setup(kop_client *c, CURL *h, const char *url,
                                        const char *content_type,
                                        struct curl_slist **headers_out, char *errbuf,
                                        kop_status *st);

/* kop__client_easy_get takes a reset easy handle from the pool (or a new one; NULL on ENOMEM). */
CURL *kop__client_easy_get(kop_client *c);

/* kop__client_easy_put returns h to the pool, or frees it when the pool is full. */
void kop__client_easy_put(kop_client *c, CURL *h);

/* kop__client_throttle waits for the client-side rate limiter, if any. */
void kop__client_throttle(kop_client *c);

/* kop__client_opts returns the client's options with defaults applied. */
const kop_client_opts *kop__client_opts(const kop_client *c);

/*
 * kop__discovery caches APIResourceLists by group version. Entries replaced
 * by a refresh are kept (retired) until the client is freed, because
 * kop_resource strings handed out point into them.
 */
typedef struct kop__discovery {
    pthread_mutex_t lock;
    json_t *by_gv;   /* object: "apps/v1" -> {"group","version","resources":[...]} */
    json_t *retired; /* array of replaced entries */
} kop__discovery;

void kop__discovery_init(kop__discovery *d);
void kop__discovery_fini(kop__discovery *d);

/* kop__client_discovery returns the client's discovery cache. */
kop__discovery *kop__client_discovery(kop_client *c);

/*
 * kop__discovery_check checks r against discovery: its group version must
 * be served (KOP_ENOTFOUND), hold r->resource (KOP_ENOTFOUND, with the
 * resources it does hold), of kind r->kind and r's scope (KOP_EINVAL).
 * st says which, naming group, version, plural and kind.
 */
kop_err kop__discovery_check(kop_client *c, const kop_resource *r, kop_status *st);

/*
 * kop__discovery_lacks_status tells whether discovery (refreshed) serves
 * r but not its status subresource: what a 404 from a status write means
 * when the object exists.
 */
bool kop__discovery_lacks_status(kop_client *c, const kop_resource *r);

#endif /* KOP_CLIENT_REQUEST_INTERNAL_H */

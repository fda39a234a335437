/*
 * client.c - the REST client: connections, authentication and retries, up to
 * one request (kop__client_do). The verbs on top of it (get, list, create,
 * update, patch, delete) are client_verbs.c's.
 *
 * Workload: an operator's reconcilers on several threads, each issuing short
 * requests, plus a few long-lived watches (client_stream.c). So:
 *
 * - Easy handles are pooled and reset between uses; curl_easy_reset keeps a
 *   handle's live connections, so a request picks up a handle whose
 *   connection is warm instead of paying a handshake. HTTP/1.1 keep-alive,
 *   not HTTP/2: each handle holds its own connection anyway (see below), and
 *   with libcurl's HTTP/2 (nghttp2) a short request cost about twice the
 *   CPU and latency (docs/benchmarks.md). One CURLSH shares the DNS cache and TLS
 *   sessions between all handles, so even a new connection resumes its TLS
 *   session. The connection cache itself is deliberately not shared: libcurl
 *   does not support sharing connections between concurrent threads.
 * - The client holds its credentials, a refcounted snapshot shared by the
 *   requests in flight, and asks the kop_config for them again at most once
 *   a second, because they rotate (token files, exec plugins); a 401 drops
 *   them and the request is sent once more with fresh ones.
 * - Safe verbs are retried on 429, 5xx and lost connections; writes only on
 *   429, which the apiserver's priority and fairness answers before acting.
 *   Retry-After is honoured, otherwise backoff doubles from 100 ms to 5 s,
 *   jittered.
 * - Every response body grows in a kop_buf capped at opts.max_body.
 * - A connection keeps its TLS record buffers (keep_tls_buffers), which
 *   libcurl otherwise has OpenSSL free whenever they are empty.
 * - Trust is kubectl's: the kubeconfig's CA and nothing else when it gives
 *   one (libcurl would also read its compiled-in CA directory, on Debian
 *   /etc/ssl/certs, so any CA of the system's store would pass for the
 *   apiserver), the system's roots when it gives none. With tls-server-name
 *   the certificate is checked against that name, sent as SNI too, while
 *   the connection goes to the server URL's own host (tls_name_init).
 *
 * Invariants: a kop_client's fields are immutable after kop_client_new
 * except the pool, the limiter, the held credentials and the discovery
 * cache, each under its own mutex. The library never prints; failures go to kop_status.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/ssl.h>

#include "client_internal.h"
#include "client_request_internal.h"
#include "kop/config.h"
#include "kop/clock.h"
#include "kop_internal.h"

#define POOL_MAX         32   /* idle easy handles (and their connections) kept */
#define RETRY_BASE_MS    100
#define RETRY_MAX_MS     5000
#define RETRY_AFTER_MAX  30   /* seconds: a longer Retry-After is clamped */
#define CONNECT_TIMEOUT  10000
#define CRED_REFRESH_MS  1000 /* how stale held credentials may get (token files rotate) */

/* One snapshot of the credentials, shared by the requests using it. */
struct cred_ref {
    atomic_int refs;
    kop_credentials cred;
};

struct kop_client {
    kop_config *cfg; /* borrowed */
    kop_client_opts opts;
    char *user_agent;

    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

    pthread_mutex_t pool_lock;
    CURL *pool[POOL_MAX];
    int npool;

    pthread_mutex_t limiter_lock; /* token bucket, when opts.qps > 0 */
    double tokens;
    int64_t refilled_ns;

    /* The credentials the client holds: asked of the config at most every
     * CRED_REFRESH_MS, and at once after a 401, not on every request. */
    pthread_mutex_t cred_lock;
    struct cred_ref *cred; /* NULL: ask the config next time */
    int64_t cred_fetched_ms;

    kop__discovery discovery;

    /* tls-server-name (all NULL when the kubeconfig sets none, or the server
     * is http): each request's URL names it in place of the server's host,
     * so libcurl sends it as SNI and checks the certificate against it;
     * connect_to sends the connection to the server's own host and port,
     * and host_header keeps the Host header the server URL's, as kubectl's
     * (Go's ServerName changes only the TLS side). */
    char *named_base; /* the server URL with the name as its host */
    struct curl_slist *connect_to;
    char *host_header;
};

/* ---- process-wide set-up ------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- share locking ------------------------------------------------------ */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
    kop_client *c = user;
    (void)h;
    (void)access;
    pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
    kop_client *c = user;
    (void)h;
    pthread_mutex_unlock(&c->share_locks[data]);
}

/* ---- lifecycle ---------------------------------------------------------- */

/*
 * tls_name_init fills c's named_base, connect_to and host_header from the
 * config's tls-server-name and server URL (see struct kop_client); nothing
 * when there is no name or the server speaks plain http. KOP_ECONFIG when
 * the name or the server URL cannot be used so.
 */
static kop_err tls_name_init(kop_client *c, kop_status *st)
{
    kop_err err = KOP_OK;
    const char *name = kop_config_tls_server_name(c->cfg);
    const char *server = kop_config_server(c->cfg);
    CURLU *u = NULL;
    char *host = NULL, *port = NULL;
    kop_buf b;
    kop_buf_init(&b, KOP__URL_MAX);

    if (!name || !name[0] || strncasecmp(server, "https://", 8) != 0)
        goto out;
    /* A host name or an IPv4 address: it goes into a URL and a CONNECT_TO
     * entry as it is. */
    if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
        strlen(name)) {
        kop_status_setf(st, 0, NULL, "tls-server-name %s: not a host name", name);
        err = KOP_ECONFIG;
        goto out;
    }
    size_t authority = strcspn(server + 8, "/");
    if (!(u = curl_url())) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (memchr(server + 8, '@', authority) ||
        curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        kop_status_setf(st, 0, NULL, "server %s: no host for tls-server-name to stand for",
                        server);
        err = KOP_ECONFIG;
        goto out;
    }
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
        port = NULL; /* none in the URL: https's own, on both sides */

    /* https://NAME[:PORT] and the server URL's path, if it has one. */
    if ((err = kop_buf_appendf(&b, "https://%s%s%s%s", name, port ? ":" : "", port ? port : "",
                               server + 8 + authority)))
        goto out;
    c->named_base = kop_buf_take(&b, NULL);
    /* NAME:any port -> the server's host, same port. */
    if ((err = kop_buf_appendf(&b, "%s::%s:", name, host)))
        goto out;
    c->connect_to = curl_slist_append(NULL, kop_buf_str(&b));
    kop_buf_reset(&b);
    if ((err = kop_buf_appendf(&b, "Host: %s%s%s", host, port ? ":" : "", port ? port : "")))
        goto out;
    c->host_header = kop_buf_take(&b, NULL);
    if (!c->named_base || !c->connect_to || !c->host_header)
        err = KOP_ENOMEM;
out:
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    kop_buf_fini(&b);
    return err;
}

static void apply_defaults(kop_client_opts *o)
{
    if (o->timeout_ms <= 0)
        o->timeout_ms = KOP_CLIENT_DEFAULT_TIMEOUT_MS;
    if (o->max_body == 0)
        o->max_body = KOP_CLIENT_DEFAULT_MAX_BODY;
    if (o->max_watch_line == 0)
        o->max_watch_line = KOP_CLIENT_DEFAULT_MAX_LINE;
    if (o->max_retries == 0)
        o->max_retries = KOP_CLIENT_DEFAULT_MAX_RETRIES;
    else if (o->max_retries < 0)
        o->max_retries = 0;
    if (o->qps > 0 && o->burst <= 0)
        o->burst = o->qps < 1 ? 1 : (int)o->qps;
}

kop_err kop_client_new(kop_config *cfg, const kop_client_opts *opts, kop_client **out,
                       kop_status *st)
{
    kop_err err = KOP_OK;
    kop_client *c = NULL;

    *out = NULL;
    if (!cfg) {
        kop_status_setf(st, 0, NULL, "kop_client_new: no configuration");
        return KOP_EINVAL;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_result != CURLE_OK) {
        kop_status_setf(st, 0, NULL, "libcurl: %s", curl_easy_strerror(curl_init_result));
        return KOP_EIO;
    }
    c = calloc(1, sizeof *c);
    if (!c)
        return KOP_ENOMEM;
    c->cfg = cfg;
    if (opts)
        c->opts = *opts;
    apply_defaults(&c->opts);
    const char *ua =
        c->opts.user_agent ? c->opts.user_agent : "kopc/" KOP_VERSION_STRING " (libkop)";
    c->user_agent = strdup(ua);
    c->opts.user_agent = c->user_agent;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_locks[i], NULL);
    pthread_mutex_init(&c->pool_lock, NULL);
    pthread_mutex_init(&c->limiter_lock, NULL);
    pthread_mutex_init(&c->cred_lock, NULL);
    c->tokens = c->opts.burst;
    c->refilled_ns = kop_mono_ns();
    kop__discovery_init(&c->discovery);

    c->share = curl_share_init();
    if (!c->user_agent || !c->share) {
        err = KOP_ENOMEM;
        goto out;
    }
    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    if ((err = tls_name_init(c, st)))
        goto out;
    *out = c;
    c = NULL;
out:
    kop_client_free(c);
    return err;
}

static void cred_unref(struct cred_ref *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        kop_credentials_fini(&r->cred);
        free(r);
    }
}

void kop_client_free(kop_client *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    if (c->share)
        curl_share_cleanup(c->share);
    kop__discovery_fini(&c->discovery);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->share_locks[i]);
    pthread_mutex_destroy(&c->pool_lock);
    pthread_mutex_destroy(&c->limiter_lock);
    cred_unref(c->cred);
    pthread_mutex_destroy(&c->cred_lock);
    free(c->user_agent);
    free(c->named_base);
    curl_slist_free_all(c->connect_to);
    free(c->host_header);
    free(c);
}

kop_config *kop_client_config(const kop_client *c)
{
    return c->cfg;
}

const kop_client_opts *kop__client_opts(const kop_client *c)
{
    return &c->opts;
}

kop__discovery *kop__client_discovery(kop_client *c)
{
    return &c->discovery;
}

/* ---- easy handle pool --------------------------------------------------- */

CURL *kop__client_easy_get(kop_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->pool_lock);
    if (c->npool > 0)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        curl_easy_reset(h);
    else
        h = curl_easy_init();
    return h;
}

void kop__client_easy_put(kop_client *c, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&c->pool_lock);
    if (c->npool < POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

/* ---- rate limiter ------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* kop__client_throttle takes one token, sleeping until one is available. */
void kop__client_throttle(kop_client *c)
{
    if (c->opts.qps <= 0)
        return;
    for (;;) {
        long wait_ms = 0;
        pthread_mutex_lock(&c->limiter_lock);
        int64_t now = kop_mono_ns();
        c->tokens += (double)(now - c->refilled_ns) / 1e9 * c->opts.qps;
        if (c->tokens > c->opts.burst)
            c->tokens = c->opts.burst;
        c->refilled_ns = now;
        if (c->tokens >= 1) {
            c->tokens -= 1;
        } else {
            wait_ms = (long)((1 - c->tokens) / c->opts.qps * 1000) + 1;
        }
        pthread_mutex_unlock(&c->limiter_lock);
        if (wait_ms == 0)
            return;
        sleep_ms(wait_ms);
    }
}

/* ---- one request -------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    kop__response *resp = user;
    size_t len = size * n;
    kop_err err = kop_buf_append(&resp->body, data, len);
    if (err) {
        resp->write_err = err;
        return 0; /* makes libcurl abort with CURLE_WRITE_ERROR */
    }
    return len;
}

/* on_header picks Retry-After (seconds form) out of the response headers. */
static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    kop__response *resp = user;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name && strncasecmp(data, name, sizeof name - 1) == 0) {
        long v = strtol(data + sizeof name - 1, NULL, 10);
        if (v > 0)
            resp->retry_after_s = v > RETRY_AFTER_MAX ? RETRY_AFTER_MAX : v;
    }
    return len;
}

/* map_curl turns a transport failure into a kop_err. */
static kop_err map_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return KOP_ECONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return KOP_ETIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
        return KOP_ETLS;
    case CURLE_OUT_OF_MEMORY:
        return KOP_ENOMEM;
    default:
        return KOP_EIO;
    }
}

/*
 * held_credentials returns a reference to the credentials the client holds
 * (the caller drops it with cred_unref), asking the config for a fresh copy
 * when there is none yet or the held one is CRED_REFRESH_MS old. The config
 * does the expensive part (re-reading a rotated token file, running an exec
 * plugin) only when the credential really changed or expired.
 */
/*
 * keep_tls_buffers undoes SSL_MODE_RELEASE_BUFFERS, which libcurl sets on
 * every connection: OpenSSL then frees a connection's 16 KiB read and write
 * buffers whenever they are empty and allocates them again for the next
 * record, so every event read from a watch and every request allocated
 * them anew, and glibc consolidated its fast bins each time (perf at 100
 * Challenges: malloc_consolidate under SSL_read, 6 % of the operator's
 * CPU, plus the slower small allocations after it). A connection now holds
 * its two buffers, about 34 KiB, for its life. Called by libcurl for each
 * new connection (OpenSSL builds only: other TLS backends ignore the option).
 */
static CURLcode keep_tls_buffers(CURL *h, void *ssl_ctx, void *user)
{
    (void)h;
    (void)user;
    SSL_CTX_clear_mode((SSL_CTX *)ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
    return CURLE_OK;
}

static kop_err held_credentials(kop_client *c, struct cred_ref **out, kop_status *st)
{
    kop_err err = KOP_OK;
    pthread_mutex_lock(&c->cred_lock);
    int64_t now = kop_mono_ms();
    if (!c->cred || now - c->cred_fetched_ms >= CRED_REFRESH_MS) {
        struct cred_ref *fresh = calloc(1, sizeof *fresh);
        err = fresh ? kop_config_credentials(c->cfg, &fresh->cred, st) : KOP_ENOMEM;
        if (err) {
            free(fresh);
            goto out;
        }
        atomic_init(&fresh->refs, 1);
        cred_unref(c->cred);
        c->cred = fresh;
        c->cred_fetched_ms = now;
    }
    atomic_fetch_add(&c->cred->refs, 1);
    *out = c->cred;
out:
    pthread_mutex_unlock(&c->cred_lock);
    return err;
}

/* drop_credentials forgets the held credentials (after a 401), and makes the
 * config fetch new ones. */
static void drop_credentials(kop_client *c)
{
    pthread_mutex_lock(&c->cred_lock);
    cred_unref(c->cred);
    c->cred = NULL;
    pthread_mutex_unlock(&c->cred_lock);
    kop_config_invalidate_credentials(c->cfg);
}

/*
 * kop__client_setup sets the options every request shares on h: URL, TLS,
 * credentials, headers, user agent, connection sharing. url must begin with
 * the config's server URL. *headers_out is owned by the caller
 * (curl_slist_free_all) once the transfer is over.
 */
kop_err kop__client_setup(kop_client *c, CURL *h, const char *url, const char *content_type,
                          struct curl_slist **headers_out, char *errbuf, kop_status *st)
{
    kop_err err = KOP_OK;
    struct cred_ref *held = NULL;
    struct curl_slist *hdrs = NULL;
    kop_buf auth, named;
    kop_buf_init(&auth, 64 << 10);
    kop_buf_init(&named, KOP__URL_MAX);

    *headers_out = NULL;
    err = held_credentials(c, &held, st);
    if (err)
        goto out;
    const kop_credentials *cred = &held->cred;

    if (c->named_base) {
        /* tls-server-name: the same URL with the name for the host, the
         * connection to the server's host (see struct kop_client). */
        const char *server = kop_config_server(c->cfg);
        size_t slen = strlen(server);
        if (strncmp(url, server, slen) != 0) {
            kop_status_setf(st, 0, NULL, "%s: not under the server URL %s", url, server);
            err = KOP_EINVAL;
            goto out;
        }
        if ((err = kop_buf_appendf(&named, "%s%s", c->named_base, url + slen)))
            goto out;
        url = kop_buf_str(&named); /* libcurl copies it */
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
        if (!(hdrs = curl_slist_append(hdrs, c->host_header))) {
            err = KOP_ENOMEM;
            goto out;
        }
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    /* HTTP/1.1 on purpose: measured cheaper than HTTP/2 here (see the top). */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, keep_tls_buffers);

    size_t ca_len = 0;
    const char *ca = kop_config_ca_pem(c->cfg, &ca_len);
    if (ca) {
        struct curl_blob blob = {.data = (void *)ca, .len = ca_len, .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
        /* That CA only: libcurl would also read its compiled-in bundle and
         * CA directory (Debian: /etc/ssl/certs/ca-certificates.crt and
         * /etc/ssl/certs; 7.88 reads the directory even beside a blob),
         * trusting every CA of the system's store for the apiserver, which
         * kubectl does not. Without a CA in the kubeconfig both stay, as the
         * system's roots are kubectl's then too. */
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
    }
    if (kop_config_insecure(c->cfg)) {
        /* Only ever because the kubeconfig says insecure-skip-tls-verify. */
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cred->cert_pem && cred->key_pem) {
        struct curl_blob cert = {
            .data = cred->cert_pem, .len = cred->cert_len, .flags = CURL_BLOB_COPY};
        struct curl_blob key = {
            .data = cred->key_pem, .len = cred->key_len, .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    }

    struct curl_slist *accept = curl_slist_append(hdrs, "Accept: application/json");
    if (!accept) {
        err = KOP_ENOMEM;
        goto out;
    }
    hdrs = accept;
    if (content_type) {
        kop_buf ct;
        kop_buf_init(&ct, 256);
        err = kop_buf_appendf(&ct, "Content-Type: %s", content_type);
        struct curl_slist *next = err ? NULL : curl_slist_append(hdrs, kop_buf_str(&ct));
        if (next)
            hdrs = next;
        else if (!err)
            err = KOP_ENOMEM;
        kop_buf_fini(&ct);
        if (err)
            goto out;
    }
    if (cred->token) {
        err = kop_buf_appendf(&auth, "Authorization: Bearer %s", cred->token);
        if (err)
            goto out;
        struct curl_slist *next = curl_slist_append(hdrs, kop_buf_str(&auth));
        if (!next) {
            err = KOP_ENOMEM;
            goto out;
        }
        hdrs = next;
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    *headers_out = hdrs;
    hdrs = NULL;
out:
    /* The token must not linger in freed memory. */
    if (auth.data)
        memset(auth.data, 0, auth.len);
    kop_buf_fini(&auth);
    kop_buf_fini(&named);
    curl_slist_free_all(hdrs);
    cred_unref(held);
    return err;
}

/* perform_once sends req once; resp gets the code, body and Retry-After. */
static kop_err perform_once(kop_client *c, const kop__request *req, kop__response *resp,
                            kop_status *st)
{
    kop_err err = KOP_OK;
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *h = kop__client_easy_get(c);

    kop_buf_reset(&resp->body);
    resp->code = 0;
    resp->retry_after_s = 0;
    resp->write_err = KOP_OK;
    if (!h)
        return KOP_ENOMEM;
    err = kop__client_setup(c, h, req->url, req->body ? req->content_type : NULL, &hdrs, errbuf,
                            st);
    if (err)
        goto out;
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->opts.timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    if (strcmp(req->method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    if (req->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }

    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        if (rc == CURLE_WRITE_ERROR && resp->write_err) {
            err = resp->write_err;
            kop_status_setf(st, 0, NULL, "%s %s: response body over the %zu-byte cap",
                            req->method, req->url, c->opts.max_body);
        } else {
            err = map_curl(rc);
            kop_status_setf(st, 0, NULL, "%s %s: %s", req->method, req->url,
                            errbuf[0] ? errbuf : curl_easy_strerror(rc));
        }
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->code);
    if (resp->code < 200 || resp->code >= 300)
        err = kop__status_decode((int)resp->code, resp->body.data, resp->body.len, st);
out:
    if (c->opts.on_response)
        c->opts.on_response(req->method, (int)resp->code, c->opts.on_response_user);
    curl_slist_free_all(hdrs);
    kop__client_easy_put(c, h);
    return err;
}

/* retryable decides whether a failed attempt may be sent again. */
static bool retryable(const kop__request *req, kop_err err, long code)
{
    if (code == 429)
        return true; /* priority and fairness refused it before acting */
    if (!req->safe)
        return false;
    if (code == 500 || code == 502 || code == 503 || code == 504)
        return true;
    return code == 0 && (err == KOP_ECONNECT || err == KOP_ETIMEOUT);
}

/* backoff_ms is the wait before retry number attempt (0-based). */
static long backoff_ms(int attempt, long retry_after_s)
{
    if (retry_after_s > 0)
        return retry_after_s * 1000;
    long ms = RETRY_BASE_MS;
    for (int i = 0; i < attempt && ms < RETRY_MAX_MS; i++)
        ms *= 2;
    if (ms > RETRY_MAX_MS)
        ms = RETRY_MAX_MS;
    /* +-20% jitter so that many clients do not retry in lockstep. */
    long spread = ms / 5;
    return ms - spread + (long)(kop__random() % (uint64_t)(2 * spread + 1));
}

kop_err kop__client_do(kop_client *c, const kop__request *req, kop__response *resp,
                       kop_status *st)
{
    kop_err err = KOP_OK;
    bool reauthed = false;
    kop_buf_init(&resp->body, c->opts.max_body);
    for (int attempt = 0;; attempt++) {
        kop__client_throttle(c);
        kop_status_clear(st);
        err = perform_once(c, req, resp, st);
        if (!err)
            break;
        if (resp->code == 401 && !reauthed) {
            /* The token may have rotated or the plugin's credential expired. */
            drop_credentials(c);
            reauthed = true;
            attempt--;
            continue;
        }
        if (attempt >= c->opts.max_retries || !retryable(req, err, resp->code))
            break;
        sleep_ms(backoff_ms(attempt, resp->retry_after_s));
    }
    return err;
}

const char *kop__client_server(const kop_client *c)
{
    return kop_config_server(c->cfg);
}

/*
 * webhook.c - the webhook server: HTTPS, routes, limits, metrics and the
 * certificate that follows its files (kop/webhook.h). What a review says
 * and how it is answered is webhook_review.c.
 *
 * TLS: libmicrohttpd's HTTPS, which is GnuTLS, with the certificate handed
 * over per handshake by a retrieve callback (MHD_OPTION_HTTPS_CERT_CALLBACK2,
 * gnutls_certificate_retrieve_function3). The pair is parsed once per
 * change of the files, not per handshake (parsing a key is about as costly
 * as a handshake: measured 0.3 ms for P-256 and 0.6 ms for RSA-2048 here).
 * A handshake borrows the parsed pair without a reference count, because
 * GnuTLS says nothing when it is done with it; so a replaced pair is never
 * freed while the server runs, only retired onto a list freed with the
 * server. Rotations are rare (cert-manager renews a 90-day certificate
 * after 60 days) and a pair is a few KB; files that change without new
 * content (a touch, a re-copy) retire nothing.
 * Before handing a certificate out, a handshake looks at the files (at most
 * once per cert_check_ms): when the certificate's or the key's identity
 * (device, inode, size, mtime, ctime, through symlinks) changed, the pair
 * is read again and, if the key matches the certificate, used from this
 * handshake on. A symlink swap (what the kubelet does to a mounted Secret)
 * changes the inode; a rewrite in place changes mtime and size.
 *
 * OpenSSL would have needed an HTTP server written here; libmicrohttpd
 * already serves the manager's probes and the CTF API, with the connection
 * caps and timeouts this server needs, and links GnuTLS in Debian's build.
 *
 * The retrieve callback gets no user pointer: it finds its server through
 * a thread-local variable that the connection-start notification sets.
 * libmicrohttpd handles a connection, from accept to close, in the thread
 * that accepted it (thread-pool mode), and notifies the start in that
 * thread before the handshake, so the variable names the right server even
 * with several servers in one process.
 *
 * Requests: POST to a registered path. The body grows into a capped
 * kop_buf; past the cap the rest is read and dropped and the answer is 413.
 * A request still incomplete request_timeout_ms after its headers is 408,
 * and an idle connection closes after the same time, so a slow client holds
 * a connection for at most about twice that. Handlers run in the server's
 * threads; one that blocks holds one of them (the apiserver gives up on its
 * own side after the webhook's timeoutSeconds).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "kop/buf.h"
#include "kop/clock.h"
#include "kop/http.h"
#include "kop/log.h"
#include "webhook_internal.h"

#define CERT_FILE_MAX  (1u << 20) /* a PEM certificate chain or key */
#define CHAIN_MAX      16         /* certificates in the chain */
#define IDLE_TIMEOUT_S_MIN 1

/* file_id: what tells that a file changed (stat through symlinks). */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

struct route {
    char path[KOP_WEBHOOK_PATH_MAX];
    bool conversion;              /* else admission */
    kop_webhook_admission adm;    /* adm.path points at path */
};

struct kop_webhook_server {
    kop_webhook_server_opts opts;
    char *bind, *cert_file, *key_file, *conversion_path; /* owned copies */

    struct route routes[KOP_WEBHOOK_MAX_HANDLERS + 1]; /* + the conversion route */
    int nroutes;
    kop_webhook_converter converters[KOP_WEBHOOK_MAX_HANDLERS];
    char conv_names[KOP_WEBHOOK_MAX_HANDLERS][2][256]; /* group and kind copies */
    int nconverters;

    struct MHD_Daemon *http;
    int port;
    bool serving; /* atomic */

    kop_metric *requests, *latency, *in_flight;

    /* The pair in use, replaced by reloads; under mu. */
    pthread_mutex_t mu;
    gnutls_datum_t cert_pem, key_pem; /* malloc'd text of the pair in use */
    struct parsed_pair *pair, *retired; /* in use; replaced ones (see the top) */
    struct file_id cert_id, key_id, bad_cert_id, bad_key_id;
    int64_t checked_ms;
};

/* A certificate chain and key as GnuTLS takes them, parsed once. */
struct parsed_pair {
    gnutls_pcert_st certs[CHAIN_MAX];
    unsigned n;
    gnutls_privkey_t key;
    struct parsed_pair *next; /* on the retired list */
};

/* One request in flight, from its headers to its completion. */
struct request {
    const struct route *route;
    kop_buf body;
    int64_t start_ns;
    bool too_big;
    bool in_flight; /* counted in the in-flight gauge until answered or dropped */
};

static __thread kop_webhook_server *current_server; /* see the top of the file */

/* ---- certificate files ----------------------------------------------------- */

static bool same_id(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static bool file_id_of(const char *path, struct file_id *id)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return false;
    *id = (struct file_id){sb.st_dev, sb.st_ino, sb.st_size, sb.st_mtim, sb.st_ctim};
    return true;
}

/* read_file reads path whole into *out (malloc'd), up to CERT_FILE_MAX. */
static kop_err read_file(const char *path, gnutls_datum_t *out, kop_status *st)
{
    kop_buf b;
    char chunk[8192];
    kop_err err = KOP_OK;
    kop_buf_init(&b, CERT_FILE_MAX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        kop_status_setf(st, 0, NULL, "cannot read %s: %s", path, strerror(errno));
        return KOP_ETLS;
    }
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            kop_status_setf(st, 0, NULL, "cannot read %s: %s", path, strerror(errno));
            err = KOP_ETLS;
            break;
        }
        if (n == 0)
            break;
        if ((err = kop_buf_append(&b, chunk, (size_t)n)) != KOP_OK) {
            kop_status_setf(st, 0, NULL, "%s is over %u bytes", path, CERT_FILE_MAX);
            break;
        }
    }
    close(fd);
    size_t len = 0;
    char *data = err ? NULL : kop_buf_take(&b, &len);
    kop_buf_fini(&b);
    if (!err && !data)
        err = KOP_ENOMEM;
    out->data = (unsigned char *)data;
    out->size = (unsigned)len;
    return err;
}

/*
 * load_pair reads the certificate and key files and checks that they parse
 * and belong together (GnuTLS compares the key with the certificate's
 * public key). On KOP_OK *cert and *key are owned by the caller.
 */
static kop_err load_pair(const kop_webhook_server *s, gnutls_datum_t *cert, gnutls_datum_t *key,
                         kop_status *st)
{
    gnutls_certificate_credentials_t cred = NULL;
    *cert = (gnutls_datum_t){0};
    *key = (gnutls_datum_t){0};
    kop_err err = read_file(s->cert_file, cert, st);
    if (!err)
        err = read_file(s->key_file, key, st);
    if (!err && gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS)
        err = KOP_ENOMEM;
    int rc = err ? 0 : gnutls_certificate_set_x509_key_mem2(cred, cert, key, GNUTLS_X509_FMT_PEM,
                                                            NULL, 0);
    if (!err && rc < 0) {
        kop_status_setf(st, 0, NULL, "certificate %s with key %s: %s", s->cert_file, s->key_file,
                        gnutls_strerror(rc));
        err = KOP_ETLS;
    }
    if (cred)
        gnutls_certificate_free_credentials(cred);
    if (err) {
        free(cert->data);
        free(key->data);
        *cert = (gnutls_datum_t){0};
        *key = (gnutls_datum_t){0};
    }
    return err;
}

static void free_pair(struct parsed_pair *p)
{
    for (unsigned i = 0; p && i < p->n; i++)
        gnutls_pcert_deinit(&p->certs[i]);
    if (p && p->key)
        gnutls_privkey_deinit(p->key);
    free(p);
}

/* parse_pair parses the PEM pair for handshakes; NULL when it does not parse. */
static struct parsed_pair *parse_pair(const gnutls_datum_t *cert, const gnutls_datum_t *key)
{
    struct parsed_pair *p = calloc(1, sizeof *p);
    unsigned n = CHAIN_MAX;
    if (!p || gnutls_privkey_init(&p->key) < 0 ||
        gnutls_privkey_import_x509_raw(p->key, key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0 ||
        gnutls_pcert_list_import_x509_raw(p->certs, &n, cert, GNUTLS_X509_FMT_PEM, 0) < 0) {
        free_pair(p);
        return NULL;
    }
    p->n = n;
    return p;
}

static bool same_datum(const gnutls_datum_t *a, const gnutls_datum_t *b)
{
    return a->size == b->size && (a->size == 0 || memcmp(a->data, b->data, a->size) == 0);
}

/*
 * install_pair makes cert and key (taken) the pair in use, retiring the
 * one before; s->mu held. KOP_ETLS (nothing changed, cert and key freed)
 * when they do not parse for a handshake.
 */
static kop_err install_pair(kop_webhook_server *s, gnutls_datum_t cert, gnutls_datum_t key,
                            const struct file_id *cid, const struct file_id *kid)
{
    s->cert_id = *cid;
    s->key_id = *kid;
    if (s->pair && same_datum(&cert, &s->cert_pem) && same_datum(&key, &s->key_pem)) {
        free(cert.data); /* new files, same pair */
        free(key.data);
        return KOP_OK;
    }
    struct parsed_pair *p = parse_pair(&cert, &key);
    if (!p) {
        free(cert.data);
        free(key.data);
        return KOP_ETLS;
    }
    if (s->pair) {
        s->pair->next = s->retired;
        s->retired = s->pair;
    }
    s->pair = p;
    free(s->cert_pem.data);
    free(s->key_pem.data);
    s->cert_pem = cert;
    s->key_pem = key;
    return KOP_OK;
}

/*
 * maybe_reload looks at the files when cert_check_ms has passed since the
 * last look, and takes a changed pair that is whole; s->mu held. A pair
 * that fails is kept out and logged once per change of the files.
 */
static void maybe_reload(kop_webhook_server *s)
{
    int64_t now = kop_mono_ms();
    struct file_id cid, kid;
    gnutls_datum_t cert, key;
    kop_status st = {0};
    if (now - s->checked_ms < s->opts.cert_check_ms)
        return;
    s->checked_ms = now;
    if (!file_id_of(s->cert_file, &cid) || !file_id_of(s->key_file, &kid))
        return; /* mid-swap, or gone: keep serving the pair we have */
    if (same_id(&cid, &s->cert_id) && same_id(&kid, &s->key_id))
        return;
    if (load_pair(s, &cert, &key, &st) != KOP_OK) {
        if (!same_id(&cid, &s->bad_cert_id) || !same_id(&kid, &s->bad_key_id))
            kop_log(KOP_LOG_WARN, "webhook certificate not reloaded: keeping the old one",
                    KOP_LOG_STR("reason", st.message));
        s->bad_cert_id = cid;
        s->bad_key_id = kid;
        return;
    }
    if (install_pair(s, cert, key, &cid, &kid) == KOP_OK)
        kop_log(KOP_LOG_INFO, "webhook certificate reloaded", KOP_LOG_STR("cert", s->cert_file));
}

/* retrieve lends the pair in use to one handshake (see the top: never freed under it). */
static int retrieve(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
                    gnutls_pcert_st **certs, unsigned int *ncerts, gnutls_ocsp_data_st **ocsp,
                    unsigned int *nocsp, gnutls_privkey_t *key, unsigned int *flags)
{
    kop_webhook_server *s = current_server;
    (void)session;
    (void)info;
    if (!s)
        return -1;
    pthread_mutex_lock(&s->mu);
    maybe_reload(s);
    struct parsed_pair *p = s->pair;
    pthread_mutex_unlock(&s->mu);
    if (!p)
        return -1;
    *certs = p->certs;
    *ncerts = p->n;
    *ocsp = NULL;
    *nocsp = 0;
    *key = p->key;
    *flags = 0; /* ours: GnuTLS must not free them */
    return 0;
}

/* ---- construction and registration ----------------------------------------- */

static char *join_path(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static kop_err register_metrics(kop_webhook_server *s)
{
    static const char *const by_code[] = {"webhook", "code", NULL};
    static const char *const by_hook[] = {"webhook", NULL};
    /* Prometheus' default buckets, which controller-runtime's histogram uses. */
    static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
    kop_metrics *m = s->opts.metrics;
    if (!m)
        return KOP_OK;
    kop_err err = kop_metrics_counter(m, "controller_runtime_webhook_requests_total",
                                      "Total number of admission requests by HTTP status code.",
                                      by_code, &s->requests);
    if (!err)
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){.name = "controller_runtime_webhook_latency_seconds",
                                  .help = "Histogram of the latency of processing admission "
                                          "requests",
                                  .label_names = by_hook,
                                  .buckets = buckets,
                                  .nbuckets = sizeof buckets / sizeof buckets[0]},
            &s->latency);
    if (!err)
        err = kop_metrics_gauge(m, "controller_runtime_webhook_requests_in_flight",
                                "Current number of admission requests being served.", by_hook,
                                &s->in_flight);
    return err;
}

kop_err kop_webhook_server_new(const kop_webhook_server_opts *opts, kop_webhook_server **out,
                               kop_status *st)
{
    kop_err err = KOP_OK;
    *out = NULL;
    kop_webhook_server *s = calloc(1, sizeof *s);
    if (!s)
        return KOP_ENOMEM;
    s->opts = opts ? *opts : (kop_webhook_server_opts){0};
    kop_webhook_server_opts *o = &s->opts;
    const char *dir = o->cert_dir && o->cert_dir[0] ? o->cert_dir : KOP_WEBHOOK_DEFAULT_CERT_DIR;
    s->bind = strdup(o->bind && o->bind[0] ? o->bind : KOP_WEBHOOK_DEFAULT_BIND);
    s->cert_file = o->cert_file ? strdup(o->cert_file) : join_path(dir, "tls.crt");
    s->key_file = o->key_file ? strdup(o->key_file) : join_path(dir, "tls.key");
    s->conversion_path = strdup(o->conversion_path ? o->conversion_path : "/convert");
    pthread_mutex_init(&s->mu, NULL);
    if (!s->bind || !s->cert_file || !s->key_file || !s->conversion_path) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (s->conversion_path[0] != '/' || strlen(s->conversion_path) >= KOP_WEBHOOK_PATH_MAX) {
        kop_status_setf(st, 0, NULL, "the conversion path must start with / and be shorter "
                                     "than %d bytes", KOP_WEBHOOK_PATH_MAX);
        err = KOP_EINVAL;
        goto out;
    }
    if (!o->max_body)
        o->max_body = KOP_WEBHOOK_DEFAULT_MAX_BODY;
    if (o->request_timeout_ms <= 0)
        o->request_timeout_ms = 30000;
    if (!o->max_connections)
        o->max_connections = 256;
    if (!o->threads)
        o->threads = 2;
    if (o->cert_check_ms <= 0)
        o->cert_check_ms = 1000;
    struct sockaddr_storage sa;
    kop_status why = {0};
    if ((err = kop_http_parse_bind(s->bind, &sa, NULL, &why)) != KOP_OK) {
        kop_status_setf(st, 0, NULL, "webhook bind: %s", why.message);
        goto out;
    }
    err = register_metrics(s);
out:
    if (err) {
        kop_webhook_server_free(s);
        return err;
    }
    *out = s;
    return KOP_OK;
}

void kop_webhook_server_free(kop_webhook_server *s)
{
    if (!s)
        return;
    kop_webhook_server_stop(s);
    pthread_mutex_destroy(&s->mu);
    free(s->cert_pem.data);
    free(s->key_pem.data);
    free_pair(s->pair);
    while (s->retired) {
        struct parsed_pair *next = s->retired->next;
        free_pair(s->retired);
        s->retired = next;
    }
    free(s->bind);
    free(s->cert_file);
    free(s->key_file);
    free(s->conversion_path);
    free(s);
}

static struct route *find_route(kop_webhook_server *s, const char *path)
{
    for (int i = 0; i < s->nroutes; i++)
        if (strcmp(s->routes[i].path, path) == 0)
            return &s->routes[i];
    return NULL;
}

kop_err kop_webhook_add_admission(kop_webhook_server *s, const kop_webhook_admission *w)
{
    if (!s)
        return KOP_OK;
    if (!w || !w->handle || !w->path || w->path[0] != '/' ||
        strlen(w->path) >= KOP_WEBHOOK_PATH_MAX || s->http || find_route(s, w->path) ||
        strcmp(w->path, s->conversion_path) == 0)
        return KOP_EINVAL;
    if (s->nroutes >= KOP_WEBHOOK_MAX_HANDLERS)
        return KOP_ETOOBIG;
    struct route *r = &s->routes[s->nroutes++];
    snprintf(r->path, sizeof r->path, "%s", w->path);
    r->conversion = false;
    r->adm = *w;
    r->adm.path = r->path;
    return KOP_OK;
}

kop_err kop_webhook_add_converter(kop_webhook_server *s, const kop_webhook_converter *c)
{
    if (!s)
        return KOP_OK;
    if (!c || !c->convert || !c->group || !c->kind || !c->kind[0] || s->http ||
        strlen(c->group) >= sizeof s->conv_names[0][0] ||
        strlen(c->kind) >= sizeof s->conv_names[0][1])
        return KOP_EINVAL;
    for (int i = 0; i < s->nconverters; i++)
        if (strcmp(s->converters[i].group, c->group) == 0 &&
            strcmp(s->converters[i].kind, c->kind) == 0)
            return KOP_EINVAL;
    if (s->nconverters >= KOP_WEBHOOK_MAX_HANDLERS)
        return KOP_ETOOBIG;
    int i = s->nconverters++;
    snprintf(s->conv_names[i][0], sizeof s->conv_names[i][0], "%s", c->group);
    snprintf(s->conv_names[i][1], sizeof s->conv_names[i][1], "%s", c->kind);
    s->converters[i] = *c;
    s->converters[i].group = s->conv_names[i][0];
    s->converters[i].kind = s->conv_names[i][1];
    if (!find_route(s, s->conversion_path)) { /* the one route every converter shares */
        struct route *r = &s->routes[s->nroutes++];
        snprintf(r->path, sizeof r->path, "%s", s->conversion_path);
        r->conversion = true;
    }
    return KOP_OK;
}

/* ---- requests -------------------------------------------------------------- */

/* kop__webhook_dispatch answers body sent to path: *code and *out (owned). */
kop_err kop__webhook_dispatch(kop_webhook_server *s, const char *path, const char *body,
                              size_t len, char **out, int *code)
{
    kop_status st = {0};
    struct route *r = find_route(s, path);
    kop_err err;
    *out = NULL;
    if (!r) {
        *code = 404;
        kop_status_setf(&st, 404, "NotFound", "no webhook at this path");
        err = KOP_ENOTFOUND;
    } else if (r->conversion) {
        err = kop__conversion_review(s->converters, s->nconverters, body, len, out, &st);
    } else {
        err = kop__admission_review(&r->adm, body, len, out, &st);
    }
    if (!err) {
        *code = 200;
        return KOP_OK;
    }
    if (err == KOP_EBADREQUEST) {
        *code = 400;
    } else if (err != KOP_ENOTFOUND) {
        *code = 500;
        kop_status_setf(&st, 500, "InternalError", "%s", kop_strerror(err));
    }
    /* A metav1.Status, as the apiserver's own errors look. */
    json_t *status = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "apiVersion", "v1", "kind",
                               "Status", "status", "Failure", "reason", st.reason, "message",
                               st.message, "code", *code);
    *out = status ? json_dumps(status, JSON_COMPACT) : NULL;
    json_decref(status);
    return *out ? err : KOP_ENOMEM;
}

/* leave_flight takes rq out of the in-flight gauge, once. */
static void leave_flight(kop_webhook_server *s, struct request *rq)
{
    const char *hook[] = {rq->route->path, NULL};
    if (rq->in_flight)
        kop_metric_add(s->in_flight, hook, -1);
    rq->in_flight = false;
}

/* finish sends code with body (taken) and counts the request. */
static enum MHD_Result finish(kop_webhook_server *s, struct MHD_Connection *conn,
                              struct request *rq, int code, char *body)
{
    char code_s[16];
    const char *hook[] = {rq->route->path, NULL};
    if (!body)
        body = strdup("");
    struct MHD_Response *resp =
        body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)code, resp);
    MHD_destroy_response(resp);
    snprintf(code_s, sizeof code_s, "%d", code);
    const char *labels[] = {rq->route->path, code_s, NULL};
    kop_metric_inc(s->requests, labels);
    kop_metric_observe(s->latency, hook, (double)(kop_mono_ns() - rq->start_ns) / 1e9);
    leave_flight(s, rq); /* answered: as controller-runtime, not when the socket drains */
    return ret;
}

/* refuse answers a request refused before its review was read. */
static enum MHD_Result refuse(kop_webhook_server *s, struct MHD_Connection *conn,
                              struct request *rq, int code, const char *reason, const char *msg)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "apiVersion", "v1", "kind", "Status",
                          "status", "Failure", "reason", reason, "message", msg, "code", code);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return finish(s, conn, rq, code, body);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
    kop_webhook_server *s = cls;
    struct request *rq = *req_cls;
    (void)version;
    if (!rq) {
        struct route *r = find_route(s, url);
        if (!r) {
            static char not_found[] = "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"status\":"
                                      "\"Failure\",\"reason\":\"NotFound\",\"code\":404}";
            struct MHD_Response *resp = MHD_create_response_from_buffer(
                strlen(not_found), not_found, MHD_RESPMEM_PERSISTENT);
            if (!resp)
                return MHD_NO;
            enum MHD_Result ret = MHD_queue_response(conn, 404, resp);
            MHD_destroy_response(resp);
            return ret;
        }
        if (!(rq = calloc(1, sizeof *rq)))
            return MHD_NO;
        rq->route = r;
        rq->start_ns = kop_mono_ns();
        kop_buf_init(&rq->body, s->opts.max_body);
        *req_cls = rq;
        const char *hook[] = {r->path, NULL};
        kop_metric_add(s->in_flight, hook, 1);
        rq->in_flight = true;
        if (strcmp(method, "POST") != 0)
            return refuse(s, conn, rq, 405, "MethodNotAllowed", "a review is POSTed");
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->opts.max_body)
            return refuse(s, conn, rq, 413, "RequestEntityTooLarge",
                          "the request body is over the webhook's cap");
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->too_big && kop_buf_append(&rq->body, upload, *upload_size) != KOP_OK)
            rq->too_big = true; /* read the rest and drop it, then say 413 */
        *upload_size = 0;
        if (kop_mono_ns() - rq->start_ns > s->opts.request_timeout_ms * 1000000LL)
            return refuse(s, conn, rq, 408, "Timeout", "the request took too long to arrive");
        return MHD_YES;
    }
    if (rq->too_big)
        return refuse(s, conn, rq, 413, "RequestEntityTooLarge",
                      "the request body is over the webhook's cap");
    char *out = NULL;
    int code = 500;
    (void)kop__webhook_dispatch(s, rq->route->path, rq->body.data, rq->body.len, &out, &code);
    return finish(s, conn, rq, code, out);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    kop_webhook_server *s = cls;
    struct request *rq = *req_cls;
    (void)conn;
    (void)toe;
    if (!rq)
        return;
    leave_flight(s, rq); /* a request dropped before its answer */
    kop_buf_fini(&rq->body);
    free(rq);
    *req_cls = NULL;
}

/* on_connection notes, in the thread that will handshake, which server it serves. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)conn;
    (void)socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        current_server = cls;
}

/* ---- start and stop -------------------------------------------------------- */

kop_err kop_webhook_server_start(kop_webhook_server *s, kop_status *st)
{
    struct sockaddr_storage sa;
    gnutls_datum_t cert, key;
    struct file_id cid = {0}, kid = {0};
    if (!s || s->http)
        return KOP_EINVAL;
    if (!MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK2)) {
        kop_status_setf(st, 0, NULL, "this libmicrohttpd has no HTTPS certificate callback");
        return KOP_ETLS;
    }
    /* The identity first: a change between it and the read is seen next time. */
    (void)file_id_of(s->cert_file, &cid);
    (void)file_id_of(s->key_file, &kid);
    kop_err err = load_pair(s, &cert, &key, st);
    if (err)
        return err;
    pthread_mutex_lock(&s->mu);
    err = install_pair(s, cert, key, &cid, &kid);
    s->checked_ms = kop_mono_ms();
    pthread_mutex_unlock(&s->mu);
    if (err) {
        kop_status_setf(st, 0, NULL, "%s or %s does not parse for TLS", s->cert_file,
                        s->key_file);
        return err;
    }
    if ((err = kop_http_parse_bind(s->bind, &sa, NULL, st)) != KOP_OK)
        return err; /* checked by new already: a name that no longer resolves */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TLS;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    long idle = s->opts.request_timeout_ms / 1000;
    s->http = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_HTTPS_CERT_CALLBACK2, retrieve, MHD_OPTION_THREAD_POOL_SIZE,
        s->opts.threads, MHD_OPTION_CONNECTION_LIMIT,
        kop_http_connection_limit(s->opts.max_connections), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(idle < IDLE_TIMEOUT_S_MIN ? IDLE_TIMEOUT_S_MIN : idle),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s, MHD_OPTION_END);
    if (!s->http) {
        kop_status_setf(st, 0, NULL, "cannot serve webhooks on %s: %s", s->bind,
                        strerror(errno));
        return KOP_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->http, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    __atomic_store_n(&s->serving, true, __ATOMIC_RELEASE);
    kop_log(KOP_LOG_INFO, "serving webhooks", KOP_LOG_STR("bind", s->bind),
            KOP_LOG_INT("port", s->port), KOP_LOG_STR("cert", s->cert_file),
            KOP_LOG_INT("handlers", s->nroutes));
    return KOP_OK;
}

void kop_webhook_server_stop(kop_webhook_server *s)
{
    if (!s || !s->http)
        return;
    __atomic_store_n(&s->serving, false, __ATOMIC_RELEASE);
    MHD_stop_daemon(s->http);
    s->http = NULL;
}

bool kop_webhook_server_is_serving(kop_webhook_server *s)
{
    return s && __atomic_load_n(&s->serving, __ATOMIC_ACQUIRE);
}

int kop_webhook_server_port(kop_webhook_server *s)
{
    return s ? s->port : 0;
}

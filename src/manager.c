/*
 * manager.c - caches, controllers, leader election, probes and shutdown
 * (see kop/manager.h for the sequence kop_manager_run follows).
 *
 * Signals: kop_manager_new blocks SIGINT and SIGTERM in the calling thread
 * before anything starts a thread (work queues start timer threads as
 * controllers are added), so every thread of the operator inherits the mask;
 * during kop_manager_run one thread takes them with sigwait and calls
 * kop_manager_stop. No code runs in a signal handler. kop_manager_free
 * restores the caller's mask.
 *
 * The HTTP endpoint is libmicrohttpd with its own polling thread; it reads
 * only thread-safe state (metrics registry, informer sync flags). Probes
 * must be answered whoever else connects: one client address holds at most
 * PROBE_PER_ADDRESS connections and an idle one is closed after
 * PROBE_IDLE_TIMEOUT_S, so a client that opens many and sends nothing
 * cannot starve the kubelet's probes into restarting the operator.
 *
 * Start order (kop_manager_run), each step waiting for the one before:
 *   1. the HTTP endpoint, so /healthz answers while caches fill and the
 *      kubelet does not restart an operator that is only slow to list;
 *   2. the webhook server, if asked for: listing a CRD served in two
 *      versions may need this very process's conversion webhook;
 *   3. every watched resource checked through discovery (check_resources):
 *      a typo stops the start here, before any cache retries forever;
 *   4. every informer, then their first lists (/readyz turns 200 after);
 *   5. the Lease, when elections are on, and the wait until this replica
 *      leads: a standby keeps warm caches but starts no controller;
 *   6. the runnables (controllers), in the order they were added.
 * Stop order (shut_down) is the reverse, for the same reasons read
 * backwards: the runnables are stopped and joined first, within the
 * shutdown deadline; only then is the Lease released, so no successor
 * reconciles while one of ours still writes; then the informers, which
 * reconciles read; the endpoint last, so probes answer to the end.
 *
 * Invariants: informers and runnables are registered before run and never
 * after (the calls refuse while running), so the arrays are read without
 * a lock once running; a controller starts only on synced caches, and the
 * Lease is released only after every runnable has been joined (both
 * asserted in debug builds). Reconciles that outlive the deadline are
 * abandoned, not freed under them: kop_manager_free then frees nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "client_request_internal.h"
#include "kop/events.h"
#include "kop/http.h"
#include "kop/leader.h"
#include "kop/log.h"
#include "kop/webhook.h"
#include "kop_internal.h"
#include "manager_internal.h"

#define MAX_INFORMERS 32
#define PROBE_CONNECTIONS    256 /* metrics, /healthz and /readyz connections in all */
#define PROBE_PER_ADDRESS    16  /* from one client address */
#define PROBE_IDLE_TIMEOUT_S 10
#define DISCOVERY_GRACE_MS   10000 /* for a resource discovery does not serve yet */

struct shared_informer {
    kop_resource resource; /* a copy: callers' structs may go, their strings stay */
    char *ns;     /* NULL: all namespaces */
    char *labels; /* NULL: every object */
    kop_informer *inf;
};

struct kop_manager {
    kop_manager_opts opts;
    char *name, *kubeconfig, *metrics_bind, *le_ns, *le_id; /* owned copies */

    kop_config *cfg;
    kop_client *client;
    kop_metrics *metrics;
    kop_metric *rest_requests, *leader_status;

    struct shared_informer informers[MAX_INFORMERS];
    int ninformers;
    kop_runnable runnables[KOP_MANAGER_MAX_RUNNABLES];
    int nrunnables;

    kop_leader *leader;
    kop_webhook_server *webhook; /* NULL until an operator asks for it */
    char *webhook_bind, *webhook_cert_dir; /* owned copies */
    kop_recorder *recorder; /* made on first ask, under mu */
    struct MHD_Daemon *http;
    int port;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stopping, lost, running;
    bool abandoned; /* reconciles outlived the shutdown deadline */
    sigset_t old_mask; /* the creator's signal mask, restored by free */
};

/* ---- flags -------------------------------------------------------------- */

static const char usage_text[] =
    "  --kubeconfig PATH        kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)\n"
    "  --metrics-bind ADDR      /metrics, /healthz, /readyz on ADDR (default 127.0.0.1:9090; 0: off)\n"
    "  --leader-elect           hold a Lease before reconciling (for several replicas)\n"
    "  --log-format text|json   log line format (default text)\n"
    "  --webhook-bind ADDR      serve the operator's webhooks over HTTPS on ADDR (default 0: off)\n"
    "  --webhook-cert-dir DIR   the webhooks' tls.crt and tls.key, reloaded when they change\n"
    "                           (default " KOP_WEBHOOK_DEFAULT_CERT_DIR ")\n"
    "  -v N                     log verbosity (default 0)\n";

const char *kop_manager_flags_usage(void)
{
    return usage_text;
}

/* flag_value returns the value of --name=value or of --name value. */
static const char *flag_value(const char *arg, const char *name, int argc, char **argv, int *i)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return NULL;
    if (arg[n] == '=')
        return arg + n + 1;
    if (arg[n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

int kop_manager_parse_flag(kop_manager_opts *o, int argc, char **argv, int *i, kop_status *st)
{
    const char *arg = argv[*i], *v;
    /* -v and --log-format may come in either order: each re-applies both. */
    static kop_log_config log_cfg; /* the settings applied so far */
    if (strcmp(arg, "--leader-elect") == 0 || strcmp(arg, "--leader-elect=true") == 0) {
        o->leader_elect = true;
    } else if (strcmp(arg, "--leader-elect=false") == 0) {
        o->leader_elect = false;
    } else if ((v = flag_value(arg, "--kubeconfig", argc, argv, i))) {
        o->kubeconfig = v;
    } else if ((v = flag_value(arg, "--metrics-bind", argc, argv, i))) {
        o->metrics_bind = v;
    } else if ((v = flag_value(arg, "--webhook-bind", argc, argv, i))) {
        o->webhook_bind = v;
    } else if ((v = flag_value(arg, "--webhook-cert-dir", argc, argv, i))) {
        o->webhook_cert_dir = v;
    } else if ((v = flag_value(arg, "--log-format", argc, argv, i))) {
        if (kop_log_format_parse(v, &log_cfg.format) != KOP_OK) {
            kop_status_setf(st, 0, NULL, "--log-format: \"%s\" is neither text nor json", v);
            return -1;
        }
        kop_log_setup(&log_cfg);
    } else if ((v = flag_value(arg, "-v", argc, argv, i)) ||
               (v = flag_value(arg, "--v", argc, argv, i))) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 0 || n > 10) {
            kop_status_setf(st, 0, NULL, "-v: \"%s\" is not a verbosity from 0 to 10", v);
            return -1;
        }
        log_cfg.verbosity = (int)n;
        kop_log_setup(&log_cfg);
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* ---- construction ------------------------------------------------------- */

static void count_response(const char *method, int code, void *user)
{
    kop_manager *m = user;
    char code_s[16];
    if (code > 0)
        snprintf(code_s, sizeof code_s, "%d", code);
    else
        snprintf(code_s, sizeof code_s, "<error>");
    /* client-go labels the host as host:port, without the scheme. */
    const char *host = kop_config_server(m->cfg), *sep = strstr(host, "://");
    const char *labels[] = {code_s, sep ? sep + 3 : host, method, NULL};
    kop_metric_inc(m->rest_requests, labels);
}

static kop_err register_metrics(kop_manager *m)
{
    static const char *const rest[] = {"code", "host", "method", NULL};
    static const char *const le[] = {"name", NULL};
    kop_err err =
        kop_metrics_counter(m->metrics, "rest_client_requests_total",
                            "Number of HTTP requests, partitioned by status code, method, "
                            "and host",
                            rest, &m->rest_requests);
    if (!err)
        err = kop_metrics_gauge(m->metrics, "leader_election_master_status",
                                "Gauge of if the reporting system is master of the relevant lease, "
                                "0 indicates backup, 1 indicates master. 'name' is the string used "
                                "to identify the lease. Please make sure to group by name.",
                                le, &m->leader_status);
    return err;
}

static char *dup_opt(const char *s)
{
    return s ? strdup(s) : NULL;
}

kop_err kop_manager_new(const kop_manager_opts *opts, kop_manager **out, kop_status *st)
{
    kop_err err = KOP_OK;
    *out = NULL;
    kop_manager *m = calloc(1, sizeof *m);
    if (!m)
        return KOP_ENOMEM;
    m->opts = opts ? *opts : (kop_manager_opts){0};
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGINT);
    sigaddset(&term, SIGTERM);
    /* Before any thread exists: threads inherit the mask, so only the
     * manager's sigwait ever takes these signals (see the note on top). */
    pthread_sigmask(SIG_BLOCK, &term, &m->old_mask);
    m->name = strdup(m->opts.name ? m->opts.name : "kopc-operator");
    m->kubeconfig = dup_opt(m->opts.kubeconfig);
    m->metrics_bind = strdup(m->opts.metrics_bind ? m->opts.metrics_bind : "127.0.0.1:9090");
    m->le_ns = dup_opt(m->opts.leader_election_namespace);
    m->webhook_bind = dup_opt(m->opts.webhook_bind);
    m->webhook_cert_dir = dup_opt(m->opts.webhook_cert_dir);
    m->le_id = strdup(m->opts.leader_election_id ? m->opts.leader_election_id : m->name);
    if (m->opts.shutdown_timeout_ms <= 0)
        m->opts.shutdown_timeout_ms = 30000; /* a pod's default grace period */
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (!m->name || !m->metrics_bind || !m->le_id) {
        err = KOP_ENOMEM;
        goto out;
    }
    err = kop_metrics_new(&m->metrics);
    if (!err)
        err = register_metrics(m);
    if (err)
        goto out;
    err = kop_config_auto(&(kop_config_opts){.kubeconfig = m->kubeconfig}, &m->cfg, st);
    if (err)
        goto out;
    char ua[128];
    snprintf(ua, sizeof ua, "%s/" KOP_VERSION_STRING " (libkop)", m->name);
    kop_client_opts co = {
        .qps = m->opts.client_qps,
        .burst = m->opts.client_burst,
        .user_agent = ua,
        .on_response = count_response,
        .on_response_user = m,
    };
    err = kop_client_new(m->cfg, &co, &m->client, st);
    if (err)
        goto out;
    *out = m;
    m = NULL;
out:
    kop_manager_free(m);
    return err;
}

void kop_manager_free(kop_manager *m)
{
    if (!m)
        return;
    kop_manager_stop(m);
    if (m->abandoned)
        return; /* threads still use everything: the process is exiting */
    /* In shut_down's order: controllers read the informers and the client. */
    for (int i = 0; i < m->nrunnables; i++) {
        kop_runnable *r = &m->runnables[i];
        r->stop(r->user);
        r->join(r->user, NULL);
        r->free(r->user);
    }
    /* Reconciles recorded events: the recorder goes once they are over,
     * and before the client and configuration its sender uses. */
    kop_recorder_free(m->recorder);
    for (int i = 0; i < m->ninformers; i++) {
        kop_informer_free(m->informers[i].inf);
        free(m->informers[i].ns);
        free(m->informers[i].labels);
    }
    kop_leader_free(m->leader);
    if (m->http)
        MHD_stop_daemon(m->http);
    kop_webhook_server_free(m->webhook); /* after the probes that read it */
    free(m->webhook_bind);
    free(m->webhook_cert_dir);
    kop_client_free(m->client);
    kop_config_free(m->cfg);
    kop_metrics_free(m->metrics);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cond);
    free(m->name);
    free(m->kubeconfig);
    free(m->metrics_bind);
    free(m->le_ns);
    free(m->le_id);
    pthread_sigmask(SIG_SETMASK, &m->old_mask, NULL);
    free(m);
}

/* ---- accessors ---------------------------------------------------------- */

kop_client *kop_manager_client(kop_manager *m)
{
    return m->client;
}

kop_config *kop_manager_config(kop_manager *m)
{
    return m->cfg;
}

kop_metrics *kop_manager_metrics(kop_manager *m)
{
    return m->metrics;
}

kop_err kop_manager_recorder(kop_manager *m, kop_recorder **out)
{
    if (!m || !out)
        return KOP_EINVAL;
    kop_err err = KOP_OK;
    /* Under mu: two reconciles asking first at once make one recorder. */
    pthread_mutex_lock(&m->mu);
    if (!m->recorder)
        err = kop_recorder_new(m->client, m->name, NULL, &m->recorder);
    *out = m->recorder;
    pthread_mutex_unlock(&m->mu);
    return err;
}

int kop_manager_bound_port(kop_manager *m)
{
    return m->port;
}

kop_err kop_manager_webhook_server(kop_manager *m, kop_webhook_server **out, kop_status *st)
{
    *out = m->webhook;
    if (m->webhook || !m->webhook_bind || strcmp(m->webhook_bind, "0") == 0)
        return KOP_OK; /* made already, or webhooks are off */
    if (m->running)
        return KOP_EINVAL;
    kop_webhook_server_opts wo = {.bind = m->webhook_bind,
                                  .cert_dir = m->webhook_cert_dir,
                                  .metrics = m->metrics};
    kop_err err = kop_webhook_server_new(&wo, &m->webhook, st);
    *out = m->webhook;
    return err;
}

kop_err kop_manager_add_runnable(kop_manager *m, const kop_runnable *r)
{
    if (!m || !r || !r->start || !r->stop || !r->join || !r->free || m->running)
        return KOP_EINVAL;
    if (m->nrunnables >= KOP_MANAGER_MAX_RUNNABLES)
        return KOP_ETOOBIG;
    m->runnables[m->nrunnables++] = *r;
    return KOP_OK;
}

/* same_str: equal strings, NULL and "" being the same. */
static bool same_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* same_resource: every field equal, the kind too (a kind typo in one
 * controller's copy must still be checked). */
static bool same_resource(const kop_resource *a, const kop_resource *b)
{
    return same_str(a->group, b->group) && same_str(a->version, b->version) &&
           same_str(a->resource, b->resource) && same_str(a->kind, b->kind) &&
           a->namespaced == b->namespaced;
}

static bool same_scope(const struct shared_informer *s, const kop_resource *r, const char *ns,
                       const char *labels)
{
    const kop_resource *a = &s->resource;
    return same_str(s->ns, r->namespaced ? ns : NULL) && same_str(s->labels, labels) &&
           same_str(a->group, r->group) && same_str(a->version, r->version) &&
           same_str(a->resource, r->resource);
}

kop_err kop_manager_informer(kop_manager *m, const kop_resource *r, const char *ns,
                             const char *label_selector, kop_informer **out)
{
    *out = NULL;
    /* One informer per resource and scope, shared by every controller that
     * asks: one list, one watch and one cache however many read it. */
    for (int i = 0; i < m->ninformers; i++) {
        if (same_scope(&m->informers[i], r, ns, label_selector)) {
            *out = m->informers[i].inf;
            return KOP_OK;
        }
    }
    if (m->running)
        return KOP_EINVAL; /* once running, the array is read without a lock */
    if (m->ninformers >= MAX_INFORMERS)
        return KOP_ETOOBIG;
    struct shared_informer *s = &m->informers[m->ninformers];
    kop_informer_opts io = {.resource = *r, .namespace = r->namespaced ? ns : NULL,
                            .label_selector = label_selector};
    kop_err err = kop_informer_new(m->client, &io, &s->inf);
    if (err)
        return err;
    s->resource = *r;
    s->ns = r->namespaced && ns && ns[0] ? strdup(ns) : NULL;
    s->labels = label_selector && label_selector[0] ? strdup(label_selector) : NULL;
    m->ninformers++;
    *out = s->inf;
    return KOP_OK;
}

/* ---- state -------------------------------------------------------------- */

void kop_manager_stop(kop_manager *m)
{
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

static bool stop_requested(kop_manager *m)
{
    pthread_mutex_lock(&m->mu);
    bool s = m->stopping;
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* Without elections every replica leads; with them, only the Lease holder. */
bool kop_manager_is_leader(kop_manager *m)
{
    return !m->opts.leader_elect || (m->leader && kop_leader_is_leader(m->leader));
}

const char *kop__manager_name(const kop_manager *m)
{
    return m ? m->name : NULL;
}

bool kop__manager_may_reconcile(kop_manager *m)
{
    return !stop_requested(m) && kop_manager_is_leader(m);
}

/* wait_stop sleeps up to ms or until stop is requested; true when stopping. */
static bool wait_stop(kop_manager *m, long ms)
{
    struct timespec until = kop__time_after(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&m->mu);
    while (!m->stopping && pthread_cond_timedwait(&m->cond, &m->mu, &until) == 0)
        ;
    bool s = m->stopping;
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* ---- start-up steps retried (kop_manager_retry) ------------------------- */

#define RETRY_FIRST_MS 500
#define RETRY_MAX_MS 30000
#define RETRY_SLICE_MS 250 /* how soon a kop_manager_stop is seen before run */

/* next_backoff doubles a start-up retry's wait, up to RETRY_MAX_MS. */
static long next_backoff(long ms)
{
    return ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : ms * 2;
}

/*
 * start_retryable tells whether err is no answer about a start-up step:
 * the apiserver not reached, or not yet willing (see kop_manager_retry).
 */
static bool start_retryable(kop_err err)
{
    switch (err) {
    case KOP_EIO:
    case KOP_ETLS:
    case KOP_EEOF:
    case KOP_ECREDENTIALS:
    case KOP_EUNAUTHORIZED:
    case KOP_EFORBIDDEN:
    case KOP_EAPI:
        return true;
    default:
        return kop_err_is_retryable(err);
    }
}

/*
 * retry_wait waits up to ms for a stop; true when stopping. While running,
 * the signal thread turns signals into kop_manager_stop. Before, nobody
 * takes SIGTERM and SIGINT (blocked since kop_manager_new), so they are
 * taken here, in slices short enough to see a kop_manager_stop from
 * another thread too, and recorded as a stop.
 */
static bool retry_wait(kop_manager *m, long ms)
{
    pthread_mutex_lock(&m->mu);
    bool running = m->running;
    pthread_mutex_unlock(&m->mu);
    if (running)
        return wait_stop(m, ms);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGINT);
    sigaddset(&term, SIGTERM);
    for (long left = ms; left > 0 && !stop_requested(m); left -= RETRY_SLICE_MS) {
        long slice = left < RETRY_SLICE_MS ? left : RETRY_SLICE_MS;
        struct timespec ts = {slice / 1000, (slice % 1000) * 1000000L};
        int sig = sigtimedwait(&term, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            kop_log(KOP_LOG_INFO, "signal received during start-up: stopping",
                    KOP_LOG_INT("signal", sig));
            kop_manager_stop(m);
        }
    }
    return stop_requested(m);
}

kop_err kop_manager_retry(kop_manager *m, const char *what, kop_step_fn step, void *user,
                          kop_status *st)
{
    kop_status local;
    kop_status *s = st ? st : &local;
    long backoff_ms = RETRY_FIRST_MS;

    kop_status_clear(s);
    if (!m || !step) {
        kop_status_setf(s, 0, NULL, "kop_manager_retry: a manager and a step are required");
        return KOP_EINVAL;
    }
    what = what ? what : "start-up step";
    for (;;) {
        if (stop_requested(m)) {
            kop_status_setf(s, 0, NULL, "stopped before %s was done", what);
            return KOP_ECANCELED;
        }
        kop_err err = step(user, s);
        if (!start_retryable(err))
            return err;
        kop_log(KOP_LOG_WARN, "start-up step failed, retrying", KOP_LOG_STR("step", what),
                KOP_LOG_ERR(err), KOP_LOG_STR("detail", s->message),
                KOP_LOG_INT("retry_ms", backoff_ms));
        if (retry_wait(m, backoff_ms)) {
            kop_status_setf(s, 0, NULL, "stopped before %s was done", what);
            return KOP_ECANCELED;
        }
        backoff_ms = next_backoff(backoff_ms);
    }
}

/* ---- HTTP: /metrics, /healthz, /readyz ------------------------------------ */

static bool all_synced(kop_manager *m)
{
    for (int i = 0; i < m->ninformers; i++)
        if (!kop_informer_has_synced(m->informers[i].inf))
            return false;
    return true;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, const char *type,
                               char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **req_cls)
{
    kop_manager *m = cls;
    (void)upload;
    (void)upload_size;
    (void)req_cls;
    /* RFC 9112: an HTTP/1.1 request without Host is a 400 (libmicrohttpd lets it through). */
    if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
        return respond(conn, 400, "text/plain", "no Host header\n", 15, MHD_RESPMEM_PERSISTENT);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond(conn, 405, "text/plain", "method not allowed\n", 19,
                       MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") == 0) {
        char *text = NULL;
        size_t len = 0;
        if (kop_metrics_render(m->metrics, &text, &len) != KOP_OK)
            return respond(conn, 500, "text/plain", "metrics unavailable\n", 20,
                           MHD_RESPMEM_PERSISTENT);
        return respond(conn, 200, KOP_METRICS_CONTENT_TYPE, text, len, MHD_RESPMEM_MUST_FREE);
    }
    /* Liveness says only that the process answers: caches that cannot sync
     * (the apiserver is down) must not get the pod restarted in a loop. */
    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0)
        return respond(conn, 200, "text/plain", "ok", 2, MHD_RESPMEM_PERSISTENT);
    /* Not ready while stopping, so traffic moves away before the end. */
    if (strcmp(url, "/readyz") == 0) {
        /* The webhooks count: the apiserver calls them through the same
         * Service the kubelet's probe gates. */
        if (m->webhook && !kop_webhook_server_is_serving(m->webhook))
            return respond(conn, 503, "text/plain", "webhook server not serving\n", 27,
                           MHD_RESPMEM_PERSISTENT);
        if (all_synced(m) && !stop_requested(m))
            return respond(conn, 200, "text/plain", "ok", 2, MHD_RESPMEM_PERSISTENT);
        return respond(conn, 503, "text/plain", "caches not synced\n", 18,
                       MHD_RESPMEM_PERSISTENT);
    }
    return respond(conn, 404, "text/plain", "not found\n", 10, MHD_RESPMEM_PERSISTENT);
}

static kop_err start_http(kop_manager *m, kop_status *st)
{
    struct sockaddr_storage sa;
    if (strcmp(m->metrics_bind, "0") == 0)
        return KOP_OK;
    kop_status why = {0};
    kop_err err = kop_http_parse_bind(m->metrics_bind, &sa, NULL, &why);
    if (err) {
        kop_status_setf(st, 0, NULL, "--metrics-bind: %s", why.message);
        return err;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m->http = MHD_start_daemon(
        flags, 0, NULL, NULL, on_http, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, kop_http_connection_limit(PROBE_CONNECTIONS),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PROBE_PER_ADDRESS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PROBE_IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (!m->http) {
        kop_status_setf(st, 0, NULL, "cannot serve metrics on %s: %s", m->metrics_bind,
                        strerror(errno));
        return KOP_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->http, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : 0;
    kop_log(KOP_LOG_INFO, "serving metrics and probes", KOP_LOG_STR("bind", m->metrics_bind),
            KOP_LOG_INT("port", m->port));
    return KOP_OK;
}

/* ---- signals ------------------------------------------------------------ */

struct signal_waiter {
    kop_manager *m;
    sigset_t set;
    pthread_t thread;
    bool quit;
};

static void *wait_signals(void *arg)
{
    struct signal_waiter *w = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&w->set, &sig) != 0)
            continue;
        if (__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE))
            return NULL;
        kop_log(KOP_LOG_INFO, "signal received: shutting down", KOP_LOG_INT("signal", sig));
        kop_manager_stop(w->m);
    }
}

/* ---- leader election ---------------------------------------------------- */

static void started_leading(void *user)
{
    kop_manager *m = user;
    const char *labels[] = {m->le_id, NULL};
    kop_metric_set(m->leader_status, labels, 1);
    kop_log(KOP_LOG_INFO, "became leader", KOP_LOG_STR("lease", m->le_id));
    pthread_mutex_lock(&m->mu);
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

static void stopped_leading(void *user)
{
    kop_manager *m = user;
    const char *labels[] = {m->le_id, NULL};
    kop_metric_set(m->leader_status, labels, 0);
    /* Losing the Lease stops the manager: another replica may lead already,
     * and a controller that kept writing would fight it. The process exits
     * with KOP_ESHUTDOWN and comes back as a standby. */
    pthread_mutex_lock(&m->mu);
    if (!m->stopping) {
        m->lost = true; /* not our decision: the Lease was lost */
        m->stopping = true;
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

static kop_err start_leader(kop_manager *m, kop_status *st)
{
    const char *labels[] = {m->le_id, NULL};
    kop_metric_set(m->leader_status, labels, 0);
    kop_leader_opts lo = {
        .lease_namespace = m->le_ns ? m->le_ns : kop_config_namespace(m->cfg),
        .lease_name = m->le_id,
        .release_on_stop = true, /* a successor need not wait out the lease */
        .on_started_leading = started_leading,
        .on_stopped_leading = stopped_leading,
        .user = m,
    };
    kop_err err = kop_leader_new(m->client, &lo, &m->leader, st);
    if (!err)
        err = kop_leader_start(m->leader);
    if (!err)
        kop_log(KOP_LOG_INFO, "waiting for the lease", KOP_LOG_STR("lease", m->le_id),
                KOP_LOG_STR("identity", kop_leader_identity(m->leader)));
    return err;
}

/* ---- run ---------------------------------------------------------------- */

/*
 * check_resource asks discovery about r until it gets an answer. Only an
 * answer about the resource ends the start: not served (after a grace of
 * DISCOVERY_GRACE_MS, since a CRD applied just before may be Established a
 * moment before discovery serves it), or served with another kind or
 * scope. No answer at all (no connection, TLS refused, 5xx) says nothing
 * about the resource: it is asked again with backoff, as an informer would
 * relist, while /healthz answers and /readyz does not.
 */
static kop_err check_resource(kop_manager *m, const kop_resource *r, kop_status *st)
{
    long grace = 0, backoff_ms = RETRY_FIRST_MS;
    for (;;) {
        long wait_ms;
        kop_err err = kop__discovery_check(m->client, r, st);
        if (err == KOP_OK || err == KOP_EINVAL)
            return err;
        if (err == KOP_ENOTFOUND) {
            if (grace >= DISCOVERY_GRACE_MS)
                return err;
            if (grace == 0)
                kop_log(KOP_LOG_INFO, "waiting for discovery to serve a watched resource",
                        KOP_LOG_STR("resource", r->resource), KOP_LOG_STR("version", r->version),
                        KOP_LOG_INT("grace_ms", DISCOVERY_GRACE_MS));
            wait_ms = 500;
            grace += wait_ms;
        } else {
            kop_log(KOP_LOG_WARN, "discovery failed, retrying", KOP_LOG_STR("resource", r->resource),
                    KOP_LOG_ERR(err), KOP_LOG_STR("detail", st ? st->message : ""),
                    KOP_LOG_INT("retry_ms", backoff_ms));
            wait_ms = backoff_ms;
            backoff_ms = next_backoff(backoff_ms);
        }
        if (wait_stop(m, wait_ms))
            return KOP_ECANCELED;
    }
}

/*
 * check_resources checks every watched resource before any cache starts:
 * a typo in a group, version or plural would otherwise make an informer
 * retry its list forever, and one in a kind would make owner references
 * never match their primary, both without a word.
 */
static kop_err check_resources(kop_manager *m, kop_status *st)
{
    for (int i = 0; i < m->ninformers; i++) {
        const kop_resource *r = &m->informers[i].resource;
        bool seen = false; /* the same resource, spelled the same, in another scope */
        for (int j = 0; j < i && !seen; j++)
            seen = same_resource(&m->informers[j].resource, r);
        if (seen)
            continue;
        kop_err err = check_resource(m, r, st);
        if (err == KOP_ECANCELED)
            return err;
        if (err) {
            kop_log(KOP_LOG_ERROR, "watched resource refused by discovery",
                    KOP_LOG_STR("group", r->group), KOP_LOG_STR("version", r->version),
                    KOP_LOG_STR("resource", r->resource), KOP_LOG_STR("kind", r->kind),
                    KOP_LOG_STR("error", st ? st->message : ""));
            return err;
        }
    }
    return KOP_OK;
}

static kop_err start_informers(kop_manager *m, kop_status *st)
{
    for (int i = 0; i < m->ninformers; i++) {
        kop_err err = kop_informer_start(m->informers[i].inf);
        if (err) {
            kop_status_setf(st, 0, NULL, "start informer for %s", m->informers[i].resource.resource);
            return err;
        }
    }
    /* All started before any is waited for: their lists run side by side. */
    for (int i = 0; i < m->ninformers; i++) {
        while (!kop_informer_wait_synced(m->informers[i].inf, 500))
            if (stop_requested(m))
                return KOP_ECANCELED;
    }
    kop_log(KOP_LOG_INFO, "caches synced", KOP_LOG_INT("informers", m->ninformers));
    return KOP_OK;
}

/*
 * shut_down stops taking work, gives reconciles in flight until the
 * shutdown deadline, then stops the elector (releasing the Lease only once
 * no reconcile runs), the informers and the endpoint. Returns false when
 * reconciles outlived the deadline: they are abandoned to the exiting
 * process, and nothing they might use is freed.
 */
static bool shut_down(kop_manager *m)
{
    struct timespec deadline = kop__time_after(CLOCK_REALTIME, m->opts.shutdown_timeout_ms);
    kop_log(KOP_LOG_INFO, "stopping controllers");
    for (int i = 0; i < m->nrunnables; i++)
        m->runnables[i].stop(m->runnables[i].user);
    int joined;
    for (joined = 0; joined < m->nrunnables; joined++) {
        kop_runnable *r = &m->runnables[joined];
        if (!r->join(r->user, &deadline)) {
            kop_log(KOP_LOG_ERROR, "work still running at the shutdown deadline",
                    KOP_LOG_STR("runnable", r->name),
                    KOP_LOG_INT("deadline_ms", m->opts.shutdown_timeout_ms));
            m->abandoned = true;
            return false;
        }
    }
    /* The Lease goes only once no reconcile of ours can still write. */
    KOP_ASSERT(joined == m->nrunnables);
    if (m->leader)
        kop_leader_stop(m->leader); /* releases the Lease: reconciles are over */
    for (int i = 0; i < m->ninformers; i++)
        kop_informer_stop(m->informers[i].inf);
    kop_webhook_server_stop(m->webhook); /* after the caches that may convert through it */
    if (m->http) {
        MHD_stop_daemon(m->http);
        m->http = NULL;
    }
    return true;
}

kop_err kop_manager_run(kop_manager *m, kop_status *st)
{
    kop_err err = KOP_OK;
    struct signal_waiter sw = {.m = m};
    bool waiter = false;

    kop_status_clear(st);
    pthread_mutex_lock(&m->mu); /* read by kop_manager_retry in any thread */
    bool again = m->running;
    m->running = true;
    pthread_mutex_unlock(&m->mu);
    if (again)
        return KOP_EINVAL;
    sigemptyset(&sw.set);
    sigaddset(&sw.set, SIGINT);
    sigaddset(&sw.set, SIGTERM); /* blocked since kop_manager_new */
    if (pthread_create(&sw.thread, NULL, wait_signals, &sw) == 0)
        waiter = true;

    err = start_http(m, st);
    /* Webhooks before caches: listing a CRD served in two versions may
     * need this very process's conversion webhook. */
    if (!err && m->webhook)
        err = kop_webhook_server_start(m->webhook, st);
    if (!err)
        err = check_resources(m, st);
    if (!err)
        err = start_informers(m, st);
    if (!err && m->opts.leader_elect)
        err = start_leader(m, st);
    /* Caches are warm before the Lease is won, so a new leader reconciles
     * at once; a standby waits here, its caches kept current. */
    while (!err && !kop_manager_is_leader(m) && !wait_stop(m, 200))
        ;
    for (int i = 0; !err && !stop_requested(m) && i < m->nrunnables; i++) {
        KOP_ASSERT(all_synced(m)); /* controllers only ever see synced caches */
        err = m->runnables[i].start(m->runnables[i].user);
        if (err)
            kop_status_setf(st, 0, NULL, "%s did not start: %s", m->runnables[i].name,
                            kop_strerror(err));
    }
    if (!err)
        while (!wait_stop(m, 1000))
            ;

    if (!shut_down(m) && !err) {
        kop_status_setf(st, 0, NULL, "reconciles outlived the %ld ms shutdown deadline",
                        m->opts.shutdown_timeout_ms);
        err = KOP_ETIMEOUT;
    }
    if (err == KOP_ECANCELED)
        err = KOP_OK; /* stopped during start-up */
    if (!err && m->lost) {
        kop_status_setf(st, 0, NULL, "leader election lost: stopped reconciling");
        err = KOP_ESHUTDOWN;
    }
    if (waiter) {
        __atomic_store_n(&sw.quit, true, __ATOMIC_RELEASE);
        pthread_kill(sw.thread, SIGTERM); /* blocked everywhere: sigwait takes it */
        pthread_join(sw.thread, NULL);
    }
    kop_log(KOP_LOG_INFO, "manager stopped");
    return err;
}

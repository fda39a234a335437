/*
 * probe.c - the gateway mode's probe (see probe.h): one TLS connection to
 * the gateway per host of an instance about to be Running, as a participant
 * would make it, and core/gateway.c's verdict on what came back.
 *
 * One probe: TCP connect and TLS handshake with SNI <host> (libcurl,
 * CONNECT_ONLY, to --gateway-probe-address whatever the host resolves to),
 * the certificate checked as a participant's client checks it: its chain
 * against --gateway-probe-ca (a PEM file, read at every probe, so a renewed
 * CA bundle counts from the next probe; only that file, not the system's
 * store beside it) or, without the flag, the system's CA store, and its
 * names against <host>. A certificate that fails (a wrong CA, the gateway's
 * default certificate, someone else's) is not a served host: the probe
 * stops at the handshake, sends nothing, and the instance waits with
 * CTF_REASON_GATEWAY_CERT and libcurl's words for what failed. There is no
 * opt-out: whoever runs the gateway holds its certificate, and so can give
 * the operator the CA (or the self-signed certificate) that vouches for it.
 * For a TCP exposure it then waits
 * PROBE_SILENT_MS for the instance to speak (a greeting: served; the
 * connection closed without a byte: the gateway has no server), and if the
 * instance stays silent it sends one "GET / HTTP/1.1" and reads the answer:
 * a gateway that has not applied the route yet answers it with its 404
 * (Traefik hands an SNI it does not route to its HTTP handler), while a
 * silent challenge stays silent or hangs up. For an HTTP exposure the
 * request goes at once. A 404 (or 421) is the gateway's only if the
 * reserved host CTF_GATEWAY_UNROUTED_LABEL.<domain> gets the same status
 * and body: a web challenge may 404 at "/" itself.
 *
 * Bounds: connect PROBE_CONNECT_MS, the whole exchange PROBE_TOTAL_MS (a TCP
 * instance that stays silent after the request line: PROBE_SILENT_MS +
 * PROBE_ANSWER_MS, as a gateway answers that line at once), the answer read
 * to PROBE_READ_MAX bytes.
 *
 * Off the workers: a reconcile never waits for a probe. It finds its host's
 * slot in a table of CTF_PROBE_MAX_IN_FLIGHT (under a mutex): none, it takes
 * a free one and starts a detached thread that probes and writes the result
 * there; running, it looks again later; done, it takes the result. So at
 * most CTF_PROBE_MAX_IN_FLIGHT probes (threads) run at once, each a few KiB
 * of heap and a thread's stack for at most about 2 s, and an instance whose
 * host finds no free slot looks again in ctf_probe_retry_ms. A probe only
 * runs for an instance that is not Running yet, so a Running CTF probes
 * nothing.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <kop/common.h>
#include <kop/log.h>

#include "controller/probe.h"
#include "core/gateway.h"

#define PROBE_CONNECT_MS 1000
#define PROBE_TOTAL_MS   2000
#define PROBE_SILENT_MS  150
#define PROBE_ANSWER_MS  1000
#define PROBE_READ_MAX   4096
#define PROBE_MSG_SIZE   768 /* a message: the host, the CA file's path, libcurl's words */

/* probe_read: what one connection brought back. */
typedef struct probe_read {
    char buf[PROBE_READ_MAX];
    size_t len;
    bool closed;    /* the peer closed (or the connection failed after the handshake) */
    bool poked;     /* the HTTP request was sent */
    bool untrusted; /* no session: the certificate failed verification, or the CA is unreadable */
} probe_read;

/* probe_gateway: where and how a probe connects; borrowed strings. */
typedef struct probe_gateway {
    const char *address; /* "host:port" of the gateway */
    int port;            /* the participants' port, in the URL whose host is the SNI */
    const char *ca;      /* PEM file of trusted CAs; NULL or "": the system's store */
} probe_gateway;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* wait_socket polls the connection's socket for events until deadline; false on timeout. */
static bool wait_socket(CURL *curl, short events, long deadline)
{
    curl_socket_t fd;
    long left = deadline - now_ms();
    if (left <= 0 || curl_easy_getinfo(curl, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
        fd == CURL_SOCKET_BAD)
        return false;
    struct pollfd p = {.fd = fd, .events = events};
    return poll(&p, 1, (int)left) > 0;
}

/*
 * read_answer reads into r until the peer closes, the buffer fills, the
 * deadline passes, or (first_bytes) the first bytes arrive.
 */
static void read_answer(CURL *curl, probe_read *r, long deadline, bool first_bytes)
{
    while (r->len < sizeof r->buf) {
        size_t n = 0;
        CURLcode rc = curl_easy_recv(curl, r->buf + r->len, sizeof r->buf - r->len, &n);
        if (rc == CURLE_OK && n == 0) {
            r->closed = true;
            return;
        }
        if (rc == CURLE_OK) {
            r->len += n;
            if (first_bytes)
                return;
            continue;
        }
        if (rc != CURLE_AGAIN) {
            r->closed = true;
            return;
        }
        if (!wait_socket(curl, POLLIN, deadline))
            return;
    }
}

/* send_all writes len bytes of data before deadline; false when it could not. */
static bool send_all(CURL *curl, const char *data, size_t len, long deadline)
{
    size_t off = 0;
    while (off < len) {
        size_t n = 0;
        CURLcode rc = curl_easy_send(curl, data + off, len - off, &n);
        if (rc == CURLE_OK) {
            off += n;
            continue;
        }
        if (rc != CURLE_AGAIN || !wait_socket(curl, POLLOUT, deadline))
            return false;
    }
    return true;
}

/*
 * cert_failed: rc says the handshake stopped at the certificate (its chain,
 * its names) or at the CA file, as opposed to a connection that failed.
 */
static bool cert_failed(CURLcode rc)
{
    return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
           rc == CURLE_SSL_PINNEDPUBKEYNOTMATCH || rc == CURLE_SSL_ISSUER_ERROR;
}

/* verify_against sets curl to check the peer's chain and names, against ca or the system store. */
static void verify_against(CURL *curl, const char *ca)
{
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca && ca[0]) {
        /* Only that file: the system's store beside it would also vouch for a stranger. */
        curl_easy_setopt(curl, CURLOPT_CAINFO, ca);
        curl_easy_setopt(curl, CURLOPT_CAPATH, NULL);
    }
}

/*
 * probe_host makes one connection through the gateway gw with SNI and Host
 * host, and fills r. wait_first: a TCP exposure, whose instance may speak
 * first. false with why (size bytes) when no TLS session came up, r->untrusted
 * when that is because the certificate failed verification.
 */
static bool probe_host(const probe_gateway *gw, const char *host, bool wait_first, probe_read *r,
                       char *why, size_t size)
{
    char url[CTF_HOST_SIZE + 32], connect_to[2 * CTF_HOST_SIZE + 32], req[CTF_HOST_SIZE + 96];
    char detail[CURL_ERROR_SIZE] = "";
    const char *address = gw->address;
    int port = gw->port;
    struct curl_slist *to = NULL;
    bool ok = false;
    long deadline = now_ms() + PROBE_TOTAL_MS;
    CURL *curl = curl_easy_init();
    memset(r, 0, sizeof *r);
    snprintf(url, sizeof url, "https://%s:%d/", host, port);
    snprintf(connect_to, sizeof connect_to, "%s:%d:%s", host, port, address);
    if (!curl || !(to = curl_slist_append(NULL, connect_to))) {
        snprintf(why, size, "out of memory");
        goto out;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CONNECT_TO, to);
    curl_easy_setopt(curl, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    verify_against(curl, gw->ca);
    /* No ALPN: the session is ours to read raw. With h2 negotiated, libcurl's
     * curl_easy_recv goes through its HTTP/2 layer (and crashed there). */
    curl_easy_setopt(curl, CURLOPT_SSL_ENABLE_ALPN, 0L);
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)PROBE_CONNECT_MS);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)PROBE_TOTAL_MS);
    CURLcode rc = curl_easy_perform(curl);
    if (rc != CURLE_OK && cert_failed(rc)) {
        r->untrusted = true;
        bool file = gw->ca && gw->ca[0];
        snprintf(why, size,
                 "the gateway at %s presents a certificate that fails verification against %s%s: "
                 "%s",
                 address, file ? "the CA file " : "the system's CA store", file ? gw->ca : "",
                 detail[0] ? detail : curl_easy_strerror(rc));
        goto out;
    }
    if (rc != CURLE_OK) {
        snprintf(why, size, "no TLS session with the gateway at %s: %s", address,
                 curl_easy_strerror(rc));
        goto out;
    }
    ok = true;
    if (wait_first) {
        long silent = now_ms() + PROBE_SILENT_MS;
        read_answer(curl, r, silent < deadline ? silent : deadline, true);
        if (r->len > 0 || r->closed)
            goto out;
    }
    int n = snprintf(req, sizeof req,
                     "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: kopc-gateway-probe\r\n"
                     "Connection: close\r\n\r\n",
                     host);
    r->poked = true;
    if (wait_first && now_ms() + PROBE_ANSWER_MS < deadline)
        deadline = now_ms() + PROBE_ANSWER_MS;
    if (n > 0 && (size_t)n < sizeof req && send_all(curl, req, (size_t)n, deadline))
        read_answer(curl, r, deadline, false);
    else
        r->closed = true;
out:
    curl_slist_free_all(to);
    curl_easy_cleanup(curl);
    return ok;
}

/* gateway_port: the participants' port (the endpoints show it), 443 when unset. */
static int gateway_port(const ctf_config *cfg)
{
    return cfg->gateway.port > 0 ? cfg->gateway.port : CTF_GATEWAY_DEFAULT_PORT;
}

/* what_came: a few words on an answer that was the gateway's, for the message. */
static void what_came(const probe_read *r, char *out, size_t size)
{
    int code = ctf_gateway_http_status(r->buf, r->len);
    if (code)
        snprintf(out, size, "the gateway's HTTP %d", code);
    else if (r->len == 0 && r->closed)
        snprintf(out, size, "the connection closed without a byte (no server yet)");
    else
        snprintf(out, size, "no answer");
}

/*
 * served_host probes one host (two connections for a 404 or 421: the
 * host's, then the unrouted host's): CTF_PROBE_OK when its instance
 * answered, else CTF_PROBE_NOT_YET (or CTF_PROBE_UNTRUSTED: the
 * certificate) with msg saying what it got instead. r and ref are the
 * caller's buffers.
 */
static ctf_probe_outcome served_host(const ctf_config *cfg, const char *host, bool http,
                                     probe_read *r, probe_read *ref, char *msg, size_t size)
{
    probe_gateway gw = {.address = cfg->gateway.probe_address,
                        .port = gateway_port(cfg),
                        .ca = cfg->gateway.probe_ca};
    char why[CURL_ERROR_SIZE + CTF_HOST_SIZE + PATH_MAX], unrouted[CTF_HOST_SIZE];
    long t0 = now_ms();
    bool up = probe_host(&gw, host, !http, r, why, sizeof why);
    kop_log(KOP_LOG_DEBUG, "gateway probe", KOP_LOG_STR("host", host),
            KOP_LOG_BOOL("session", up), KOP_LOG_INT("bytes", (long long)r->len),
            KOP_LOG_BOOL("poked", r->poked), KOP_LOG_BOOL("closed", r->closed),
            KOP_LOG_INT("ms", now_ms() - t0), KOP_LOG_STR("error", up ? "" : why));
    if (!up && r->untrusted) {
        if (snprintf(msg, size, "the certificate for %s is not trusted: %s", host, why) >=
            (int)size)
            msg[size - 1] = '\0'; /* cut: the message is for people */
        return CTF_PROBE_UNTRUSTED;
    }
    if (!up) {
        if (snprintf(msg, size, "waiting for the gateway to serve %s: %s", host, why) >= (int)size)
            msg[size - 1] = '\0';
        return CTF_PROBE_NOT_YET;
    }
    ctf_probe_verdict v = ctf_gateway_probe_verdict(r->buf, r->len, http, r->poked, r->closed);
    if (v == CTF_PROBE_COMPARE) {
        /* Too long a domain cuts the name: then no route matches it either, which is the point. */
        if (snprintf(unrouted, sizeof unrouted, "%s.%s", CTF_GATEWAY_UNROUTED_LABEL,
                     cfg->gateway.domain) >= (int)sizeof unrouted)
            unrouted[sizeof unrouted - 1] = '\0';
        /* The instance's own 404 unless a host without a route gets the very same. */
        v = probe_host(&gw, unrouted, false, ref, why, sizeof why) &&
                    ctf_gateway_probe_same(r->buf, r->len, ref->buf, ref->len)
                ? CTF_PROBE_GATEWAY
                : CTF_PROBE_SERVED;
    }
    if (v == CTF_PROBE_SERVED)
        return CTF_PROBE_OK;
    what_came(r, why, sizeof why);
    if (snprintf(msg, size, "waiting for the gateway to serve %s: %s", host, why) >= (int)size)
        msg[size - 1] = '\0';
    return CTF_PROBE_NOT_YET;
}

/* ---- probes off the workers: a table of slots, one thread per probe ---- */

/*
 * probe_slot: one probe of one host, run by a thread of its own. A slot is
 * free (!used), running (used, !done) or holding a result (used, done) that
 * the next reconcile of its instance takes. A result nobody took within
 * RESULT_KEEP_MS (the instance went away) is freed by whoever needs a slot.
 */
typedef struct probe_slot {
    bool used, done, served;
    bool untrusted; /* the last answer: a certificate that failed verification */
    long done_at;   /* now_ms() when done */
    char host[CTF_HOST_SIZE];
    char msg[PROBE_MSG_SIZE];
} probe_slot;

#define RESULT_KEEP_MS 3000
#define PROBE_GAP_MS   200

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static probe_slot slots[CTF_PROBE_MAX_IN_FLIGHT];
/* Probe threads not finished (under slots_mu), and the signal that it dropped to 0. */
static int threads_running;
static pthread_cond_t threads_idle = PTHREAD_COND_INITIALIZER;

/* probe_job: what a probe thread needs, owned by it (the reconcile's inputs are borrowed). */
typedef struct probe_job {
    int slot;
    bool http;
    char address[CTF_HOST_SIZE + 8];
    char domain[CTF_HOST_SIZE];
    char host[CTF_HOST_SIZE];
    char ca[PATH_MAX]; /* "": the system's store */
    int port;
    probe_read answers[2];
} probe_job;

static void *probe_thread(void *arg)
{
    probe_job *job = arg;
    ctf_config cfg = {.gateway = {.domain = job->domain, .port = job->port,
                                  .probe_address = job->address, .probe_ca = job->ca}};
    char msg[PROBE_MSG_SIZE] = "";
    ctf_probe_outcome got = served_host(&cfg, job->host, job->http, &job->answers[0],
                                        &job->answers[1], msg, sizeof msg);
    pthread_mutex_lock(&slots_mu);
    probe_slot *ps = &slots[job->slot];
    ps->done = true;
    ps->served = got == CTF_PROBE_OK;
    ps->untrusted = got == CTF_PROBE_UNTRUSTED;
    ps->done_at = now_ms();
    snprintf(ps->msg, sizeof ps->msg, "%s", msg);
    pthread_mutex_unlock(&slots_mu);
    free(job);
    /* OpenSSL's state of this thread (its error queue, its per-thread keys) goes now rather
     * than at the thread's exit, which may come after ctf_probe_wait_idle's caller has
     * exited: LeakSanitizer saw those blocks left once, with the machine loaded. */
    OPENSSL_thread_stop();
    /* Last: ctf_probe_wait_idle's caller may exit once this thread holds nothing. */
    pthread_mutex_lock(&slots_mu);
    if (--threads_running == 0)
        pthread_cond_broadcast(&threads_idle);
    pthread_mutex_unlock(&slots_mu);
    return NULL;
}

/* find_slot: the slot of host, or -1. Under slots_mu. */
static int find_slot(const char *host)
{
    for (int i = 0; i < CTF_PROBE_MAX_IN_FLIGHT; i++)
        if (slots[i].used && strcmp(slots[i].host, host) == 0)
            return i;
    return -1;
}

/* take_free_slot: a free slot (or one whose result went stale) marked running, or -1. */
static int take_free_slot(const char *host, long now)
{
    for (int i = 0; i < CTF_PROBE_MAX_IN_FLIGHT; i++) {
        probe_slot *ps = &slots[i];
        if (ps->used && !(ps->done && now - ps->done_at > RESULT_KEEP_MS))
            continue;
        memset(ps, 0, sizeof *ps);
        ps->used = true;
        snprintf(ps->host, sizeof ps->host, "%s", host);
        return i;
    }
    return -1;
}

/*
 * start_probe starts a thread probing host into slot (taken by the caller);
 * false (the slot freed) when the thread cannot be made.
 */
static bool start_probe(const ctf_config *cfg, const char *host, bool http, int slot)
{
    pthread_t t;
    pthread_attr_t attr;
    bool ok = false;
    probe_job *job = calloc(1, sizeof *job);
    if (job) {
        job->slot = slot;
        job->http = http;
        job->port = gateway_port(cfg);
        snprintf(job->address, sizeof job->address, "%s", cfg->gateway.probe_address);
        snprintf(job->domain, sizeof job->domain, "%s", cfg->gateway.domain);
        if (cfg->gateway.probe_ca)
            snprintf(job->ca, sizeof job->ca, "%s", cfg->gateway.probe_ca);
        snprintf(job->host, sizeof job->host, "%s", host);
        if (pthread_attr_init(&attr) == 0) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            pthread_mutex_lock(&slots_mu);
            threads_running++; /* before the thread can end and count itself out */
            pthread_mutex_unlock(&slots_mu);
            ok = pthread_create(&t, &attr, probe_thread, job) == 0;
            pthread_attr_destroy(&attr);
            if (!ok) {
                pthread_mutex_lock(&slots_mu);
                threads_running--;
                pthread_mutex_unlock(&slots_mu);
            }
        }
    }
    if (!ok) {
        free(job);
        pthread_mutex_lock(&slots_mu);
        slots[slot].used = false;
        pthread_mutex_unlock(&slots_mu);
    }
    return ok;
}

/*
 * host_state: for one host, take its result (served: kept until every host
 * of the instance is served), see its probe running, or start one (again).
 * A host keeps its slot while its instance waits, and with it the message of
 * its last answer: the message a reconcile reports stays the same from one
 * probe to the next until the answer changes, so the Challenge's status is
 * not rewritten (an event, a reconcile, a probe: a loop) at every probe. A
 * host is probed again PROBE_GAP_MS after its last answer at the soonest.
 * CTF_PROBE_OK served, CTF_PROBE_NOT_YET not (yet), CTF_PROBE_UNTRUSTED its
 * last answer was a certificate that failed (kept, like the message, while
 * it is probed again), CTF_PROBE_BUSY no slot.
 */
static ctf_probe_outcome host_state(const ctf_config *cfg, const char *host, bool http, char *msg,
                                    size_t size)
{
    long now = now_ms();
    ctf_probe_outcome out = CTF_PROBE_NOT_YET;
    bool start = false;
    int slot;
    pthread_mutex_lock(&slots_mu);
    slot = find_slot(host);
    if (slot >= 0) {
        probe_slot *ps = &slots[slot];
        if (ps->done && ps->served && now - ps->done_at <= RESULT_KEEP_MS) {
            out = CTF_PROBE_OK;
        } else if (ps->done && now - ps->done_at >= PROBE_GAP_MS) {
            ps->done = false; /* again, in the same slot, keeping the last answer's message */
            start = true;
        }
        if (out != CTF_PROBE_OK) {
            if (ps->msg[0] && !ps->served && ps->untrusted)
                out = CTF_PROBE_UNTRUSTED;
            if (ps->msg[0] && !ps->served)
                snprintf(msg, size, "%s", ps->msg);
            else
                snprintf(msg, size, "waiting for the gateway probe of %s", host);
        }
    } else if ((slot = take_free_slot(host, now)) >= 0) {
        snprintf(msg, size, "waiting for the gateway probe of %s", host);
        start = true;
    } else {
        snprintf(msg, size, "waiting for a turn to probe the gateway");
        out = CTF_PROBE_BUSY;
    }
    pthread_mutex_unlock(&slots_mu);
    if (start && !start_probe(cfg, host, http, slot))
        snprintf(msg, size, "waiting for the gateway probe: cannot start a thread");
    return out;
}

/* release_hosts frees the held results of eps's hosts (their instance is Running). */
static void release_hosts(const json_t *eps)
{
    const json_t *e;
    size_t i;
    pthread_mutex_lock(&slots_mu);
    json_array_foreach(eps, i, e)
    {
        const char *host = json_string_value(json_object_get(e, "host"));
        int slot = host ? find_slot(host) : -1;
        if (slot >= 0 && slots[slot].done)
            slots[slot].used = false;
    }
    pthread_mutex_unlock(&slots_mu);
}

ctf_probe_outcome ctf_gateway_served(const ctf_config *cfg, const json_t *eps, char *msg,
                                     size_t size)
{
    const json_t *e;
    size_t i;
    ctf_probe_outcome out = CTF_PROBE_OK;
    if (!cfg->gateway.probe_address || !cfg->gateway.probe_address[0])
        return CTF_PROBE_OFF;
    json_array_foreach(eps, i, e)
    {
        const char *host = json_string_value(json_object_get(e, "host"));
        bool http = kop_streq(json_string_value(json_object_get(e, "type")), "HTTP");
        char why[PROBE_MSG_SIZE];
        if (!host)
            continue;
        ctf_probe_outcome h = host_state(cfg, host, http, why, sizeof why);
        /* The first host not served says why; a certificate that fails says more than a wait. */
        if (h != CTF_PROBE_OK && (out == CTF_PROBE_OK ||
                                  (h == CTF_PROBE_UNTRUSTED && out != CTF_PROBE_UNTRUSTED))) {
            if (snprintf(msg, size, "%s", why) >= (int)size)
                msg[size - 1] = '\0';
            out = h;
        }
    }
    if (out == CTF_PROBE_OK)
        release_hosts(eps);
    return out;
}

long ctf_probe_retry_ms(double age_ms)
{
    if (age_ms < 30 * 1000.0)
        return 200;
    if (age_ms < 5 * 60 * 1000.0)
        return 1000;
    return 3000;
}

kop_err ctf_probe_ca_check(const char *path, kop_status *st)
{
    kop_err err = KOP_OK;
    int certs = 0;
    X509 *x;
    FILE *f = fopen(path, "r");
    if (!f) {
        kop_status_setf(st, 0, NULL, "--gateway-probe-ca %s: cannot read it: %s", path,
                        strerror(errno));
        return KOP_ECONFIG;
    }
    while ((x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
        certs++;
        X509_free(x);
    }
    ERR_clear_error(); /* the end of the file reads as an error; nothing else is asked of it */
    if (certs == 0) {
        kop_status_setf(st, 0, NULL,
                        "--gateway-probe-ca %s: no PEM certificate in it (the CA that signed the "
                        "gateway's certificate, or a self-signed certificate itself)",
                        path);
        err = KOP_ECONFIG;
    }
    fclose(f);
    return err;
}

bool ctf_probe_wait_idle(long timeout_ms)
{
    struct timespec until;
    bool idle;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&slots_mu);
    while (threads_running > 0 &&
           pthread_cond_timedwait(&threads_idle, &slots_mu, &until) == 0)
        ;
    idle = threads_running == 0;
    pthread_mutex_unlock(&slots_mu);
    return idle;
}

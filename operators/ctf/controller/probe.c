/*
 * probe.c - the gateway mode's probe (see probe.h): one TLS connection to
 * the gateway per host of an instance about to be Running, as a participant
 * would make it, and core/gateway.c's verdict on what came back.
 *
 * One probe: TCP connect and TLS handshake with SNI <host> (libcurl,
 * CONNECT_ONLY, to --gateway-probe-address whatever the host resolves to;
 * the certificate is not checked: the probe asks whether the gateway routes
 * the host, not whether it is trusted). For a TCP exposure it then waits
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
 * PROBE_ANSWER_MS, as a gateway answers that line at once), the
 * answer read to PROBE_READ_MAX bytes; CTF_PROBE_MAX_IN_FLIGHT probes at once
 * (an atomic count: a worker that finds them taken does not wait, its
 * instance looks again in ctf_probe_retry_ms). A probe only runs for an
 * instance that is not Running yet, so a Running CTF probes nothing.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include <kop/common.h>
#include <kop/log.h>

#include "controller/probe.h"
#include "core/gateway.h"

#define PROBE_CONNECT_MS 1000
#define PROBE_TOTAL_MS   2000
#define PROBE_SILENT_MS  150
#define PROBE_ANSWER_MS  1000
#define PROBE_READ_MAX   4096

static atomic_int in_flight;

/* probe_read: what one connection brought back. */
typedef struct probe_read {
    char buf[PROBE_READ_MAX];
    size_t len;
    bool closed; /* the peer closed (or the connection failed after the handshake) */
    bool poked;  /* the HTTP request was sent */
} probe_read;

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
 * probe_host makes one connection through the gateway at address
 * ("host:port") with SNI and Host host, port the participants' port, and
 * fills r. wait_first: a TCP exposure, whose instance may speak first.
 * false with why (size bytes) when no TLS session came up.
 */
static bool probe_host(const char *address, int port, const char *host, bool wait_first,
                       probe_read *r, char *why, size_t size)
{
    char url[CTF_HOST_SIZE + 32], connect_to[2 * CTF_HOST_SIZE + 32], req[CTF_HOST_SIZE + 96];
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
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    /* No ALPN: the session is ours to read raw. With h2 negotiated, libcurl's
     * curl_easy_recv goes through its HTTP/2 layer (and crashed there). */
    curl_easy_setopt(curl, CURLOPT_SSL_ENABLE_ALPN, 0L);
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)PROBE_CONNECT_MS);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)PROBE_TOTAL_MS);
    CURLcode rc = curl_easy_perform(curl);
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
 * host's, then the unrouted host's); false with msg saying what it got
 * instead of its instance's answer. r and ref are the caller's buffers.
 */
static bool served_host(const ctf_config *cfg, const char *host, bool http, probe_read *r,
                        probe_read *ref, char *msg, size_t size)
{
    const char *address = cfg->gateway.probe_address;
    char why[256], unrouted[CTF_HOST_SIZE];
    int port = gateway_port(cfg);
    long t0 = now_ms();
    bool up = probe_host(address, port, host, !http, r, why, sizeof why);
    kop_log(KOP_LOG_DEBUG, "gateway probe", KOP_LOG_STR("host", host),
            KOP_LOG_BOOL("session", up), KOP_LOG_INT("bytes", (long long)r->len),
            KOP_LOG_BOOL("poked", r->poked), KOP_LOG_BOOL("closed", r->closed),
            KOP_LOG_INT("ms", now_ms() - t0), KOP_LOG_STR("error", up ? "" : why));
    if (!up) {
        snprintf(msg, size, "waiting for the gateway to serve %s: %s", host, why);
        return false;
    }
    ctf_probe_verdict v = ctf_gateway_probe_verdict(r->buf, r->len, http, r->poked, r->closed);
    if (v == CTF_PROBE_COMPARE) {
        snprintf(unrouted, sizeof unrouted, "%s.%s", CTF_GATEWAY_UNROUTED_LABEL,
                 cfg->gateway.domain);
        /* The instance's own 404 unless a host without a route gets the very same. */
        v = probe_host(address, port, unrouted, false, ref, why, sizeof why) &&
                    ctf_gateway_probe_same(r->buf, r->len, ref->buf, ref->len)
                ? CTF_PROBE_GATEWAY
                : CTF_PROBE_SERVED;
    }
    if (v == CTF_PROBE_SERVED)
        return true;
    what_came(r, why, sizeof why);
    snprintf(msg, size, "waiting for the gateway to serve %s: %s", host, why);
    return false;
}

ctf_probe_outcome ctf_gateway_served(const ctf_config *cfg, const json_t *eps, char *msg,
                                     size_t size)
{
    const json_t *e;
    size_t i;
    probe_read *bufs = NULL;
    ctf_probe_outcome out = CTF_PROBE_OK;
    if (!cfg->gateway.probe_address || !cfg->gateway.probe_address[0])
        return CTF_PROBE_OFF;
    if (atomic_fetch_add(&in_flight, 1) >= CTF_PROBE_MAX_IN_FLIGHT) {
        snprintf(msg, size, "waiting for a turn to probe the gateway");
        out = CTF_PROBE_BUSY;
        goto out;
    }
    /* Two answers of PROBE_READ_MAX: on the heap, a worker's stack is not ours to spend. */
    if (!(bufs = calloc(2, sizeof *bufs))) {
        snprintf(msg, size, "waiting for the gateway probe: out of memory");
        out = CTF_PROBE_NOT_YET;
        goto out;
    }
    json_array_foreach(eps, i, e)
    {
        const char *host = json_string_value(json_object_get(e, "host"));
        bool http = kop_streq(json_string_value(json_object_get(e, "type")), "HTTP");
        if (!host)
            continue;
        if (!served_host(cfg, host, http, &bufs[0], &bufs[1], msg, size)) {
            out = CTF_PROBE_NOT_YET;
            break;
        }
    }
out:
    free(bufs);
    atomic_fetch_sub(&in_flight, 1);
    return out;
}

long ctf_probe_retry_ms(double age_ms)
{
    if (age_ms < 30 * 1000.0)
        return 300;
    if (age_ms < 5 * 60 * 1000.0)
        return 1000;
    return 3000;
}

/*
 * test_webhook_server.c - the webhook server over real TLS on loopback:
 * a review POSTed over HTTPS is answered, the certificate follows its files
 * (rewritten in place, swapped by symlink as the kubelet does, and a
 * mismatched pair refused while the old one keeps serving), bodies over the
 * cap are a 413, other methods a 405, unknown paths a 404, and the metrics
 * count each request; in a manager, /readyz is 503 while the webhook server
 * does not serve. Certificates come from the openssl command.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <pthread.h>

#include "kop/buf.h"
#include "kop/manager.h"
#include "kop/webhook.h"

static char dir[256];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

/* make_cert writes a self-signed certificate for 127.0.0.1 with common name cn. */
static void make_cert(const char *cn)
{
    sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout %s.key -out %s.crt -days 1 -subj /CN=%s -addext subjectAltName=IP:127.0.0.1 "
       ">/dev/null 2>&1",
       dir, cn, cn, cn);
}

/* peer_cn handshakes with 127.0.0.1:port and returns the certificate's common name. */
static void peer_cn(int port, char *cn, size_t size)
{
    gnutls_session_t sess;
    gnutls_certificate_credentials_t cred;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(gnutls_certificate_allocate_credentials(&cred), 0);
    assert_int_equal(gnutls_init(&sess, GNUTLS_CLIENT), 0);
    assert_int_equal(gnutls_set_default_priority(sess), 0);
    assert_int_equal(gnutls_credentials_set(sess, GNUTLS_CRD_CERTIFICATE, cred), 0);
    gnutls_transport_set_int(sess, fd);
    int rc;
    do
        rc = gnutls_handshake(sess);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    assert_int_equal(rc, 0);
    unsigned n = 0;
    const gnutls_datum_t *chain = gnutls_certificate_get_peers(sess, &n);
    assert_true(n >= 1);
    gnutls_x509_crt_t crt;
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    assert_int_equal(gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER), 0);
    assert_int_equal(gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn,
                                                   &size),
                     0);
    gnutls_x509_crt_deinit(crt);
    gnutls_bye(sess, GNUTLS_SHUT_RDWR);
    gnutls_deinit(sess);
    gnutls_certificate_free_credentials(cred);
    close(fd);
}

static size_t collect(char *p, size_t size, size_t n, void *user)
{
    kop_buf *b = user;
    return kop_buf_append(b, p, size * n) == KOP_OK ? size * n : 0;
}

/* post sends body to path over HTTPS, trusting ca; returns the HTTP code, the answer in out. */
static long post(int port, const char *method, const char *path, const char *body, size_t len,
                 const char *ca, kop_buf *out)
{
    char url[256];
    long code = 0;
    snprintf(url, sizeof url, "https://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}

static kop_err deny_same(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    (void)user;
    const json_t *spec = json_object_get(req->object, "spec");
    if (json_equal(json_object_get(spec, "from"), json_object_get(spec, "to")))
        return kop_admission_deny(resp, "same from and to");
    return KOP_OK;
}

static const char review[] =
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
    "{\"uid\":\"u-1\",\"operation\":\"CREATE\",\"object\":{\"spec\":{\"from\":\"A\",\"to\":"
    "\"A\"}}}}";

static double value(kop_metric *f, const char *const *labels)
{
    double v = -1;
    if (kop_metric_value(f, labels, &v) != KOP_OK)
        return 0;
    return v;
}

static void test_serve_and_reload(void **state)
{
    (void)state;
    char path[512], path2[512], cn[64];
    kop_metrics *reg = NULL;
    kop_webhook_server *s = NULL;
    kop_status st = {0};
    kop_buf out;
    kop_buf_init(&out, 1 << 20);

    snprintf(dir, sizeof dir, "/tmp/kop-webhook-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    make_cert("first");
    make_cert("second");
    make_cert("third");
    /* A mounted Secret: tls.crt -> ..data/tls.crt, ..data -> a timestamped directory. */
    sh("cd %s && mkdir v1 && cp first.crt v1/tls.crt && cp first.key v1/tls.key && "
       "ln -s v1 ..data && ln -s ..data/tls.crt tls.crt && ln -s ..data/tls.key tls.key",
       dir);

    assert_int_equal(kop_metrics_new(&reg), KOP_OK);
    kop_webhook_server_opts o = {.bind = "127.0.0.1:0", .cert_dir = dir, .cert_check_ms = 1,
                                 .max_body = 4096, .metrics = reg};
    assert_int_equal(kop_webhook_server_new(&o, &s, &st), KOP_OK);
    assert_int_equal(kop_webhook_add_admission(s, &(kop_webhook_admission){
                                                      .path = "/validate", .handle = deny_same}),
                     KOP_OK);
    assert_false(kop_webhook_server_is_serving(s));
    assert_int_equal(kop_webhook_server_start(s, &st), KOP_OK);
    assert_true(kop_webhook_server_is_serving(s));
    int port = kop_webhook_server_port(s);
    assert_true(port > 0);
    /* Registration is closed once serving. */
    assert_int_equal(kop_webhook_add_admission(s, &(kop_webhook_admission){
                                                      .path = "/late", .handle = deny_same}),
                     KOP_EINVAL);

    peer_cn(port, cn, sizeof cn);
    assert_string_equal(cn, "first");

    /* A review over HTTPS, checked against the first certificate. */
    snprintf(path, sizeof path, "%s/first.crt", dir);
    assert_int_equal(post(port, "POST", "/validate", review, sizeof review - 1, path, &out), 200);
    assert_non_null(strstr(kop_buf_str(&out), "\"uid\":\"u-1\""));
    assert_non_null(strstr(kop_buf_str(&out), "\"message\":\"same from and to\""));

    /* The kubelet's update: a new directory, then ..data swapped by rename. */
    sh("cd %s && mkdir v2 && cp second.crt v2/tls.crt && cp second.key v2/tls.key && "
       "ln -s v2 ..data_tmp && mv -T ..data_tmp ..data",
       dir);
    usleep(20000); /* past cert_check_ms */
    peer_cn(port, cn, sizeof cn);
    assert_string_equal(cn, "second");

    /* A half-written pair (new certificate, old key) is refused: still "second". */
    sh("cd %s && mkdir v3 && cp third.crt v3/tls.crt && cp second.key v3/tls.key && "
       "ln -s v3 ..data_tmp && mv -T ..data_tmp ..data",
       dir);
    usleep(20000);
    peer_cn(port, cn, sizeof cn);
    assert_string_equal(cn, "second");
    /* ...until the key arrives. Rewritten in place this time. */
    sh("cd %s && cp third.key v3/tls.key", dir);
    usleep(20000);
    peer_cn(port, cn, sizeof cn);
    assert_string_equal(cn, "third");

    /* Limits and routes, over the new certificate. */
    snprintf(path2, sizeof path2, "%s/third.crt", dir);
    char big[8192];
    memset(big, ' ', sizeof big);
    kop_buf_reset(&out);
    assert_int_equal(post(port, "POST", "/validate", big, sizeof big, path2, &out), 413);
    kop_buf_reset(&out);
    assert_int_equal(post(port, "POST", "/validate", "{nope", 5, path2, &out), 400);
    kop_buf_reset(&out);
    assert_int_equal(post(port, "GET", "/validate", NULL, 0, path2, &out), 405);
    kop_buf_reset(&out);
    assert_int_equal(post(port, "POST", "/elsewhere", review, sizeof review - 1, path2, &out),
                     404);

    /* The metrics, with controller-runtime's names and labels. */
    kop_metric *total = NULL, *latency = NULL, *in_flight = NULL;
    static const char *const by_code[] = {"webhook", "code", NULL};
    static const char *const by_hook[] = {"webhook", NULL};
    assert_int_equal(kop_metrics_counter(reg, "controller_runtime_webhook_requests_total", NULL,
                                         by_code, &total),
                     KOP_OK);
    assert_int_equal(kop_metrics_gauge(reg, "controller_runtime_webhook_requests_in_flight", NULL,
                                       by_hook, &in_flight),
                     KOP_OK);
    const char *ok[] = {"/validate", "200", NULL}, *big_l[] = {"/validate", "413", NULL};
    const char *bad_l[] = {"/validate", "400", NULL}, *hook[] = {"/validate", NULL};
    assert_true(value(total, ok) == 1);
    assert_true(value(total, big_l) == 1);
    assert_true(value(total, bad_l) == 1);
    assert_true(value(in_flight, hook) == 0);
    char *text = NULL;
    assert_int_equal(kop_metrics_render(reg, &text, NULL), KOP_OK);
    assert_non_null(strstr(text, "controller_runtime_webhook_latency_seconds_count{webhook="
                                 "\"/validate\"} 4"));
    free(text);
    (void)latency;

    kop_webhook_server_stop(s);
    assert_false(kop_webhook_server_is_serving(s));
    kop_webhook_server_free(s);
    kop_metrics_free(reg);
    kop_buf_fini(&out);
    sh("rm -rf %s", dir);
}

static void test_start_refuses_bad_pair(void **state)
{
    (void)state;
    kop_webhook_server *s = NULL;
    kop_status st = {0};
    snprintf(dir, sizeof dir, "/tmp/kop-webhook-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    kop_webhook_server_opts o = {.bind = "127.0.0.1:0", .cert_dir = dir};
    assert_int_equal(kop_webhook_server_new(&o, &s, &st), KOP_OK);
    assert_int_equal(kop_webhook_server_start(s, &st), KOP_ETLS); /* no files */
    assert_non_null(strstr(st.message, "tls.crt"));
    make_cert("a");
    make_cert("b");
    sh("cd %s && cp a.crt tls.crt && cp b.key tls.key", dir);
    assert_int_equal(kop_webhook_server_start(s, &st), KOP_ETLS); /* mismatched */
    assert_false(kop_webhook_server_is_serving(s));
    kop_webhook_server_free(s);
    sh("rm -rf %s", dir);
}

/*
 * A client that sends its headers and then one byte of body every 300 ms
 * (never idle long enough for the idle timeout) is cut off by the request
 * time limit: a 408 or a closed connection after about request_timeout_ms,
 * never a request held open for as long as the client likes.
 */
static void test_slow_body_cut_off(void **state)
{
    (void)state;
    kop_webhook_server *s = NULL;
    kop_status st = {0};
    snprintf(dir, sizeof dir, "/tmp/kop-webhook-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    make_cert("tls");
    kop_webhook_server_opts o = {.bind = "127.0.0.1:0", .cert_dir = dir,
                                 .request_timeout_ms = 1000};
    assert_int_equal(kop_webhook_server_new(&o, &s, &st), KOP_OK);
    assert_int_equal(kop_webhook_add_admission(s, &(kop_webhook_admission){
                                                      .path = "/v", .handle = deny_same}),
                     KOP_OK);
    assert_int_equal(kop_webhook_server_start(s, &st), KOP_OK);

    gnutls_session_t sess;
    gnutls_certificate_credentials_t cred;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)kop_webhook_server_port(s))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(gnutls_certificate_allocate_credentials(&cred), 0);
    assert_int_equal(gnutls_init(&sess, GNUTLS_CLIENT), 0);
    assert_int_equal(gnutls_set_default_priority(sess), 0);
    assert_int_equal(gnutls_credentials_set(sess, GNUTLS_CRD_CERTIFICATE, cred), 0);
    gnutls_transport_set_int(sess, fd);
    assert_int_equal(gnutls_handshake(sess), 0);
    static const char head[] = "POST /v HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               "Content-Length: 100000\r\n\r\n";
    assert_true(gnutls_record_send(sess, head, sizeof head - 1) > 0);
    time_t start = time(NULL);
    bool cut = false;
    for (int i = 0; i < 40 && !cut; i++) { /* 12 s at most */
        usleep(300000);
        if (gnutls_record_send(sess, " ", 1) < 0)
            cut = true;
        char buf[512];
        /* Anything back (a 408) or a closed connection ends it. */
        gnutls_record_set_timeout(sess, 1);
        ssize_t n = gnutls_record_recv(sess, buf, sizeof buf - 1);
        if (n >= 0 || (n != GNUTLS_E_TIMEDOUT && n != GNUTLS_E_AGAIN)) {
            if (n > 0) {
                buf[n] = '\0';
                assert_non_null(strstr(buf, " 408 "));
            }
            cut = true;
        }
    }
    assert_true(cut);
    assert_true(time(NULL) - start <= 6);
    gnutls_deinit(sess);
    gnutls_certificate_free_credentials(cred);
    close(fd);
    kop_webhook_server_free(s);
    sh("rm -rf %s", dir);
}

/* get returns the HTTP code of a plain GET, the body in out. */
static long get(int port, const char *path, kop_buf *out)
{
    char url[256];
    long code = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code;
}

static void *run_manager(void *m)
{
    kop_status st;
    return (void *)(intptr_t)kop_manager_run(m, &st);
}

/* The manager's /readyz follows the webhook server (no informers: no cluster needed). */
static void test_manager_readyz(void **state)
{
    (void)state;
    char kubeconfig[512];
    kop_manager *m = NULL;
    kop_webhook_server *srv = NULL;
    kop_status st = {0};
    kop_buf out;
    kop_buf_init(&out, 1 << 16);
    snprintf(dir, sizeof dir, "/tmp/kop-webhook-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    make_cert("tls");
    snprintf(kubeconfig, sizeof kubeconfig, "%s/kubeconfig", dir);
    FILE *f = fopen(kubeconfig, "w");
    assert_non_null(f);
    fputs("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n"
          "    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\nusers:\n"
          "- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n",
          f);
    fclose(f);

    /* Webhooks off: no server, and the add functions take NULL. */
    kop_manager_opts mo = {.name = "t", .kubeconfig = kubeconfig, .metrics_bind = "127.0.0.1:0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    assert_int_equal(kop_manager_webhook_server(m, &srv, &st), KOP_OK);
    assert_null(srv);
    kop_manager_free(m);

    mo.webhook_bind = "127.0.0.1:0";
    mo.webhook_cert_dir = dir;
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    assert_int_equal(kop_manager_webhook_server(m, &srv, &st), KOP_OK);
    assert_non_null(srv);
    assert_int_equal(kop_webhook_add_admission(srv, &(kop_webhook_admission){
                                                        .path = "/v", .handle = deny_same}),
                     KOP_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_manager, m), 0);
    for (int i = 0; i < 1000 && !kop_webhook_server_is_serving(srv); i++)
        usleep(10000);
    assert_true(kop_webhook_server_is_serving(srv));
    int port = kop_manager_bound_port(m);
    assert_true(port > 0);
    assert_int_equal(get(port, "/readyz", &out), 200);
    kop_webhook_server_stop(srv);
    kop_buf_reset(&out);
    assert_int_equal(get(port, "/readyz", &out), 503);
    assert_non_null(strstr(kop_buf_str(&out), "webhook server not serving"));
    kop_manager_stop(m);
    void *rc = NULL;
    pthread_join(t, &rc);
    assert_int_equal((intptr_t)rc, KOP_OK);
    kop_manager_free(m);
    kop_buf_fini(&out);
    sh("rm -rf %s", dir);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_and_reload),
        cmocka_unit_test(test_start_refuses_bad_pair),
        cmocka_unit_test(test_manager_readyz),
        cmocka_unit_test(test_slow_body_cut_off),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

/*
 * test_ctf_probe.c - the gateway mode's probe (operators/ctf/controller/
 * probe.c) against a TLS server in this process that plays a gateway on
 * 127.0.0.1: it picks its behaviour by the SNI it is asked for, as a
 * gateway routes, and offers ALPN h2 first, as Traefik does (the probe
 * once crashed inside libcurl's HTTP/2 layer when it let h2 be chosen).
 *
 *   greet.d.test    an instance that speaks first (a greeting): served
 *   silent.d.test   an instance that waits for input and never answers: served
 *   close.d.test    the gateway with no server: the connection closes: not served
 *   web.d.test      a web instance: 200: served
 *   web404.d.test   a web instance whose "/" is its own 404: served
 *   web503.d.test   the gateway's 503 (no available server): not served
 *   any other host  the gateway without a route for it: its HTTP handler's
 *                   404 "404 page not found" (kopc-no-route.d.test too), so an
 *                   unapplied route's host is not served
 *
 * Also: nothing listening (no TLS session: not served, with why) and no
 * probe address (off).
 *
 * Certificates, as the probe checks them: the test's gateway presents a
 * certificate for *.d.test (and d.test) signed by a CA of the test's
 * own, whose PEM file the probes get as --gateway-probe-ca. Verification
 * must fail, and say so with CTF_PROBE_UNTRUSTED, when the probe trusts
 * another CA, when it trusts only the system's store (the default), and
 * when the gateway presents someone else's certificate (for *.elsewhere.test,
 * from the right CA) for stranger.d.test; a CA file that holds no
 * certificate is refused at start-up (ctf_probe_ca_check).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "controller/probe.h"

static SSL_CTX *server_ctx;   /* the wildcard certificate for *.d.test */
static SSL_CTX *stranger_ctx; /* someone else's: *.elsewhere.test, from the same CA */
static char ca_path[64] = "/tmp/kopc-probe-ca-XXXXXX";       /* the gateway's CA (PEM) */
static char wrong_ca_path[64] = "/tmp/kopc-probe-wrong-XXXXXX"; /* a CA that signed nothing here */
static int listen_fd = -1;
static int server_port;
static pthread_t server_thread;
static int connections; /* accepted by the test's gateway (its thread only writes it) */

/* alpn_h2_first: the server's choice, h2 when the client offers it (as Traefik's). */
static int alpn_h2_first(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                         const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char prefs[] = "\x02h2\x08http/1.1";
    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto((unsigned char **)out, outlen, prefs, sizeof prefs - 1, in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    return SSL_TLSEXT_ERR_OK;
}

/* add_ext adds the X.509v3 extension nid with value (OpenSSL's config syntax) to cert. */
static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(cert, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

/*
 * make_cert: a P-256 certificate named cn, signed by issuer's key (NULL:
 * self-signed, a CA), with the subjectAltName san for a leaf. *key_out
 * (owned by the caller) is its key.
 */
static X509 *make_cert(const char *cn, const char *san, X509 *issuer, EVP_PKEY *issuer_key,
                       EVP_PKEY **key_out)
{
    static long serial = 1;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    assert_non_null(key);
    assert_non_null(cert);
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(issuer ? issuer : cert));
    if (!issuer) {
        add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
    } else {
        add_ext(cert, issuer, NID_subject_alt_name, san);
        add_ext(cert, issuer, NID_ext_key_usage, "serverAuth");
    }
    assert_true(X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
    *key_out = key;
    return cert;
}

/* write_pem writes cert into the temporary file made from template path (mkstemp). */
static void write_pem(char *path, X509 *cert)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, cert), 1);
    assert_int_equal(fclose(f), 0);
}

/* server_ctx_for: a server context presenting leaf (then ca, the chain) with key. */
static SSL_CTX *server_ctx_for(X509 *leaf, X509 *ca, EVP_PKEY *key)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate(ctx, leaf), 1);
    assert_int_equal(SSL_CTX_add1_chain_cert(ctx, ca), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, key), 1);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_h2_first, NULL);
    return ctx;
}

/* pick_cert: the gateway presents someone else's certificate for stranger.d.test. */
static int pick_cert(SSL *ssl, int *alert, void *arg)
{
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    (void)alert;
    (void)arg;
    if (sni && strcmp(sni, "stranger.d.test") == 0)
        SSL_set_SSL_CTX(ssl, stranger_ctx);
    return SSL_TLSEXT_ERR_OK;
}

/*
 * make_ctxs: the gateway's contexts (server_ctx, stranger_ctx) and the CA
 * files (ca_path, wrong_ca_path), all made here, thrown away at the end.
 */
static void make_ctxs(void)
{
    EVP_PKEY *ca_key, *wrong_key, *leaf_key, *stranger_key;
    X509 *ca = make_cert("kopc test gateway CA", NULL, NULL, NULL, &ca_key);
    X509 *wrong = make_cert("kopc test other CA", NULL, NULL, NULL, &wrong_key);
    X509 *leaf = make_cert("*.d.test", "DNS:*.d.test,DNS:d.test", ca, ca_key, &leaf_key);
    X509 *stranger = make_cert("*.elsewhere.test", "DNS:*.elsewhere.test", ca, ca_key,
                               &stranger_key);
    write_pem(ca_path, ca);
    write_pem(wrong_ca_path, wrong);
    server_ctx = server_ctx_for(leaf, ca, leaf_key);
    stranger_ctx = server_ctx_for(stranger, ca, stranger_key);
    SSL_CTX_set_tlsext_servername_callback(server_ctx, pick_cert);
    X509_free(ca);
    X509_free(wrong);
    X509_free(leaf);
    X509_free(stranger);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(wrong_key);
    EVP_PKEY_free(leaf_key);
    EVP_PKEY_free(stranger_key);
}

/* read_request reads until the end of an HTTP head (or the peer stops); false if none. */
static bool read_request(SSL *ssl)
{
    char buf[2048];
    size_t len = 0;
    while (len < sizeof buf - 1) {
        int n = SSL_read(ssl, buf + len, (int)(sizeof buf - 1 - len));
        if (n <= 0)
            return false;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            return true;
    }
    return true;
}

static void say(SSL *ssl, const char *s)
{
    (void)SSL_write(ssl, s, (int)strlen(s));
}

/* serve_one plays the gateway for one connection, by its SNI. */
static void serve_one(int fd)
{
    SSL *ssl = SSL_new(server_ctx);
    char sink[256];
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1)
        goto out;
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    sni = sni ? sni : "";
    if (strncmp(sni, "greet", 5) == 0 || strcmp(sni, "stranger.d.test") == 0) {
        say(ssl, "Your flag: flag{probe}\n");
        while (SSL_read(ssl, sink, sizeof sink) > 0)
            ;
    } else if (strcmp(sni, "silent.d.test") == 0) {
        while (SSL_read(ssl, sink, sizeof sink) > 0)
            ;
    } else if (strcmp(sni, "close.d.test") == 0) {
        /* nothing: closed at once */
    } else if (strcmp(sni, "web.d.test") == 0) {
        if (read_request(ssl))
            say(ssl, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
    } else if (strcmp(sni, "web404.d.test") == 0) {
        if (read_request(ssl))
            say(ssl, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\n"
                     "no such\r\n");
    } else if (strcmp(sni, "web503.d.test") == 0) {
        if (read_request(ssl))
            say(ssl, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 19\r\n"
                     "Connection: close\r\n\r\nno available server");
    } else if (read_request(ssl)) {
        say(ssl, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 "Content-Length: 19\r\nConnection: close\r\n\r\n404 page not found\n");
    }
    SSL_shutdown(ssl);
out:
    SSL_free(ssl);
    close(fd);
}

static void *server_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL; /* the listener was shut down */
        __atomic_add_fetch(&connections, 1, __ATOMIC_SEQ_CST);
        serve_one(fd);
    }
}

static int setup(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* a probe that hangs up first must not kill the server */
    make_ctxs();
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(listen_fd, 16) != 0 || getsockname(listen_fd, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    server_port = ntohs(a.sin_port);
    return pthread_create(&server_thread, NULL, server_main, NULL) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    /* The last probes started run on (detached): nothing of theirs may be left at exit. */
    if (!ctf_probe_wait_idle(10 * 1000))
        return -1;
    shutdown(listen_fd, SHUT_RDWR);
    close(listen_fd);
    pthread_join(server_thread, NULL);
    SSL_CTX_free(server_ctx);
    SSL_CTX_free(stranger_ctx);
    unlink(ca_path);
    unlink(wrong_ca_path);
    return 0;
}

/*
 * served_soon asks ctf_gateway_served until its probes have answered (it
 * never blocks: the first calls start them and say they are running), at
 * most 10 s.
 */
static ctf_probe_outcome served_soon(const ctf_config *cfg, const json_t *eps, char *msg,
                                     size_t size)
{
    ctf_probe_outcome r = CTF_PROBE_NOT_YET;
    for (int i = 0; i < 1000; i++) {
        msg[0] = '\0';
        r = ctf_gateway_served(cfg, eps, msg, size);
        if (r == CTF_PROBE_OK || r == CTF_PROBE_OFF || r == CTF_PROBE_UNTRUSTED ||
            (r == CTF_PROBE_NOT_YET && !strstr(msg, "waiting for the gateway probe of")))
            return r;
        usleep(10 * 1000);
    }
    return r;
}

/*
 * probe_ca asks whether host (an exposure of type) is served through the
 * test's gateway, its certificate checked against the CA file ca (NULL: the
 * system's store).
 */
static ctf_probe_outcome probe_ca(const char *host, const char *type, const char *ca, char *msg,
                                  size_t size)
{
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%d", server_port);
    ctf_config cfg = {.gateway = {.domain = "d.test", .port = 443, .probe_address = address,
                                  .probe_ca = ca}};
    json_t *eps = json_pack("[{s:s, s:s, s:s, s:i}]", "name", "x", "type", type, "host", host,
                            "port", 443);
    ctf_probe_outcome r = served_soon(&cfg, eps, msg, size);
    json_decref(eps);
    return r;
}

/* probe: probe_ca with the gateway's own CA, as the operator is meant to run. */
static ctf_probe_outcome probe(const char *host, const char *type, char *msg, size_t size)
{
    return probe_ca(host, type, ca_path, msg, size);
}

/*
 * A certificate that fails verification is not a served host, even though
 * the instance behind it greets: the probe trusts another CA; only the
 * system's store (no --gateway-probe-ca); or the gateway presents a
 * certificate (from the right CA) for other names than the host. Each
 * says so with CTF_PROBE_UNTRUSTED and libcurl's words. Distinct hosts:
 * a host's result is kept for a while, whatever the CA.
 */
static void test_certificate(void **state)
{
    char msg[1024];
    (void)state;
    assert_int_equal(probe("greet-right.d.test", "TCP", msg, sizeof msg), CTF_PROBE_OK);

    assert_int_equal(probe_ca("greet-wrongca.d.test", "TCP", wrong_ca_path, msg, sizeof msg),
                     CTF_PROBE_UNTRUSTED);
    assert_non_null(strstr(msg, "the certificate for greet-wrongca.d.test is not trusted"));
    assert_non_null(strstr(msg, wrong_ca_path));
    assert_non_null(strstr(msg, "SSL certificate problem"));

    assert_int_equal(probe_ca("greet-system.d.test", "TCP", NULL, msg, sizeof msg),
                     CTF_PROBE_UNTRUSTED);
    assert_non_null(strstr(msg, "the system's CA store"));

    assert_int_equal(probe("stranger.d.test", "TCP", msg, sizeof msg), CTF_PROBE_UNTRUSTED);
    assert_non_null(strstr(msg, "stranger.d.test"));
    assert_non_null(strstr(msg, "name"));

    /* HTTP exposures are probed the same way. */
    assert_int_equal(probe_ca("web.d.test", "HTTP", wrong_ca_path, msg, sizeof msg),
                     CTF_PROBE_UNTRUSTED);

    /* One host untrusted, another waiting: the certificate is what the instance says. */
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%d", server_port);
    ctf_config cfg = {.gateway = {.domain = "d.test", .port = 443, .probe_address = address,
                                  .probe_ca = ca_path}};
    json_t *eps = json_pack("[{s:s, s:s}, {s:s, s:s}]", "type", "TCP", "host", "close2.d.test",
                            "type", "TCP", "host", "stranger.d.test");
    ctf_probe_outcome r = CTF_PROBE_NOT_YET;
    for (int i = 0; i < 1000 && r != CTF_PROBE_UNTRUSTED; i++) {
        r = ctf_gateway_served(&cfg, eps, msg, sizeof msg);
        usleep(10 * 1000);
    }
    assert_int_equal(r, CTF_PROBE_UNTRUSTED);
    assert_non_null(strstr(msg, "stranger.d.test"));
    json_decref(eps);
}

/* A CA file is checked at start-up: readable, and holding a PEM certificate. */
static void test_ca_check(void **state)
{
    char empty[64] = "/tmp/kopc-probe-empty-XXXXXX";
    kop_status st;
    (void)state;
    kop_status_clear(&st);
    assert_int_equal(ctf_probe_ca_check(ca_path, &st), KOP_OK);
    assert_int_equal(ctf_probe_ca_check("/nonexistent/ca.crt", &st), KOP_ECONFIG);
    assert_non_null(strstr(st.message, "cannot read"));
    int fd = mkstemp(empty);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a certificate\n", 18), 18);
    close(fd);
    assert_int_equal(ctf_probe_ca_check(empty, &st), KOP_ECONFIG);
    assert_non_null(strstr(st.message, "no PEM certificate"));
    unlink(empty);
}

static void test_tcp(void **state)
{
    char msg[512];
    (void)state;
    assert_int_equal(probe("greet.d.test", "TCP", msg, sizeof msg), CTF_PROBE_OK);
    assert_int_equal(probe("silent.d.test", "TCP", msg, sizeof msg), CTF_PROBE_OK);
    assert_int_equal(probe("close.d.test", "TCP", msg, sizeof msg), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "close.d.test"));
    assert_non_null(strstr(msg, "closed"));
    /* A route the gateway has not applied: its HTTP handler's 404, like a host of no route. */
    assert_int_equal(probe("abcdefghijklmnop.d.test", "TCP", msg, sizeof msg), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "HTTP 404"));
}

static void test_http(void **state)
{
    char msg[512];
    (void)state;
    assert_int_equal(probe("web.d.test", "HTTP", msg, sizeof msg), CTF_PROBE_OK);
    /* Its own 404 differs from the gateway's for a host without a route: served. */
    assert_int_equal(probe("web404.d.test", "HTTP", msg, sizeof msg), CTF_PROBE_OK);
    assert_int_equal(probe("web503.d.test", "HTTP", msg, sizeof msg), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "HTTP 503"));
    assert_int_equal(probe("abcdefghijklmnop.d.test", "HTTP", msg, sizeof msg),
                     CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "HTTP 404"));
}

/*
 * A reconcile that comes back at once (every status write is an event) must
 * neither probe at once again nor see its message change from one probe to
 * the next: that was a loop of about 70 probes a second in a real run.
 */
static void test_no_hot_loop(void **state)
{
    char msg[512], first[512] = "";
    char address[64];
    (void)state;
    snprintf(address, sizeof address, "127.0.0.1:%d", server_port);
    ctf_config cfg = {.gateway = {.domain = "d.test", .port = 443, .probe_address = address,
                                  .probe_ca = ca_path}};
    json_t *eps = json_pack("[{s:s, s:s}]", "type", "TCP", "host", "close.d.test");
    assert_int_equal(served_soon(&cfg, eps, first, sizeof first), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(first, "closed"));
    int before = __atomic_load_n(&connections, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 100; i++) { /* 1 s of reconciles 10 ms apart */
        assert_int_equal(ctf_gateway_served(&cfg, eps, msg, sizeof msg), CTF_PROBE_NOT_YET);
        assert_string_equal(msg, first);
        usleep(10 * 1000);
    }
    int probes = __atomic_load_n(&connections, __ATOMIC_SEQ_CST) - before;
    assert_true(probes >= 2 && probes <= 7); /* one per 200 ms at most */
    json_decref(eps);
}

static void test_no_gateway(void **state)
{
    char msg[512];
    (void)state;
    /* A port nobody listens on: bound, then closed. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    close(fd);
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%d", ntohs(a.sin_port));
    ctf_config cfg = {.gateway = {.domain = "d.test", .probe_address = address}};
    json_t *eps = json_pack("[{s:s, s:s}]", "type", "TCP", "host", "greet.d.test");
    /* The first call starts the probe and does not wait for it. */
    assert_int_equal(ctf_gateway_served(&cfg, eps, msg, sizeof msg), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "waiting for the gateway probe of greet.d.test"));
    assert_int_equal(served_soon(&cfg, eps, msg, sizeof msg), CTF_PROBE_NOT_YET);
    assert_non_null(strstr(msg, "no TLS session"));
    /* No address: no probe. */
    cfg.gateway.probe_address = NULL;
    assert_int_equal(ctf_gateway_served(&cfg, eps, msg, sizeof msg), CTF_PROBE_OFF);
    json_decref(eps);

    /* The retry schedule. */
    assert_int_equal(ctf_probe_retry_ms(0), 200);
    assert_int_equal(ctf_probe_retry_ms(29999), 200);
    assert_int_equal(ctf_probe_retry_ms(30000), 1000);
    assert_int_equal(ctf_probe_retry_ms(300000), 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_no_hot_loop),
        cmocka_unit_test(test_no_gateway),
        cmocka_unit_test(test_certificate),
        cmocka_unit_test(test_ca_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

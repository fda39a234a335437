/*
 * test_config_parse.c - kubeconfig text (config_parse.c): a table of
 * documents parsed from memory, parse_only, garbage input that must fail
 * cleanly, and the caps on alias expansion and size.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config_internal.h"
#include "kop/kop.h"
#include "config_fixture.h"

/* ---- parsing from memory ------------------------------------------------ */

struct parse_case {
    const char *yaml;
    kop_err err;
    const char *expect; /* server on success, message substring on failure */
};

static const struct parse_case parse_cases[] = {
    {"", KOP_ECONFIG, "/mem/config: no context: current-context is not set"},
    {"# only a comment\n", KOP_ECONFIG, "no context"},
    {"- a\n- b\n", KOP_ECONFIG, "not a kubeconfig"},
    {"clusters: {a: b}\n", KOP_ECONFIG, "/mem/config: clusters: expected a list"},
    {"clusters: [{cluster: {server: x}}]\n", KOP_ECONFIG, "clusters[0]: missing name"},
    {"clusters: [{name: c}, {name: c}]\n", KOP_ECONFIG, "clusters[name=c]: defined twice"},
    {"clusters: [{name: c, cluster: {server: [x]}}]\n", KOP_ECONFIG,
     "clusters[name=c].server: expected a string"},
    {"clusters: [{name: c, cluster: {insecure-skip-tls-verify: maybe}}]\n", KOP_ECONFIG,
     "clusters[name=c].insecure-skip-tls-verify: expected true or false"},
    {"clusters: [{name: c, cluster: {certificate-authority-data: 'not base64!'}}]\n", KOP_ECONFIG,
     "clusters[name=c].certificate-authority-data: invalid base64"},
    {"clusters: [{name: c, cluster: {server: *nowhere}}]\n", KOP_ECONFIG, "unknown anchor"},
    {MINI_CLUSTER "users: [{name: u, user: {token: t}}]\n" MINI_CONTEXT, KOP_OK, "https://h"},
    {"clusters: [{name: c, cluster: {server: 'h.example:6443//'}}]\n"
     "users: [{name: u}]\n" MINI_CONTEXT,
     KOP_OK, "https://h.example:6443"},
    {"clusters: [{name: c, cluster: {server: 'ftp://h'}}]\nusers: [{name: u}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "only https:// and http://"},
    {"clusters: [{name: c, cluster: {}}]\nusers: [{name: u}]\n" MINI_CONTEXT, KOP_ECONFIG,
     "clusters[name=c]: no server"},
    {MINI_CLUSTER "users: [{name: u, user: {username: a, password: b}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "users[name=u]: username/password (basic auth) is not supported"},
    {MINI_CLUSTER "users: [{name: u, user: {auth-provider: {name: oidc}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "users[name=u].auth-provider: not supported"},
    {MINI_CLUSTER "users: [{name: u, user: {client-certificate-data: 'QQ=='}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "client-certificate and client-key must be given together"},
    {MINI_CLUSTER "users: [{name: u, user: {token: \"a\\r\\nX-Evil: 1\"}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "users[name=u].token: contains control characters"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {command: x, apiVersion: "
                  "client.authentication.k8s.io/v1alpha1}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "exec.apiVersion: client.authentication.k8s.io/v1alpha1 is not supported"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {command: x, apiVersion: "
                  "client.authentication.k8s.io/v1}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "interactiveMode must be set"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {command: x, interactiveMode: Always, "
                  "apiVersion: client.authentication.k8s.io/v1}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "exec.interactiveMode: Always needs a terminal"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {apiVersion: "
                  "client.authentication.k8s.io/v1beta1}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "exec: command is required"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {command: x, apiVersion: "
                  "client.authentication.k8s.io/v1beta1, env: [{value: v}]}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "exec.env[0]: invalid name"},
    {MINI_CLUSTER "users: [{name: u, user: {exec: {command: x, apiVersion: "
                  "client.authentication.k8s.io/v1beta1, args: [a, [b]]}}}]\n" MINI_CONTEXT,
     KOP_ECONFIG, "exec.args[1]: expected a string"},
    /* Anchors and aliases resolve; JSON is YAML too. */
    {"base: &srv {server: 'https://anchored'}\nclusters: [{name: c, cluster: *srv}]\n"
     "users: [{name: u}]\n" MINI_CONTEXT,
     KOP_OK, "https://anchored"},
    {"{\"clusters\": [{\"name\": \"c\", \"cluster\": {\"server\": \"https://json\"}}],"
     " \"contexts\": [{\"name\": \"x\", \"context\": {\"cluster\": \"c\"}}],"
     " \"current-context\": \"x\"}",
     KOP_OK, "https://json"},
};

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        kop_config *cfg = NULL;
        kop_status st;
        kop_err err = kop_config_parse(c->yaml, strlen(c->yaml), "/mem/config",
                                       &(kop_config_opts){.parse_only = true}, &cfg, &st);
        if (err != c->err)
            fail_msg("case %zu: got %s (%s), want %s", i, kop_err_name(err), st.message,
                     kop_err_name(c->err));
        if (err) {
            assert_null(cfg);
            if (!strstr(st.message, c->expect))
                fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, c->expect);
        } else {
            assert_string_equal(kop_config_server(cfg), c->expect);
            kop_config_free(cfg);
        }
    }
}

/* parse_only reads no file; credentials that need one are refused. */
static void test_parse_only(void **state)
{
    (void)state;
    char *yaml = read_text(FX "/missing-key.yaml");
    kop_config *cfg;
    kop_credentials c;
    kop_status st;
    assert_int_equal(kop_config_parse(yaml, strlen(yaml), FX "/missing-key.yaml",
                                      &(kop_config_opts){.parse_only = true}, &cfg, &st),
                     KOP_OK);
    assert_int_equal(kop_config_credentials(cfg, &c, &st), KOP_EINVAL);
    assert_null(c.cert_pem);
    assert_non_null(strstr(st.message, "parse_only"));
    kop_config_free(cfg);
    /* Without parse_only the same document fails at once. */
    assert_int_equal(kop_config_parse(yaml, strlen(yaml), FX "/missing-key.yaml", NULL, &cfg, &st),
                     KOP_EIO);
    /* A missing CA file names the kubeconfig, the field and the file. */
    const char *ca = "clusters: [{name: c, cluster: {server: 'https://h', "
                     "certificate-authority: ca.pem}}]\n"
                     "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n";
    assert_int_equal(kop_config_parse(ca, strlen(ca), "/nonexistent/kc", NULL, &cfg, &st), KOP_EIO);
    assert_string_equal(st.message, "/nonexistent/kc: clusters[name=c].certificate-authority: "
                                    "/nonexistent/ca.pem: No such file or directory");
    /* A key that is a directory cannot be read either. */
    const char *key = MINI_CLUSTER "users: [{name: u, user: {client-certificate-data: 'QQ==', "
                                   "client-key: '" FX "'}}]\n" MINI_CONTEXT;
    assert_int_equal(kop_config_parse(key, strlen(key), "/mem/kc", NULL, &cfg, &st), KOP_EIO);
    assert_string_equal(st.message, "/mem/kc: users[name=u].client-key: " FX ": Is a directory");
    /* NULL origin: named <memory> in messages. */
    assert_int_equal(kop_config_parse("[", 1, NULL, NULL, &cfg, &st), KOP_EPARSE);
    assert_non_null(strstr(st.message, "<memory>:"));
    assert_int_equal(kop_config_parse(NULL, 0, NULL, NULL, NULL, &st), KOP_EINVAL);
}

/* Garbage, binary input and hostile YAML fail cleanly, never crash. */
static void test_garbage_never_crashes(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "\x00\x01\x02\xff",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        "clusters: &a [*a]\n",
        "a: &a [x]\nclusters: *a\n",
        "clusters: [*x]\n",
        "users: [{name: u, user: {exec: {args: *nope}}}]\n",
        "users: [{name: u, user: {exec: [1, 2]}}]\n",
        "current-context: [a]\n",
        "current-context: !!binary aGVsbG8=\n",
        "clusters: [{name: \"a\\0b\", cluster: {}}]\n",
        "%YAML 1.2\n---\n!tag {? [a]: b}\n",
        "clusters:\n- name: c\n  cluster:\n    server: \"\\xff\\xfe\"\n",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        kop_config *cfg = NULL;
        kop_status st;
        size_t len = i == 0 ? 4 : strlen(docs[i]);
        kop_err err = kop_config_parse(docs[i], len, "/fuzz/config",
                                       &(kop_config_opts){.parse_only = true}, &cfg, &st);
        assert_true(err != KOP_OK);
        assert_null(cfg);
        assert_true(strlen(st.message) > 0);
    }
    /* Random bytes, and random bytes after a valid prefix. */
    unsigned seed = 12345;
    char buf[512];
    for (int round = 0; round < 3000; round++) {
        size_t len = (size_t)(rand_r(&seed) % (int)sizeof buf);
        size_t start = 0;
        if (round % 2) {
            const char *prefix = "clusters:\n- name: c\n  cluster:\n    server: ";
            start = strlen(prefix);
            memcpy(buf, prefix, start);
            if (len < start)
                len = start;
        }
        for (size_t k = start; k < len; k++)
            buf[k] = round % 3 ? (char)rand_r(&seed) : "ab:-[]{}&*!|> \n\"'#,?"[rand_r(&seed) % 21];
        kop_config *cfg = NULL;
        kop_status st;
        kop_err err = kop_config_parse(buf, len, "/fuzz/config",
                                       &(kop_config_opts){.parse_only = true}, &cfg, &st);
        if (err)
            assert_true(strlen(st.message) > 0 || err == KOP_ENOMEM);
        kop_config_free(cfg);
    }
}

/* Aliases cannot multiply a small document into a huge one. */
static void test_alias_expansion_capped(void **state)
{
    (void)state;
    size_t big = 64 << 10, n = 2000;
    char *doc = malloc(big + n * 4 + 512), *p = doc;
    assert_non_null(doc);
    p += sprintf(p, "big: &b \"");
    memset(p, 'x', big);
    p += big;
    p += sprintf(p, "\"\nusers: [{name: u, user: {exec: {args: [");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "*b,");
    p += sprintf(p, "*b]}}}]\n");
    kop_config *cfg = NULL;
    kop_status st;
    assert_int_equal(kop_config_parse(doc, (size_t)(p - doc), "/mem/config",
                                      &(kop_config_opts){.parse_only = true}, &cfg, &st),
                     KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "aliases"));
    free(doc);
}

/* Every input has a cap: kubeconfig files, documents in memory, token files. */
static void test_size_caps(void **state)
{
    (void)state;
    size_t big = ((size_t)4 << 20) + 1;
    char *dir = tmpdir(), *path = join(dir, "kubeconfig"), *tok = join(dir, "token");
    char *text = malloc(big + 1);
    kop_config *cfg = NULL;
    kop_status st;
    assert_non_null(text);
    memset(text, '#', big);
    text[big] = '\0';
    assert_int_equal(kop_config_parse(text, big, "/mem/config", NULL, &cfg, &st), KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "/mem/config: larger than the 4 MiB cap"));
    write_file(path, text, 0600);
    assert_int_equal(kop_config_load(&(kop_config_opts){.kubeconfig = path}, &cfg, &st),
                     KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "larger than the 4 MiB cap"));
    assert_null(cfg);

    text[((size_t)64 << 10) + 1] = '\0'; /* 64 KiB + 1 byte of token */
    text[0] = 'x';
    write_file(tok, text, 0600);
    const char *y = MINI_CLUSTER "users: [{name: u, user: {tokenFile: token}}]\n" MINI_CONTEXT;
    assert_int_equal(kop_config_parse(y, strlen(y), path, NULL, &cfg, &st), KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "users[name=u].tokenFile: "));
    assert_non_null(strstr(st.message, "larger than the 64 KiB cap"));
    free(text);
    free(path);
    free(tok);
    rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_parse_table, clean_env),
        cmocka_unit_test_setup(test_parse_only, clean_env),
        cmocka_unit_test_setup(test_garbage_never_crashes, clean_env),
        cmocka_unit_test_setup(test_alias_expansion_capped, clean_env),
        cmocka_unit_test_setup(test_size_caps, clean_env),
    };
    return cmocka_run_group_tests_name("config_parse", tests, NULL, NULL);
}

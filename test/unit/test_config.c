/*
 * test_config.c - unit tests of the config module: kubeconfig parsing and
 * merging against the fixture files in fixtures/kubeconfig, credential
 * files that rotate, exec plugins (small shell scripts written into a
 * temporary directory at run time), in-cluster configuration, and garbage
 * input that must fail cleanly.
 *
 * Nothing here depends on timing except with wide margins: a rotation test
 * sleeps a little over the one-second recheck interval, and the plugin
 * timeout test only checks that a 300 ms timeout fires well before the
 * plugin's 10 s sleep would end.
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

#ifndef KOP_CONFIG_FIXTURES
#error "KOP_CONFIG_FIXTURES must name test/unit/fixtures/kubeconfig"
#endif
#define FX KOP_CONFIG_FIXTURES

#define INLINE_CA     "-----BEGIN CERTIFICATE-----\nINLINE-CA\n-----END CERTIFICATE-----\n"
#define INLINE_CERT   "-----BEGIN CERTIFICATE-----\nINLINE-CLIENT\n-----END CERTIFICATE-----\n"
#define INLINE_KEY    "-----BEGIN PRIVATE KEY-----\nINLINE-KEY\n-----END PRIVATE KEY-----\n"
#define FILE_CA       "-----BEGIN CERTIFICATE-----\nFILE-CA\n-----END CERTIFICATE-----\n"
#define FILE_CERT     "-----BEGIN CERTIFICATE-----\nFILE-CLIENT\n-----END CERTIFICATE-----\n"
#define FILE_KEY      "-----BEGIN PRIVATE KEY-----\nFILE-KEY\n-----END PRIVATE KEY-----\n"

/* ---- helpers ------------------------------------------------------------ */

/* expand replaces each '@' in pattern with the fixtures directory. */
static const char *expand(const char *pattern)
{
    static char buf[2048];
    size_t k = 0;
    for (const char *p = pattern; *p && k < sizeof buf - 1; p++) {
        if (*p == '@')
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%s", FX);
        else
            buf[k++] = *p;
    }
    buf[k < sizeof buf ? k : sizeof buf - 1] = '\0';
    return buf;
}

static void write_file(const char *path, const char *content, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static char *read_text(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* tmpdir makes a fresh directory; rm_tree removes it with its contents. */
static char *tmpdir(void)
{
    char *d = strdup("/tmp/kop-config-test-XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *join(const char *dir, const char *name)
{
    char *s = NULL;
    assert_true(asprintf(&s, "%s/%s", dir, name) > 0);
    return s;
}

/* Each test starts from a clean environment for the variables we read. */
static int clean_env(void **state)
{
    (void)state;
    unsetenv("KUBECONFIG");
    unsetenv("POD_NAMESPACE");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    return 0;
}

static kop_config *load_fixture(const char *name, const char *context)
{
    char path[PATH_MAX];
    kop_status st;
    kop_config *cfg = NULL;
    snprintf(path, sizeof path, "%s/%s", FX, name);
    kop_err err = kop_config_load(&(kop_config_opts){.kubeconfig = path, .context = context},
                                  &cfg, &st);
    if (err)
        fail_msg("%s: %s: %s", name, kop_err_name(err), st.message);
    return cfg;
}

/* creds fetches credentials that must be available. */
static void creds(kop_config *cfg, kop_credentials *c)
{
    kop_status st;
    kop_err err = kop_config_credentials(cfg, c, &st);
    if (err)
        fail_msg("credentials: %s: %s", kop_err_name(err), st.message);
}

/* ---- loading fixtures: a table of cases --------------------------------- */

struct load_case {
    const char *file;
    const char *context;
    kop_err err;
    const char *server;  /* expected on success */
    const char *ns;
    const char *ctx;
    const char *message; /* substring expected on failure; '@' is the fixture dir */
};

static const struct load_case load_cases[] = {
    {"basic.yaml", NULL, KOP_OK, "https://127.0.0.1:6443", "team-a", "dev", NULL},
    {"basic.yaml", "prod", KOP_OK, "https://prod.example.com", "default", "prod", NULL},
    {"basic.yaml", "anonymous", KOP_OK, "https://prod.example.com", "default", "anonymous", NULL},
    {"basic.yaml", "nope", KOP_ECONFIG, NULL, NULL, NULL,
     "@/basic.yaml: context \"nope\" not found"},
    {"dangling.yaml", NULL, KOP_ECONFIG, NULL, NULL, NULL,
     "@/dangling.yaml: contexts[name=no-cluster]: cluster \"ghost\" not found"},
    {"dangling.yaml", "no-user", KOP_ECONFIG, NULL, NULL, NULL,
     "contexts[name=no-user]: user \"ghost\" not found"},
    {"dangling.yaml", "bad-namespace", KOP_ECONFIG, NULL, NULL, NULL,
     "contexts[name=bad-namespace].namespace: \"Not_A_Label\""},
    {"bad.yaml", NULL, KOP_EPARSE, NULL, NULL, NULL, "@/bad.yaml:6:5: invalid YAML: duplicate key"},
    {"missing-key.yaml", NULL, KOP_EIO, NULL, NULL, NULL,
     "@/missing-key.yaml: users[name=dev].client-key: @/certs/no-such-key.pem: No such file or "
     "directory"},
    {"insecure.yaml", "conflict", KOP_ECONFIG, NULL, NULL, NULL,
     "clusters[name=conflict]: insecure-skip-tls-verify together with a certificate authority"},
    {"no-such-file.yaml", NULL, KOP_EIO, NULL, NULL, NULL,
     "@/no-such-file.yaml: No such file or directory"},
    {"certs", NULL, KOP_EIO, NULL, NULL, NULL, "@/certs: Is a directory"},
};

static void test_load_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof load_cases / sizeof load_cases[0]; i++) {
        const struct load_case *c = &load_cases[i];
        char path[PATH_MAX];
        kop_status st;
        kop_config *cfg = (kop_config *)1;
        snprintf(path, sizeof path, "%s/%s", FX, c->file);
        kop_err err = kop_config_load(
            &(kop_config_opts){.kubeconfig = path, .context = c->context}, &cfg, &st);
        if (err != c->err)
            fail_msg("case %zu (%s %s): got %s (%s), want %s", i, c->file,
                     c->context ? c->context : "-", kop_err_name(err), st.message,
                     kop_err_name(c->err));
        if (err) {
            assert_null(cfg);
            if (!strstr(st.message, expand(c->message)))
                fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message,
                         expand(c->message));
            continue;
        }
        assert_string_equal(kop_config_server(cfg), c->server);
        assert_string_equal(kop_config_namespace(cfg), c->ns);
        assert_string_equal(kop_config_context(cfg), c->ctx);
        kop_config_free(cfg);
    }
}

static void test_basic_fields_and_credentials(void **state)
{
    (void)state;
    kop_credentials c;
    size_t len = 0;
    kop_config *cfg = load_fixture("basic.yaml", NULL);
    assert_string_equal(kop_config_tls_server_name(cfg), "kubernetes.default");
    assert_false(kop_config_insecure(cfg));
    assert_string_equal(kop_config_ca_pem(cfg, &len), INLINE_CA);
    assert_int_equal(len, strlen(INLINE_CA));
    creds(cfg, &c);
    assert_string_equal(c.token, "dev-token");
    assert_null(c.cert_pem);
    assert_null(c.key_pem);
    kop_credentials_fini(&c);
    kop_credentials_fini(&c); /* idempotent */
    kop_credentials_fini(NULL);
    kop_config_free(cfg);

    cfg = load_fixture("basic.yaml", "prod");
    assert_null(kop_config_tls_server_name(cfg));
    assert_null(kop_config_ca_pem(cfg, &len));
    assert_int_equal(len, 0);
    creds(cfg, &c);
    assert_null(c.token);
    assert_string_equal(c.cert_pem, INLINE_CERT);
    assert_int_equal(c.cert_len, strlen(INLINE_CERT));
    assert_string_equal(c.key_pem, INLINE_KEY);
    assert_int_equal(c.key_len, strlen(INLINE_KEY));
    kop_credentials_fini(&c);
    kop_config_free(cfg);

    cfg = load_fixture("basic.yaml", "anonymous"); /* no user: no credentials at all */
    creds(cfg, &c);
    assert_null(c.token);
    assert_null(c.cert_pem);
    assert_null(c.key_pem);
    kop_config_free(cfg);
    kop_config_free(NULL);
}

/* Files named relative to the kubeconfig are found from any directory. */
static void test_relative_files(void **state)
{
    (void)state;
    kop_credentials c;
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/"), 0);
    kop_config *cfg = load_fixture("files.yaml", NULL);
    assert_int_equal(chdir(cwd), 0);
    assert_string_equal(kop_config_server(cfg), "https://files.example.com:8443");
    assert_string_equal(kop_config_ca_pem(cfg, NULL), FILE_CA);
    creds(cfg, &c);
    assert_string_equal(c.cert_pem, FILE_CERT);
    assert_string_equal(c.key_pem, FILE_KEY);
    kop_credentials_fini(&c);
    kop_config_free(cfg);

    /* A relative origin for an in-memory document anchors paths too. */
    char *yaml = read_text(FX "/files.yaml");
    assert_non_null(yaml);
    kop_status st;
    assert_int_equal(chdir(FX), 0);
    kop_err err = kop_config_parse(yaml, strlen(yaml), "files.yaml", NULL, &cfg, &st);
    assert_int_equal(chdir(cwd), 0);
    if (err)
        fail_msg("%s", st.message);
    assert_string_equal(kop_config_ca_pem(cfg, NULL), FILE_CA);
    kop_config_free(cfg);
}

static void test_data_wins_over_file(void **state)
{
    (void)state;
    kop_credentials c;
    kop_config *cfg = load_fixture("both.yaml", NULL);
    assert_string_equal(kop_config_ca_pem(cfg, NULL), INLINE_CA);
    creds(cfg, &c);
    assert_string_equal(c.cert_pem, INLINE_CERT);
    assert_string_equal(c.key_pem, INLINE_KEY);
    kop_credentials_fini(&c);
    kop_config_free(cfg);
}

static void test_insecure_only_when_set(void **state)
{
    (void)state;
    static const struct {
        const char *context;
        bool insecure;
    } cases[] = {{"skip", true}, {"verify", false}, {"unset", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kop_config *cfg = load_fixture("insecure.yaml", cases[i].context);
        assert_int_equal(kop_config_insecure(cfg), cases[i].insecure);
        kop_config_free(cfg);
    }
}

/* ---- KUBECONFIG merging ------------------------------------------------- */

static kop_err load_env(const char *list, const char *context, kop_config **cfg, kop_status *st)
{
    setenv("KUBECONFIG", expand(list), 1);
    kop_err err = kop_config_load(&(kop_config_opts){.context = context}, cfg, st);
    unsetenv("KUBECONFIG");
    return err;
}

static void test_kubeconfig_merge(void **state)
{
    (void)state;
    kop_config *cfg;
    kop_credentials c;
    kop_status st;
    /* current-context and "shared" entries come from the first file. */
    assert_int_equal(load_env("@/merge-a.yaml:@/merge-b.yaml:@/merge-c.yaml", NULL, &cfg, &st),
                     KOP_OK);
    assert_string_equal(kop_config_context(cfg), "a-ctx");
    assert_string_equal(kop_config_server(cfg), "https://a.example.com");
    assert_string_equal(kop_config_namespace(cfg), "ns-a");
    creds(cfg, &c);
    assert_string_equal(c.token, "token-a");
    kop_credentials_fini(&c);
    kop_config_free(cfg);

    /* A context from the third file uses a cluster from the first and a user
     * from the second. */
    assert_int_equal(load_env("@/merge-a.yaml:@/merge-b.yaml:@/merge-c.yaml", "c-ctx", &cfg, &st),
                     KOP_OK);
    assert_string_equal(kop_config_server(cfg), "https://a.example.com");
    assert_string_equal(kop_config_namespace(cfg), "ns-c");
    creds(cfg, &c);
    assert_string_equal(c.token, "token-b-only");
    kop_credentials_fini(&c);
    kop_config_free(cfg);

    /* In the other order, b's entries win. */
    assert_int_equal(load_env("@/merge-b.yaml:@/merge-a.yaml", NULL, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_context(cfg), "b-ctx");
    assert_string_equal(kop_config_server(cfg), "https://b-only.example.com");
    kop_config_free(cfg);
    assert_int_equal(load_env("@/merge-b.yaml:@/merge-a.yaml", "a-ctx", &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_namespace(cfg), "ns-b");
    kop_config_free(cfg);

    /* A file without current-context leaves it to the next one. */
    assert_int_equal(load_env("@/merge-c.yaml:@/merge-b.yaml:@/merge-a.yaml", NULL, &cfg, &st),
                     KOP_OK);
    assert_string_equal(kop_config_context(cfg), "b-ctx");
    kop_config_free(cfg);
}

static void test_kubeconfig_list_skips_missing(void **state)
{
    (void)state;
    kop_config *cfg;
    kop_status st;
    /* Empty entries, repeats and missing files are skipped. */
    assert_int_equal(
        load_env("::@/nope-1.yaml:@/merge-a.yaml::@/merge-a.yaml:@/nope-2.yaml:", NULL, &cfg, &st),
        KOP_OK);
    assert_string_equal(kop_config_context(cfg), "a-ctx");
    kop_config_free(cfg);

    /* None exists: an error naming the variable. */
    assert_int_equal(load_env("@/nope-1.yaml:@/nope-2.yaml", NULL, &cfg, &st), KOP_ECONFIG);
    assert_null(cfg);
    assert_non_null(strstr(st.message, "KUBECONFIG="));
    assert_non_null(strstr(st.message, "none of the listed files exists"));

    /* A broken file in the list is an error even if others are fine. */
    assert_int_equal(load_env("@/merge-a.yaml:@/bad.yaml", NULL, &cfg, &st), KOP_EPARSE);
    assert_non_null(strstr(st.message, expand("@/bad.yaml:6:")));

    /* An explicit path beats $KUBECONFIG. */
    setenv("KUBECONFIG", expand("@/merge-b.yaml"), 1);
    cfg = load_fixture("merge-a.yaml", NULL);
    unsetenv("KUBECONFIG");
    assert_string_equal(kop_config_context(cfg), "a-ctx");
    kop_config_free(cfg);
}

/* Without KUBECONFIG: $HOME/.kube/config, and kop_config_auto's order. */
static void test_home_and_auto(void **state)
{
    (void)state;
    char *home = tmpdir(), *kube = join(home, ".kube"), *file = join(kube, "config");
    char *sa = tmpdir(), *p;
    const char *old_home = getenv("HOME");
    char *saved = old_home ? strdup(old_home) : NULL;
    kop_config *cfg;
    kop_status st;
    setenv("HOME", home, 1);

    /* No ~/.kube/config: load fails naming it, auto falls back to in-cluster. */
    assert_int_equal(kop_config_load(NULL, &cfg, &st), KOP_EIO);
    assert_non_null(strstr(st.message, ".kube/config: No such file or directory"));
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    write_file((p = join(sa, "ca.crt")), FILE_CA, 0644);
    free(p);
    write_file((p = join(sa, "token")), "sa-token\n", 0600);
    free(p);
    kop_config_opts opts = {.service_account_dir = sa};
    assert_int_equal(kop_config_auto(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_server(cfg), "https://10.96.0.1:443");
    assert_string_equal(kop_config_context(cfg), "");
    kop_config_free(cfg);

    /* With ~/.kube/config, both use it. */
    assert_int_equal(mkdir(kube, 0700), 0);
    write_file(file, read_text(FX "/merge-a.yaml"), 0600);
    assert_int_equal(kop_config_load(NULL, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_context(cfg), "a-ctx");
    kop_config_free(cfg);
    assert_int_equal(kop_config_auto(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_context(cfg), "a-ctx");
    kop_config_free(cfg);

    /* $KUBECONFIG beats ~/.kube/config, and opts->kubeconfig beats both. */
    setenv("KUBECONFIG", expand("@/merge-b.yaml"), 1);
    assert_int_equal(kop_config_auto(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_context(cfg), "b-ctx");
    kop_config_free(cfg);
    opts.kubeconfig = expand("@/basic.yaml");
    assert_int_equal(kop_config_auto(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_context(cfg), "dev");
    kop_config_free(cfg);
    unsetenv("KUBECONFIG");

    if (saved)
        setenv("HOME", saved, 1);
    else
        unsetenv("HOME");
    free(saved);
    free(kube);
    free(file);
    rm_tree(home);
    rm_tree(sa);
}

/* ---- parsing from memory ------------------------------------------------ */

struct parse_case {
    const char *yaml;
    kop_err err;
    const char *expect; /* server on success, message substring on failure */
};

#define MINI_CLUSTER "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
#define MINI_CONTEXT "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"

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

/* ---- token files -------------------------------------------------------- */

static void test_token_file_static_fixture(void **state)
{
    (void)state;
    kop_credentials c;
    kop_config *cfg = load_fixture("tokenfile.yaml", NULL);
    creds(cfg, &c);
    assert_string_equal(c.token, "file-token"); /* trimmed; the file wins over token */
    kop_credentials_fini(&c);
    kop_config_free(cfg);
}

static kop_config *token_file_config(const char *dir)
{
    char *origin = join(dir, "kubeconfig");
    static const char yaml[] = MINI_CLUSTER "users: [{name: u, user: {tokenFile: token}}]\n"
                                            MINI_CONTEXT;
    kop_config *cfg = NULL;
    kop_status st;
    kop_err err = kop_config_parse(yaml, strlen(yaml), origin, NULL, &cfg, &st);
    if (err)
        fail_msg("%s", st.message);
    free(origin);
    return cfg;
}

static void expect_token(kop_config *cfg, const char *want)
{
    kop_credentials c;
    creds(cfg, &c);
    assert_string_equal(c.token, want);
    kop_credentials_fini(&c);
}

static void test_token_file_rotation(void **state)
{
    (void)state;
    char *dir = tmpdir(), *tok = join(dir, "token"), *tmp = join(dir, "token.new");
    kop_status st;
    kop_config *cfg;

    const char *y = MINI_CLUSTER "users: [{name: u, user: {tokenFile: token}}]\n" MINI_CONTEXT;
    /* Missing token file: an error naming the file and the field. */
    assert_int_equal(kop_config_parse(y, strlen(y), "/nonexistent/kc", NULL, &cfg, &st), KOP_EIO);
    assert_non_null(strstr(st.message, "/nonexistent/kc: users[name=u].tokenFile: "
                                       "/nonexistent/token: No such file or directory"));

    write_file(tok, "one\n", 0600);
    cfg = token_file_config(dir);
    expect_token(cfg, "one");

    /* Rewritten in place (same size), mtime moved: seen after invalidation
     * without waiting. */
    write_file(tok, "two\n", 0600);
    struct timespec times[2] = {{0, UTIME_OMIT}, {time(NULL) + 10, 0}};
    assert_int_equal(utimensat(AT_FDCWD, tok, times, 0), 0);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "two");

    /* Replaced by rename (new inode, as the kubelet does): seen once the
     * one-second recheck interval has passed. */
    write_file(tmp, "  three  \n", 0600);
    assert_int_equal(rename(tmp, tok), 0);
    struct timespec pause = {1, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    expect_token(cfg, "three");

    /* Gone or empty later: the last good token is kept. */
    assert_int_equal(unlink(tok), 0);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "three");
    write_file(tok, "\n\n", 0600);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "three");
    kop_config_free(cfg);

    /* An empty file with no previous token is an error. */
    kop_config *cfg2 = NULL;
    char *origin = join(dir, "kubeconfig");
    assert_int_equal(kop_config_parse(y, strlen(y), origin, NULL, &cfg2, &st), KOP_ECREDENTIALS);
    assert_non_null(strstr(st.message, "tokenFile"));
    free(origin);

    free(tok);
    free(tmp);
    rm_tree(dir);
}

struct hammer {
    kop_config *cfg;
    int bad;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 200; i++) {
        kop_credentials c;
        if (kop_config_credentials(h->cfg, &c, NULL) != KOP_OK || !c.token ||
            strncmp(c.token, "tok", 3) != 0)
            __atomic_add_fetch(&h->bad, 1, __ATOMIC_RELAXED);
        if (i % 50 == 0)
            kop_config_invalidate_credentials(h->cfg);
        kop_credentials_fini(&c);
    }
    return NULL;
}

/* Many threads reading credentials while the file rotates. */
static void test_credentials_threads(void **state)
{
    (void)state;
    char *dir = tmpdir(), *tok = join(dir, "token"), *tmp = join(dir, "t.new");
    write_file(tok, "tok-0", 0600);
    struct hammer h = {.cfg = token_file_config(dir)};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h), 0);
    for (int i = 1; i <= 20; i++) {
        char t[32];
        snprintf(t, sizeof t, "tok-%d", i);
        write_file(tmp, t, 0600);
        assert_int_equal(rename(tmp, tok), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(h.bad, 0);
    kop_config_free(h.cfg);
    free(tok);
    free(tmp);
    rm_tree(dir);
}

/* ---- exec plugins ------------------------------------------------------- */

/* The plugin counts its runs in $PLUGIN_DIR/count, saves its request in
 * $PLUGIN_DIR/info, and answers with apiVersion $1, token tok-<run> and the
 * expiry in $PLUGIN_DIR/expiry if that file exists. */
static const char plugin_ok[] =
    "d=\"$PLUGIN_DIR\"\n"
    "n=$(( $(cat \"$d/count\" 2>/dev/null || echo 0) + 1 ))\n"
    "echo \"$n\" > \"$d/count\"\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/info\"\n"
    "exp=''\n"
    "[ -f \"$d/expiry\" ] && exp=\",\\\"expirationTimestamp\\\":\\\"$(cat \"$d/expiry\")\\\"\"\n"
    "printf '{\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"tok-%s\"%s}}\\n' \"$1\" \"$n\" \"$exp\"\n";

struct plugin {
    char *dir;
    kop_config *cfg;
};

/*
 * plugin_setup writes script (a /bin/sh body) as DIR/plugin.sh and parses a
 * kubeconfig in DIR whose user runs it with apiVersion api and argument
 * answer. mode is the interactiveMode line ("" for none).
 */
static kop_err plugin_setup(struct plugin *pl, const char *script, const char *api,
                            const char *answer, const char *mode, kop_status *st)
{
    char yaml[2048], *path;
    pl->dir = tmpdir();
    pl->cfg = NULL;
    path = join(pl->dir, "plugin.sh");
    char *body = NULL;
    assert_true(asprintf(&body, "#!/bin/sh\n%s", script) > 0);
    write_file(path, body, 0755);
    free(body);
    free(path);
    snprintf(yaml, sizeof yaml,
             MINI_CLUSTER "users:\n- name: u\n  user:\n    exec:\n"
                          "      apiVersion: %s\n"
                          "      command: ./plugin.sh\n"
                          "      args: [\"%s\"]\n"
                          "      env: [{name: PLUGIN_DIR, value: \"%s\"}]\n"
                          "      provideClusterInfo: true\n"
                          "      installHint: try apt install kop-plugin\n"
                          "%s" MINI_CONTEXT,
             api, answer, pl->dir, mode);
    path = join(pl->dir, "kubeconfig");
    kop_err err = kop_config_parse(yaml, strlen(yaml), path, NULL, &pl->cfg, st);
    free(path);
    return err;
}

static void plugin_teardown(struct plugin *pl)
{
    kop_config_free(pl->cfg);
    rm_tree(pl->dir);
}

static int plugin_runs(const struct plugin *pl)
{
    char *path = join(pl->dir, "count");
    const char *t = read_text(path);
    free(path);
    return t ? atoi(t) : 0;
}

static void plugin_expiry(const struct plugin *pl, const char *text)
{
    char *path = join(pl->dir, "expiry");
    write_file(path, text, 0644);
    free(path);
}

#define V1      "client.authentication.k8s.io/v1"
#define V1BETA1 "client.authentication.k8s.io/v1beta1"

static void test_exec_cached_without_expiry(void **state)
{
    (void)state;
    static const struct {
        const char *api, *mode;
    } versions[] = {{V1, "      interactiveMode: Never\n"},
                    {V1BETA1, ""},
                    {V1BETA1, "      interactiveMode: IfAvailable\n"}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        struct plugin pl;
        kop_status st;
        if (plugin_setup(&pl, plugin_ok, versions[i].api, versions[i].api, versions[i].mode, &st))
            fail_msg("%s", st.message);
        assert_int_equal(plugin_runs(&pl), 0); /* nothing runs at load time */
        expect_token(pl.cfg, "tok-1");
        expect_token(pl.cfg, "tok-1");
        assert_int_equal(plugin_runs(&pl), 1);
        kop_config_invalidate_credentials(pl.cfg);
        expect_token(pl.cfg, "tok-2");
        expect_token(pl.cfg, "tok-2");
        assert_int_equal(plugin_runs(&pl), 2);

        /* The request it got in KUBERNETES_EXEC_INFO. */
        char *info_path = join(pl.dir, "info");
        const char *info = read_text(info_path);
        free(info_path);
        assert_non_null(info);
        assert_non_null(strstr(info, "\"kind\":\"ExecCredential\""));
        assert_non_null(strstr(info, versions[i].api));
        assert_non_null(strstr(info, "\"interactive\":false"));
        assert_non_null(strstr(info, "\"server\":\"https://h\""));
        plugin_teardown(&pl);
    }
}

static void test_exec_expiry(void **state)
{
    (void)state;
    struct plugin pl;
    kop_status st;
    char soon[64];

    /* Expired: every call runs the plugin. */
    assert_int_equal(plugin_setup(&pl, plugin_ok, V1, V1, "      interactiveMode: Never\n", &st),
                     KOP_OK);
    plugin_expiry(&pl, "2001-01-01T00:00:00Z");
    expect_token(pl.cfg, "tok-1");
    expect_token(pl.cfg, "tok-2");
    expect_token(pl.cfg, "tok-3");
    assert_int_equal(plugin_runs(&pl), 3);

    /* Within 10 s of expiry counts as expired. */
    time_t t = time(NULL) + 5;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(soon, sizeof soon, "%Y-%m-%dT%H:%M:%SZ", &tm);
    plugin_expiry(&pl, soon);
    expect_token(pl.cfg, "tok-4");
    expect_token(pl.cfg, "tok-5");

    /* In the future: cached until invalidated. */
    plugin_expiry(&pl, "2099-12-31T23:59:59.123456+01:00");
    expect_token(pl.cfg, "tok-6");
    expect_token(pl.cfg, "tok-6");
    expect_token(pl.cfg, "tok-6");
    kop_config_invalidate_credentials(pl.cfg);
    expect_token(pl.cfg, "tok-7");
    assert_int_equal(plugin_runs(&pl), 7);

    /* A malformed expiry is an error. */
    plugin_expiry(&pl, "tomorrow");
    kop_config_invalidate_credentials(pl.cfg);
    kop_credentials c;
    assert_int_equal(kop_config_credentials(pl.cfg, &c, &st), KOP_ECREDENTIALS);
    assert_non_null(strstr(st.message, "expirationTimestamp tomorrow is not RFC 3339"));
    plugin_teardown(&pl);
}

struct exec_fail_case {
    const char *script;
    const char *answer; /* apiVersion the plugin answers with */
    kop_err err;
    const char *message;
};

static const struct exec_fail_case exec_fail_cases[] = {
    {"echo 'plugin: refresh token expired' >&2\necho partial\nexit 3\n", V1, KOP_ECREDENTIALS,
     "exited with status 3: plugin: refresh token expired"},
    {"kill -9 $$\n", V1, KOP_ECREDENTIALS, "was killed by signal 9"},
    {plugin_ok, V1BETA1, KOP_ECREDENTIALS,
     "answered apiVersion " V1BETA1 ", expected " V1},
    {"echo not json\n", V1, KOP_ECREDENTIALS, "output is not JSON"},
    {"echo '{\"apiVersion\":\"" V1 "\",\"kind\":\"Pod\",\"status\":{\"token\":\"x\"}}'\n", V1,
     KOP_ECREDENTIALS, "not an ExecCredential"},
    {"echo '{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\"}'\n", V1, KOP_ECREDENTIALS,
     "has no status"},
    {"echo '{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{}}'\n", V1,
     KOP_ECREDENTIALS, "neither a token nor a certificate"},
    {"echo '{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
     "{\"clientCertificateData\":\"C\"}}'\n",
     V1, KOP_ECREDENTIALS, "a certificate or a key, not both"},
    {"printf '%s' '{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
     "{\"token\":\"a\\nb\"}}'\n",
     V1, KOP_ECREDENTIALS, "token contains control characters"},
    {"head -c 2000000 /dev/zero | tr '\\0' a\n", V1, KOP_ETOOBIG, "wrote more than 1024 KiB"},
};

static void test_exec_failures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof exec_fail_cases / sizeof exec_fail_cases[0]; i++) {
        const struct exec_fail_case *c = &exec_fail_cases[i];
        struct plugin pl;
        kop_credentials cr;
        kop_status st;
        assert_int_equal(
            plugin_setup(&pl, c->script, V1, c->answer, "      interactiveMode: Never\n", &st),
            KOP_OK);
        kop_err err = kop_config_credentials(pl.cfg, &cr, &st);
        if (err != c->err)
            fail_msg("case %zu: got %s (%s)", i, kop_err_name(err), st.message);
        assert_null(cr.token);
        if (!strstr(st.message, c->message))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, c->message);
        assert_non_null(strstr(st.message, "users[name=u].exec: "));
        plugin_teardown(&pl);
    }
}

static void test_exec_cert_and_key(void **state)
{
    (void)state;
    struct plugin pl;
    kop_credentials c;
    kop_status st;
    assert_int_equal(plugin_setup(&pl,
                                  "printf '%s' '{\"apiVersion\":\"" V1BETA1 "\","
                                  "\"kind\":\"ExecCredential\","
                                  "\"status\":{\"clientCertificateData\":\"CERT\\n\","
                                  "\"clientKeyData\":\"KEY\\n\"}}'\n",
                                  V1BETA1, V1BETA1, "", &st),
                     KOP_OK);
    creds(pl.cfg, &c);
    assert_null(c.token);
    assert_string_equal(c.cert_pem, "CERT\n");
    assert_int_equal(c.cert_len, 5);
    assert_string_equal(c.key_pem, "KEY\n");
    assert_int_equal(c.key_len, 4);
    kop_credentials_fini(&c);
    plugin_teardown(&pl);
}

static void test_exec_timeout_and_not_found(void **state)
{
    (void)state;
    struct plugin pl;
    kop_credentials c;
    kop_status st;
    assert_int_equal(plugin_setup(&pl, "sleep 10\n", V1, V1, "      interactiveMode: Never\n", &st),
                     KOP_OK);
    kop__config_set_exec_timeout_ms(pl.cfg, 300);
    time_t t0 = time(NULL);
    assert_int_equal(kop_config_credentials(pl.cfg, &c, &st), KOP_ETIMEOUT);
    assert_true(time(NULL) - t0 < 8);
    assert_non_null(strstr(st.message, "did not finish within 300 ms"));
    plugin_teardown(&pl);

    /* A command that does not exist: the error carries the install hint. */
    assert_int_equal(plugin_setup(&pl, "", V1, V1, "      interactiveMode: Never\n", &st),
                     KOP_OK);
    kop_config_free(pl.cfg);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             MINI_CLUSTER "users: [{name: u, user: {exec: {apiVersion: " V1BETA1 ", "
                          "command: kop-no-such-plugin-zz9, installHint: 'see docs/auth.md'}}}]\n"
                          MINI_CONTEXT);
    assert_int_equal(kop_config_parse(yaml, strlen(yaml), "/mem/config", NULL, &pl.cfg, &st),
                     KOP_OK);
    assert_int_equal(kop_config_credentials(pl.cfg, &c, &st), KOP_ECREDENTIALS);
    assert_non_null(strstr(st.message, "cannot run kop-no-such-plugin-zz9"));
    assert_non_null(strstr(st.message, "see docs/auth.md"));
    plugin_teardown(&pl);
}

/* The output parser and the timestamp parser, directly. */
static void test_exec_output_and_rfc3339(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool ok;
        time_t want;
    } times[] = {
        {"1970-01-01T00:00:00Z", true, 0},
        {"2024-02-29T12:30:45Z", true, 1709209845},
        {"2024-02-29T12:30:45.999z", true, 1709209845},
        {"2024-02-29T14:30:45+02:00", true, 1709209845},
        {"2024-02-29t10:00:45-02:30", true, 1709209845},
        {"2023-02-29T00:00:00Z", false, 0},
        {"2024-13-01T00:00:00Z", false, 0},
        {"2024-01-01T00:00:00", false, 0},
        {"2024-01-01T00:00:00.Z", false, 0},
        {"2024-01-01T24:00:00Z", false, 0},
        {"2024-01-01T00:00:00+2:00", false, 0},
        {"2024-01-01T00:00:00Zjunk", false, 0},
        {"", false, 0},
    };
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        time_t t = -1;
        bool ok = kop__parse_rfc3339(times[i].text, &t);
        if (ok != times[i].ok || (ok && t != times[i].want))
            fail_msg("%s: ok=%d t=%lld", times[i].text, ok, (long long)t);
    }
    kop__exec_cred cred;
    kop_status st;
    const char *good = "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"spec\":{},"
                       "\"status\":{\"token\":\"abc\",\"expirationTimestamp\":null}}";
    assert_int_equal(kop__exec_parse_output(good, strlen(good), V1, "w", &cred, &st), KOP_OK);
    assert_string_equal(cred.token, "abc");
    assert_false(cred.has_expiry);
    kop__exec_cred_fini(&cred);
    const char *dup = "{\"apiVersion\":\"" V1 "\",\"apiVersion\":\"" V1 "\"}";
    assert_int_equal(kop__exec_parse_output(dup, strlen(dup), V1, "w", &cred, &st),
                     KOP_ECREDENTIALS);
    assert_int_equal(kop__exec_parse_output("", 0, V1, "w", &cred, &st), KOP_ECREDENTIALS);
    assert_null(cred.token);
}

/* ---- in-cluster --------------------------------------------------------- */

static char *sa_dir(const char *ns)
{
    char *dir = tmpdir(), *p;
    write_file((p = join(dir, "ca.crt")), FILE_CA, 0644);
    free(p);
    write_file((p = join(dir, "token")), "sa-token-1\n", 0600);
    free(p);
    if (ns) {
        write_file((p = join(dir, "namespace")), ns, 0644);
        free(p);
    }
    return dir;
}

static void test_in_cluster(void **state)
{
    (void)state;
    static const struct {
        const char *host, *port, *server;
    } hosts[] = {
        {"10.96.0.1", "443", "https://10.96.0.1:443"},
        {"fd00:10:96::1", "6443", "https://[fd00:10:96::1]:6443"},
        {"kubernetes.default.svc", "443", "https://kubernetes.default.svc:443"},
    };
    char *dir = sa_dir("ctf\n");
    kop_config_opts opts = {.service_account_dir = dir};
    kop_config *cfg;
    kop_status st;
    kop_credentials c;

    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_ECONFIG);
    assert_non_null(strstr(st.message, "not running in a cluster"));
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        setenv("KUBERNETES_SERVICE_HOST", hosts[i].host, 1);
        setenv("KUBERNETES_SERVICE_PORT", hosts[i].port, 1);
        assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_OK);
        assert_string_equal(kop_config_server(cfg), hosts[i].server);
        assert_string_equal(kop_config_namespace(cfg), "ctf");
        assert_string_equal(kop_config_context(cfg), "");
        assert_string_equal(kop_config_ca_pem(cfg, NULL), FILE_CA);
        assert_false(kop_config_insecure(cfg));
        kop_config_free(cfg);
    }
    setenv("KUBERNETES_SERVICE_PORT", "https", 1);
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_ECONFIG);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);

    /* The token rotates like a tokenFile. */
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_OK);
    creds(cfg, &c);
    assert_string_equal(c.token, "sa-token-1");
    kop_credentials_fini(&c);
    char *tok = join(dir, "token"), *tmp = join(dir, "token.tmp");
    write_file(tmp, "sa-token-2", 0600);
    assert_int_equal(rename(tmp, tok), 0);
    kop_config_invalidate_credentials(cfg);
    creds(cfg, &c);
    assert_string_equal(c.token, "sa-token-2");
    kop_credentials_fini(&c);
    kop_config_free(cfg);

    /* $POD_NAMESPACE wins over the file. */
    setenv("POD_NAMESPACE", "from-env", 1);
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_namespace(cfg), "from-env");
    kop_config_free(cfg);
    unsetenv("POD_NAMESPACE");

    /* No token: an error naming it. */
    assert_int_equal(unlink(tok), 0);
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_EIO);
    assert_null(cfg);
    assert_non_null(strstr(st.message, "token: No such file or directory"));
    free(tok);
    free(tmp);
    rm_tree(dir);

    /* No namespace file: "default". No CA: an error. */
    dir = sa_dir(NULL);
    opts.service_account_dir = dir;
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_OK);
    assert_string_equal(kop_config_namespace(cfg), "default");
    kop_config_free(cfg);
    char *ca = join(dir, "ca.crt");
    assert_int_equal(unlink(ca), 0);
    free(ca);
    assert_int_equal(kop_config_in_cluster(&opts, &cfg, &st), KOP_EIO);
    assert_non_null(strstr(st.message, "in-cluster CA"));
    rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_load_table, clean_env),
        cmocka_unit_test_setup(test_basic_fields_and_credentials, clean_env),
        cmocka_unit_test_setup(test_relative_files, clean_env),
        cmocka_unit_test_setup(test_data_wins_over_file, clean_env),
        cmocka_unit_test_setup(test_insecure_only_when_set, clean_env),
        cmocka_unit_test_setup(test_kubeconfig_merge, clean_env),
        cmocka_unit_test_setup(test_kubeconfig_list_skips_missing, clean_env),
        cmocka_unit_test_setup(test_home_and_auto, clean_env),
        cmocka_unit_test_setup(test_parse_table, clean_env),
        cmocka_unit_test_setup(test_parse_only, clean_env),
        cmocka_unit_test_setup(test_garbage_never_crashes, clean_env),
        cmocka_unit_test_setup(test_alias_expansion_capped, clean_env),
        cmocka_unit_test_setup(test_size_caps, clean_env),
        cmocka_unit_test_setup(test_token_file_static_fixture, clean_env),
        cmocka_unit_test_setup(test_token_file_rotation, clean_env),
        cmocka_unit_test_setup(test_credentials_threads, clean_env),
        cmocka_unit_test_setup(test_exec_cached_without_expiry, clean_env),
        cmocka_unit_test_setup(test_exec_expiry, clean_env),
        cmocka_unit_test_setup(test_exec_failures, clean_env),
        cmocka_unit_test_setup(test_exec_cert_and_key, clean_env),
        cmocka_unit_test_setup(test_exec_timeout_and_not_found, clean_env),
        cmocka_unit_test_setup(test_exec_output_and_rfc3339, clean_env),
        cmocka_unit_test_setup(test_in_cluster, clean_env),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

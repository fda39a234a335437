/*
 * test_config.c - loading a configuration (config.c): kubeconfig files
 * against the fixtures in fixtures/kubeconfig, KUBECONFIG merging,
 * ~/.kube/config and kop_config_auto, and in-cluster configuration.
 * Parsing from memory, credential files and exec plugins have their own
 * tests (test_config_parse.c, test_config_credentials.c,
 * test_config_exec.c).
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
        cmocka_unit_test_setup(test_in_cluster, clean_env),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

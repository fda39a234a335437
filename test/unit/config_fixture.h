/*
 * config_fixture.h - what the config module's unit tests share: the
 * fixture directory (fixtures/kubeconfig, '@' in a pattern), PEM
 * stand-ins, temporary directories and files, a clean environment per
 * test, and loading a fixture or credentials that must succeed.
 * Include after <cmocka.h>, with _GNU_SOURCE defined (asprintf).
 */
#ifndef KOP_TEST_CONFIG_FIXTURE_H
#define KOP_TEST_CONFIG_FIXTURE_H

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A minimal cluster and a context selecting it with user u, to complete documents. */
#define MINI_CLUSTER "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
#define MINI_CONTEXT "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"

/* expand replaces each '@' in pattern with the fixtures directory. */
static inline const char *expand(const char *pattern)
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

static inline void write_file(const char *path, const char *content, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static inline char *read_text(const char *path)
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
static inline char *tmpdir(void)
{
    char *d = strdup("/tmp/kop-config-test-XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static inline int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void rm_tree(char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static inline char *join(const char *dir, const char *name)
{
    char *s = NULL;
    assert_true(asprintf(&s, "%s/%s", dir, name) > 0);
    return s;
}

/* Each test starts from a clean environment for the variables we read. */
static inline int clean_env(void **state)
{
    (void)state;
    unsetenv("KUBECONFIG");
    unsetenv("POD_NAMESPACE");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    return 0;
}

static inline kop_config *load_fixture(const char *name, const char *context)
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
static inline void creds(kop_config *cfg, kop_credentials *c)
{
    kop_status st;
    kop_err err = kop_config_credentials(cfg, c, &st);
    if (err)
        fail_msg("credentials: %s: %s", kop_err_name(err), st.message);
}

/* expect_token fetches credentials and checks their token. */
static inline void expect_token(kop_config *cfg, const char *want)
{
    kop_credentials c;
    creds(cfg, &c);
    assert_string_equal(c.token, want);
    kop_credentials_fini(&c);
}

#endif /* KOP_TEST_CONFIG_FIXTURE_H */

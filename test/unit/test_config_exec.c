/*
 * test_config_exec.c - exec plugins (config_exec.c, and the cache in
 * config_credentials.c): small shell scripts written into a temporary
 * directory at run time, their expiry, failures, certificates, timeout
 * and output parsing.
 *
 * The timeout test only checks that a 300 ms timeout fires well before
 * the plugin's 10 s sleep would end.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_exec_cached_without_expiry, clean_env),
        cmocka_unit_test_setup(test_exec_expiry, clean_env),
        cmocka_unit_test_setup(test_exec_failures, clean_env),
        cmocka_unit_test_setup(test_exec_cert_and_key, clean_env),
        cmocka_unit_test_setup(test_exec_timeout_and_not_found, clean_env),
        cmocka_unit_test_setup(test_exec_output_and_rfc3339, clean_env),
    };
    return cmocka_run_group_tests_name("config_exec", tests, NULL, NULL);
}

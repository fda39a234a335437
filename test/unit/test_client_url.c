/*
 * test_client_url.c - request URLs: the apiserver's path layout, escaping
 * that Go decodes back byte for byte, and refusal of anything that could
 * leave its path segment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "kop_internal.h"

static const kop_resource configmaps = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource pods_null_group = {NULL, "v1", "pods", "Pod", true};
static const kop_resource namespaces = {"", "v1", "namespaces", "Namespace", false};
static const kop_resource deployments = {"apps", "v1", "deployments", "Deployment", true};
static const kop_resource clusterroles = {"rbac.authorization.k8s.io", "v1", "clusterroles",
                                          "ClusterRole", false};
static const kop_resource flighttickets = {"flights.com", "v1", "flighttickets", "FlightTicket",
                                           true};
static const kop_resource bad_group = {"a/b", "v1", "things", "Thing", true};
static const kop_resource no_version = {"apps", "", "deployments", "Deployment", true};
static const kop_resource no_resource = {"apps", "v1", NULL, "Deployment", true};
static const kop_resource dotdot_resource = {"", "v1", "..", "X", false};

#define S "https://10.0.0.1:6443"

struct url_case {
    const char *server;
    const kop_resource *r;
    const char *ns, *name, *sub;
    kop__query_param params[5];
    size_t nparams;
    kop_err want;
    const char *url; /* expected URL, or a fragment of the message on error */
};

static const struct url_case cases[] = {
    /* Collections: all namespaces, one namespace. */
    {S, &configmaps, NULL, NULL, NULL, {{0}}, 0, KOP_OK, S "/api/v1/configmaps"},
    {S, &configmaps, "", NULL, NULL, {{0}}, 0, KOP_OK, S "/api/v1/configmaps"},
    {S, &pods_null_group, "ctf", NULL, NULL, {{0}}, 0, KOP_OK, S "/api/v1/namespaces/ctf/pods"},
    {S, &deployments, "prod", NULL, NULL, {{0}}, 0, KOP_OK,
     S "/apis/apps/v1/namespaces/prod/deployments"},
    {S, &clusterroles, NULL, NULL, NULL, {{0}}, 0, KOP_OK,
     S "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
    /* Objects and subresources. */
    {S, &configmaps, "default", "boarding-pass", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/boarding-pass"},
    {S, &deployments, "prod", "web", "scale", {{0}}, 0, KOP_OK,
     S "/apis/apps/v1/namespaces/prod/deployments/web/scale"},
    {S, &flighttickets, "default", "ft-1", "status", {{0}}, 0, KOP_OK,
     S "/apis/flights.com/v1/namespaces/default/flighttickets/ft-1/status"},
    {S, &namespaces, NULL, "ctf-team-1", NULL, {{0}}, 0, KOP_OK, S "/api/v1/namespaces/ctf-team-1"},
    {S, &namespaces, "", "ctf-team-1", "finalize", {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/ctf-team-1/finalize"},
    {S, &clusterroles, NULL, "system:controller:job-controller", NULL, {{0}}, 0, KOP_OK,
     S "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Acontroller%3Ajob-controller"},
    /* Names are escaped, never interpreted. */
    {S, &configmaps, "default", "a b%c?d#e", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/a%20b%25c%3Fd%23e"},
    {S, &configmaps, "default", "caf\xc3\xa9", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/caf%C3%A9"},
    {S, &configmaps, "default", "...", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/..."},
    {S, &configmaps, "default", ".hidden", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/.hidden"},
    {S, &configmaps, "default", "a\\b", NULL, {{0}}, 0, KOP_OK,
     S "/api/v1/namespaces/default/configmaps/a%5Cb"},
    /* Servers with a path prefix and trailing slashes. */
    {"https://rancher.example.com/k8s/clusters/c-m-4x7z/", &configmaps, "default", "x", NULL,
     {{0}}, 0, KOP_OK,
     "https://rancher.example.com/k8s/clusters/c-m-4x7z/api/v1/namespaces/default/configmaps/x"},
    {"https://h//", &deployments, NULL, NULL, NULL, {{0}}, 0, KOP_OK,
     "https://h/apis/apps/v1/deployments"},
    {"http://127.0.0.1:8001", &namespaces, NULL, NULL, NULL, {{0}}, 0, KOP_OK,
     "http://127.0.0.1:8001/api/v1/namespaces"},
    /* Query parameters: selectors, tokens, NULL values skipped. */
    {S, &configmaps, NULL, NULL, NULL, {{"labelSelector", "app in (a,b),!x"}}, 1, KOP_OK,
     S "/api/v1/configmaps?labelSelector=app%20in%20%28a%2Cb%29%2C%21x"},
    {S, &configmaps, "ctf", NULL, NULL,
     {{"fieldSelector", "metadata.name=foo,status.phase!=Running"}, {"limit", "500"}}, 2, KOP_OK,
     S "/api/v1/namespaces/ctf/configmaps?fieldSelector=metadata.name%3Dfoo%2Cstatus.phase%21%"
       "3DRunning&limit=500"},
    {S, &flighttickets, NULL, NULL, NULL,
     {{"watch", "true"},
      {"resourceVersion", "48213"},
      {"timeoutSeconds", NULL},
      {"allowWatchBookmarks", "true"},
      {"labelSelector", NULL}},
     5, KOP_OK,
     S "/apis/flights.com/v1/flighttickets?watch=true&resourceVersion=48213&"
       "allowWatchBookmarks=true"},
    {S, &configmaps, NULL, NULL, NULL,
     {{"continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzLCJzdGFydCI6ImEvYiJ9+/=="},
      {"limit", "2"}},
     2, KOP_OK,
     S "/api/v1/configmaps?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzLCJzdGFydCI6ImEvYiJ9%"
       "2B%2F%3D%3D&limit=2"},
    {S, &configmaps, NULL, NULL, NULL, {{"labelSelector", NULL}}, 1, KOP_OK,
     S "/api/v1/configmaps"},
    {S, &configmaps, NULL, NULL, NULL, {{"labelSelector", ""}}, 1, KOP_OK,
     S "/api/v1/configmaps?labelSelector="},
    {S, &deployments, "prod", "web", NULL, {{"dryRun", "All"}, {"fieldManager", "kop c"}}, 2,
     KOP_OK, S "/apis/apps/v1/namespaces/prod/deployments/web?dryRun=All&fieldManager=kop%20c"},
    /* Refused: anything that could climb out of its segment. */
    {S, &configmaps, "default", "", NULL, {{0}}, 0, KOP_EINVAL,
     "invalid name \"\": must not be empty"},
    {S, &configmaps, "default", ".", NULL, {{0}}, 0, KOP_EINVAL, "must not be \".\" or \"..\""},
    {S, &configmaps, "default", "..", NULL, {{0}}, 0, KOP_EINVAL, "must not be \".\" or \"..\""},
    {S, &configmaps, "default", "a/b", NULL, {{0}}, 0, KOP_EINVAL,
     "invalid name \"a/b\": must not contain '/'"},
    {S, &configmaps, "default", "../../../api/v1/secrets", NULL, {{0}}, 0, KOP_EINVAL,
     "must not contain '/'"},
    {S, &configmaps, "default", "/", NULL, {{0}}, 0, KOP_EINVAL, "must not contain '/'"},
    {S, &configmaps, "..", NULL, NULL, {{0}}, 0, KOP_EINVAL, "invalid namespace"},
    {S, &configmaps, "kube-system/secrets", NULL, NULL, {{0}}, 0, KOP_EINVAL,
     "invalid namespace"},
    {S, &deployments, "prod", "web", "", {{0}}, 0, KOP_EINVAL, "invalid subresource"},
    {S, &deployments, "prod", "web", "..", {{0}}, 0, KOP_EINVAL, "invalid subresource"},
    {S, &deployments, "prod", "web", "scale/../../x", {{0}}, 0, KOP_EINVAL,
     "invalid subresource"},
    {S, &deployments, "prod", NULL, "scale", {{0}}, 0, KOP_EINVAL, "needs an object name"},
    {S, &bad_group, "x", NULL, NULL, {{0}}, 0, KOP_EINVAL, "invalid group"},
    {S, &no_version, "x", NULL, NULL, {{0}}, 0, KOP_EINVAL, "invalid version"},
    {S, &no_resource, "x", NULL, NULL, {{0}}, 0, KOP_EINVAL, "invalid resource"},
    {S, &dotdot_resource, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "invalid resource"},
    /* Scope mismatches. */
    {S, &clusterroles, "default", NULL, NULL, {{0}}, 0, KOP_EINVAL,
     "clusterroles is cluster-scoped"},
    {S, &namespaces, "default", "x", NULL, {{0}}, 0, KOP_EINVAL, "cluster-scoped"},
    {S, &configmaps, NULL, "boarding-pass", NULL, {{0}}, 0, KOP_EINVAL,
     "configmaps is namespaced"},
    {S, &configmaps, "", "boarding-pass", NULL, {{0}}, 0, KOP_EINVAL, "is namespaced"},
    /* Bad servers and parameters. */
    {NULL, &configmaps, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "no server URL"},
    {"", &configmaps, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "no server URL"},
    {"///", &configmaps, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "no server URL"},
    {"https://h/?x=1", &configmaps, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "query or fragment"},
    {S, NULL, NULL, NULL, NULL, {{0}}, 0, KOP_EINVAL, "no resource"},
    {S, &configmaps, NULL, NULL, NULL, {{NULL, "x"}}, 1, KOP_EINVAL, "has no name"},
    {S, &configmaps, NULL, NULL, NULL, {{"watch", "true"}, {"", "x"}}, 2, KOP_EINVAL,
     "query parameter 1 has no name"},
};

static void test_url_table(void **state)
{
    (void)state;
    kop_buf out;
    kop_buf_init(&out, 1 << 16);
    for (size_t i = 0; i < KOP_ARRAY_LEN(cases); i++) {
        const struct url_case *c = &cases[i];
        kop_status st;
        kop_status_clear(&st);
        assert_int_equal(kop_buf_appends(&out, "stale"), KOP_OK);
        kop_err err = kop__url_build(&out, c->server, c->r, c->ns, c->name, c->sub, c->params,
                                     c->nparams, &st);
        if (err != c->want)
            fail_msg("case %zu: got %s (%s), want %s", i, kop_err_name(err), st.message,
                     kop_err_name(c->want));
        if (err == KOP_OK) {
            if (strcmp(kop_buf_str(&out), c->url) != 0)
                fail_msg("case %zu:\n got %s\nwant %s", i, kop_buf_str(&out), c->url);
        } else {
            assert_int_equal(out.len, 0); /* nothing half-built left behind */
            if (!strstr(st.message, c->url))
                fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, c->url);
        }
        /* st is optional. */
        assert_int_equal(kop__url_build(&out, c->server, c->r, c->ns, c->name, c->sub,
                                        c->params, c->nparams, NULL),
                         c->want);
    }
    kop_buf_fini(&out);
}

/* Past KOP__URL_MAX, through the name or the query, or past out's own cap. */
static void test_url_too_long(void **state)
{
    (void)state;
    char *big = malloc(KOP__URL_MAX + 1);
    assert_non_null(big);
    memset(big, 'a', KOP__URL_MAX);
    big[KOP__URL_MAX] = '\0';
    kop_buf out;
    kop_buf_init(&out, 1 << 20);
    kop_status st;
    assert_int_equal(
        kop__url_build(&out, S, &configmaps, "default", big, NULL, NULL, 0, &st), KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "longer than 8192 bytes"));
    assert_int_equal(out.len, 0);

    kop__query_param q = {"labelSelector", big};
    assert_int_equal(kop__url_build(&out, S, &configmaps, NULL, NULL, NULL, &q, 1, &st),
                     KOP_ETOOBIG);
    /* Escaping triples a value: 3000 spaces are 9000 bytes. */
    memset(big, ' ', 3000);
    big[3000] = '\0';
    q.value = big;
    assert_int_equal(kop__url_build(&out, S, &configmaps, NULL, NULL, NULL, &q, 1, &st),
                     KOP_ETOOBIG);
    /* Just under the cap is fine. */
    size_t base = strlen(S "/api/v1/configmaps?l=");
    memset(big, 'b', KOP__URL_MAX - base);
    big[KOP__URL_MAX - base] = '\0';
    q.key = "l";
    assert_int_equal(kop__url_build(&out, S, &configmaps, NULL, NULL, NULL, &q, 1, &st), KOP_OK);
    assert_int_equal(out.len, KOP__URL_MAX);
    big[KOP__URL_MAX - base] = 'b';
    big[KOP__URL_MAX - base + 1] = '\0';
    assert_int_equal(kop__url_build(&out, S, &configmaps, NULL, NULL, NULL, &q, 1, &st),
                     KOP_ETOOBIG);
    kop_buf_fini(&out);

    /* out's own cap binds too. */
    kop_buf small;
    kop_buf_init(&small, 16);
    assert_int_equal(kop__url_build(&small, S, &configmaps, NULL, NULL, NULL, NULL, 0, &st),
                     KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "longer than 16 bytes"));
    assert_int_equal(small.len, 0);
    kop_buf_fini(&small);
    free(big);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1; /* lower case is never produced */
}

/* unescape decodes %XX (as Go's PathUnescape / QueryUnescape do for our output). */
static char *unescape(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    assert_non_null(out);
    for (; *s; s++) {
        if (*s == '%') {
            int hi = hexval(s[1]), lo = hi >= 0 ? hexval(s[2]) : -1;
            assert_true(hi >= 0 && lo >= 0);
            *o++ = (char)(hi << 4 | lo);
            s += 2;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

/* Every byte round-trips, and the output holds only unreserved bytes and '%'. */
static void test_escape_round_trip(void **state)
{
    (void)state;
    char all[256];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = '\0';
    const char *samples[] = {
        all,
        "app in (a,b),!x",
        "metadata.name=foo",
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ==/+ &?#%",
        "environment notin (qa), tier=frontend",
        "",
        "\xf0\x9f\x9b\xab",
    };
    for (size_t i = 0; i < KOP_ARRAY_LEN(samples); i++) {
        for (int q = 0; q < 2; q++) {
            kop_buf b;
            kop_buf_init(&b, 4096);
            assert_int_equal(kop__url_escape(&b, samples[i], q), KOP_OK);
            for (const char *p = kop_buf_str(&b); *p; p++)
                assert_true(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789-._~%",
                                   *p) != NULL);
            char *back = unescape(kop_buf_str(&b));
            assert_string_equal(back, samples[i]);
            free(back);
            kop_buf_fini(&b);
        }
    }
    /* The escape fails cleanly at its buffer's cap. */
    kop_buf b;
    kop_buf_init(&b, 5);
    assert_int_equal(kop__url_escape(&b, "abc def", false), KOP_ETOOBIG);
    kop_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_table),
        cmocka_unit_test(test_url_too_long),
        cmocka_unit_test(test_escape_round_trip),
    };
    return cmocka_run_group_tests_name("client_url", tests, NULL, NULL);
}

/*
 * test_ctf_names.c - the names of an instance's objects (operators/ctf/core/
 * names.c): the instance namespace, fixed for known inputs (hashes computed
 * with Python's hashlib, each case says how), valid, distinct and stable
 * over many inputs that sanitize or truncate alike, refused when an input
 * is missing or the buffer is short; and the Ingress host of an exposure,
 * cut to a DNS label with a hash when too long; and the name of the
 * Challenge the API creates for a team, deterministic and never shared; and
 * a warm instance's namespace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/names.h"

struct ns_case {
    const char *challenge_ns, *definition, *team, *want;
};

/*
 * Expected hashes: python3 -c 'import hashlib; print(hashlib.sha256(
 * "ctf\0web\0team1\0".encode()).hexdigest()[:12])' and likewise.
 */
static const struct ns_case ns_cases[] = {
    {"ctf", "web", "team1", "ctf-web-755e0b8a3c59"},
    {"ctf", "Web.Challenge_2", "Team-1", "ctf-web-challenge-2-c362fb04298b"},
    {"default", "pwn-baby", "t", "ctf-pwn-baby-40472fa383d9"},
    {"ctf", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "team1",
     "ctf-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-e3fd9fd1e3d8"},
    {"ctf", "...", "x", "ctf-deac753aff62"},
};

static void test_namespace_fixed(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(ns_cases); i++) {
        const struct ns_case *c = &ns_cases[i];
        char out[CTF_NAMESPACE_SIZE];
        assert_int_equal(ctf_instance_namespace(c->challenge_ns, c->definition, c->team, out,
                                                sizeof out),
                         KOP_OK);
        if (strcmp(out, c->want) != 0)
            fail_msg("case %zu: got %s, want %s", i, out, c->want);
        assert_true(kop_meta_is_valid_dns1123_label(out));
    }
}

/* Many inputs, including ones that sanitize or truncate alike: all valid, distinct, stable. */
static void test_namespace_distinct(void **state)
{
    (void)state;
    static const char *const nss[] = {"ctf", "ctf-2", "CTF", "default"};
    static const char *const stems[] = {"web", "web.1", "web-1", "web_1", "Web-1", "w",
                                        "a-very-long-definition-name-that-is-cut-here-x",
                                        "a-very-long-definition-name-that-is-cut-here-y"};
    json_t *seen = json_object();
    char def[64], team[64], out[CTF_NAMESPACE_SIZE], again[CTF_NAMESPACE_SIZE];
    size_t count = 0;

    for (size_t n = 0; n < LEN(nss); n++) {
        for (size_t s = 0; s < LEN(stems); s++) {
            for (int d = 0; d < 6; d++) {
                snprintf(def, sizeof def, d ? "%s%d" : "%s", stems[s], d);
                for (int t = 0; t < 25; t++) {
                    snprintf(team, sizeof team, "team%d", t);
                    assert_int_equal(ctf_instance_namespace(nss[n], def, team, out, sizeof out),
                                     KOP_OK);
                    assert_int_equal(ctf_instance_namespace(nss[n], def, team, again,
                                                            sizeof again),
                                     KOP_OK);
                    assert_string_equal(out, again);
                    assert_true(strlen(out) <= 47);
                    if (!kop_meta_is_valid_dns1123_label(out))
                        fail_msg("invalid label %s", out);
                    if (json_object_get(seen, out))
                        fail_msg("collision: %s for %s/%s/%s", out, nss[n], def, team);
                    json_object_set_new(seen, out, json_true());
                    count++;
                }
            }
        }
    }
    assert_int_equal(json_object_size(seen), count);
    json_decref(seen);
}

static void test_namespace_invalid(void **state)
{
    (void)state;
    char out[CTF_NAMESPACE_SIZE], small[20];
    assert_int_equal(ctf_instance_namespace(NULL, "web", "t", out, sizeof out), KOP_EINVAL);
    assert_int_equal(ctf_instance_namespace("ctf", "", "t", out, sizeof out), KOP_EINVAL);
    assert_int_equal(ctf_instance_namespace("ctf", "web", NULL, out, sizeof out), KOP_EINVAL);
    assert_string_equal(out, "");
    assert_int_equal(ctf_instance_namespace("ctf", "web", "t", small, sizeof small), KOP_EINVAL);
}

static void test_ingress_host(void **state)
{
    (void)state;
    char host[CTF_HOST_SIZE];
    assert_int_equal(ctf_ingress_host(&INGRESS_CFG, "web", "ctf-web-755e0b8a3c59", host,
                                      sizeof host),
                     KOP_OK);
    assert_string_equal(host, "web-ctf-web-755e0b8a3c59.ctf.example.com");

    /* Too long for a label: cut, then 10 hex digits of SHA-256("<expose>\0<ns>\0") (python3). */
    assert_int_equal(ctf_ingress_host(&INGRESS_CFG, "exposure-with-a-long-name-too",
                                      "ctf-some-long-definition-name-abcdef0123456789", host,
                                      sizeof host),
                     KOP_OK);
    assert_string_equal(host,
                        "exposure-with-a-long-name-too-ctf-some-long-definiti-4ecd129782"
                        ".ctf.example.com");
    assert_true(kop_meta_is_valid_dns1123_subdomain(host));
    assert_int_equal(strchr(host, '.') - host, 63);

    assert_int_equal(ctf_ingress_host(&NODEPORT_CFG, "web", "ns", host, sizeof host),
                     KOP_EINVAL);
}

/* The name of the Challenge the API creates for a team. */
static void test_instance_name(void **state)
{
    (void)state;
    char a[64], b[64], c[64];
    assert_int_equal(ctf_challenge_name("team-a", "web", a, sizeof a), KOP_OK);
    assert_int_equal(ctf_challenge_name("team-a", "web", b, sizeof b), KOP_OK);
    assert_string_equal(a, b); /* deterministic */
    assert_true(kop_meta_is_valid_dns1123_label(a));
    /* "web-team" + "a" must not meet "web" + "team-a". */
    assert_int_equal(ctf_challenge_name("a", "web-team", c, sizeof c), KOP_OK);
    assert_string_not_equal(a, c);
    /* A long challenge name still gives a label. */
    char longname[254];
    memset(longname, 'x', 253);
    longname[253] = '\0';
    assert_int_equal(ctf_challenge_name("team-a", longname, c, sizeof c), KOP_OK);
    assert_true(kop_meta_is_valid_dns1123_label(c));
}

/* A warm instance's namespace: the team's rule with "pool:<id>" for the team. */
static void test_pool_namespace(void **state)
{
    (void)state;
    char ns[CTF_NAMESPACE_SIZE], same[CTF_NAMESPACE_SIZE];
    /* python3 -c 'import hashlib; print(hashlib.sha256(
     *   "ctf\0web\0pool:0123456789\0".encode()).hexdigest()[:12])' */
    assert_int_equal(ctf_pool_namespace("ctf", "web", ID, ns, sizeof ns), KOP_OK);
    assert_string_equal(ns, "ctf-web-28de6c9ef70b");
    assert_int_equal(ctf_instance_namespace("ctf", "web", "pool:0123456789", same, sizeof same),
                     KOP_OK);
    assert_string_equal(ns, same);
    static const char *const bad[] = {"012345678", "01234567890", "ABCDEF0123", "01234567zz", ""};
    for (size_t i = 0; i < LEN(bad); i++) {
        assert_int_equal(ctf_pool_namespace("ctf", "web", bad[i], ns, sizeof ns), KOP_EINVAL);
        assert_string_equal(ns, "");
    }
    assert_int_equal(ctf_pool_namespace("ctf", "web", NULL, ns, sizeof ns), KOP_EINVAL);
    assert_int_equal(ctf_pool_namespace("ctf", "web", ID, ns, 8), KOP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_namespace_fixed),
        cmocka_unit_test(test_namespace_distinct),
        cmocka_unit_test(test_namespace_invalid),
        cmocka_unit_test(test_ingress_host),
        cmocka_unit_test(test_instance_name),
        cmocka_unit_test(test_pool_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

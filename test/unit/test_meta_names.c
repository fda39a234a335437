/*
 * test_meta_names.c - DNS names (meta_names.c): generated names, fixed,
 * at the length limits, distinct and stable, and the validators checked
 * against Kubernetes' own regular expressions.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kop/meta.h"
#include "kop_internal.h"

/* ---- names -------------------------------------------------------------- */

struct name_case {
    bool subdomain;
    const char *prefix;
    const char *parts[4];
    const char *want; /* computed independently (SHA-256 in Python) */
};

static const struct name_case name_cases[] = {
    {false, "ctf", {"web", "team1"}, "ctf-web-team1"},
    {false, "ctf", {"Web", "team1"}, "ctf-web-team1-85ac4ac8aa"},
    {false, "ctf", {"web", "team-1"}, "ctf-web-team-1-6ce8c958e0"},
    {false, NULL, {"a-b", "c"}, "a-b-c-f84d07e18d"},
    {false, NULL, {"a", "b-c"}, "a-b-c-d4cd470910"},
    {false, NULL, {"!!!"}, "ba5fc5c1a4"},
    {false, NULL, {NULL}, "e3b0c44298"},
    {false, "", {"x"}, "x"},
    {false, "ctf-inst", {"x"}, "ctf-inst-x"},
    {false, NULL, {"caf\xc3\xa9"}, "caf-425a4cd602"},
    {false, "ctf", {"a.b", "c"}, "ctf-a-b-c-a6b55767f7"},
    {false, "ctf", {"", ""}, "ctf-eacd74611e"},
    {false, "ctf", {NULL}, "ctf"},
    {false, "kopc", {"Team Rocket", "Web 100"}, "kopc-team-rocket-web-100-31f23597cf"},
    {false, NULL,
     {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxx"},
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-b2422ebfc5"},
    {true, "ctf", {"a.b", "c"}, "ctf-a.b-c"},
    {true, "x", {"A..B"}, "x-a.b-578a72c2f1"},
    {true, NULL, {"a.-b"}, "a.b-98ed117f65"},
    {true, NULL, {"a.b.c"}, "a.b.c"},
    {true, NULL, {".a."}, "a-48c47d4161"},
};

static kop_err make(bool subdomain, char *out, size_t size, const char *prefix,
                    const char *const *parts)
{
    return subdomain ? kop_meta_dns1123_subdomain(out, size, prefix, parts)
                     : kop_meta_dns1123_label(out, size, prefix, parts);
}

static void test_names_fixed(void **state)
{
    (void)state;
    char out[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    for (size_t i = 0; i < KOP_ARRAY_LEN(name_cases); i++) {
        const struct name_case *c = &name_cases[i];
        assert_int_equal(make(c->subdomain, out, sizeof out, c->prefix, c->parts), KOP_OK);
        if (strcmp(out, c->want) != 0)
            fail_msg("case %zu:\n got %s\nwant %s", i, out, c->want);
        assert_true(c->subdomain ? kop_meta_is_valid_dns1123_subdomain(out)
                                 : kop_meta_is_valid_dns1123_label(out));
    }
    /* parts may be NULL. */
    assert_int_equal(kop_meta_dns1123_label(out, sizeof out, "ctf", NULL), KOP_OK);
    assert_string_equal(out, "ctf");
    /* The buffer must hold the longest name. */
    char small[KOP_META_DNS1123_LABEL_MAX];
    assert_int_equal(kop_meta_dns1123_label(small, sizeof small, "a", NULL), KOP_EINVAL);
    char label[KOP_META_DNS1123_LABEL_MAX + 1];
    assert_int_equal(kop_meta_dns1123_label(label, sizeof label, "a", NULL), KOP_OK);
    assert_int_equal(kop_meta_dns1123_subdomain(label, sizeof label, "a", NULL), KOP_EINVAL);
}

static void test_names_lengths(void **state)
{
    (void)state;
    char big[600], out[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    for (size_t len = 1; len < sizeof big; len += 7) {
        const char *parts[] = {big, NULL};
        for (int sub = 0; sub < 2; sub++) {
            memset(big, 'a', len);
            big[len] = '\0';
            size_t max = sub ? KOP_META_DNS1123_SUBDOMAIN_MAX : KOP_META_DNS1123_LABEL_MAX;
            assert_int_equal(make(sub, out, sizeof out, NULL, parts), KOP_OK);
            if (len <= max) {
                assert_string_equal(out, big); /* fits and is exact: unchanged */
            } else {
                assert_int_equal(strlen(out), max);
                assert_int_equal(out[max - KOP_META_NAME_HASH_LEN - 1], '-');
            }
            /* Cutting never leaves a separator before the hash. */
            big[len > 60 ? 52 : 0] = '-';
            assert_int_equal(make(sub, out, sizeof out, "p", parts), KOP_OK);
            assert_true(sub ? kop_meta_is_valid_dns1123_subdomain(out)
                            : kop_meta_is_valid_dns1123_label(out));
            assert_true(strlen(out) <= max);
            assert_null(strstr(out, "--"));
        }
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Many similar inputs: every output valid, all distinct, each stable. */
static void test_names_distinct_and_stable(void **state)
{
    (void)state;
    enum { N = 12000 };
    char **names = calloc(N, sizeof *names);
    const char *seps[] = {"-", "_", ".", " ", "--", "A", "a"};
    char a[128], b[128];
    size_t k = 0;
    for (int i = 0; i < 600; i++) {
        for (size_t s = 0; s < KOP_ARRAY_LEN(seps); s++) {
            /* Variants that normalize alike: case, separators, splits, long shared prefixes. */
            snprintf(a, sizeof a, "team%s%d", seps[s], i);
            snprintf(b, sizeof b, "%0100d%s%d", 0, seps[s], i);
            const char *p1[] = {"web", a, NULL};
            const char *p2[] = {b, NULL};
            const char *p3[] = {a, "web", NULL};
            const char *const *ps[] = {p1, p2, p3};
            for (size_t v = 0; v < KOP_ARRAY_LEN(ps) && k < N; v++) {
                char out[KOP_META_DNS1123_LABEL_MAX + 1], again[KOP_META_DNS1123_LABEL_MAX + 1];
                assert_int_equal(kop_meta_dns1123_label(out, sizeof out, "ctf", ps[v]), KOP_OK);
                assert_int_equal(kop_meta_dns1123_label(again, sizeof again, "ctf", ps[v]),
                                 KOP_OK);
                assert_string_equal(out, again);
                assert_true(kop_meta_is_valid_dns1123_label(out));
                names[k++] = strdup(out);
            }
        }
    }
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 1; i < k; i++) {
        if (strcmp(names[i - 1], names[i]) == 0)
            fail_msg("collision: %s", names[i]);
    }
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
}

/* ---- validators --------------------------------------------------------- */

struct valid_case {
    const char *s;
    bool label, subdomain, value, key;
};

static const struct valid_case valid_cases[] = {
    {"a", true, true, true, true},
    {"abc-123", true, true, true, true},
    {"0abc", true, true, true, true},
    {"", false, false, true, false},
    {"-a", false, false, false, false},
    {"a-", false, false, false, false},
    {"A", false, false, true, true},
    {"a.b", false, true, true, true},
    {"a..b", false, false, true, true},
    {".a", false, false, false, false},
    {"a_b", false, false, true, true},
    {"_a", false, false, false, false},
    {"a b", false, false, false, false},
    {"app.kubernetes.io/name", false, false, false, true},
    {"kopc.io/", false, false, false, false},
    {"/name", false, false, false, false},
    {"Bad.io/name", false, false, false, false},
    {"a/b/c", false, false, false, false},
    {"x.io/-a", false, false, false, false},
    {"caf\xc3\xa9", false, false, false, false},
    /* Lengths at and past the limits. */
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true, true, true, true},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false, true, false, false},
};

/* The regular expressions apimachinery's validation uses. */
#define RE_LABEL     "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define RE_SUBDOMAIN RE_LABEL "(\\." RE_LABEL ")*"
#define RE_QNAME     "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

static bool re_match(const regex_t *re, const char *s)
{
    return regexec(re, s, 0, NULL, 0) == 0;
}

static void test_validators(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(valid_cases); i++) {
        const struct valid_case *c = &valid_cases[i];
        if (kop_meta_is_valid_dns1123_label(c->s) != c->label ||
            kop_meta_is_valid_dns1123_subdomain(c->s) != c->subdomain ||
            kop_meta_is_valid_label_value(c->s) != c->value ||
            kop_meta_is_valid_label_key(c->s) != c->key)
            fail_msg("case %zu (%s): got %d%d%d%d", i, c->s, kop_meta_is_valid_dns1123_label(c->s),
                     kop_meta_is_valid_dns1123_subdomain(c->s),
                     kop_meta_is_valid_label_value(c->s), kop_meta_is_valid_label_key(c->s));
    }
    assert_false(kop_meta_is_valid_dns1123_label(NULL));
    assert_false(kop_meta_is_valid_label_key(NULL));
    assert_false(kop_meta_is_valid_label_value(NULL));
    assert_false(kop_meta_is_valid_dns1123_subdomain(NULL));

    /* Random strings from a small alphabet, judged by the regexes themselves. */
    regex_t label, subdomain, value, key;
    assert_int_equal(regcomp(&label, "^" RE_LABEL "$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&subdomain, "^" RE_SUBDOMAIN "$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&value, "^(" RE_QNAME ")?$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(
        regcomp(&key, "^(" RE_SUBDOMAIN "/)?" RE_QNAME "$", REG_EXTENDED | REG_NOSUB), 0);
    const char alphabet[] = "ab0Z-._/ ";
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        char s[80];
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t len = (seed >> 33) % (i % 10 == 0 ? 75 : 9);
        for (size_t j = 0; j < len; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            s[j] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
        }
        s[len] = '\0';
        const char *slash = strchr(s, '/');
        size_t name_len = slash ? strlen(slash + 1) : len;
        size_t prefix_len = slash ? (size_t)(slash - s) : 0;
        bool want_label = re_match(&label, s) && len <= 63;
        bool want_sub = re_match(&subdomain, s) && len <= 253;
        bool want_value = re_match(&value, s) && len <= 63;
        bool want_key = re_match(&key, s) && name_len <= 63 && prefix_len <= 253;
        if (kop_meta_is_valid_dns1123_label(s) != want_label ||
            kop_meta_is_valid_dns1123_subdomain(s) != want_sub ||
            kop_meta_is_valid_label_value(s) != want_value ||
            kop_meta_is_valid_label_key(s) != want_key)
            fail_msg("\"%s\": label %d/%d subdomain %d/%d value %d/%d key %d/%d", s,
                     kop_meta_is_valid_dns1123_label(s), want_label,
                     kop_meta_is_valid_dns1123_subdomain(s), want_sub,
                     kop_meta_is_valid_label_value(s), want_value,
                     kop_meta_is_valid_label_key(s), want_key);
    }
    regfree(&label);
    regfree(&subdomain);
    regfree(&value);
    regfree(&key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_fixed),
        cmocka_unit_test(test_names_lengths),
        cmocka_unit_test(test_names_distinct_and_stable),
        cmocka_unit_test(test_validators),
    };
    return cmocka_run_group_tests_name("meta_names", tests, NULL, NULL);
}

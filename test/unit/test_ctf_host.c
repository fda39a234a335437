/*
 * test_ctf_host.c - the gateway mode's instance host (operators/ctf/core/host.c):
 * the id is HMAC-SHA256 of the tag, team, challenge namespace, challenge and
 * exposure (NUL-separated) under the key, its first 80 bits in lowercase
 * base32 (known values computed with openssl and Python, each says how);
 * it is stable, differs whenever one input or the key differs, is always a
 * 16-character DNS-1123 label, and is refused for a short key, a missing
 * part or a small buffer. "<id>.<domain>" is checked as a host name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <kop/meta.h>

#include "core/host.h"
#include "core/names.h"

#define KEY1 "0123456789abcdef-k1"
#define KEY2 "0123456789abcdef-k2"

/* id computes the id of (team, ns, challenge, exposure) under key, asserting success. */
static void id(const char *key, const char *team, const char *ns, const char *challenge,
               const char *exposure, char out[CTF_HOST_ID_SIZE])
{
    kop_status st;
    ctf_host_parts p = {.team = team, .challenge_ns = ns, .challenge = challenge,
                        .exposure = exposure};
    assert_int_equal(ctf_host_id((const unsigned char *)key, strlen(key), &p, out,
                                 CTF_HOST_ID_SIZE, &st),
                     KOP_OK);
}

/* assert_id_shape: 16 characters of [a-z2-7], a valid DNS-1123 label. */
static void assert_id_shape(const char *s)
{
    assert_int_equal(strlen(s), CTF_HOST_ID_LEN);
    assert_int_equal(strspn(s, "abcdefghijklmnopqrstuvwxyz234567"), CTF_HOST_ID_LEN);
    assert_true(kop_meta_is_valid_dns1123_label(s));
}

static void test_host_id_known_and_stable(void **state)
{
    (void)state;
    char a[CTF_HOST_ID_SIZE], b[CTF_HOST_ID_SIZE];

    /* printf 'kopc-host-v1\0team1\0ctf\0pwn\0shell' |
     *   openssl dgst -sha256 -hmac 0123456789abcdef-k1 -binary | head -c 10 |
     *   python3 -c 'import sys,base64;
     *     print(base64.b32encode(sys.stdin.buffer.read()).decode().lower())'
     * gives 4bft7sybsn2y7vu6. */
    id(KEY1, "team1", "ctf", "pwn", "shell", a);
    assert_string_equal(a, "4bft7sybsn2y7vu6");
    assert_id_shape(a);

    /* The same inputs again (a stop and a start, a restarted operator): the same id. */
    id(KEY1, "team1", "ctf", "pwn", "shell", b);
    assert_string_equal(a, b);

    /* The same pipeline for team2 gives cv4x56actpqcx4lh. */
    id(KEY1, "team2", "ctf", "pwn", "shell", b);
    assert_string_equal(b, "cv4x56actpqcx4lh");
}

static void test_host_id_differs_per_input(void **state)
{
    (void)state;
    char base[CTF_HOST_ID_SIZE], other[CTF_HOST_ID_SIZE];
    id(KEY1, "team1", "ctf", "pwn", "shell", base);

    /* Each of these pipelines (as above) gives the value asserted. */
    id(KEY1, "team1", "ctf", "web", "shell", other); /* another challenge */
    assert_string_equal(other, "ee5fkmzdbs3a42ai");
    id(KEY1, "team1", "ctf", "pwn", "admin", other); /* another exposure */
    assert_string_equal(other, "lsv4rbp3lrgkzpu7");
    id(KEY2, "team1", "ctf", "pwn", "shell", other); /* another key */
    assert_string_equal(other, "62ebioonacjs5r4q");
    id(KEY1, "team1", "other", "pwn", "shell", other); /* the challenge in another namespace */
    assert_string_equal(other, "jaqejboh4digaxjk");

    /* The separators keep the parts apart: moving a character across a
     * boundary changes the message, so the id. */
    char x[CTF_HOST_ID_SIZE], y[CTF_HOST_ID_SIZE];
    id(KEY1, "team1", "ctf", "pwn", "shell", x);
    id(KEY1, "team1c", "tf", "pwn", "shell", y);
    assert_string_not_equal(x, y);
    id(KEY1, "team1", "ctf", "pwns", "hell", y);
    assert_string_not_equal(x, y);
}

static int compare_ids(const void *a, const void *b) { return strcmp(a, b); }

static void test_host_id_many_distinct_labels(void **state)
{
    (void)state;
    /* 2,000 teams, 5 exposures each: every id a label, no two alike. */
    enum { TEAMS = 2000, EXPOSURES = 5, N = TEAMS * EXPOSURES };
    char(*ids)[CTF_HOST_ID_SIZE] = calloc(N, CTF_HOST_ID_SIZE);
    assert_non_null(ids);
    for (int t = 0; t < TEAMS; t++) {
        for (int e = 0; e < EXPOSURES; e++) {
            char team[32], exposure[32];
            snprintf(team, sizeof team, "team-%d", t);
            snprintf(exposure, sizeof exposure, "port-%d", e);
            id(KEY1, team, "ctf", "pwn", exposure, ids[t * EXPOSURES + e]);
            assert_id_shape(ids[t * EXPOSURES + e]);
        }
    }
    qsort(ids, N, CTF_HOST_ID_SIZE, compare_ids);
    for (int i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

static void test_host_id_refused(void **state)
{
    (void)state;
    char out[CTF_HOST_ID_SIZE];
    kop_status st;
    ctf_host_parts p = {.team = "team1", .challenge_ns = "ctf", .challenge = "pwn",
                        .exposure = "shell"};
    const unsigned char *key = (const unsigned char *)KEY1;

    /* A key of 15 bytes is too short to keep ids unguessable; 16 is enough. */
    assert_int_equal(ctf_host_id(key, CTF_HOST_KEY_MIN - 1, &p, out, sizeof out, &st),
                     KOP_EINVAL);
    assert_string_equal(out, "");
    assert_non_null(strstr(st.message, "key"));
    assert_int_equal(ctf_host_id(key, CTF_HOST_KEY_MIN, &p, out, sizeof out, &st), KOP_OK);
    assert_int_equal(ctf_host_id(NULL, 32, &p, out, sizeof out, &st), KOP_EINVAL);

    /* Every part is needed. */
    const char **fields[] = {&p.team, &p.challenge_ns, &p.challenge, &p.exposure};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *keep = *fields[i];
        *fields[i] = "";
        assert_int_equal(ctf_host_id(key, strlen(KEY1), &p, out, sizeof out, &st), KOP_EINVAL);
        *fields[i] = NULL;
        assert_int_equal(ctf_host_id(key, strlen(KEY1), &p, out, sizeof out, &st), KOP_EINVAL);
        *fields[i] = keep;
    }
    assert_int_equal(ctf_host_id(key, strlen(KEY1), NULL, out, sizeof out, &st), KOP_EINVAL);

    /* A buffer without room for the NUL. */
    assert_int_equal(ctf_host_id(key, strlen(KEY1), &p, out, CTF_HOST_ID_LEN, &st), KOP_EINVAL);
}

static void test_host_name(void **state)
{
    (void)state;
    char host[CTF_HOST_SIZE], small[20];
    kop_status st;

    assert_int_equal(ctf_host_name("4bft7sybsn2y7vu6", "ctf.example.org", host, sizeof host, &st),
                     KOP_OK);
    assert_string_equal(host, "4bft7sybsn2y7vu6.ctf.example.org");
    assert_true(kop_meta_is_valid_dns1123_subdomain(host));

    /* Not a domain, not an id, too small a buffer, too long a host. */
    assert_int_equal(ctf_host_name("4bft7sybsn2y7vu6", "Bad_Domain", host, sizeof host, &st),
                     KOP_EINVAL);
    assert_int_equal(ctf_host_name("4bft7sybsn2y7vu6", "", host, sizeof host, &st), KOP_EINVAL);
    assert_int_equal(ctf_host_name("a.b", "ctf.example.org", host, sizeof host, &st), KOP_EINVAL);
    assert_int_equal(ctf_host_name("4bft7sybsn2y7vu6", "ctf.example.org", small, sizeof small,
                                   &st),
                     KOP_EINVAL);
    char domain[250];
    for (size_t i = 0; i + 1 < sizeof domain; i++)
        domain[i] = (i % 60 == 59) ? '.' : 'a';
    domain[sizeof domain - 1] = '\0';
    assert_true(kop_meta_is_valid_dns1123_subdomain(domain));
    assert_int_equal(ctf_host_name("4bft7sybsn2y7vu6", domain, host, sizeof host, &st),
                     KOP_EINVAL);
    assert_non_null(strstr(st.message, "characters"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_id_known_and_stable),
        cmocka_unit_test(test_host_id_differs_per_input),
        cmocka_unit_test(test_host_id_many_distinct_labels),
        cmocka_unit_test(test_host_id_refused),
        cmocka_unit_test(test_host_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_ctf_api_auth.c - whose token it is (operators/ctf/api/auth.c): the
 * bearer header read strictly, tokens compared in constant time, the table
 * of token digests built from the admin and team Secrets (the admin wins a
 * shared token; bad keys and undecodable values match nobody; 3,000 teams
 * each found by their own token through the digest index), and each
 * team's write budget (burst, refill, Retry-After, a clock going back).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "api/auth.h"
#include "api/routes.h"

static void test_bearer(void **state)
{
    (void)state;
    char t[CTF_API_TOKEN_MAX + 1];
    assert_true(ctf_api_bearer("Bearer abc", t, sizeof t));
    assert_string_equal(t, "abc");
    assert_true(ctf_api_bearer("bearer  abc ", t, sizeof t));
    assert_string_equal(t, "abc");
    assert_false(ctf_api_bearer(NULL, t, sizeof t));
    assert_false(ctf_api_bearer("", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer ", t, sizeof t));
    assert_false(ctf_api_bearer("Basic YWJj", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer a b", t, sizeof t));
    assert_false(ctf_api_bearer("Bearer a\tb", t, sizeof t));
    char big[CTF_API_TOKEN_MAX + 20];
    snprintf(big, sizeof big, "Bearer ");
    memset(big + 7, 'a', CTF_API_TOKEN_MAX + 1);
    big[7 + CTF_API_TOKEN_MAX + 1] = '\0';
    assert_false(ctf_api_bearer(big, t, sizeof t));
    big[7 + CTF_API_TOKEN_MAX] = '\0';
    assert_true(ctf_api_bearer(big, t, sizeof t));
}

static void test_token_equal(void **state)
{
    (void)state;
    const unsigned char want[] = "s3cret";
    assert_true(ctf_api_token_equal("s3cret", want, 6));
    assert_false(ctf_api_token_equal("s3cre", want, 6));
    assert_false(ctf_api_token_equal("s3cret!", want, 6));
    assert_false(ctf_api_token_equal("S3cret", want, 6));
    assert_false(ctf_api_token_equal("", (const unsigned char *)"", 0));
    assert_false(ctf_api_token_equal("x", NULL, 0));
    assert_false(ctf_api_token_equal(NULL, want, 6));
}

/* secret_of makes a Secret with base64 data from pairs (key, value), NULL-ended. */
static json_t *secret_of(const char *const *kv)
{
    json_t *data = json_object();
    for (size_t i = 0; kv[i]; i += 2) {
        unsigned char b64[256];
        int n = EVP_EncodeBlock(b64, (const unsigned char *)kv[i + 1], (int)strlen(kv[i + 1]));
        json_object_set_new(data, kv[i], json_stringn((const char *)b64, (size_t)n));
    }
    return json_pack("{s:o}", "data", data);
}

static void test_token_table(void **state)
{
    (void)state;
    const char *admin_kv[] = {"token", "admin-tok", NULL};
    const char *teams_kv[] = {"team-a",     "tok-a",     "team-b",     "tok-b",
                              "Not_A_Team", "tok-x",     "team-empty", "",
                              "team-same",  "admin-tok", NULL};
    json_t *admin = secret_of(admin_kv), *teams = secret_of(teams_kv);
    json_object_set_new(json_object_get(teams, "data"), "team-bad64", json_string("!!!"));
    ctf_token_table *t = NULL;
    bool is_admin;
    char team[CTF_TEAM_SIZE];

    assert_int_equal(ctf_token_table_build(admin, teams, &t), KOP_OK);
    assert_true(ctf_token_table_match(t, "admin-tok", &is_admin, team));
    assert_true(is_admin); /* the admin wins over a team holding the same token */
    assert_string_equal(team, "");
    assert_true(ctf_token_table_match(t, "tok-b", &is_admin, team));
    assert_false(is_admin);
    assert_string_equal(team, "team-b");
    assert_true(ctf_token_table_match(t, "tok-a", &is_admin, team));
    assert_string_equal(team, "team-a");
    /* a key that is no team name, an empty or undecodable token: never anyone's */
    assert_false(ctf_token_table_match(t, "tok-x", &is_admin, team));
    assert_false(ctf_token_table_match(t, "", &is_admin, team));
    assert_false(ctf_token_table_match(t, "!!!", &is_admin, team));
    assert_false(ctf_token_table_match(t, "tok-", &is_admin, team));
    assert_false(ctf_token_table_match(t, NULL, &is_admin, team));
    assert_false(is_admin);
    assert_string_equal(team, "");
    ctf_token_table_free(t);

    /* no Secrets at all: nobody; no admin Secret: the teams still */
    assert_int_equal(ctf_token_table_build(NULL, NULL, &t), KOP_OK);
    assert_false(ctf_token_table_match(t, "admin-tok", &is_admin, team));
    ctf_token_table_free(t);
    assert_int_equal(ctf_token_table_build(NULL, teams, &t), KOP_OK);
    assert_true(ctf_token_table_match(t, "admin-tok", &is_admin, team)); /* team-same's now */
    assert_false(is_admin);
    assert_string_equal(team, "team-same");
    assert_true(ctf_token_table_match(t, "tok-a", &is_admin, team));
    ctf_token_table_free(t);
    assert_false(ctf_token_table_match(NULL, "tok-a", &is_admin, team));
    json_decref(admin);
    json_decref(teams);
}

/* ---- write budget ------------------------------------------------------- */

/*
 * 3,000 teams, every team's digest indexed (the probes of some collide in
 * a table of 8,192 slots): each token is its own team's, a token one
 * character longer is nobody's, and a team holding the admin's token
 * (added after thousands of others) still loses to it.
 */
static void test_token_table_many(void **state)
{
    (void)state;
    enum { N = 3000 };
    static char names[N][16], toks[N][40];
    const char *kv[2 * N + 3];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "team-%04d", i);
        snprintf(toks[i], sizeof toks[i], "token-of-team-%04d", i);
        kv[2 * i] = names[i];
        kv[2 * i + 1] = toks[i];
    }
    kv[2 * N] = "team-late";
    kv[2 * N + 1] = "admin-tok";
    kv[2 * N + 2] = NULL;
    const char *admin_kv[] = {"token", "admin-tok", NULL};
    json_t *admin = secret_of(admin_kv), *teams = secret_of(kv);
    ctf_token_table *t = NULL;
    bool is_admin;
    char team[CTF_TEAM_SIZE], off[48];
    assert_int_equal(ctf_token_table_build(admin, teams, &t), KOP_OK);
    for (int i = 0; i < N; i++) {
        assert_true(ctf_token_table_match(t, toks[i], &is_admin, team));
        assert_false(is_admin);
        assert_string_equal(team, names[i]);
        snprintf(off, sizeof off, "%.40sx", toks[i]);
        assert_false(ctf_token_table_match(t, off, &is_admin, team));
    }
    assert_true(ctf_token_table_match(t, "admin-tok", &is_admin, team));
    assert_true(is_admin);
    ctf_token_table_free(t);
    json_decref(admin);
    json_decref(teams);
}

static void test_bucket(void **state)
{
    (void)state;
    ctf_bucket b = {0};
    int retry = 0;
    int64_t t = 1000;
    for (int i = 0; i < 3; i++)
        assert_true(ctf_bucket_take(&b, 3, 60, t, &retry)); /* the burst */
    assert_false(ctf_bucket_take(&b, 3, 60, t, &retry));
    assert_int_equal(retry, 1); /* 60/min: one per second */
    assert_false(ctf_bucket_full(&b, 3, 60, t));
    assert_true(ctf_bucket_take(&b, 3, 60, t + 1000, &retry)); /* refilled one */
    assert_false(ctf_bucket_take(&b, 3, 60, t + 1000, &retry));
    assert_true(ctf_bucket_full(&b, 3, 60, t + 1000 + 3000));
    /* A slow rate gives a long Retry-After. */
    ctf_bucket s = {0};
    assert_true(ctf_bucket_take(&s, 1, 2, t, &retry));
    assert_false(ctf_bucket_take(&s, 1, 2, t, &retry));
    assert_int_equal(retry, 30);
    /* A clock that goes back does not mint writes. */
    assert_false(ctf_bucket_take(&s, 1, 2, t - 500000, &retry));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_token_equal),
        cmocka_unit_test(test_token_table),
        cmocka_unit_test(test_token_table_many),
        cmocka_unit_test(test_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_ctf_flag.c - a team's flag (operators/ctf/core/flag.c): a static flag,
 * none, and the dynamic one, HMAC-SHA256 of "<definition>:<team>" under the
 * definition's key with its prefix and suffix (the known values computed
 * with openssl, each says how); refused without a key or a team. Where the
 * flag goes in an instance (only in its Secret) is test_ctf_instance.c's.
 * Flag attribution (ctf_flag_owner): another team's dynamic flag names that
 * team, a wrong one or a static flag nobody; and its cost at 2,000 teams,
 * printed (a measurement, not a timed assertion).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/flag.h"

static void test_flag_static_and_none(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TCP);
    char *flag = NULL;
    kop_status st;
    assert_int_equal(ctf_flag(def, "pwn", "team1", NULL, 0, &flag, &st), KOP_OK);
    assert_string_equal(flag, "flag{static_one}");
    free(flag);
    assert_false(ctf_flag_secret_ref(def, NULL, NULL));

    json_object_del(json_object_get(def, "spec"), "flag");
    flag = (char *)"sentinel";
    assert_int_equal(ctf_flag(def, "pwn", "team1", NULL, 0, &flag, &st), KOP_OK);
    assert_null(flag);
    json_decref(def);
}

static void test_flag_dynamic(void **state)
{
    (void)state;
    json_t *def = parse(DEF_HTTP);
    const unsigned char key[] = "s3cret-key";
    const char *name = NULL, *k = NULL;
    char *flag = NULL;
    kop_status st;

    assert_true(ctf_flag_secret_ref(def, &name, &k));
    assert_string_equal(name, "ctf-flag-key");
    assert_string_equal(k, "key");

    /* printf 'web:team1' | openssl dgst -sha256 -hmac 's3cret-key' gives
     * 30f24671fb6e529656e5371dfefa10178b34b8a5b14d3d92b0e1449ca9991ecf. */
    assert_int_equal(ctf_flag(def, "web", "team1", key, sizeof key - 1, &flag, &st), KOP_OK);
    assert_string_equal(flag, "flag{30f24671fb6e529656e5371dfefa1017}");
    free(flag);

    /* printf 'web:team2' | openssl dgst -sha256 -hmac 's3cret-key' gives
     * 389307e3fee8e55477d19ae4b6f21f8198cc84a1276b8b6355b7e315191cb641. */
    mutate(def, "spec.flag.dynamic.prefix", "'CTF['");
    mutate(def, "spec.flag.dynamic.suffix", "']'");
    mutate(def, "spec.flag.dynamic.secretRef.key", "'hmac'");
    assert_int_equal(ctf_flag(def, "web", "team2", key, sizeof key - 1, &flag, &st), KOP_OK);
    assert_string_equal(flag, "CTF[389307e3fee8e55477d19ae4b6f21f81]");
    free(flag);
    assert_true(ctf_flag_secret_ref(def, &name, &k));
    assert_string_equal(k, "hmac");

    /* No key, no team: refused, nothing returned. */
    flag = (char *)"sentinel";
    assert_int_equal(ctf_flag(def, "web", "team1", key, 0, &flag, &st), KOP_EINVAL);
    assert_null(flag);
    assert_non_null(strstr(st.message, "key"));
    assert_int_equal(ctf_flag(def, "web", "", key, sizeof key - 1, &flag, &st), KOP_EINVAL);
    assert_int_equal(ctf_flag(def, "web", "t", key, 3, NULL, &st), KOP_EINVAL);
    json_decref(def);
}

/* team_names fills names[0..n) with "team-<i>" in storage (n * 16 bytes). */
static void team_names(const char **names, char *storage, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(storage + 16 * i, 16, "team-%zu", i);
        names[i] = storage + 16 * i;
    }
}

static void test_flag_owner(void **state)
{
    (void)state;
    json_t *def = parse(DEF_HTTP);
    const unsigned char key[] = "s3cret-key";
    const char *teams[] = {"team0", "team1", "team2"};
    size_t owner = 0;
    kop_status st;

    /* team1's flag (see test_flag_dynamic) is attributed to team1, wherever it is listed. */
    const char *t1 = "flag{30f24671fb6e529656e5371dfefa1017}";
    assert_int_equal(ctf_flag_owner(def, "web", teams, 3, t1, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, 1);
    assert_int_equal(ctf_flag_owner(def, "web", teams + 1, 1, t1, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, 0);
    /* Not among the teams tried, another key, another definition: nobody's. */
    assert_int_equal(ctf_flag_owner(def, "web", teams + 2, 1, t1, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    assert_int_equal(ctf_flag_owner(def, "web", teams, 3, t1, key, 3, &owner, &st), KOP_OK);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    assert_int_equal(ctf_flag_owner(def, "pwn", teams, 3, t1, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    /* Wrong: one digit off, upper case, cut, extended, another shape. */
    const char *wrong[] = {"flag{30f24671fb6e529656e5371dfefa1018}",
                           "flag{30F24671FB6E529656E5371DFEFA1017}",
                           "flag{30f24671fb6e529656e5371dfefa101}",
                           "flag{30f24671fb6e529656e5371dfefa1017}x", "flag{}", "x"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        owner = 0;
        assert_int_equal(
            ctf_flag_owner(def, "web", teams, 3, wrong[i], key, sizeof key - 1, &owner, &st),
            KOP_OK);
        assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    }
    /* Other affixes: team2's flag with CTF[...] is found only with them. */
    const char *t2 = "CTF[389307e3fee8e55477d19ae4b6f21f81]";
    assert_int_equal(ctf_flag_owner(def, "web", teams, 3, t2, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    mutate(def, "spec.flag.dynamic.prefix", "'CTF['");
    mutate(def, "spec.flag.dynamic.suffix", "']'");
    assert_int_equal(ctf_flag_owner(def, "web", teams, 3, t2, key, sizeof key - 1, &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, 2);
    /* No key: refused. */
    assert_int_equal(ctf_flag_owner(def, "web", teams, 3, t2, key, 0, &owner, &st), KOP_EINVAL);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    json_decref(def);

    /* A static flag is never attributed, even when it is exactly the submission. */
    def = parse(DEF_TCP);
    owner = 0;
    assert_int_equal(ctf_flag_owner(def, "pwn", teams, 3, "flag{static_one}", key, sizeof key - 1,
                                    &owner, &st),
                     KOP_OK);
    assert_int_equal(owner, CTF_FLAG_NO_OWNER);
    json_decref(def);
}

/*
 * The cost of attribution at 2,000 teams: the flag of the last team tried
 * (every HMAC is computed whoever matches), printed per check and per team.
 */
static void test_flag_owner_2000_teams(void **state)
{
    (void)state;
    enum { N = 2000, ROUNDS = 20 };
    json_t *def = parse(DEF_HTTP);
    const unsigned char key[] = "s3cret-key";
    const char **teams = calloc(N, sizeof *teams);
    char *storage = calloc(N, 16), *last = NULL;
    size_t owner = 0;
    kop_status st;
    assert_non_null(teams);
    assert_non_null(storage);
    team_names(teams, storage, N);
    assert_int_equal(ctf_flag(def, "web", teams[N - 1], key, sizeof key - 1, &last, &st), KOP_OK);

    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < ROUNDS; r++) {
        assert_int_equal(
            ctf_flag_owner(def, "web", teams, N, last, key, sizeof key - 1, &owner, &st), KOP_OK);
        assert_int_equal(owner, N - 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) /
                ROUNDS;
    printf("flag attribution at %d teams: %.2f ms per wrong submission (%.2f us per team)\n", N,
           ms, ms * 1000.0 / N);
    free(last);
    free(storage);
    free(teams);
    json_decref(def);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_static_and_none),
        cmocka_unit_test(test_flag_dynamic),
        cmocka_unit_test(test_flag_owner),
        cmocka_unit_test(test_flag_owner_2000_teams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

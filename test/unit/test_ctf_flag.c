/*
 * test_ctf_flag.c - a team's flag (operators/ctf/core/flag.c): a static flag,
 * none, and the dynamic one, HMAC-SHA256 of "<definition>:<team>" under the
 * definition's key with its prefix and suffix (the known values computed
 * with openssl, each says how); refused without a key or a team. Where the
 * flag goes in an instance (only in its Secret) is test_ctf_instance.c's.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_static_and_none),
        cmocka_unit_test(test_flag_dynamic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

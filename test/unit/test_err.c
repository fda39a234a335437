/*
 * test_err.c - unit tests of the err module: the table is complete and
 * consistent, apiserver responses map to the right codes, and kop_status
 * truncates instead of overflowing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kop/kop.h"

static void test_ok_is_zero(void **state)
{
    (void)state;
    assert_int_equal(KOP_OK, 0);
    assert_string_equal(kop_err_name(KOP_OK), "KOP_EOK");
    assert_string_equal(kop_strerror(KOP_OK), "success");
}

/* Every code has a distinct name starting KOP_E and a non-empty text. */
static void test_every_code_named(void **state)
{
    (void)state;
    for (int i = 0; i < KOP__ERR_COUNT; i++) {
        kop_err e = (kop_err)-i;
        assert_true(i == 0 || e < 0);
        assert_int_equal(strncmp(kop_err_name(e), "KOP_E", 5), 0);
        assert_true(strlen(kop_strerror(e)) > 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(kop_err_name(e), kop_err_name((kop_err)-j));
    }
}

static void test_unknown_code(void **state)
{
    (void)state;
    assert_string_equal(kop_strerror((kop_err)-KOP__ERR_COUNT), "unknown error");
    assert_string_equal(kop_strerror((kop_err)7), "unknown error");
    assert_string_equal(kop_err_name((kop_err)-1000), "KOP_E?");
    assert_int_equal(kop_err_http_code((kop_err)-1000), 0);
}

struct status_case {
    int code;
    const char *reason;
    kop_err want;
};

/* Cases are data: HTTP code and reason as the apiserver sends them. */
static const struct status_case status_cases[] = {
    {200, NULL, KOP_OK},
    {201, "", KOP_OK},
    {404, "NotFound", KOP_ENOTFOUND},
    {404, NULL, KOP_ENOTFOUND},
    {409, "AlreadyExists", KOP_EALREADYEXISTS},
    {409, "Conflict", KOP_ECONFLICT},
    {410, "Gone", KOP_EGONE},
    {410, "Expired", KOP_EEXPIRED},
    {410, NULL, KOP_EGONE},
    {422, "Invalid", KOP_EINVALID},
    {403, "Forbidden", KOP_EFORBIDDEN},
    {401, "Unauthorized", KOP_EUNAUTHORIZED},
    {429, "TooManyRequests", KOP_ETOOMANYREQUESTS},
    {500, "InternalError", KOP_EINTERNAL},
    {500, "Timeout", KOP_ESERVERTIMEOUT},
    {503, NULL, KOP_EUNAVAILABLE},
    {504, NULL, KOP_ESERVERTIMEOUT},
    {418, NULL, KOP_EAPI},
    {418, "SomethingNew", KOP_EAPI},
    {400, "SomethingNew", KOP_EBADREQUEST},
    {409, "SomethingNew", KOP_ECONFLICT},
    {0, NULL, KOP_EAPI},
    {0, "", KOP_EAPI},
    {302, NULL, KOP_EAPI},
};

static void test_from_status(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof status_cases / sizeof status_cases[0]; i++) {
        const struct status_case *c = &status_cases[i];
        kop_err got = kop_err_from_status(c->code, c->reason);
        if (got != c->want)
            fail_msg("case %zu: %d %s gave %s, want %s", i, c->code, c->reason ? c->reason : "-",
                     kop_err_name(got), kop_err_name(c->want));
    }
}

static void test_http_code_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(kop_err_http_code(KOP_ENOTFOUND), 404);
    assert_int_equal(kop_err_http_code(KOP_EINVALID), 422);
    assert_int_equal(kop_err_http_code(KOP_ENOMEM), 0);
}

static void test_retryable(void **state)
{
    (void)state;
    assert_true(kop_err_is_retryable(KOP_ETOOMANYREQUESTS));
    assert_true(kop_err_is_retryable(KOP_EUNAVAILABLE));
    assert_true(kop_err_is_retryable(KOP_ECONNECT));
    assert_false(kop_err_is_retryable(KOP_ENOTFOUND));
    assert_false(kop_err_is_retryable(KOP_ECONFLICT));
    assert_false(kop_err_is_retryable(KOP_OK));
}

static void test_status_truncates(void **state)
{
    (void)state;
    kop_status st;
    char big[4 * KOP_STATUS_MESSAGE_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';

    kop_status_setf(&st, 409, big, "%s", big);
    assert_int_equal(st.code, 409);
    assert_int_equal(strlen(st.reason), KOP_STATUS_REASON_MAX - 1);
    assert_int_equal(strlen(st.message), KOP_STATUS_MESSAGE_MAX - 1);

    kop_status_setf(&st, 404, NULL, "configmaps \"%s\" not found", "a");
    assert_string_equal(st.reason, "");
    assert_string_equal(st.message, "configmaps \"a\" not found");

    kop_status_clear(&st);
    assert_int_equal(st.code, 0);
    assert_string_equal(st.message, "");

    kop_status_clear(NULL);                 /* NULL is accepted */
    kop_status_setf(NULL, 1, "r", "%d", 1); /* and ignored */
}

static void test_version(void **state)
{
    (void)state;
    assert_string_equal(kop_version(), KOP_VERSION_STRING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok_is_zero),       cmocka_unit_test(test_every_code_named),
        cmocka_unit_test(test_unknown_code),     cmocka_unit_test(test_from_status),
        cmocka_unit_test(test_http_code_roundtrip), cmocka_unit_test(test_retryable),
        cmocka_unit_test(test_status_truncates), cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests_name("err", tests, NULL, NULL);
}

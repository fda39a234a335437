/*
 * test_clock.c - kop/clock.h: the monotonic clock moves forward, and
 * kop_rfc3339 / kop_rfc3339_now write the metav1.Time form Kubernetes
 * writes (RFC 3339, UTC, to the second), which round-trips through
 * strptime/timegm to the same second.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kop/clock.h"

static void test_mono(void **state)
{
    (void)state;
    int64_t a = kop_mono_ns(), b = kop_mono_ns();
    assert_true(b >= a);
    assert_true(kop_mono_ms() >= a / 1000000);
}

static void test_rfc3339(void **state)
{
    (void)state;
    char out[KOP_RFC3339_SIZE];
    /* Known instants: the epoch, a leap day, the end of a year. */
    assert_string_equal(kop_rfc3339(0, out), "1970-01-01T00:00:00Z");
    assert_ptr_equal(kop_rfc3339(951782400, out), out);
    assert_string_equal(out, "2000-02-29T00:00:00Z");
    assert_string_equal(kop_rfc3339(1798761599, out), "2026-12-31T23:59:59Z");
}

static void test_rfc3339_now(void **state)
{
    (void)state;
    char out[KOP_RFC3339_SIZE];
    time_t before = time(NULL);
    const char *s = kop_rfc3339_now(out);
    time_t after = time(NULL);
    assert_ptr_equal(s, out);
    assert_int_equal(strlen(s), 20);
    assert_int_equal(s[19], 'Z');
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    assert_non_null(end);
    assert_int_equal(*end, '\0');
    time_t back = timegm(&tm); /* UTC: the text says Z, so no time zone may shift it */
    assert_true(back >= before && back <= after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mono),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_rfc3339_now),
    };
    return cmocka_run_group_tests_name("clock", tests, NULL, NULL);
}

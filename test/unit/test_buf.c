/*
 * test_buf.c - kop_buf grows, stays NUL-terminated, and refuses to pass
 * its cap without changing what it holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kop/buf.h"

static void test_append_and_terminate(void **state)
{
    (void)state;
    kop_buf b;
    kop_buf_init(&b, 1 << 20);
    assert_string_equal(kop_buf_str(&b), "");
    for (int i = 0; i < 1000; i++)
        assert_int_equal(kop_buf_append(&b, "abc", 3), KOP_OK);
    assert_int_equal(b.len, 3000);
    assert_int_equal(b.data[3000], '\0');
    assert_int_equal(kop_buf_appendf(&b, "%d-%s", 42, "x"), KOP_OK);
    assert_string_equal(b.data + 3000, "42-x");
    kop_buf_fini(&b);
}

static void test_cap_is_hard(void **state)
{
    (void)state;
    kop_buf b;
    kop_buf_init(&b, 10);
    assert_int_equal(kop_buf_appends(&b, "0123456789"), KOP_OK);
    assert_int_equal(kop_buf_append(&b, "x", 1), KOP_ETOOBIG);
    assert_int_equal(kop_buf_appendf(&b, "%s", "y"), KOP_ETOOBIG);
    assert_string_equal(kop_buf_str(&b), "0123456789"); /* unchanged */
    assert_true(b.cap_alloc <= 11);
    kop_buf_reset(&b);
    assert_int_equal(kop_buf_appends(&b, "01234567890"), KOP_ETOOBIG);
    assert_int_equal(b.len, 0);
    /* A length that would overflow size_t arithmetic is refused too. */
    assert_int_equal(kop_buf_append(&b, "z", SIZE_MAX), KOP_ETOOBIG);
    kop_buf_fini(&b);
}

static void test_consume_and_take(void **state)
{
    (void)state;
    kop_buf b;
    kop_buf_init(&b, 100);
    assert_int_equal(kop_buf_appends(&b, "line1\nline2\n"), KOP_OK);
    kop_buf_consume(&b, 6);
    assert_string_equal(kop_buf_str(&b), "line2\n");
    size_t len = 0;
    char *s = kop_buf_take(&b, &len);
    assert_string_equal(s, "line2\n");
    assert_int_equal(len, 6);
    assert_null(b.data);
    free(s);
    s = kop_buf_take(&b, &len); /* empty buffer: empty heap string */
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
    kop_buf_fini(&b);
    kop_buf_fini(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_terminate),
        cmocka_unit_test(test_cap_is_hard),
        cmocka_unit_test(test_consume_and_take),
    };
    return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}

/*
 * test_map.c - kop__map keeps every key it is given, forgets removed ones,
 * survives heavy churn (tombstones) and iterates each live key once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "map_internal.h"

#define N 20000

static void test_put_get_remove(void **state)
{
    (void)state;
    kop__map m;
    char key[32];
    kop__map_init(&m);
    assert_null(kop__map_get(&m, "absent"));
    for (intptr_t i = 0; i < N; i++) {
        snprintf(key, sizeof key, "ns/obj-%ld", (long)i);
        assert_int_equal(kop__map_put(&m, key, (void *)(i + 1), NULL), KOP_OK);
    }
    assert_int_equal(m.len, N);
    for (intptr_t i = 0; i < N; i++) {
        snprintf(key, sizeof key, "ns/obj-%ld", (long)i);
        assert_ptr_equal(kop__map_get(&m, key), (void *)(i + 1));
    }
    void *old = NULL;
    assert_int_equal(kop__map_put(&m, "ns/obj-7", (void *)99, &old), KOP_OK);
    assert_ptr_equal(old, (void *)8);
    assert_int_equal(m.len, N);
    for (intptr_t i = 0; i < N; i += 2) {
        snprintf(key, sizeof key, "ns/obj-%ld", (long)i);
        assert_non_null(kop__map_remove(&m, key));
    }
    assert_int_equal(m.len, N / 2);
    assert_null(kop__map_get(&m, "ns/obj-0"));
    assert_false(kop__map_has(&m, "ns/obj-0"));
    assert_true(kop__map_has(&m, "ns/obj-1"));
    assert_null(kop__map_remove(&m, "ns/obj-0"));
    kop__map_fini(&m, NULL);
}

static void test_churn_keeps_table_small(void **state)
{
    (void)state;
    kop__map m;
    char key[32];
    kop__map_init(&m);
    /* 100 live keys, replaced 2,000 times over: tombstones must be recycled. */
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < 100; i++) {
            snprintf(key, sizeof key, "k-%d-%d", round, i);
            assert_int_equal(kop__map_put(&m, key, NULL, NULL), KOP_OK);
        }
        for (int i = 0; i < 100; i++) {
            snprintf(key, sizeof key, "k-%d-%d", round, i);
            assert_true(kop__map_has(&m, key));
            kop__map_remove(&m, key);
        }
    }
    assert_int_equal(m.len, 0);
    assert_true(m.cap <= 1024);
    kop__map_fini(&m, NULL);
}

static void test_iterate_each_once(void **state)
{
    (void)state;
    kop__map m;
    char key[32];
    int seen[500] = {0};
    kop__map_init(&m);
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "%d", i);
        assert_int_equal(kop__map_put(&m, key, strdup(key), NULL), KOP_OK);
    }
    size_t pos = 0;
    const char *k;
    void *v;
    while (kop__map_next(&m, &pos, &k, &v)) {
        assert_string_equal(k, v);
        seen[atoi(k)]++;
    }
    for (int i = 0; i < 500; i++)
        assert_int_equal(seen[i], 1);
    kop__map_fini(&m, free); /* frees the values too: ASan checks */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_remove),
        cmocka_unit_test(test_churn_keeps_table_small),
        cmocka_unit_test(test_iterate_each_once),
    };
    return cmocka_run_group_tests_name("map", tests, NULL, NULL);
}

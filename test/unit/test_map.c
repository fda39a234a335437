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

/* A borrowing map stores the caller's key pointers: the caller's record
 * carries the key, and freeing the map frees no key. */
static void test_borrowed_keys(void **state)
{
    (void)state;
    struct rec {
        int n;
        char key[16];
    } recs[3] = {{1, "ns/a"}, {2, "ns/b"}, {3, "ns/c"}};
    kop__map m;
    kop__map_init_borrowing(&m);
    for (int i = 0; i < 3; i++)
        assert_int_equal(kop__map_put(&m, recs[i].key, &recs[i], NULL), KOP_OK);
    size_t pos = 0;
    const char *k;
    void *v;
    int seen = 0;
    while (kop__map_next(&m, &pos, &k, &v)) {
        assert_ptr_equal(k, ((struct rec *)v)->key); /* the very pointer, not a copy */
        seen++;
    }
    assert_int_equal(seen, 3);
    assert_ptr_equal(kop__map_remove(&m, "ns/b"), &recs[1]);
    assert_null(kop__map_get(&m, "ns/b"));
    assert_ptr_equal(kop__map_get(&m, "ns/c"), &recs[2]);
    kop__map_fini(&m, NULL); /* must not free the keys: they are in recs */
}

/* After a burst, shrinking brings the table back near what the live keys need. */
static void test_shrink(void **state)
{
    (void)state;
    kop__map m;
    kop__map_init(&m);
    char key[32];
    for (int i = 0; i < 4096; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(kop__map_put(&m, key, NULL, NULL), KOP_OK);
    }
    size_t big = m.cap;
    for (int i = 0; i < 4090; i++) {
        snprintf(key, sizeof key, "k%d", i);
        kop__map_remove(&m, key);
    }
    kop__map_shrink(&m);
    assert_true(m.cap < big / 64);
    assert_int_equal(m.len, 6);
    assert_int_equal(m.used, 6); /* the tombstones went with the rehash */
    for (int i = 4090; i < 4096; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_true(kop__map_has(&m, key));
    }
    assert_int_not_equal(kop__hash("ns/a"), kop__hash("ns/b"));
    kop__map_fini(&m, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_remove),
        cmocka_unit_test(test_churn_keeps_table_small),
        cmocka_unit_test(test_iterate_each_once),
        cmocka_unit_test(test_borrowed_keys),
        cmocka_unit_test(test_shrink),
    };
    return cmocka_run_group_tests_name("map", tests, NULL, NULL);
}

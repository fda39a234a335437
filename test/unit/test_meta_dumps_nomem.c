/*
 * test_meta_dumps_nomem.c - kop_meta_dumps (src/meta.c) when allocations
 * fail (torture.h): for n = 1, 2, ... the n-th allocation fails, until a run
 * sees no failure; each run either fails whole (NULL) or gives the exact
 * text. jansson 2.14's json_dumps returned a torn object key there (an
 * informer cache entry that no longer parsed, for good).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kop/meta.h"
#include "torture.h"

static void test_dumps_torture(void **state)
{
    (void)state;
    json_t *obj = json_pack("{s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:[i, s, {s:s}]}}", "apiVersion",
                            "v1", "metadata", "name", "t-00", "namespace", "kopc-torture", "labels",
                            "kopc.dev/team", "team-with-a-longer-name", "data", "round", "1",
                            "list", 1, "two", "nested", "a value long enough to grow a buffer");
    assert_non_null(obj);
    for (size_t flags = JSON_COMPACT; flags <= (JSON_COMPACT | JSON_SORT_KEYS);
         flags += JSON_SORT_KEYS) {
        char *want = kop_meta_dumps(obj, flags);
        assert_non_null(want);
        long failed = 0, n;
        for (n = 1; n < 10000; n++) {
            torture_fail_at(n);
            char *got = kop_meta_dumps(obj, flags);
            bool hit = torture_hit();
            torture_fail_at(0);
            if (got && strcmp(got, want) != 0)
                fail_msg("allocation %ld failed: a torn text came back: %s", n, got);
            failed += got == NULL;
            free(got);
            if (!hit)
                break;
        }
        printf("dumps torture (flags %zx): %ld runs, %ld failed whole\n", flags, n, failed);
        assert_true(failed > 2); /* the buffer grew and jansson allocated: each failed once */
        free(want);
    }
    json_decref(obj);
}

int main(void)
{
    torture_json_alloc();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dumps_torture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

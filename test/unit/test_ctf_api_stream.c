/*
 * test_ctf_api_stream.c - the format of one server-sent event (operators/
 * ctf/api/stream.c): its name, then its data on one line, newlines escaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/stream.h"
#include "ctf_fixture.h"

static void test_sse_event(void **state)
{
    (void)state;
    json_t *d = parse("{'message':'two\\nlines'}");
    char *ev = NULL;
    size_t n = 0;
    assert_int_equal(ctf_sse_event("instance", d, &ev, &n), KOP_OK);
    assert_string_equal(ev, "event: instance\ndata: {\"message\":\"two\\nlines\"}\n\n");
    assert_int_equal(n, strlen(ev));
    free(ev);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

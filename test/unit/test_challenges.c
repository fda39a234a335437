/*
 * test_challenges.c - the sample challenges' own logic: the web challenge's
 * request parser (whole requests, partial ones, malformed and oversized
 * heads) and the flag reader (the mounted file wins over FLAG, newlines are
 * trimmed, an absent flag is reported).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "challenge.h"
#include "request.h"

static enum webflag_parse parse(const char *s, struct webflag_request *req)
{
    return webflag_parse_request(s, strlen(s), req);
}

static void test_request_complete(void **state)
{
    (void)state;
    struct webflag_request req;
    assert_int_equal(parse("GET /flag?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", &req), WEBFLAG_COMPLETE);
    assert_string_equal(req.method, "GET");
    assert_string_equal(req.path, "/flag");
    assert_int_equal(parse("HEAD / HTTP/1.0\n\n", &req), WEBFLAG_COMPLETE);
    assert_string_equal(req.method, "HEAD");
    assert_string_equal(req.path, "/");
}

static void test_request_partial(void **state)
{
    (void)state;
    struct webflag_request req;
    assert_int_equal(parse("", &req), WEBFLAG_MORE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &req), WEBFLAG_MORE);
}

static void test_request_malformed(void **state)
{
    (void)state;
    struct webflag_request req;
    const char *bad[] = {
        " / HTTP/1.1\r\n\r\n",           /* empty method */
        "GET\r\n\r\n",                   /* no target */
        "GET flag HTTP/1.1\r\n\r\n",     /* target without / */
        "GET / HTTP/2.0\r\n\r\n",        /* not HTTP/1.x */
        "GET / HTTP/1.1 x\r\n\r\n",      /* trailing junk */
        "G(T / HTTP/1.1\r\n\r\n",        /* method not a token */
        "GET /a\x01 HTTP/1.1\r\n\r\n",   /* control byte in path */
        "GET  / HTTP/1.1\r\n\r\n",       /* empty target */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(parse(bad[i], &req), WEBFLAG_BAD);
}

static void test_request_too_big(void **state)
{
    (void)state;
    struct webflag_request req;
    char *big = malloc(WEBFLAG_HEAD_MAX + 64);
    assert_non_null(big);
    memset(big, 'a', WEBFLAG_HEAD_MAX + 63);
    big[WEBFLAG_HEAD_MAX + 63] = '\0';
    assert_int_equal(parse(big, &req), WEBFLAG_TOO_BIG); /* no end of head within the cap */
    snprintf(big, WEBFLAG_HEAD_MAX, "GET /%0*d HTTP/1.1\r\n\r\n", WEBFLAG_PATH_MAX + 1, 0);
    assert_int_equal(parse(big, &req), WEBFLAG_TOO_BIG); /* path over its cap */
    snprintf(big, WEBFLAG_HEAD_MAX, "ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n\r\n");
    assert_int_equal(parse(big, &req), WEBFLAG_TOO_BIG); /* method over its cap */
    free(big);
}

static void test_flag_file_wins(void **state)
{
    (void)state;
    char path[] = "/tmp/kopc-flag-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "flag{file}\n", 11), 11);
    close(fd);
    setenv("FLAG_FILE", path, 1);
    setenv("FLAG", "flag{env}", 1);
    char out[CHALLENGE_FLAG_MAX];
    assert_int_equal(challenge_flag(out, sizeof out), 10);
    assert_string_equal(out, "flag{file}");

    unlink(path); /* the file goes: FLAG is next */
    assert_int_equal(challenge_flag(out, sizeof out), 9);
    assert_string_equal(out, "flag{env}");

    unsetenv("FLAG");
    assert_int_equal(challenge_flag(out, sizeof out), -1);
    assert_string_equal(out, "");
    unsetenv("FLAG_FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_complete),  cmocka_unit_test(test_request_partial),
        cmocka_unit_test(test_request_malformed), cmocka_unit_test(test_request_too_big),
        cmocka_unit_test(test_flag_file_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

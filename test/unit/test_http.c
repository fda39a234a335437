/*
 * test_http.c - kop_http_parse_bind: the addresses both HTTP servers take,
 * and a clear refusal of everything else that changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "kop/http.h"

static void test_good(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    char text[INET6_ADDRSTRLEN];

    assert_int_equal(kop_http_parse_bind("127.0.0.1:9090", &ss, &len, NULL), KOP_OK);
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(len, sizeof *in);
    assert_int_equal(ntohs(in->sin_port), 9090);
    assert_string_equal(inet_ntop(AF_INET, &in->sin_addr, text, sizeof text), "127.0.0.1");

    assert_int_equal(kop_http_parse_bind("[::1]:0", &ss, &len, NULL), KOP_OK);
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(ntohs(in6->sin6_port), 0);
    assert_string_equal(inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text), "::1");

    /* An empty host is every address (the wildcard). */
    assert_int_equal(kop_http_parse_bind(":8080", &ss, &len, NULL), KOP_OK);
    assert_true(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
    assert_int_equal(kop_http_parse_bind("0.0.0.0:8080", &ss, NULL, NULL), KOP_OK);
}

static void test_refused(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "8080",
                         "127.0.0.1",
                         "127.0.0.1:",
                         "127.0.0.1:65536",
                         "127.0.0.1:-1",
                         "127.0.0.1:80x",
                         "::1:8080",
                         "[::1:8080",
                         "999.1.1.1:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct sockaddr_storage ss;
        memset(&ss, 0xab, sizeof ss);
        kop_status st = {0};
        assert_int_equal(kop_http_parse_bind(bad[i], &ss, NULL, &st), KOP_EINVAL);
        assert_non_null(strstr(st.message, "want HOST:PORT"));
        assert_int_equal(((unsigned char *)&ss)[0], 0xab); /* untouched */
    }
    assert_int_equal(kop_http_parse_bind(NULL, NULL, NULL, NULL), KOP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_client_status.c - apiserver error bodies become the right kop_err and
 * a kop_status with the server's words; anything else (proxy HTML, empty,
 * garbage, huge) becomes a short, printable message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "kop_internal.h"

struct status_case {
    const char *name;
    int code;
    const char *body; /* NULL: no body at all */
    kop_err want;
    const char *reason;  /* exact */
    const char *message; /* exact */
};

/* Bodies as a kube-apiserver (v1.30) sends them, and what proxies send. */
static const struct status_case cases[] = {
    {"NotFound", 404,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"configmaps \\\"boarding-pass\\\" not found\",\"reason\":\"NotFound\","
     "\"details\":{\"name\":\"boarding-pass\",\"kind\":\"configmaps\"},\"code\":404}\n",
     KOP_ENOTFOUND, "NotFound", "configmaps \"boarding-pass\" not found"},
    {"AlreadyExists", 409,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"flighttickets.flights.com \\\"ft-1\\\" already exists\",\"reason\":"
     "\"AlreadyExists\",\"details\":{\"name\":\"ft-1\",\"group\":\"flights.com\",\"kind\":"
     "\"flighttickets\"},\"code\":409}",
     KOP_EALREADYEXISTS, "AlreadyExists", "flighttickets.flights.com \"ft-1\" already exists"},
    {"Conflict", 409,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"Operation cannot be fulfilled on configmaps \\\"boarding-pass\\\": the "
     "object has been modified; please apply your changes to the latest version and try "
     "again\",\"reason\":\"Conflict\",\"details\":{\"name\":\"boarding-pass\",\"kind\":"
     "\"configmaps\"},\"code\":409}",
     KOP_ECONFLICT, "Conflict",
     "Operation cannot be fulfilled on configmaps \"boarding-pass\": the object has been "
     "modified; please apply your changes to the latest version and try again"},
    {"Invalid", 422,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"FlightTicket.flights.com \\\"ft-1\\\" is invalid: spec.number: Invalid "
     "value: 11: spec.number in body should be less than or equal to 10\",\"reason\":"
     "\"Invalid\",\"details\":{\"name\":\"ft-1\",\"group\":\"flights.com\",\"kind\":"
     "\"FlightTicket\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid "
     "value: 11: spec.number in body should be less than or equal to 10\",\"field\":"
     "\"spec.number\"}]},\"code\":422}",
     KOP_EINVALID, "Invalid",
     "FlightTicket.flights.com \"ft-1\" is invalid: spec.number: Invalid value: 11: "
     "spec.number in body should be less than or equal to 10"},
    {"Gone", 410,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"too old resource version: 1000 (2000)\",\"reason\":\"Gone\",\"code\":410}",
     KOP_EGONE, "Gone", "too old resource version: 1000 (2000)"},
    {"Expired continue", 410,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"The provided continue parameter is too old to display a consistent list "
     "result. You can start a new list without the continue parameter, or use the continue "
     "token in this response to retrieve the remainder of the results. Continuing with the "
     "provided token results in an inconsistent list - objects that were created, modified, "
     "or deleted between the time the first chunk was returned and now may show up in the "
     "list.\",\"reason\":\"Expired\",\"code\":410}",
     KOP_EEXPIRED, "Expired", NULL},
    {"Forbidden", 403,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"pods is forbidden: User \\\"system:serviceaccount:ctf:ctf-operator\\\" "
     "cannot list resource \\\"pods\\\" in API group \\\"\\\" in the namespace "
     "\\\"kube-system\\\"\",\"reason\":\"Forbidden\",\"details\":{\"kind\":\"pods\"},"
     "\"code\":403}",
     KOP_EFORBIDDEN, "Forbidden",
     "pods is forbidden: User \"system:serviceaccount:ctf:ctf-operator\" cannot list resource "
     "\"pods\" in API group \"\" in the namespace \"kube-system\""},
    {"TooManyRequests", 429,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"Too many requests, please try again later.\",\"reason\":"
     "\"TooManyRequests\",\"details\":{\"causes\":[{\"message\":\"client rate limiter Wait "
     "returned an error\"}],\"retryAfterSeconds\":1},\"code\":429}",
     KOP_ETOOMANYREQUESTS, "TooManyRequests", "Too many requests, please try again later."},
    {"Unauthorized", 401,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}",
     KOP_EUNAUTHORIZED, "Unauthorized", "Unauthorized"},
    {"Timeout on 504", 504,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"Timeout: request did not complete within requested timeout - context "
     "deadline exceeded\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}",
     KOP_ESERVERTIMEOUT, "Timeout",
     "Timeout: request did not complete within requested timeout - context deadline exceeded"},
    {"Status without message", 404, "{\"kind\":\"Status\",\"reason\":\"NotFound\"}",
     KOP_ENOTFOUND, "NotFound", "Not Found"},
    {"Status with odd types", 409,
     "{\"kind\":\"Status\",\"reason\":7,\"message\":[\"x\"],\"code\":\"409\"}", KOP_ECONFLICT,
     "", "Conflict"},
    {"unknown reason, known code", 400,
     "{\"kind\":\"Status\",\"message\":\"bad\",\"reason\":\"SomethingNew\",\"code\":400}",
     KOP_EBADREQUEST, "SomethingNew", "bad"},
    {"control characters in message", 500,
     "{\"kind\":\"Status\",\"message\":\"line1\\nline2\\ttab\\u001b[31m\",\"reason\":"
     "\"InternalError\",\"code\":500}",
     KOP_EINTERNAL, "InternalError", "line1 line2 tab [31m"},
    {"UTF-8 kept in message", 422,
     "{\"kind\":\"Status\",\"message\":\"spec.title: Invalid value: \\\"Gr\xc3\xbc\xc3\x9f"
     "e\\\"\",\"reason\":\"Invalid\",\"code\":422}",
     KOP_EINVALID, "Invalid", "spec.title: Invalid value: \"Gr\xc3\xbc\xc3\x9f" "e\""},
    {"proxy HTML", 502,
     "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
     "Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n",
     KOP_EAPI, "",
     "Bad Gateway: <html> <head><title>502 Bad Gateway</title></head> <body> <center><h1>502 "
     "Bad Gateway</h1></center> <hr><center>nginx/1.25.3</center> </body> </html>"},
    {"empty body", 503, "", KOP_EUNAVAILABLE, "", "Service Unavailable"},
    {"no body", 503, NULL, KOP_EUNAVAILABLE, "", "Service Unavailable"},
    {"whitespace body", 404, " \r\n\t ", KOP_ENOTFOUND, "", "Not Found"},
    {"JSON that is not a Status", 401, "{\"error\":\"invalid_token\"}", KOP_EUNAUTHORIZED, "",
     "Unauthorized: {\"error\":\"invalid_token\"}"},
    {"garbage bytes", 500, "\x01\x02GET\x7f\xc3\xa9t\xe9\xff\x00z", KOP_EINTERNAL, "",
     "Internal Server Error: ??GET??t???z"},
    {"unknown code", 418, "I'm a teapot", KOP_EAPI, "", "HTTP 418: I'm a teapot"},
    {"no response", 0, NULL, KOP_EAPI, "", "error without message"},
    {"redirect", 302, "", KOP_EAPI, "", "HTTP 302"},
    {"success", 200, "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":200}", KOP_OK, "",
     "OK"},
};

static void test_status_bodies(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(cases); i++) {
        const struct status_case *c = &cases[i];
        kop_status st;
        kop_status_setf(&st, 1, "stale", "stale");
        size_t len = c->body ? strlen(c->body) : 0;
        if (c->body && strcmp(c->name, "garbage bytes") == 0)
            len += 2; /* include the NUL and the byte after it */
        kop_err err = kop__status_decode(c->code, c->body, len, &st);
        if (err != c->want)
            fail_msg("%s: got %s, want %s", c->name, kop_err_name(err), kop_err_name(c->want));
        assert_int_equal(st.code, c->code);
        if (strcmp(st.reason, c->reason) != 0)
            fail_msg("%s: reason \"%s\", want \"%s\"", c->name, st.reason, c->reason);
        if (c->message && strcmp(st.message, c->message) != 0)
            fail_msg("%s: message\n\"%s\"\nwant\n\"%s\"", c->name, st.message, c->message);
        assert_true(st.message[0] != '\0');
        /* The same with st NULL changes nothing but the output. */
        assert_int_equal(kop__status_decode(c->code, c->body, len, NULL), c->want);
    }
}

/* is_valid_utf8 checks well-formedness of s (no overlong/surrogate check needed here). */
static bool is_valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2
                                : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0)
            return false;
        p++;
        for (int k = 0; k < n; k++, p++) {
            if ((*p & 0xC0) != 0x80)
                return false;
        }
    }
    return true;
}

/* A huge Status message is cut to the buffer at a character boundary. */
static void test_huge_message_truncated(void **state)
{
    (void)state;
    for (size_t shift = 0; shift < 4; shift++) {
        kop_buf b;
        kop_buf_init(&b, 1 << 20);
        assert_int_equal(kop_buf_appends(&b, "{\"kind\":\"Status\",\"reason\":\"Invalid\","
                                             "\"code\":422,\"message\":\""),
                         KOP_OK);
        for (size_t i = 0; i < shift; i++)
            assert_int_equal(kop_buf_appends(&b, "x"), KOP_OK);
        for (int i = 0; i < 20000; i++) /* 4-byte character: U+1F6EB */
            assert_int_equal(kop_buf_appends(&b, "\xf0\x9f\x9b\xab"), KOP_OK);
        assert_int_equal(kop_buf_appends(&b, "\"}"), KOP_OK);
        kop_status st;
        assert_int_equal(kop__status_decode(422, b.data, b.len, &st), KOP_EINVALID);
        size_t n = strlen(st.message);
        assert_true(n <= KOP_STATUS_MESSAGE_MAX - 1);
        assert_true(n > KOP_STATUS_MESSAGE_MAX - 8);
        assert_string_equal(st.message + n - 3, "...");
        assert_true(is_valid_utf8(st.message));
        kop_buf_fini(&b);
    }

    /* A huge HTML page is quoted briefly, in printable ASCII. */
    kop_buf b;
    kop_buf_init(&b, 1 << 20);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(kop_buf_appends(&b, "<p>\xe2\x9c\x93 proxy error</p>\n"), KOP_OK);
    kop_status st;
    assert_int_equal(kop__status_decode(502, b.data, b.len, &st), KOP_EAPI);
    assert_true(strlen(st.message) < 256);
    assert_string_equal(st.message + strlen(st.message) - 3, "...");
    for (const char *p = st.message; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    kop_buf_fini(&b);

    /* A huge reason is cut to its buffer too. */
    kop_buf_init(&b, 1 << 20);
    assert_int_equal(kop_buf_appends(&b, "{\"kind\":\"Status\",\"reason\":\""), KOP_OK);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(kop_buf_appends(&b, "R"), KOP_OK);
    assert_int_equal(kop_buf_appends(&b, "\"}"), KOP_OK);
    /* (An unknown reason on 409 maps by code alone: a Conflict.) */
    assert_int_equal(kop__status_decode(409, b.data, b.len, &st), KOP_ECONFLICT);
    assert_int_equal(strlen(st.reason), KOP_STATUS_REASON_MAX - 1);
    kop_buf_fini(&b);
}

struct json_case {
    const char *json; /* NULL: pass NULL */
    kop_err want;
    int code;
    const char *reason;
    const char *message;
};

static const struct json_case json_cases[] = {
    {"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"too old resource version: 1 (2)\",\"reason\":\"Gone\",\"code\":410}",
     KOP_EGONE, 410, "Gone", "too old resource version: 1 (2)"},
    {"{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too old resource version: 1 (2)\","
     "\"reason\":\"Expired\",\"code\":410}",
     KOP_EEXPIRED, 410, "Expired", "too old resource version: 1 (2)"},
    {"{\"code\":410}", KOP_EGONE, 410, "", "Gone"},
    {"{\"reason\":\"NotFound\"}", KOP_ENOTFOUND, 0, "NotFound", "error without message"},
    {"{\"kind\":\"Status\",\"message\":\"internal error\",\"code\":500}", KOP_EINTERNAL, 500, "",
     "internal error"},
    {"{}", KOP_EAPI, 0, "", "error without message"},
    {"{\"code\":-5}", KOP_EAPI, 0, "", "error without message"},
    {"{\"code\":1e3}", KOP_EAPI, 0, "", "error without message"},
    {"{\"code\":99999999999}", KOP_EAPI, 0, "", "error without message"},
    {"[]", KOP_EPARSE, 0, "", NULL},
    {"\"Status\"", KOP_EPARSE, 0, "", NULL},
    {NULL, KOP_EPARSE, 0, "", NULL},
};

static void test_status_from_json(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(json_cases); i++) {
        const struct json_case *c = &json_cases[i];
        json_t *j = NULL;
        if (c->json) {
            json_error_t jerr;
            j = json_loads(c->json, JSON_DECODE_ANY, &jerr);
            assert_non_null(j);
        }
        kop_status st;
        kop_status_clear(&st);
        kop_err err = kop__status_from_json(j, &st);
        if (err != c->want)
            fail_msg("case %zu: got %s, want %s", i, kop_err_name(err), kop_err_name(c->want));
        assert_int_equal(st.code, c->code);
        assert_string_equal(st.reason, c->reason);
        if (c->message)
            assert_string_equal(st.message, c->message);
        else
            assert_true(st.message[0] != '\0');
        assert_int_equal(kop__status_from_json(j, NULL), c->want);
        json_decref(j);
    }
}

struct excerpt_case {
    const char *in;
    size_t max_chars;
    const char *want;
};

static const struct excerpt_case excerpt_cases[] = {
    {"", 10, ""},
    {"   ", 10, ""},
    {"  a  b  ", 10, "a b"},
    {"a\r\n\tb", 10, "a b"},
    {"abcdefghij", 10, "abcdefghij"},
    {"abcdefghijk", 10, "abcdefg..."},
    {"abcdef ghijk", 10, "abcdef..."},
    {"\xc3\xa9t\xc3\xa9", 10, "?t?"},
    {"\xf0\x9f\x9b\xab!", 10, "?!"},
    {"\x01\x7f", 10, "??"},
    {"abcdef", 2, "ab"},
    {"abcdef", 3, "..."},
};

static void test_text_excerpt(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(excerpt_cases); i++) {
        char out[32];
        const struct excerpt_case *c = &excerpt_cases[i];
        size_t n = kop__text_excerpt(out, sizeof out, c->in, strlen(c->in), c->max_chars);
        if (strcmp(out, c->want) != 0)
            fail_msg("case %zu: \"%s\", want \"%s\"", i, out, c->want);
        assert_int_equal(n, strlen(c->want));
    }
    /* The destination size caps max_chars. */
    char small[5];
    assert_int_equal(kop__text_excerpt(small, sizeof small, "abcdefgh", 8, 100), 4);
    assert_string_equal(small, "a...");
    char one[1];
    assert_int_equal(kop__text_excerpt(one, sizeof one, "abc", 3, 100), 0);
    assert_string_equal(one, "");
}

static void test_reason_phrases(void **state)
{
    (void)state;
    assert_string_equal(kop__http_reason_phrase(404), "Not Found");
    assert_string_equal(kop__http_reason_phrase(429), "Too Many Requests");
    assert_string_equal(kop__http_reason_phrase(0), "");
    assert_string_equal(kop__http_reason_phrase(999), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_bodies),
        cmocka_unit_test(test_huge_message_truncated),
        cmocka_unit_test(test_status_from_json),
        cmocka_unit_test(test_text_excerpt),
        cmocka_unit_test(test_reason_phrases),
    };
    return cmocka_run_group_tests_name("client_status", tests, NULL, NULL);
}

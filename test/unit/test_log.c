/*
 * test_log.c - structured logging: exact text and JSON lines under a fixed
 * clock, escaping, verbosity gating, context loggers, redaction, the line
 * cap, and whole lines from many threads writing to one pipe.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "kop/log.h"
#include "kop_internal.h"

/* The clock hook in log.c, for tests only. */
void kop__log_set_clock(void (*now)(struct timespec *));

static void fixed_clock(struct timespec *now)
{
    now->tv_sec = 1795255200; /* 2026-11-21T10:00:00Z */
    now->tv_nsec = 123456789;
}

#define TS "2026-11-21T10:00:00.123Z"

/* ---- capturing output --------------------------------------------------- */

static FILE *capture_file;

/* capture_start sends the log to a fresh temporary file. */
static void capture_start(kop_log_format format, int verbosity)
{
    capture_file = tmpfile();
    assert_non_null(capture_file);
    kop_log_setup(&(kop_log_config){.format = format, .verbosity = verbosity, .out = capture_file});
}

/* capture_end returns everything written since capture_start (free() it). */
static char *capture_end(void)
{
    kop_log_setup(NULL);
    fseek(capture_file, 0, SEEK_END);
    long n = ftell(capture_file);
    rewind(capture_file);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, capture_file), (size_t)n);
    fclose(capture_file);
    capture_file = NULL;
    return text;
}

static int setup(void **state)
{
    (void)state;
    kop__log_set_clock(fixed_clock);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kop__log_set_clock(NULL);
    kop_log_setup(NULL);
    return 0;
}

/* ---- exact lines -------------------------------------------------------- */

struct line_case {
    kop_log_level level;
    int v;
    const char *msg;
    kop_log_field fields[8];
    size_t n;
    const char *text, *json; /* without the newline */
};

#define ESCAPES "a\"b\\c\nd\te\x01" "f\x7f caf\xc3\xa9 \xff!"

static const struct line_case line_cases[] = {
    {KOP_LOG_INFO, 0, "reconciled",
     {KOP_LOG_STR("name", "web"), KOP_LOG_INT("attempt", 2), KOP_LOG_BOOL("ok", true),
      KOP_LOG_FLOAT("ratio", 0.5), KOP_LOG_STR("note", "two words"), KOP_LOG_STR("empty", ""),
      KOP_LOG_STR("nil", NULL)},
     7, TS " INFO reconciled name=web attempt=2 ok=true ratio=0.5 note=\"two words\" empty=\"\" "
        "nil=null",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"reconciled\",\"name\":\"web\",\"attempt\":2,"
     "\"ok\":true,\"ratio\":0.5,\"note\":\"two words\",\"empty\":\"\",\"nil\":null}"},
    {KOP_LOG_ERROR, 0, "update failed",
     {KOP_LOG_ERR(KOP_ENOTFOUND), KOP_LOG_INT("code", -404), KOP_LOG_UINT("big", UINT64_MAX)}, 3,
     TS " ERROR update failed error=\"not found\" code=-404 big=18446744073709551615",
     "{\"ts\":\"" TS "\",\"level\":\"error\",\"msg\":\"update failed\",\"error\":\"not found\","
     "\"code\":-404,\"big\":18446744073709551615}"},
    {KOP_LOG_WARN, 0, "odd numbers",
     {KOP_LOG_FLOAT("nan", NAN), KOP_LOG_FLOAT("inf", -INFINITY), KOP_LOG_FLOAT("x", 1e-7),
      KOP_LOG_FLOAT("third", 1.0 / 3)},
     4, TS " WARN odd numbers nan=NaN inf=-Inf x=1e-07 third=0.333333333333333",
     "{\"ts\":\"" TS "\",\"level\":\"warn\",\"msg\":\"odd numbers\",\"nan\":\"NaN\",\"inf\":"
     "\"-Inf\",\"x\":1e-07,\"third\":0.333333333333333}"},
    /* Escapes: quotes, backslash, newline, tab, control bytes, UTF-8 kept, bad bytes replaced. */
    {KOP_LOG_INFO, 0, "escapes", {KOP_LOG_STR("v", ESCAPES)}, 1,
     TS " INFO escapes v=\"a\\\"b\\\\c\\nd\\te\\u0001f\\u007f caf\xc3\xa9 \\ufffd!\"",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"escapes\",\"v\":\"a\\\"b\\\\c\\nd\\te"
     "\\u0001f\\u007f caf\xc3\xa9 \\ufffd!\"}"},
    /* UTF-8 alone needs no quotes in text. */
    {KOP_LOG_INFO, 0, "caf\xc3\xa9 ok", {KOP_LOG_STR("team", "\xe5\x9b\xa2\xe9\x98\x9f")}, 1,
     TS " INFO caf\xc3\xa9 ok team=\xe5\x9b\xa2\xe9\x98\x9f",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"caf\xc3\xa9 ok\",\"team\":"
     "\"\xe5\x9b\xa2\xe9\x98\x9f\"}"},
    /* A message that could be mistaken for a field, or spans lines, is quoted. */
    {KOP_LOG_INFO, 0, "x=y", {{0}}, 0, TS " INFO \"x=y\"",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"x=y\"}"},
    {KOP_LOG_INFO, 0, "two\nlines", {{0}}, 0, TS " INFO \"two\\nlines\"",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"two\\nlines\"}"},
    {KOP_LOG_INFO, 0, NULL, {{0}}, 0, TS " INFO \"\"",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"\"}"},
    /* Keys: text makes them safe, JSON escapes them. */
    {KOP_LOG_INFO, 0, "keys",
     {KOP_LOG_STR("a b", "1"), KOP_LOG_STR("", "2"), KOP_LOG_STR(NULL, "3"),
      KOP_LOG_STR("k=\"", "4")},
     4, TS " INFO keys a_b=1 _=2 _=3 k__=4",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"keys\",\"a b\":\"1\",\"_\":\"2\",\"_\":\"3\","
     "\"k=\\\"\":\"4\"}"},
    /* Redaction by type and by key, whatever the value's type. */
    {KOP_LOG_INFO, 0, "secrets",
     {KOP_LOG_SECRET("value", "s3cr3t"), KOP_LOG_STR("token", "abc"),
      KOP_LOG_STR("adminToken", "abc"), KOP_LOG_STR("Password", "p"), KOP_LOG_STR("ctf_flag", "f"),
      KOP_LOG_INT("api_key", 5), KOP_LOG_STR("flags", "--v=2"), KOP_LOG_STR("secretName", "x")},
     8,
     TS " INFO secrets value=[redacted] token=[redacted] adminToken=[redacted] "
        "Password=[redacted] ctf_flag=[redacted] api_key=[redacted] flags=\"--v=2\" secretName=x",
     "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"secrets\",\"value\":\"[redacted]\","
     "\"token\":\"[redacted]\",\"adminToken\":\"[redacted]\",\"Password\":\"[redacted]\","
     "\"ctf_flag\":\"[redacted]\",\"api_key\":\"[redacted]\",\"flags\":\"--v=2\","
     "\"secretName\":\"x\"}"},
    /* V-levels above 0 and DEBUG are labelled debug. */
    {KOP_LOG_INFO, 2, "v2", {{0}}, 0, TS " DEBUG v2",
     "{\"ts\":\"" TS "\",\"level\":\"debug\",\"msg\":\"v2\"}"},
    {KOP_LOG_DEBUG, 0, "dbg", {{0}}, 0, TS " DEBUG dbg",
     "{\"ts\":\"" TS "\",\"level\":\"debug\",\"msg\":\"dbg\"}"},
};

static void test_exact_lines(void **state)
{
    (void)state;
    for (size_t i = 0; i < KOP_ARRAY_LEN(line_cases); i++) {
        const struct line_case *c = &line_cases[i];
        for (int json = 0; json < 2; json++) {
            capture_start(json ? KOP_LOG_JSON : KOP_LOG_TEXT, 5);
            kop_log_write(NULL, &(kop_log_record){.level = c->level, .v = c->v, .msg = c->msg,
                                                  .fields = c->fields, .nfields = c->n});
            char *got = capture_end();
            const char *want = json ? c->json : c->text;
            size_t len = strlen(got);
            if (len == 0 || got[len - 1] != '\n' || strlen(want) != len - 1 ||
                strncmp(got, want, len - 1) != 0)
                fail_msg("case %zu (%s):\n got %s\nwant %s", i, json ? "json" : "text", got, want);
            if (json) {
                json_error_t e;
                json_t *v = json_loads(got, JSON_DECODE_INT_AS_REAL, &e);
                if (!v)
                    fail_msg("case %zu: not JSON: %s", i, e.text);
                json_decref(v);
            }
            free(got);
        }
    }
}

/* The same lines through the macros, and through a stream without a descriptor. */
static void test_macros_and_memstream(void **state)
{
    (void)state;
    char *mem = NULL;
    size_t memlen = 0;
    FILE *f = open_memstream(&mem, &memlen);
    assert_non_null(f);
    kop_log_setup(&(kop_log_config){.format = KOP_LOG_TEXT, .verbosity = 1, .out = f});
    kop_log(KOP_LOG_INFO, "hello");
    kop_log(KOP_LOG_WARN, "careful", KOP_LOG_STR("name", "web"), KOP_LOG_INT("n", 3));
    kop_logv(1, "detail", KOP_LOG_BOOL("x", false));
    kop_logv(2, "hidden");
    kop_log_setup(NULL);
    fclose(f);
    assert_string_equal(mem, TS " INFO hello\n" TS " WARN careful name=web n=3\n" TS
                             " DEBUG detail x=false\n");
    free(mem);

    kop_log_format fmt = KOP_LOG_TEXT;
    assert_int_equal(kop_log_format_parse("json", &fmt), KOP_OK);
    assert_int_equal(fmt, KOP_LOG_JSON);
    assert_int_equal(kop_log_format_parse("text", &fmt), KOP_OK);
    assert_int_equal(fmt, KOP_LOG_TEXT);
    assert_int_equal(kop_log_format_parse("JSON", &fmt), KOP_EINVAL);
    assert_int_equal(kop_log_format_parse(NULL, &fmt), KOP_EINVAL);
}

/* With no configuration, lines go to stderr in text. */
static void test_default_is_stderr(void **state)
{
    (void)state;
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    kop_log_setup(NULL);
    kop_log(KOP_LOG_ERROR, "to stderr", KOP_LOG_INT("n", 1));
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    char buf[256] = {0};
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    assert_string_equal(buf, TS " ERROR to stderr n=1\n");
}

/* ---- verbosity ---------------------------------------------------------- */

static int evaluated;

static long long count_evaluation(void)
{
    return ++evaluated;
}

static void test_verbosity(void **state)
{
    (void)state;
    struct {
        int verbosity;
        bool debug, v1, v2, v3;
    } cases[] = {
        {-1, false, false, false, false},
        {0, false, false, false, false},
        {1, true, true, false, false},
        {2, true, true, true, false},
        {9, true, true, true, true},
    };
    for (size_t i = 0; i < KOP_ARRAY_LEN(cases); i++) {
        capture_start(KOP_LOG_TEXT, cases[i].verbosity);
        assert_true(kop_log_enabled(KOP_LOG_ERROR));
        assert_true(kop_log_enabled(KOP_LOG_INFO));
        assert_true(kop_logv_enabled(0));
        assert_int_equal(kop_log_enabled(KOP_LOG_DEBUG), cases[i].debug);
        assert_int_equal(kop_logv_enabled(2), cases[i].v2);
        evaluated = 0;
        kop_log(KOP_LOG_DEBUG, "d", KOP_LOG_INT("n", count_evaluation()));
        kop_logv(1, "v1", KOP_LOG_INT("n", count_evaluation()));
        kop_logv(2, "v2", KOP_LOG_INT("n", count_evaluation()));
        kop_logv(3, "v3", KOP_LOG_INT("n", count_evaluation()));
        kop_logv(0, "v0");
        /* Direct writes are gated too. */
        kop_log_write(NULL, &(kop_log_record){.level = KOP_LOG_INFO, .v = 3, .msg = "direct"});
        char *got = capture_end();
        int want_lines = cases[i].debug + cases[i].v1 + cases[i].v2 + cases[i].v3 * 2 + 1;
        int lines = 0;
        for (char *p = got; *p; p++)
            lines += *p == '\n';
        if (lines != want_lines)
            fail_msg("verbosity %d: %d lines, want %d:\n%s", cases[i].verbosity, lines, want_lines,
                     got);
        /* Fields of disabled lines are never evaluated. */
        assert_int_equal(evaluated, cases[i].debug + cases[i].v1 + cases[i].v2 + cases[i].v3);
        assert_int_equal(strstr(got, "DEBUG v3") != NULL, cases[i].v3);
        assert_non_null(strstr(got, "INFO v0"));
        free(got);
    }
}

/* ---- context loggers ---------------------------------------------------- */

static void test_context_loggers(void **state)
{
    (void)state;
    char name[16] = "web";
    kop_logger *ctl = NULL, *obj = NULL, *empty = NULL;
    assert_int_equal(kop_logger_with(NULL, &ctl, KOP_LOG_STR("controller", "challenge"),
                                     KOP_LOG_SECRET("key", "never"), KOP_LOG_STR("authToken", "x")),
                     KOP_OK);
    assert_int_equal(kop_logger_with(ctl, &obj, KOP_LOG_STR("namespace", "ctf"),
                                     KOP_LOG_STR("name", name), KOP_LOG_INT("gen", 4),
                                     KOP_LOG_STR("nothing", NULL)),
                     KOP_OK);
    assert_int_equal(kop_logger_with(obj, &empty), KOP_OK);
    strcpy(name, "changed"); /* the logger holds its own copy */
    kop_logger_free(ctl);    /* a child does not need its parent */

    for (int json = 0; json < 2; json++) {
        capture_start(json ? KOP_LOG_JSON : KOP_LOG_TEXT, 0);
        kop_logger_log(obj, KOP_LOG_INFO, "reconciling", KOP_LOG_STR("phase", "Pending"));
        kop_logger_log(empty, KOP_LOG_WARN, "slow");
        kop_loggerv(obj, 1, "not shown");
        char *got = capture_end();
        const char *want =
            json ? "{\"ts\":\"" TS "\",\"level\":\"info\",\"msg\":\"reconciling\",\"controller\":"
                   "\"challenge\",\"key\":\"[redacted]\",\"authToken\":\"[redacted]\","
                   "\"namespace\":\"ctf\",\"name\":\"web\",\"gen\":4,\"nothing\":null,\"phase\":"
                   "\"Pending\"}\n"
                   "{\"ts\":\"" TS "\",\"level\":\"warn\",\"msg\":\"slow\",\"controller\":"
                   "\"challenge\",\"key\":\"[redacted]\",\"authToken\":\"[redacted]\","
                   "\"namespace\":\"ctf\",\"name\":\"web\",\"gen\":4,\"nothing\":null}\n"
                 : TS " INFO reconciling controller=challenge key=[redacted] authToken=[redacted] "
                      "namespace=ctf name=web gen=4 nothing=null phase=Pending\n" TS
                      " WARN slow controller=challenge key=[redacted] authToken=[redacted] "
                      "namespace=ctf name=web gen=4 nothing=null\n";
        assert_string_equal(got, want);
        free(got);
    }
    kop_logger_free(obj);
    kop_logger_free(empty);
    kop_logger_free(NULL);
}

/* ---- the line cap ------------------------------------------------------- */

/* one_line logs fields and returns the single line written (free() it). */
static char *one_line(kop_log_format fmt, const char *msg, const kop_log_field *fields, size_t n)
{
    capture_start(fmt, 0);
    kop_log_write(NULL, &(kop_log_record){.level = KOP_LOG_INFO, .msg = msg, .fields = fields,
                                          .nfields = n});
    char *got = capture_end();
    size_t len = strlen(got);
    assert_true(len > 0 && len <= KOP_LOG_LINE_MAX);
    assert_int_equal(got[len - 1], '\n');
    assert_ptr_equal(strchr(got, '\n'), got + len - 1); /* exactly one line */
    return got;
}

static void check_json(const char *line, bool want_truncated)
{
    json_error_t e;
    json_t *v = json_loads(line, 0, &e);
    if (!v)
        fail_msg("truncated line is not JSON (%s): %.200s", e.text, line);
    assert_int_equal(json_is_true(json_object_get(v, "truncated")), want_truncated);
    json_decref(v);
}

static void test_line_cap(void **state)
{
    (void)state;
    size_t big = 3 * KOP_LOG_LINE_MAX;
    char *s = malloc(big + 1);
    assert_non_null(s);
    /* Fill patterns: plain ASCII, 2-byte UTF-8, 3-byte UTF-8, control bytes (6-byte escapes),
     * quotes (2-byte escapes). Each must be cut at a unit boundary. */
    const char *units[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\x01", "\"", "a b"};
    for (size_t u = 0; u < KOP_ARRAY_LEN(units); u++) {
        size_t ul = strlen(units[u]), len = 0;
        while (len + ul <= big) {
            memcpy(s + len, units[u], ul);
            len += ul;
        }
        s[len] = '\0';
        for (int json = 0; json < 2; json++) {
            kop_log_format fmt = json ? KOP_LOG_JSON : KOP_LOG_TEXT;
            /* A huge value: cut, marked, later fields dropped. */
            kop_log_field f[] = {KOP_LOG_STR("k", "before"), KOP_LOG_STR("huge", s),
                                 KOP_LOG_STR("after", "dropped")};
            char *line = one_line(fmt, "big", f, 3);
            assert_true(strlen(line) > KOP_LOG_LINE_MAX - 64);
            assert_null(strstr(line, "dropped"));
            assert_non_null(strstr(line, "before"));
            if (json) {
                check_json(line, true);
            } else {
                size_t n = strlen(line);
                assert_string_equal(line + n - strlen(" truncated=true\n"), " truncated=true\n");
            }
            free(line);
            /* A huge message. */
            line = one_line(fmt, s, f, 1);
            if (json)
                check_json(line, true);
            else
                if (!strstr(line, "...") || !strstr(line, " truncated=true\n"))
                    fail_msg("unit %zu: %s", u, line + strlen(line) - 80);
            free(line);
        }
    }
    /* Many small fields: the line stops at a whole field. */
    kop_log_field *many = calloc(4000, sizeof *many);
    for (size_t i = 0; i < 4000; i++)
        many[i] = KOP_LOG_INT("field", (long long)i);
    char *line = one_line(KOP_LOG_JSON, "many", many, 4000);
    check_json(line, true);
    free(line);
    line = one_line(KOP_LOG_TEXT, "many", many, 4000);
    assert_non_null(strstr(line, " field=0 field=1 "));
    assert_non_null(strstr(line, " truncated=true\n"));
    free(line);
    free(many);

    /* Just under the cap nothing is cut. */
    size_t fixed = strlen(TS " INFO m v=\n");
    memset(s, 'x', KOP_LOG_LINE_MAX - 32 - fixed);
    s[KOP_LOG_LINE_MAX - 32 - fixed] = '\0';
    line = one_line(KOP_LOG_TEXT, "m", &KOP_LOG_STR("v", s), 1);
    assert_int_equal(strlen(line), KOP_LOG_LINE_MAX - 32);
    assert_null(strstr(line, "truncated"));
    free(line);
    free(s);
}

/* ---- concurrency -------------------------------------------------------- */

#define THREADS 8
#define LINES   600

struct reader {
    int fd;
    char *data;
    size_t len;
};

static void *read_all(void *arg)
{
    struct reader *r = arg;
    size_t cap = 1 << 20;
    r->data = malloc(cap);
    for (;;) {
        if (cap - r->len < 65536) {
            cap *= 2;
            r->data = realloc(r->data, cap);
        }
        ssize_t n = read(r->fd, r->data + r->len, cap - r->len - 1);
        if (n <= 0)
            break;
        r->len += (size_t)n;
    }
    r->data[r->len] = '\0';
    return NULL;
}

static kop_logger *shared_logger;

static void *write_lines(void *arg)
{
    int id = (int)(intptr_t)arg;
    char pad[7000];
    for (int i = 0; i < LINES; i++) {
        /* Lengths cross PIPE_BUF now and then; content includes escapes. */
        size_t n = (size_t)((i * 131 + id * 17) % (i % 50 == 0 ? 6500 : 300));
        memset(pad, 'a' + id, n);
        pad[n] = '\0';
        if (n > 3)
            pad[1] = '"', pad[2] = '\n';
        kop_logger_log(shared_logger, i % 3 ? KOP_LOG_INFO : KOP_LOG_WARN, "concurrent line",
                       KOP_LOG_INT("thread", id), KOP_LOG_INT("seq", i), KOP_LOG_STR("pad", pad));
    }
    return NULL;
}

static void test_concurrent_lines_whole(void **state)
{
    (void)state;
    for (int json = 0; json < 2; json++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        FILE *out = fdopen(p[1], "w");
        assert_non_null(out);
        struct reader r = {.fd = p[0]};
        pthread_t reader, writers[THREADS];
        assert_int_equal(pthread_create(&reader, NULL, read_all, &r), 0);
        kop_log_setup(&(kop_log_config){.format = json ? KOP_LOG_JSON : KOP_LOG_TEXT, .out = out});
        assert_int_equal(kop_logger_with(NULL, &shared_logger, KOP_LOG_STR("controller", "c")),
                         KOP_OK);
        for (int t = 0; t < THREADS; t++)
            assert_int_equal(
                pthread_create(&writers[t], NULL, write_lines, (void *)(intptr_t)t), 0);
        for (int t = 0; t < THREADS; t++)
            pthread_join(writers[t], NULL);
        kop_log_setup(NULL);
        fclose(out); /* the reader sees EOF */
        pthread_join(reader, NULL);
        close(p[0]);
        kop_logger_free(shared_logger);

        static int seen[THREADS][LINES];
        memset(seen, 0, sizeof seen);
        int lines = 0;
        char *save = NULL;
        for (char *line = strtok_r(r.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            int t = -1, i = -1;
            if (json) {
                json_error_t e;
                json_t *v = json_loads(line, 0, &e);
                if (!v)
                    fail_msg("line %d is not JSON (%s): %.120s", lines, e.text, line);
                t = (int)json_integer_value(json_object_get(v, "thread"));
                i = (int)json_integer_value(json_object_get(v, "seq"));
                const char *pad = json_string_value(json_object_get(v, "pad"));
                assert_non_null(pad);
                for (size_t k = 0; pad[k]; k++)
                    assert_true(pad[k] == 'a' + t || ((k == 1 || k == 2) && strlen(pad) > 3));
                json_decref(v);
            } else {
                if (sscanf(line, TS " %*s concurrent line controller=c thread=%d seq=%d", &t, &i) !=
                    2)
                    fail_msg("line %d is broken: %.120s", lines, line);
            }
            assert_true(t >= 0 && t < THREADS && i >= 0 && i < LINES);
            seen[t][i]++;
            lines++;
        }
        assert_int_equal(lines, THREADS * LINES);
        for (int t = 0; t < THREADS; t++)
            for (int i = 0; i < LINES; i++)
                assert_int_equal(seen[t][i], 1);
        free(r.data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_lines),
        cmocka_unit_test(test_macros_and_memstream),
        cmocka_unit_test(test_default_is_stderr),
        cmocka_unit_test(test_verbosity),
        cmocka_unit_test(test_context_loggers),
        cmocka_unit_test(test_line_cap),
        cmocka_unit_test(test_concurrent_lines_whole),
    };
    return cmocka_run_group_tests_name("log", tests, setup, teardown);
}

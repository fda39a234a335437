/*
 * test_client_watch.c - the watch-stream decoder yields the same events
 * however the network cuts the stream, skips blank lines and "\r", reports
 * bad lines and goes on, and refuses lines past its cap without holding
 * more than the cap.
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

/* A stream as the apiserver writes it, with the oddities a proxy may add:
 * CRLF endings, blank lines, multi-byte UTF-8 to split, and an ERROR. */
static const char fixture[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"boarding-pass\",\"namespace\":\"default\",\"uid\":"
    "\"6d1f2c3a-8a4e-4d1b-9a57-0c1f3e5b7d90\",\"resourceVersion\":\"1001\","
    "\"creationTimestamp\":\"2024-05-01T10:00:00Z\"},\"data\":{\"seat\":\"12A\","
    "\"greeting\":\"Gr\xc3\xbc\xc3\x9f" "e, \xe4\xb9\x97\xe5\xae\xa2 \xf0\x9f\x9b\xab\"}}}\n"
    "\r\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"boarding-pass\",\"namespace\":\"default\",\"resourceVersion\":\"1002\"},"
    "\"data\":{\"seat\":\"14C\"}}}\r\n"
    "\n"
    "   \n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"resourceVersion\":\"1003\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"boarding-pass\",\"namespace\":\"default\",\"resourceVersion\":\"1004\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 1000 (1004)\","
    "\"reason\":\"Expired\",\"code\":410}}\n";

/* The same with two bad lines inside, so error reporting is split-proof too. */
static const char fixture_with_errors[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":\n"
    "{\"type\":\"SYNC\",\"object\":{}}\r\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n";

/*
 * decode_chunks feeds data cut at the given lengths (the last chunk takes
 * the rest), drains after every feed, and returns a transcript: one line per
 * event ("TYPE {json}") or error ("!KOP_EPARSE message"). Caller frees it.
 */
static char *decode_chunks(const char *data, size_t len, const size_t *cuts, size_t ncuts,
                           size_t max_line)
{
    kop_buf t;
    kop_buf_init(&t, 1 << 24);
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, max_line);
    size_t off = 0;
    for (size_t i = 0; i <= ncuts && off <= len; i++) {
        size_t n = i < ncuts ? cuts[i] : len - off;
        if (n > len - off)
            n = len - off;
        kop_err err = kop__watch_decoder_feed(&d, data + off, n);
        off += n;
        if (err) {
            assert_int_equal(kop_buf_appendf(&t, "!%s\n", kop_err_name(err)), KOP_OK);
            break;
        }
        for (;;) {
            kop_watch_event ev;
            kop_status st;
            bool got;
            err = kop__watch_decoder_next(&d, &ev, &got, &st);
            if (err) {
                assert_int_equal(kop_buf_appendf(&t, "!%s %s\n", kop_err_name(err), st.message),
                                 KOP_OK);
                if (err == KOP_EPARSE)
                    continue;
                break;
            }
            if (!got)
                break;
            char *js = json_dumps(ev.object, JSON_COMPACT);
            assert_non_null(js);
            assert_int_equal(kop_buf_appendf(&t, "%s %s\n", kop_watch_type_name(ev.type), js),
                             KOP_OK);
            free(js);
            kop_watch_event_fini(&ev);
            assert_null(ev.object);
        }
        if (i == ncuts)
            break;
    }
    kop__watch_decoder_fini(&d);
    return kop_buf_take(&t, NULL);
}

static char *decode_whole(const char *data, size_t len, size_t max_line)
{
    return decode_chunks(data, len, NULL, 0, max_line);
}

/* The whole fixture at once gives the five events, in order, with their objects. */
static void test_fixture_events(void **state)
{
    (void)state;
    char *t = decode_whole(fixture, sizeof fixture - 1, 1 << 20);
    const char *want_types[] = {"ADDED ", "MODIFIED ", "BOOKMARK ", "DELETED ", "ERROR "};
    const char *p = t;
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(strncmp(p, want_types[i], strlen(want_types[i])), 0);
        p = strchr(p, '\n');
        assert_non_null(p);
        p++;
    }
    assert_string_equal(p, "");
    /* The UTF-8 survives decoding byte for byte (json_dumps escapes nothing by default). */
    assert_non_null(strstr(t, "Gr\xc3\xbc\xc3\x9f" "e, \xe4\xb9\x97\xe5\xae\xa2 \xf0\x9f\x9b\xab"));
    free(t);
}

/* Split the stream once at every byte position: the transcript never changes. */
static void check_every_split(const char *data, size_t len)
{
    char *want = decode_whole(data, len, 1 << 20);
    for (size_t cut = 0; cut <= len; cut++) {
        char *got = decode_chunks(data, len, &cut, 1, 1 << 20);
        if (strcmp(got, want) != 0)
            fail_msg("split at %zu:\n%s\nwant:\n%s", cut, got, want);
        free(got);
    }
    /* And two cuts around every position, which puts the middle piece inside
     * "\r\n" pairs and UTF-8 sequences of every length. */
    for (size_t cut = 0; cut + 3 <= len; cut++) {
        size_t cuts[2] = {cut, 3};
        char *got = decode_chunks(data, len, cuts, 2, 1 << 20);
        if (strcmp(got, want) != 0)
            fail_msg("cuts at %zu+3:\n%s\nwant:\n%s", cut, got, want);
        free(got);
    }
    free(want);
}

static void test_every_split_point(void **state)
{
    (void)state;
    check_every_split(fixture, sizeof fixture - 1);
    check_every_split(fixture_with_errors, sizeof fixture_with_errors - 1);
}

/* Byte by byte, and random chunk sizes from a fixed seed. */
static void test_random_chunking(void **state)
{
    (void)state;
    size_t len = sizeof fixture - 1;
    char *want = decode_whole(fixture, len, 1 << 20);
    size_t *cuts = malloc(len * sizeof *cuts);
    assert_non_null(cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = 1;
    char *got = decode_chunks(fixture, len, cuts, len, 1 << 20);
    assert_string_equal(got, want);
    free(got);

    uint32_t x = 0x2545F491; /* xorshift32: same sequence on every run */
    for (int round = 0; round < 500; round++) {
        size_t n = 0, sum = 0;
        while (sum < len) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            cuts[n] = 1 + x % (round < 250 ? 8 : 200);
            sum += cuts[n++];
        }
        got = decode_chunks(fixture, len, cuts, n, 1 << 20);
        if (strcmp(got, want) != 0)
            fail_msg("round %d:\n%s\nwant:\n%s", round, got, want);
        free(got);
    }
    free(cuts);
    free(want);
}

/* next_event drains one event that must be there. */
static void next_event(kop__watch_decoder *d, kop_watch_event *ev, kop_watch_type want)
{
    bool got = false;
    kop_status st;
    assert_int_equal(kop__watch_decoder_next(d, ev, &got, &st), KOP_OK);
    assert_true(got);
    assert_int_equal(ev->type, want);
    assert_true(json_is_object(ev->object));
}

/* next_none checks that nothing complete is buffered. */
static void next_none(kop__watch_decoder *d)
{
    kop_watch_event ev;
    bool got = true;
    assert_int_equal(kop__watch_decoder_next(d, &ev, &got, NULL), KOP_OK);
    assert_false(got);
    assert_null(ev.object);
}

static void test_crlf_and_blank_lines(void **state)
{
    (void)state;
    static const char s[] = "\r\n\n \t \r\n"
                            "{\"type\":\"ADDED\",\"object\":{\"a\":1}}\r\n"
                            "\r\n"
                            "{\"type\":\"DELETED\",\"object\":{\"a\":2}}\n"
                            "\n";
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    assert_int_equal(kop__watch_decoder_feed(&d, s, sizeof s - 1), KOP_OK);
    kop_watch_event ev;
    next_event(&d, &ev, KOP_WATCH_ADDED);
    assert_int_equal(json_integer_value(json_object_get(ev.object, "a")), 1);
    kop_watch_event_fini(&ev);
    next_event(&d, &ev, KOP_WATCH_DELETED);
    assert_int_equal(json_integer_value(json_object_get(ev.object, "a")), 2);
    kop_watch_event_fini(&ev);
    next_none(&d);
    /* Everything taken: the buffer was emptied without being compacted. */
    assert_int_equal(d.pending.len, 0);

    /* A final line without "\n" stays pending until its end arrives. */
    static const char tail[] = "{\"type\":\"MODIFIED\",\"object\":{}}";
    assert_int_equal(kop__watch_decoder_feed(&d, tail, sizeof tail - 1), KOP_OK);
    next_none(&d);
    assert_int_equal(kop__watch_decoder_feed(&d, "\r", 1), KOP_OK);
    next_none(&d);
    assert_int_equal(kop__watch_decoder_feed(&d, "\n", 1), KOP_OK);
    next_event(&d, &ev, KOP_WATCH_MODIFIED);
    kop_watch_event_fini(&ev);
    next_none(&d);
    kop__watch_decoder_fini(&d);
}

/* build_event returns a heap line "{"type":"ADDED","object":{...<payload>...}}\n". */
static char *build_event(size_t payload, size_t *len)
{
    static const char pre[] = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\","
                              "\"metadata\":{\"name\":\"big\"},\"data\":{\"blob\":\"";
    static const char post[] = "\"}}}\n";
    *len = sizeof pre - 1 + payload + sizeof post - 1;
    char *s = malloc(*len + 1);
    assert_non_null(s);
    memcpy(s, pre, sizeof pre - 1);
    for (size_t i = 0; i < payload; i++)
        s[sizeof pre - 1 + i] = (char)('a' + i % 26);
    memcpy(s + sizeof pre - 1 + payload, post, sizeof post);
    return s;
}

/* An event of 200 KiB under a 1 MiB cap, fed in 16 KiB and in 7-byte chunks. */
static void test_large_event(void **state)
{
    (void)state;
    size_t len;
    char *s = build_event(200 * 1024, &len);
    size_t steps[] = {16384, 7, len};
    for (size_t k = 0; k < KOP_ARRAY_LEN(steps); k++) {
        kop__watch_decoder d;
        kop__watch_decoder_init(&d, 1 << 20);
        for (size_t off = 0; off < len; off += steps[k]) {
            size_t n = len - off < steps[k] ? len - off : steps[k];
            assert_int_equal(kop__watch_decoder_feed(&d, s + off, n), KOP_OK);
            if (off + n < len)
                next_none(&d);
        }
        kop_watch_event ev;
        next_event(&d, &ev, KOP_WATCH_ADDED);
        json_t *blob = json_object_get(json_object_get(ev.object, "data"), "blob");
        assert_int_equal(json_string_length(blob), 200 * 1024);
        kop_watch_event_fini(&ev);
        next_none(&d);
        kop__watch_decoder_fini(&d);
    }
    free(s);
}

/* A line exactly max_line long is accepted, however it arrives. */
static void test_line_at_cap(void **state)
{
    (void)state;
    size_t len;
    char *s = build_event(3000, &len);
    size_t max_line = len - 1; /* without its "\n" */
    for (size_t step = 1; step <= len; step = step * 3 + 1) {
        kop__watch_decoder d;
        kop__watch_decoder_init(&d, max_line);
        for (size_t off = 0; off < len; off += step) {
            size_t n = len - off < step ? len - off : step;
            assert_int_equal(kop__watch_decoder_feed(&d, s + off, n), KOP_OK);
        }
        kop_watch_event ev;
        next_event(&d, &ev, KOP_WATCH_ADDED);
        kop_watch_event_fini(&ev);
        kop__watch_decoder_fini(&d);
    }
    free(s);
}

/* A line past the cap, trickled in: ETOOBIG, the buffer never held more than
 * the cap, and the decoder stays poisoned. */
static void test_line_over_cap(void **state)
{
    (void)state;
    const size_t max_line = 4096;
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, max_line);
    static const char first[] = "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",";
    assert_int_equal(kop__watch_decoder_feed(&d, first, sizeof first - 1), KOP_OK);
    kop_watch_event ev;
    next_event(&d, &ev, KOP_WATCH_ADDED);
    kop_watch_event_fini(&ev);
    next_none(&d);

    char chunk[100];
    memset(chunk, 'x', sizeof chunk);
    kop_err err = KOP_OK;
    size_t fed = sizeof first - 1, max_alloc = 0;
    while (!err && fed < 10 * max_line) {
        err = kop__watch_decoder_feed(&d, chunk, sizeof chunk);
        fed += sizeof chunk;
        if (!err) {
            assert_true(d.pending.len - d.line_start <= max_line);
            next_none(&d);
        }
        if (d.pending.cap_alloc > max_alloc)
            max_alloc = d.pending.cap_alloc;
    }
    assert_int_equal(err, KOP_ETOOBIG);
    assert_true(fed < max_line + 200); /* refused as soon as it passed the cap */
    assert_true(max_alloc <= 2 * (max_line + 1));
    assert_null(d.pending.data); /* the buffered bytes were released */

    /* Poisoned: the end of the line changes nothing. */
    assert_int_equal(kop__watch_decoder_feed(&d, "}}\n", 3), KOP_ETOOBIG);
    bool got = true;
    kop_status st;
    assert_int_equal(kop__watch_decoder_next(&d, &ev, &got, &st), KOP_ETOOBIG);
    assert_false(got);
    assert_null(ev.object);
    assert_non_null(strstr(st.message, "a line exceeds 4096 bytes"));
    kop__watch_decoder_fini(&d);
}

/* A complete line over the cap that arrives in one chunk fails in next, after
 * the events before it. */
static void test_complete_line_over_cap(void **state)
{
    (void)state;
    size_t len;
    char *big = build_event(500, &len);
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 200);
    static const char small[] = "{\"type\":\"ADDED\",\"object\":{}}\n";
    assert_int_equal(kop__watch_decoder_feed(&d, small, sizeof small - 1), KOP_OK);
    assert_int_equal(kop__watch_decoder_feed(&d, big, len), KOP_OK);
    kop_watch_event ev;
    next_event(&d, &ev, KOP_WATCH_ADDED);
    kop_watch_event_fini(&ev);
    bool got = true;
    assert_int_equal(kop__watch_decoder_next(&d, &ev, &got, NULL), KOP_ETOOBIG);
    assert_false(got);
    assert_int_equal(kop__watch_decoder_feed(&d, small, sizeof small - 1), KOP_ETOOBIG);
    kop__watch_decoder_fini(&d);
    free(big);
}

/* Many feeds before a drain are fine (libcurl may call back many times per
 * perform); past KOP__WATCH_BACKLOG_MAX undrained bytes the stream is refused. */
static void test_feed_without_draining(void **state)
{
    (void)state;
    kop_buf chunk;
    kop_buf_init(&chunk, 1 << 20);
    int per_chunk = 0;
    while (chunk.len < 60000) {
        assert_int_equal(kop_buf_appendf(&chunk,
                                         "{\"type\":\"ADDED\",\"object\":{\"metadata\":"
                                         "{\"name\":\"n%d\"}}}\n",
                                         per_chunk++),
                         KOP_OK);
    }
    /* End the chunk mid-line, so every feed also completes the previous line. */
    assert_int_equal(kop_buf_appends(&chunk, "{\"type\":\"ADDED\","), KOP_OK);
    static const char rest[] = "\"object\":{}}\n";

    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    /* 100 feeds, then one drain. */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(kop__watch_decoder_feed(&d, chunk.data, chunk.len), KOP_OK);
        assert_int_equal(kop__watch_decoder_feed(&d, rest, sizeof rest - 1), KOP_OK);
    }
    assert_int_equal(kop__watch_decoder_backlog(&d), 100 * (chunk.len + sizeof rest - 1));
    for (int i = 0; i < 100 * (per_chunk + 1); i++) {
        kop_watch_event ev;
        next_event(&d, &ev, KOP_WATCH_ADDED);
        kop_watch_event_fini(&ev);
    }
    next_none(&d);
    assert_int_equal(kop__watch_decoder_backlog(&d), 0);

    /* Never drained: refused once the backlog passes its cap. */
    kop_err err = KOP_OK;
    size_t fed = 0;
    while (!err && fed <= 2 * KOP__WATCH_BACKLOG_MAX) {
        err = kop__watch_decoder_feed(&d, chunk.data, chunk.len);
        fed += chunk.len;
    }
    assert_int_equal(err, KOP_ETOOBIG);
    assert_true(fed > KOP__WATCH_BACKLOG_MAX);
    assert_true(fed < KOP__WATCH_BACKLOG_MAX + 2 * chunk.len);
    kop_watch_event ev;
    bool got;
    kop_status st;
    assert_int_equal(kop__watch_decoder_next(&d, &ev, &got, &st), KOP_ETOOBIG);
    assert_non_null(strstr(st.message, "fed and not taken"));
    kop__watch_decoder_fini(&d);
    kop_buf_fini(&chunk);
}

struct bad_case {
    const char *line;
    const char *why; /* expected in the message */
};

static const struct bad_case bad_cases[] = {
    {"not json at all", "not JSON"},
    {"{\"type\":\"ADDED\",\"object\":", "not JSON"},
    {"{\"type\":\"ADDED\",\"object\":{}} trailing", "not JSON"},
    {"{\"type\":\"ADDED\",\"object\":{\"s\":\"\xff\xfe\"}}", "not JSON"}, /* bad UTF-8 */
    {"[1,2,3]", "not a JSON object"},
    {"\"ADDED\"", "not JSON"}, /* jansson wants an object or array at the top */
    {"{\"object\":{}}", "no \"type\" string"},
    {"{\"type\":1,\"object\":{}}", "no \"type\" string"},
    {"{\"type\":\"SYNC\",\"object\":{}}", "unknown type"},
    {"{\"type\":\"added\",\"object\":{}}", "unknown type"},
    {"{\"type\":\"ADDED\\u0000\",\"object\":{}}", "unknown type"},
    {"{\"type\":\"\",\"object\":{}}", "unknown type"},
    {"{\"type\":\"ADDED\"}", "no \"object\" object"},
    {"{\"type\":\"ADDED\",\"object\":[]}", "no \"object\" object"},
    {"{\"type\":\"ADDED\",\"object\":null}", "no \"object\" object"},
};

/* Each bad line fails with EPARSE and a quote of itself; the next line decodes. */
static void test_malformed_lines(void **state)
{
    (void)state;
    static const char good[] = "{\"type\":\"MODIFIED\",\"object\":{\"ok\":true}}\n";
    for (size_t i = 0; i < KOP_ARRAY_LEN(bad_cases); i++) {
        kop__watch_decoder d;
        kop__watch_decoder_init(&d, 1024);
        assert_int_equal(
            kop__watch_decoder_feed(&d, bad_cases[i].line, strlen(bad_cases[i].line)), KOP_OK);
        assert_int_equal(kop__watch_decoder_feed(&d, "\n", 1), KOP_OK);
        assert_int_equal(kop__watch_decoder_feed(&d, good, sizeof good - 1), KOP_OK);
        kop_watch_event ev;
        bool got = true;
        kop_status st;
        kop_status_clear(&st);
        assert_int_equal(kop__watch_decoder_next(&d, &ev, &got, &st), KOP_EPARSE);
        assert_false(got);
        assert_null(ev.object);
        if (!strstr(st.message, bad_cases[i].why))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, st.message, bad_cases[i].why);
        for (const char *p = st.message; *p; p++)
            assert_true(*p >= 0x20 && *p < 0x7f);
        next_event(&d, &ev, KOP_WATCH_MODIFIED);
        kop_watch_event_fini(&ev);
        next_none(&d);
        kop__watch_decoder_fini(&d);
    }
}

/* The message quotes a capped excerpt of a long bad line. */
static void test_malformed_excerpt_capped(void **state)
{
    (void)state;
    size_t len;
    char *s = build_event(5000, &len);
    s[len - 3] = ','; /* "}}}\n" -> "},}\n": invalid */
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1 << 16);
    assert_int_equal(kop__watch_decoder_feed(&d, s, len), KOP_OK);
    kop_watch_event ev;
    bool got;
    kop_status st;
    assert_int_equal(kop__watch_decoder_next(&d, &ev, &got, &st), KOP_EPARSE);
    assert_true(strlen(st.message) < 200);
    assert_non_null(strstr(st.message, "...\""));
    next_none(&d);
    kop__watch_decoder_fini(&d);
    free(s);
}

/* A watch that fell too far behind ends with ERROR and a 410 Status. */
static void test_error_event_gone(void **state)
{
    (void)state;
    static const char gone[] =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
        "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: "
        "5 (10)\",\"reason\":\"Gone\",\"code\":410}}\n"
        /* What current apiservers send for the same condition: reason Expired. */
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
        "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: "
        "5 (10)\",\"reason\":\"Expired\",\"code\":410}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"code\":410}}\n";
    const kop_err want[] = {KOP_EGONE, KOP_EEXPIRED, KOP_EGONE};
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    assert_int_equal(kop__watch_decoder_feed(&d, gone, sizeof gone - 1), KOP_OK);
    for (size_t i = 0; i < KOP_ARRAY_LEN(want); i++) {
        kop_watch_event ev;
        next_event(&d, &ev, KOP_WATCH_ERROR);
        kop_status st;
        assert_int_equal(kop__status_from_json(ev.object, &st), want[i]);
        assert_int_equal(st.code, 410);
        if (i < 2)
            assert_string_equal(st.message, "too old resource version: 5 (10)");
        else
            assert_string_equal(st.message, "Gone");
        kop_watch_event_fini(&ev);
    }
    next_none(&d);
    kop__watch_decoder_fini(&d);
}

/* A BOOKMARK carries only the resourceVersion (and the initial-events marker). */
static void test_bookmark(void **state)
{
    (void)state;
    static const char bm[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"FlightTicket\",\"apiVersion\":"
        "\"flights.com/v1\",\"metadata\":{\"resourceVersion\":\"48213\",\"creationTimestamp\":"
        "null,\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},\"spec\":{}}}\n";
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    assert_int_equal(kop__watch_decoder_feed(&d, bm, sizeof bm - 1), KOP_OK);
    kop_watch_event ev;
    next_event(&d, &ev, KOP_WATCH_BOOKMARK);
    json_t *meta = json_object_get(ev.object, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "resourceVersion")), "48213");
    kop_watch_event_fini(&ev);
    next_none(&d);
    kop__watch_decoder_fini(&d);
}

/* Thousands of events in one chunk are all returned, in order. */
static void test_many_events_one_chunk(void **state)
{
    (void)state;
    kop_buf s;
    kop_buf_init(&s, 1 << 20);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(kop_buf_appendf(&s,
                                         "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":"
                                         "\"t%d\",\"resourceVersion\":\"%d\"}}}\n",
                                         i, 100 + i),
                         KOP_OK);
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    assert_int_equal(kop__watch_decoder_feed(&d, s.data, s.len), KOP_OK);
    for (int i = 0; i < 5000; i++) {
        kop_watch_event ev;
        next_event(&d, &ev, KOP_WATCH_ADDED);
        json_t *rv = json_object_get(json_object_get(ev.object, "metadata"), "resourceVersion");
        assert_int_equal(atoi(json_string_value(rv)), 100 + i);
        kop_watch_event_fini(&ev);
    }
    next_none(&d);
    kop__watch_decoder_fini(&d);
    kop_buf_fini(&s);
}

/* "\u0000" inside a string is kept, not a parse failure. */
static void test_nul_in_string(void **state)
{
    (void)state;
    static const char s[] = "{\"type\":\"ADDED\",\"object\":{\"data\":{\"k\":\"a\\u0000b\"}}}\n";
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 1024);
    assert_int_equal(kop__watch_decoder_feed(&d, s, sizeof s - 1), KOP_OK);
    kop_watch_event ev;
    next_event(&d, &ev, KOP_WATCH_ADDED);
    json_t *k = json_object_get(json_object_get(ev.object, "data"), "k");
    assert_int_equal(json_string_length(k), 3);
    kop_watch_event_fini(&ev);
    kop__watch_decoder_fini(&d);
}

/* cut_text runs kop__cut_managed_fields on text and returns the result (static storage). */
static const char *cut_text(const char *text)
{
    static char buf[1024];
    size_t n = strlen(text);
    assert_true(n < sizeof buf);
    memcpy(buf, text, n + 1);
    n = kop__cut_managed_fields(buf, n);
    buf[n] = '\0';
    return buf;
}

/* The cut removes .object.metadata.managedFields as written, with one comma, and nothing else. */
static void test_cut_managed_fields(void **state)
{
    (void)state;
    /* In the middle, first, last and alone; arrays holding brackets and quotes in strings. */
    assert_string_equal(
        cut_text("{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"p\","
                 "\"managedFields\":[{\"f\":\"]}\\\"[\"}],\"labels\":{}},"
                 "\"spec\":{\"managedFields\":[1]}}}"),
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"p\",\"labels\":{}},"
        "\"spec\":{\"managedFields\":[1]}}}");
    assert_string_equal(cut_text("{\"object\":{\"metadata\":{\"managedFields\":[[]],\"a\":1}}}"),
                        "{\"object\":{\"metadata\":{\"a\":1}}}");
    assert_string_equal(cut_text("{\"object\":{\"metadata\":{\"a\":1,\"managedFields\":null}}}"),
                        "{\"object\":{\"metadata\":{\"a\":1}}}");
    assert_string_equal(cut_text("{\"object\":{\"metadata\":{\"managedFields\":[]}}}"),
                        "{\"object\":{\"metadata\":{}}}");
    /* Spaces around the tokens, and every duplicate. */
    assert_string_equal(
        cut_text("{ \"object\" : { \"metadata\" : { \"managedFields\" : [ ] , \"x\" : 1 ,"
                 " \"managedFields\":[2] } } }"),
        "{ \"object\" : { \"metadata\" : { \"x\" : 1  } } }"); /* spaces stay */
    /* Left alone: elsewhere, another value type, a key written with escapes, broken text. */
    static const char *const kept[] = {
        "{\"object\":{\"spec\":{\"managedFields\":[1]}}}",
        "{\"metadata\":{\"managedFields\":[1]}}",
        "{\"object\":{\"metadata\":{\"managedFields\":{\"a\":1}}}}",
        "{\"object\":{\"metadata\":{\"managed\\u0046ields\":[1]}}}",
        "{\"object\":{\"metadata\":{\"managedFields\":[1,\"]}}}",
        "{\"object\":{\"metadata\":[\"managedFields\",[1]]}}",
        "[{\"object\":{\"metadata\":{\"managedFields\":[1]}}}]",
        "{\"object\":{\"metadata\":{\"managedFields\"",
        "",
    };
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        assert_string_equal(cut_text(kept[i]), kept[i]);
    /* A NUL byte anywhere: left whole (fuzz_managed_fields found a cut next to one that
     * turned a line jansson accepts into one it refuses). */
    static const char nul[] = "{\"object\":{\"metadata\":{\"a\":1,\"managedFields\":null\0}}}";
    char nul_buf[sizeof nul];
    memcpy(nul_buf, nul, sizeof nul);
    assert_int_equal(kop__cut_managed_fields(nul_buf, sizeof nul - 1), sizeof nul - 1);
    assert_memory_equal(nul_buf, nul, sizeof nul);

    /* Through the decoder: only when asked for. */
    static const char ev[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\","
                             "\"managedFields\":[{\"manager\":\"m\"}]}}}\n";
    for (int drop = 0; drop <= 1; drop++) {
        kop__watch_decoder d;
        kop_watch_event e;
        kop__watch_decoder_init(&d, 1024);
        d.drop_managed_fields = drop;
        assert_int_equal(kop__watch_decoder_feed(&d, ev, sizeof ev - 1), KOP_OK);
        next_event(&d, &e, KOP_WATCH_ADDED);
        json_t *meta = json_object_get(e.object, "metadata");
        assert_string_equal(json_string_value(json_object_get(meta, "name")), "a");
        assert_int_equal(json_object_get(meta, "managedFields") == NULL, drop);
        kop_watch_event_fini(&e);
        kop__watch_decoder_fini(&d);
    }
}

static void test_edges(void **state)
{
    (void)state;
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, 16);
    next_none(&d);
    assert_int_equal(kop__watch_decoder_feed(&d, "", 0), KOP_OK);
    assert_int_equal(kop__watch_decoder_feed(&d, NULL, 0), KOP_OK);
    next_none(&d);
    kop__watch_decoder_fini(&d);
    kop__watch_decoder_fini(&d); /* twice is harmless */
    kop__watch_decoder_fini(NULL);
    kop_watch_event_fini(NULL);

    /* A huge max_line is clamped, not overflowed. */
    kop__watch_decoder_init(&d, SIZE_MAX);
    assert_int_equal(kop__watch_decoder_feed(&d, "{", 1), KOP_OK);
    next_none(&d);
    kop__watch_decoder_fini(&d);

    assert_string_equal(kop_watch_type_name(KOP_WATCH_ADDED), "ADDED");
    assert_string_equal(kop_watch_type_name(KOP_WATCH_MODIFIED), "MODIFIED");
    assert_string_equal(kop_watch_type_name(KOP_WATCH_DELETED), "DELETED");
    assert_string_equal(kop_watch_type_name(KOP_WATCH_BOOKMARK), "BOOKMARK");
    assert_string_equal(kop_watch_type_name(KOP_WATCH_ERROR), "ERROR");
    assert_string_equal(kop_watch_type_name((kop_watch_type)0), "UNKNOWN");
    assert_string_equal(kop_watch_type_name((kop_watch_type)99), "UNKNOWN");
    assert_string_equal(kop_watch_type_name((kop_watch_type)-1), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_events),
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_random_chunking),
        cmocka_unit_test(test_crlf_and_blank_lines),
        cmocka_unit_test(test_large_event),
        cmocka_unit_test(test_line_at_cap),
        cmocka_unit_test(test_line_over_cap),
        cmocka_unit_test(test_complete_line_over_cap),
        cmocka_unit_test(test_feed_without_draining),
        cmocka_unit_test(test_malformed_lines),
        cmocka_unit_test(test_malformed_excerpt_capped),
        cmocka_unit_test(test_error_event_gone),
        cmocka_unit_test(test_bookmark),
        cmocka_unit_test(test_many_events_one_chunk),
        cmocka_unit_test(test_nul_in_string),
        cmocka_unit_test(test_cut_managed_fields),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests_name("client_watch", tests, NULL, NULL);
}

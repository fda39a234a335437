/*
 * test_ctf_duration.c - durations, times and lifetimes (operators/ctf/core/
 * duration.c): Go-style durations to the millisecond with their overflow
 * edges (some found by fuzzing), RFC 3339 times read and written (epochs
 * computed with Python's calendar.timegm), and the lifetime rules: where an
 * instance expires (default, requested, clamped to max and to creation) and
 * how far a renewal moves it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_fixture.h"
#include "core/duration.h"

struct dur_case {
    const char *s;
    kop_err err;
    int64_t ms;
};

static const struct dur_case dur_cases[] = {
    {"30m", KOP_OK, 1800000},
    {"1h30m", KOP_OK, 5400000},
    {"1.5h", KOP_OK, 5400000},
    {"250ms", KOP_OK, 250},
    {"1h0m0s", KOP_OK, 3600000},
    {"2h45m30.5s", KOP_OK, 9930500},
    {"1m1ms", KOP_OK, 60001},
    {"0", KOP_OK, 0},
    {"0s", KOP_OK, 0},
    {".5s", KOP_OK, 500},
    {"1.s", KOP_OK, 1000},
    {"1.0000000001h", KOP_OK, 3600000}, /* beyond nine fraction digits: ignored */
    {"0.0001s", KOP_OK, 0},             /* below a millisecond: truncated */
    {"9223372036854775807ms", KOP_OK, INT64_MAX},
    {"2562047788015h", KOP_OK, 2562047788015LL * 3600000},
    {"9223372036854775808ms", KOP_EINVAL, 0},
    {"2562047788016h", KOP_EINVAL, 0},
    {"2562047788015h1h", KOP_EINVAL, 0},
    {"2562047788015.999h", KOP_EINVAL, 0}, /* found by fuzzing: the fraction overflowed */
    {"99999999999999999999999h", KOP_EINVAL, 0},
    {"", KOP_EINVAL, 0},
    {"30", KOP_EINVAL, 0},
    {"m", KOP_EINVAL, 0},
    {".", KOP_EINVAL, 0},
    {".s", KOP_EINVAL, 0},
    {"1x", KOP_EINVAL, 0},
    {"1d", KOP_EINVAL, 0},
    {"-1h", KOP_EINVAL, 0},
    {"+1h", KOP_EINVAL, 0},
    {"1h ", KOP_EINVAL, 0},
    {" 1h", KOP_EINVAL, 0},
    {"1hh", KOP_EINVAL, 0},
    {"h1", KOP_EINVAL, 0},
    {"1e3s", KOP_EINVAL, 0},
    {"1.5.5h", KOP_EINVAL, 0},
    {"1h30", KOP_EINVAL, 0},
};

static void test_durations(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(dur_cases); i++) {
        int64_t ms = -1;
        kop_err err = ctf_parse_duration(dur_cases[i].s, &ms);
        if (err != dur_cases[i].err)
            fail_msg("\"%s\": %s, want %s", dur_cases[i].s, kop_err_name(err),
                     kop_err_name(dur_cases[i].err));
        if (!err && ms != dur_cases[i].ms)
            fail_msg("\"%s\": %lld ms, want %lld", dur_cases[i].s, (long long)ms,
                     (long long)dur_cases[i].ms);
    }
    int64_t ms;
    assert_int_equal(ctf_parse_duration(NULL, &ms), KOP_EINVAL);
}

struct time_case {
    const char *s;
    kop_err err;
    time_t t;
};

/* Epochs: python3 -c "import calendar; print(calendar.timegm((2024,2,29,0,0,0)))" etc. */
static const struct time_case time_cases[] = {
    {"2026-11-21T10:00:00Z", KOP_OK, T0},
    {"2026-11-21T10:00:00.123456Z", KOP_OK, T0},
    {"2026-11-21t10:00:00z", KOP_OK, T0},
    {"2026-11-21 10:00:00Z", KOP_OK, T0},
    {"2026-11-21T12:00:00+02:00", KOP_OK, T0},
    {"2026-11-21T05:30:00-04:30", KOP_OK, T0},
    {"2026-11-21T09:59:60Z", KOP_OK, T0},
    {"2024-02-29T00:00:00Z", KOP_OK, 1709164800},
    {"1970-01-01T00:00:00Z", KOP_OK, 0},
    {"2026-02-29T00:00:00Z", KOP_EINVAL, 0},
    {"2026-13-01T00:00:00Z", KOP_EINVAL, 0},
    {"2026-11-31T00:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21T24:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21T10:60:00Z", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00.Z", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00Zjunk", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00+0200", KOP_EINVAL, 0},
    {"2026-1-21T10:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21", KOP_EINVAL, 0},
    {"", KOP_EINVAL, 0},
};

static void test_times(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(time_cases); i++) {
        time_t t = -1;
        kop_err err = ctf_parse_time(time_cases[i].s, &t);
        if (err != time_cases[i].err)
            fail_msg("\"%s\": %s", time_cases[i].s, kop_err_name(err));
        if (!err && t != time_cases[i].t)
            fail_msg("\"%s\": %lld, want %lld", time_cases[i].s, (long long)t,
                     (long long)time_cases[i].t);
    }
    char out[CTF_TIME_SIZE];
    assert_int_equal(ctf_format_time(T0, out), KOP_OK);
    assert_string_equal(out, "2026-11-21T10:00:00Z");
    assert_int_equal(ctf_format_time(0, out), KOP_OK);
    assert_string_equal(out, "1970-01-01T00:00:00Z");
    /* Found by fuzzing: years are always four digits, and beyond 9999 refused
     * (RFC 3339 and the CRD's date-time format have no other). */
    assert_int_equal(ctf_format_time((time_t)-43499289600LL, out), KOP_OK); /* 0591-07-... */
    assert_int_equal(strlen(out), 20);
    assert_int_equal(out[0], '0');
    assert_int_equal(ctf_format_time((time_t)253402300800LL, out), KOP_EINVAL); /* 10000-01-01 */
    assert_string_equal(out, "");
    /* Round trip. */
    for (time_t t = T0 - 86400 * 400; t < T0 + 86400 * 400; t += 86400 * 7 + 3599) {
        time_t back;
        assert_int_equal(ctf_format_time(t, out), KOP_OK);
        assert_int_equal(ctf_parse_time(out, &back), KOP_OK);
        assert_int_equal(back, t);
    }
}

struct life_case {
    const char *lifetime; /* spec.lifetime JSON, NULL: absent */
    char op;              /* 'e' expiry, 'r' renew */
    const char *requested;
    time_t expiry; /* current expiry for 'r' (offset from T0) */
    kop_err err;
    time_t want; /* offset from T0 */
};

static const struct life_case life_cases[] = {
    /* Expiry: default, requested, clamped to max and to creation. */
    {NULL, 'e', NULL, 0, KOP_OK, 1800},
    {"{'default':'1h','max':'2h'}", 'e', NULL, 0, KOP_OK, 3600},
    {NULL, 'e', "2026-11-21T11:30:00Z", 0, KOP_OK, 5400},
    {NULL, 'e', "2026-11-21T20:00:00Z", 0, KOP_OK, 7200},
    {"{'max':'3h'}", 'e', "2026-11-21T20:00:00+08:00", 0, KOP_OK, 7200},
    {NULL, 'e', "2026-11-21T09:00:00Z", 0, KOP_OK, 0},
    {NULL, 'e', "tomorrow", 0, KOP_EINVAL, 0},
    {"{'default':'3h'}", 'e', NULL, 0, KOP_EINVAL, 0},
    /* Renewal: extends by renewBy, clamps at max, refuses at max. */
    {NULL, 'r', NULL, 1800, KOP_OK, 3600},
    {NULL, 'r', NULL, 6000, KOP_OK, 7200},
    {NULL, 'r', NULL, 7200, KOP_ECONFLICT, 0},
    {NULL, 'r', NULL, 8000, KOP_ECONFLICT, 0},
    {"{'default':'10m','max':'1h','renewBy':'45m'}", 'r', NULL, 600, KOP_OK, 3300},
    {"{'default':'10m','max':'1h','renewBy':'45m'}", 'r', NULL, 3300, KOP_OK, 3600},
    {"{'renewBy':'soon'}", 'r', NULL, 600, KOP_EINVAL, 0},
};

static void test_lifetimes(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(life_cases); i++) {
        const struct life_case *c = &life_cases[i];
        json_t *spec = parse("{}");
        if (c->lifetime)
            json_object_set_new(spec, "lifetime", parse(c->lifetime));
        time_t got = 0;
        kop_status st;
        kop_err err = c->op == 'e' ? ctf_expiry(T0, spec, c->requested, &got, &st)
                                   : ctf_renew(T0, T0 + c->expiry, spec, &got, &st);
        if (err != c->err)
            fail_msg("case %zu: %s, want %s (%s)", i, kop_err_name(err), kop_err_name(c->err),
                     st.message);
        if (!err && got != T0 + c->want)
            fail_msg("case %zu: T0%+lld, want T0%+lld", i, (long long)(got - T0),
                     (long long)c->want);
        if (err == KOP_ECONFLICT)
            assert_int_equal(st.code, 409);
        json_decref(spec);
    }

    ctf_lifetime lt;
    json_t *spec = parse("{'lifetime':{'max':'90m'},'startTimeout':'2m30s'}");
    assert_int_equal(ctf_lifetime_parse(spec, &lt, NULL), KOP_OK);
    assert_int_equal(lt.default_ms, CTF_LIFETIME_DEFAULT_MS);
    assert_int_equal(lt.max_ms, 90 * 60 * 1000);
    assert_int_equal(lt.renew_ms, CTF_LIFETIME_RENEW_MS);
    assert_int_equal(lt.start_timeout_ms, 150000);
    json_decref(spec);
    assert_int_equal(ctf_lifetime_parse(NULL, &lt, NULL), KOP_OK);
    assert_int_equal(lt.start_timeout_ms, CTF_START_TIMEOUT_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_lifetimes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

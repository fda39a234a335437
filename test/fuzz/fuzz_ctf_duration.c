/*
 * fuzz_ctf_duration.c - libFuzzer target for the CTF operator's duration,
 * time and lifetime parsers (operators/ctf/core/duration.h).
 *
 * Input layout: fields separated by '\n' or NUL; a missing field is absent.
 *   0  a duration for ctf_parse_duration
 *   1  an RFC 3339 time for ctf_parse_time; when it parses it is also the
 *      Challenge's creation time (else 2026-11-21T10:00:00Z)
 *   2-4  spec.lifetime.default, .max, .renewBy
 *   5  spec.startTimeout
 *   6  the requested expiry (a Challenge's spec.expiresAt) for ctf_expiry
 *   7  the current expiry for ctf_renew (else ctf_expiry's result)
 * Invariants checked, abort() on violation:
 *  - a parsed duration is >= 0; a parsed lifetime is positive, default <=
 *    max, and agrees field by field with ctf_parse_duration;
 *  - ctf_expiry and ctf_renew fail exactly when the lifetime does;
 *  - ctf_expiry's result lies in [created, created + max] and is the
 *    requested (or default) expiry clamped into that range;
 *  - ctf_renew never goes backwards nor beyond created + max, and refuses
 *    (ECONFLICT) exactly when the expiry already is at created + max;
 *  - whatever ctf_format_time writes, ctf_parse_time reads back to the
 *    same second.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/duration.h"

#define FIELDS 8
#define T0     ((time_t)1795255200) /* 2026-11-21T10:00:00Z */


/* cap_of is created + ms (whole seconds), saturated at INT64_MAX, computed exactly. */
static time_t cap_of(time_t created, int64_t ms)
{
    __int128 c = (__int128)created + ms / 1000;
    return c > INT64_MAX ? (time_t)INT64_MAX : (time_t)c;
}

/* round_trip checks that a time ctf_format_time writes parses back to itself. */
static void round_trip(time_t t)
{
    char out[CTF_TIME_SIZE];
    time_t back = 0;
    if (ctf_format_time(t, out) != KOP_OK) {
        FUZZ_CHECK(out[0] == '\0');
        return;
    }
    FUZZ_CHECK(strlen(out) == 20);
    FUZZ_CHECK(ctf_parse_time(out, &back) == KOP_OK);
    FUZZ_CHECK(back == t);
}

/* lifetime_spec builds {lifetime: {default, max, renewBy}, startTimeout} from fields 2-5. */
static json_t *lifetime_spec(char *const f[FIELDS])
{
    static const char *const keys[] = {"default", "max", "renewBy"};
    json_t *spec = json_object(), *lifetime = json_object();
    FUZZ_CHECK(spec && lifetime);
    for (size_t i = 0; i < 3; i++)
        if (f[2 + i])
            FUZZ_CHECK(json_object_set_new(lifetime, keys[i], json_string_nocheck(f[2 + i])) == 0);
    if (json_object_size(lifetime) > 0)
        FUZZ_CHECK(json_object_set(spec, "lifetime", lifetime) == 0);
    json_decref(lifetime);
    if (f[5])
        FUZZ_CHECK(json_object_set_new(spec, "startTimeout", json_string_nocheck(f[5])) == 0);
    return spec;
}

/* field_agrees checks a parsed lifetime field against ctf_parse_duration of its text. */
static void field_agrees(const char *s, int64_t parsed, int64_t dflt)
{
    int64_t ms = -1;
    if (!s) {
        FUZZ_CHECK(parsed == dflt);
        return;
    }
    FUZZ_CHECK(ctf_parse_duration(s, &ms) == KOP_OK);
    FUZZ_CHECK(ms == parsed && ms > 0);
}

static void lifetimes(char *const f[FIELDS], time_t created)
{
    json_t *spec = lifetime_spec(f);
    ctf_lifetime lt;
    kop_status st;
    kop_err lerr = ctf_lifetime_parse(spec, &lt, &st);
    FUZZ_CHECK(lerr == KOP_OK || lerr == KOP_EINVAL);
    if (lerr == KOP_OK) {
        field_agrees(f[2], lt.default_ms, CTF_LIFETIME_DEFAULT_MS);
        field_agrees(f[3], lt.max_ms, CTF_LIFETIME_MAX_MS);
        field_agrees(f[4], lt.renew_ms, CTF_LIFETIME_RENEW_MS);
        field_agrees(f[5], lt.start_timeout_ms, CTF_START_TIMEOUT_MS);
        FUZZ_CHECK(lt.default_ms <= lt.max_ms);
    } else {
        FUZZ_CHECK(st.message[0] != '\0');
    }

    /* Expiry: the requested time (or the default) clamped into [created, cap]. */
    time_t expires = 0, requested = 0;
    kop_err eerr = ctf_expiry(created, spec, f[6], &expires, &st);
    bool req_ok = f[6] && ctf_parse_time(f[6], &requested) == KOP_OK;
    if (lerr) {
        FUZZ_CHECK(eerr == KOP_EINVAL);
    } else if (f[6] && !req_ok) {
        FUZZ_CHECK(eerr == KOP_EINVAL);
    } else {
        time_t cap = cap_of(created, lt.max_ms);
        time_t want = f[6] ? requested : cap_of(created, lt.default_ms);
        want = want > cap ? cap : want < created ? created : want;
        FUZZ_CHECK(eerr == KOP_OK);
        FUZZ_CHECK(expires >= created && expires <= cap);
        FUZZ_CHECK(expires == want);
        round_trip(expires);
    }

    /* Renewals from field 7 (or from the expiry above), chained a few times. */
    time_t expiry = created;
    if (!f[7] || ctf_parse_time(f[7], &expiry) != KOP_OK)
        expiry = eerr == KOP_OK ? expires : created;
    for (int i = 0; i < 8; i++) {
        time_t next = 0;
        kop_err rerr = ctf_renew(created, expiry, spec, &next, &st);
        if (lerr) {
            FUZZ_CHECK(rerr == KOP_EINVAL);
            break;
        }
        time_t cap = cap_of(created, lt.max_ms);
        if (expiry >= cap) {
            FUZZ_CHECK(rerr == KOP_ECONFLICT && st.code == 409);
            break;
        }
        FUZZ_CHECK(rerr == KOP_OK);
        FUZZ_CHECK(next >= expiry && next <= cap);
        FUZZ_CHECK(next == (cap_of(expiry, lt.renew_ms) < cap ? cap_of(expiry, lt.renew_ms) : cap));
        round_trip(next);
        expiry = next;
    }
    json_decref(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *f[FIELDS] = {0};
    size_t n = 0, start = 0;

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    /* Split at every '\n' or NUL into at most FIELDS strings; the last keeps the rest. */
    for (size_t i = 0; i <= size && n < FIELDS; i++) {
        if (i == size || ((copy[i] == '\n' || copy[i] == '\0') && n < FIELDS - 1)) {
            copy[i] = '\0';
            f[n++] = copy + start;
            start = i + 1;
        }
    }

    /* Durations. */
    int64_t ms = -1;
    time_t created = T0, t = 0;
    if (f[0] && ctf_parse_duration(f[0], &ms) == KOP_OK) {
        FUZZ_CHECK(ms >= 0);
        round_trip(T0 + (time_t)(ms / 1000));
        round_trip(T0 - (time_t)(ms / 1000));
    }

    /* Times: whatever parses formats back (when representable) to the same second. */
    if (f[1] && ctf_parse_time(f[1], &t) == KOP_OK) {
        round_trip(t);
        created = t;
    }
    if (size >= 8) {
        int64_t raw;
        memcpy(&raw, data + size - 8, sizeof raw);
        round_trip((time_t)raw);
    }

    lifetimes(f, created);
    free(copy);
    return 0;
}

/*
 * duration.c - Go-style durations, RFC 3339 times and instance lifetimes
 * (see duration.h).
 *
 * Workload: a handful of calls per reconcile and per API request, on short
 * strings from the definition and the Challenge. The parsers are strict and
 * overflow-checked because their input is written by people (definitions)
 * and by clients of the API (expiresAt).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/definition.h"
#include "core/duration.h"

#define REASON_INVALID "InvalidDefinition"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- durations ---------------------------------------------------------- */

/*
 * unit_ms reads a unit at *p, advancing past it, and returns its length in
 * milliseconds, or 0 when there is none. "ms" is tried before "m".
 */
static int64_t unit_ms(const char **p)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (strncmp(*p, units[i].name, n) == 0) {
            *p += n;
            return units[i].ms;
        }
    }
    return 0;
}

kop_err ctf_parse_duration(const char *s, int64_t *ms)
{
    int64_t total = 0;
    const char *p = s;

    if (!s || !*s || !ms)
        return KOP_EINVAL;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return KOP_OK;
    }
    while (*p) {
        /* <int>[.<frac>]: at least one digit on one side of the point. */
        uint64_t whole = 0, frac = 0, scale = 1;
        bool digits = false;
        for (; is_digit(*p); p++, digits = true) {
            if (whole > (UINT64_MAX - 9) / 10)
                return KOP_EINVAL;
            whole = whole * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            /* Nine digits are a nanosecond of an hour: plenty, and the product stays small. */
            for (p++; is_digit(*p); p++, digits = true) {
                if (scale < 1000000000u) {
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    scale *= 10;
                }
            }
        }
        int64_t unit = unit_ms(&p);
        if (!digits || unit == 0)
            return KOP_EINVAL;
        if (whole > (uint64_t)(INT64_MAX / unit))
            return KOP_EINVAL;
        /* Unsigned: the fraction may carry a whole just under INT64_MAX past it. */
        uint64_t v = whole * (uint64_t)unit + frac * (uint64_t)unit / scale;
        if (v > (uint64_t)INT64_MAX || total > INT64_MAX - (int64_t)v)
            return KOP_EINVAL;
        total += (int64_t)v;
    }
    *ms = total;
    return KOP_OK;
}

/* ---- lifetimes ---------------------------------------------------------- */

/*
 * field_duration reads obj[key] into *ms, leaving the default there when the
 * field is absent. It must be a positive duration; path names it in messages.
 */
static kop_err field_duration(const json_t *obj, const char *key, const char *path, int64_t *ms,
                              kop_status *st)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return KOP_OK;
    const char *s = json_string_value(v);
    int64_t parsed = 0;
    if (!s || ctf_parse_duration(s, &parsed) != KOP_OK) {
        kop_status_setf(st, 0, REASON_INVALID, "%s \"%s\" is not a duration such as 30m or 1h30m.",
                        path, s ? s : "(not a string)");
        return KOP_EINVAL;
    }
    if (parsed <= 0) {
        kop_status_setf(st, 0, REASON_INVALID, "%s must be longer than zero.", path);
        return KOP_EINVAL;
    }
    *ms = parsed;
    return KOP_OK;
}

kop_err ctf_lifetime_parse(const json_t *spec, ctf_lifetime *out, kop_status *st)
{
    ctf_lifetime lt = {CTF_LIFETIME_DEFAULT_MS, CTF_LIFETIME_MAX_MS, CTF_LIFETIME_RENEW_MS,
                       CTF_START_TIMEOUT_MS};
    const json_t *lifetime = json_object_get(spec, "lifetime");
    kop_err err = KOP_OK;

    if (lifetime && !json_is_null(lifetime) && !json_is_object(lifetime)) {
        kop_status_setf(st, 0, REASON_INVALID, "spec.lifetime must be an object.");
        return KOP_EINVAL;
    }
    err = field_duration(lifetime, "default", "spec.lifetime.default", &lt.default_ms, st);
    if (!err)
        err = field_duration(lifetime, "max", "spec.lifetime.max", &lt.max_ms, st);
    if (!err)
        err = field_duration(lifetime, "renewBy", "spec.lifetime.renewBy", &lt.renew_ms, st);
    if (!err)
        err = field_duration(spec, "startTimeout", "spec.startTimeout", &lt.start_timeout_ms, st);
    if (!err && lt.default_ms > lt.max_ms) {
        kop_status_setf(st, 0, REASON_INVALID,
                        "spec.lifetime.default is longer than spec.lifetime.max.");
        err = KOP_EINVAL;
    }
    if (!err && out)
        *out = lt;
    return err;
}

/* add_ms returns t + ms seconds (truncated), saturating instead of overflowing. */
static time_t add_ms(time_t t, int64_t ms)
{
    int64_t secs = ms / 1000;
    int64_t max = sizeof(time_t) >= 8 ? INT64_MAX : INT32_MAX;
    if ((int64_t)t > 0 && secs > max - (int64_t)t)
        return (time_t)max;
    return (time_t)((int64_t)t + secs);
}

kop_err ctf_expiry(time_t created, const json_t *spec, const char *requested, time_t *expires_out,
                   kop_status *st)
{
    ctf_lifetime lt;
    kop_err err = ctf_lifetime_parse(spec, &lt, st);
    if (err)
        return err;

    time_t cap = add_ms(created, lt.max_ms);
    time_t expiry = add_ms(created, lt.default_ms);
    if (requested) {
        if (ctf_parse_time(requested, &expiry) != KOP_OK) {
            kop_status_setf(st, 0, "BadRequest", "expiresAt \"%s\" is not an RFC 3339 time.",
                            requested);
            return KOP_EINVAL;
        }
    }
    if (expiry > cap)
        expiry = cap;
    if (expiry < created)
        expiry = created;
    *expires_out = expiry;
    return KOP_OK;
}

kop_err ctf_renew(time_t created, time_t expiry, const json_t *spec, time_t *new_out,
                  kop_status *st)
{
    ctf_lifetime lt;
    kop_err err = ctf_lifetime_parse(spec, &lt, st);
    if (err)
        return err;

    time_t cap = add_ms(created, lt.max_ms);
    if (expiry >= cap) {
        kop_status_setf(st, 409, "Conflict",
                        "The instance already runs until its maximum lifetime.");
        return KOP_ECONFLICT;
    }
    time_t next = add_ms(expiry, lt.renew_ms);
    *new_out = next < cap ? next : cap;
    return KOP_OK;
}

/* ---- RFC 3339 ----------------------------------------------------------- */

kop_err ctf_format_time(time_t t, char out[CTF_TIME_SIZE])
{
    struct tm tm;
    out[0] = '\0';
    /*
     * RFC 3339 years have exactly four digits (strftime's %Y does not pad
     * years before 1000); other years would not parse back (ctf_parse_time).
     */
    if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
        return KOP_EINVAL;
    snprintf(out, CTF_TIME_SIZE, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return KOP_OK;
}

/* digits reads exactly n digits at *p into *v, advancing. */
static bool digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        x = x * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return true;
}

static bool expect(const char **p, const char *set)
{
    if (!**p || !strchr(set, **p))
        return false;
    (*p)++;
    return true;
}

static int days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

kop_err ctf_parse_time(const char *s, time_t *out)
{
    int year, mon, day, hour, min, sec, oh = 0, om = 0, sign = 0;
    const char *p = s;

    if (!s || !out)
        return KOP_EINVAL;
    if (!digits(&p, 4, &year) || !expect(&p, "-") || !digits(&p, 2, &mon) ||
        !expect(&p, "-") || !digits(&p, 2, &day) || !expect(&p, "Tt ") ||
        !digits(&p, 2, &hour) || !expect(&p, ":") || !digits(&p, 2, &min) ||
        !expect(&p, ":") || !digits(&p, 2, &sec))
        return KOP_EINVAL;
    if (*p == '.') {
        if (!is_digit(p[1]))
            return KOP_EINVAL;
        for (p++; is_digit(*p); p++)
            ;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p == '-' ? -1 : 1;
        p++;
        if (!digits(&p, 2, &oh) || !expect(&p, ":") || !digits(&p, 2, &om) || oh > 23 ||
            om > 59)
            return KOP_EINVAL;
    } else {
        return KOP_EINVAL;
    }
    if (*p || mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) || hour > 23 ||
        min > 59 || sec > 60)
        return KOP_EINVAL;

    struct tm tm = {.tm_year = year - 1900, .tm_mon = mon - 1, .tm_mday = day,
                    .tm_hour = hour, .tm_min = min, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1 && !(year == 1969 && mon == 12 && day == 31))
        return KOP_EINVAL;
    /* The offset is local minus UTC: subtract it to get UTC. */
    *out = t - (time_t)sign * (time_t)(oh * 3600 + om * 60);
    return KOP_OK;
}

/*
 * core/duration.h - durations, RFC 3339 times and the lifetime rules of a CTF
 * instance.
 *
 * A ChallengeDefinition's spec.lifetime holds Go-style durations ("30m",
 * "1h30m", "1.5h"); a Challenge's times are RFC 3339 strings. The lifetime
 * rules (docs/ctf-resources.md) are counted from the Challenge's creation:
 * it expires at creation + default (or at the requested spec.expiresAt),
 * never later than creation + max; a renewal moves the expiry to
 * min(expiry + renewBy, creation + max) and is refused when the expiry
 * already is creation + max.
 *
 * Everything here is pure: no clock is read, the caller passes the times.
 * Times are whole seconds (time_t, UTC); sub-second parts are truncated.
 */
#ifndef CTF_CORE_DURATION_H
#define CTF_CORE_DURATION_H

#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include <kop/err.h>

/* Defaults of spec.lifetime and spec.startTimeout, in milliseconds. */
#define CTF_LIFETIME_DEFAULT_MS (30LL * 60 * 1000)
#define CTF_LIFETIME_MAX_MS     (2LL * 60 * 60 * 1000)
#define CTF_LIFETIME_RENEW_MS   (30LL * 60 * 1000)
#define CTF_START_TIMEOUT_MS    (5LL * 60 * 1000)

/* Room for "2026-11-21T10:00:00Z" and any year time_t can hold. */
#define CTF_TIME_SIZE 32

/*
 * ctf_parse_duration parses a Go-style duration into milliseconds: one or
 * more <number><unit> with units ms, s, m, h ("1h30m", "1.5h", "250ms"),
 * decimal fractions allowed (extra precision below a millisecond is
 * truncated), or the bare "0". No sign, no spaces. Returns KOP_OK, or
 * KOP_EINVAL for garbage, a missing unit, or a total beyond INT64_MAX ms.
 */
KOP_NODISCARD kop_err ctf_parse_duration(const char *s, int64_t *ms);

/*
 * ctf_lifetime holds spec.lifetime and spec.startTimeout, parsed, in
 * milliseconds. Plain value type.
 */
typedef struct ctf_lifetime {
    int64_t default_ms;
    int64_t max_ms;
    int64_t renew_ms;
    int64_t start_timeout_ms;
} ctf_lifetime;

/*
 * ctf_lifetime_parse reads the lifetime of a definition's spec (spec.lifetime
 * .default/.max/.renewBy and spec.startTimeout; spec and any field may be
 * absent, giving the defaults above). Every duration must be positive and
 * default <= max. Returns KOP_OK, or KOP_EINVAL with a one-sentence message
 * naming the field in st (reason InvalidDefinition; st may be NULL).
 */
KOP_NODISCARD kop_err ctf_lifetime_parse(const json_t *spec, ctf_lifetime *out, kop_status *st);

/*
 * ctf_expiry computes an instance's effective expiry: the requested time
 * (a Challenge's spec.expiresAt, RFC 3339; NULL when not set) if given,
 * else created + default; clamped into [created, created + max]. spec is
 * the definition's spec as for ctf_lifetime_parse. KOP_EINVAL (explained in
 * st) for a bad lifetime or an unparsable requested time.
 */
KOP_NODISCARD kop_err ctf_expiry(time_t created, const json_t *spec, const char *requested,
                                 time_t *expires_out, kop_status *st);

/*
 * ctf_renew computes the expiry after one renewal: min(expiry + renewBy,
 * created + max). Returns KOP_OK, KOP_ECONFLICT when the expiry is already
 * at (or past) created + max so nothing can be extended (the API answers
 * 409), or KOP_EINVAL for a bad lifetime. st explains failures.
 */
KOP_NODISCARD kop_err ctf_renew(time_t created, time_t expiry, const json_t *spec,
                                time_t *new_out, kop_status *st);

/*
 * ctf_format_time writes t as RFC 3339 UTC with whole seconds,
 * "2026-11-21T10:00:00Z", into out. KOP_EINVAL when t is not representable,
 * that is outside the years 0000-9999 (out is then "").
 */
KOP_NODISCARD kop_err ctf_format_time(time_t t, char out[CTF_TIME_SIZE]);

/*
 * ctf_parse_time parses RFC 3339 "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)"
 * ('t', 'z' and ' ' as separator accepted too) into a time_t; fractions of a
 * second are truncated, a leap second 60 reads as the next second. Returns
 * KOP_OK or KOP_EINVAL.
 */
KOP_NODISCARD kop_err ctf_parse_time(const char *s, time_t *out);

#endif /* CTF_CORE_DURATION_H */

/*
 * kop/clock.h - the one monotonic clock of libkop and of the operators built
 * on it: durations, deadlines, rate limits. Never the wall clock (which
 * jumps); use time(2) for timestamps that leave the process, and
 * kop_rfc3339_now for the wall-clock time a status or an event records.
 */
#ifndef KOP_CLOCK_H
#define KOP_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "kop/common.h"

KOP_BEGIN_DECLS

/* kop_mono_ns returns CLOCK_MONOTONIC in nanoseconds. */
KOP_API int64_t kop_mono_ns(void);

/* kop_mono_ms returns CLOCK_MONOTONIC in milliseconds. */
KOP_API int64_t kop_mono_ms(void);

/* KOP_RFC3339_SIZE: room for "2026-11-27T05:00:00Z" and its NUL, with margin. */
#define KOP_RFC3339_SIZE 32

/*
 * kop_rfc3339 writes t as Kubernetes writes a metav1.Time, RFC 3339 in UTC
 * to the second ("2026-11-27T05:00:00Z"), into out and returns out. A t
 * that cannot be represented (gmtime fails) gives "".
 */
KOP_API const char *kop_rfc3339(time_t t, char out[KOP_RFC3339_SIZE]);

/*
 * kop_rfc3339_now is kop_rfc3339 of the wall clock now (time(2)): the value
 * of a status timestamp such as confirmedAt or startedAt.
 *
 *   char now[KOP_RFC3339_SIZE];
 *   json_pack("{s:s}", "startedAt", kop_rfc3339_now(now));
 */
KOP_API const char *kop_rfc3339_now(char out[KOP_RFC3339_SIZE]);

KOP_END_DECLS

#endif /* KOP_CLOCK_H */

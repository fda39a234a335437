/*
 * kop/clock.h - the one monotonic clock of libkop and of the operators built
 * on it: durations, deadlines, rate limits. Never the wall clock (which
 * jumps); use time(2) for timestamps that leave the process.
 */
#ifndef KOP_CLOCK_H
#define KOP_CLOCK_H

#include <stdint.h>

#include "kop/common.h"

KOP_BEGIN_DECLS

/* kop_mono_ns returns CLOCK_MONOTONIC in nanoseconds. */
KOP_API int64_t kop_mono_ns(void);

/* kop_mono_ms returns CLOCK_MONOTONIC in milliseconds. */
KOP_API int64_t kop_mono_ms(void);

KOP_END_DECLS

#endif /* KOP_CLOCK_H */

/*
 * kop_internal.h - helpers shared by libkop's modules; not installed.
 *
 * KOP_ASSERT states an invariant: checked in debug builds (KOP_DEBUG), where
 * a violation aborts with the location; compiled out in release builds.
 */
#ifndef KOP_INTERNAL_H
#define KOP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kop/clock.h"
#include "kop/common.h"
#include "kop/err.h"

#define KOP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * kop__random returns a pseudo-random 64-bit value from a per-thread
 * xorshift generator: for jitter and backoff, never for secrets.
 */
uint64_t kop__random(void);

/*
 * kop__time_after returns the time on clock (CLOCK_MONOTONIC for condition
 * variables made with a monotonic condattr, CLOCK_REALTIME for
 * pthread_timedjoin_np) ms milliseconds from now: a deadline.
 */
struct timespec kop__time_after(clockid_t clock, long ms);

#endif /* KOP_INTERNAL_H */

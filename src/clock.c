/*
 * clock.c - the monotonic clock (kop/clock.h) and the deadlines libkop's
 * condition variables wait for (kop__time_after, kop_internal.h). Every
 * duration in libkop is measured here, so a test can reason about one clock.
 */
#include <stdint.h>
#include <time.h>

#include "kop/clock.h"
#include "kop_internal.h"

int64_t kop_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t kop_mono_ms(void)
{
    return kop_mono_ns() / 1000000;
}

struct timespec kop__time_after(clockid_t clock, long ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    if (ms > 0) {
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
    }
    return ts;
}

/*
 * clock.c - the monotonic clock (kop/clock.h) and the deadlines libkop's
 * condition variables wait for (kop__time_after, kop_internal.h). Every
 * duration in libkop is measured here, so a test can reason about one clock.
 * The wall clock appears only in kop_rfc3339*, for timestamps written into
 * objects, never for durations.
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

const char *kop_rfc3339(time_t t, char out[KOP_RFC3339_SIZE])
{
    struct tm tm;
    out[0] = '\0';
    if (gmtime_r(&t, &tm) && strftime(out, KOP_RFC3339_SIZE, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        out[0] = '\0'; /* a year too wide for the buffer */
    return out;
}

const char *kop_rfc3339_now(char out[KOP_RFC3339_SIZE])
{
    return kop_rfc3339(time(NULL), out);
}

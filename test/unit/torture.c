/*
 * torture.c - the allocation failure injection of torture.h. The wrapped
 * functions count allocations atomically; a failed one returns NULL (and
 * sets errno), as the C library does when memory runs out.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "torture.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

static atomic_long countdown; /* > 0: the allocation that brings it to 0 fails */
static atomic_int ratio;      /* per mille */
static atomic_bool hit;
static atomic_long failures, calls;
static _Thread_local bool exempt;
static _Thread_local bool in_window;
static atomic_bool windowed;       /* failures only inside a window */
static _Thread_local uint64_t rng; /* xorshift64*, seeded per thread */

/* next_random returns a number in [0, 1000). */
static unsigned next_random(void)
{
    if (!rng)
        rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&rng;
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)((rng * 0x2545F4914F6CDD1Dull) >> 33) % 1000;
}

void torture_exempt_thread(void)
{
    exempt = true;
}

void torture_window(bool on)
{
    in_window = on;
}

void torture_fail_window(int per_mille)
{
    torture_fail_ratio(per_mille);
    atomic_store(&windowed, per_mille > 0);
}

void torture_fail_at(long n)
{
    atomic_store(&windowed, false);
    atomic_store(&ratio, 0);
    atomic_store(&hit, false);
    atomic_store(&countdown, n);
}

void torture_fail_ratio(int per_mille)
{
    atomic_store(&countdown, 0);
    atomic_store(&hit, false);
    atomic_store(&ratio, per_mille);
}

void torture_counts(long *calls_out, long *failures_out)
{
    *calls_out = atomic_load(&calls);
    *failures_out = atomic_load(&failures);
}

bool torture_hit(void)
{
    return atomic_load(&hit);
}

/* should_fail decides the fate of one allocation. */
static bool should_fail(void)
{
    if (exempt)
        return false;
    atomic_fetch_add(&calls, 1);
    int r = atomic_load(&ratio);
    if (r > 0) {
        if (atomic_load(&windowed) && !in_window)
            return false;
        if (next_random() < (unsigned)r) {
            in_window = false;
            atomic_store(&hit, true);
            atomic_fetch_add(&failures, 1);
            return true;
        }
        return false;
    }
    if (atomic_load(&countdown) > 0 && atomic_fetch_sub(&countdown, 1) == 1) {
        atomic_store(&hit, true);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n && should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_strdup(s);
}

static void *json_malloc(size_t n)
{
    return __wrap_malloc(n);
}

void torture_json_alloc(void)
{
    json_set_alloc_funcs(json_malloc, free);
}

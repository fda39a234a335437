/*
 * util.c - small helpers shared by libkop's modules (see kop_internal.h).
 */
#include <stdint.h>
#include <time.h>

#include "kop/clock.h"
#include "kop_internal.h"

uint64_t kop__random(void)
{
    static _Thread_local uint64_t state;
    if (state == 0) {
        uint64_t ns = (uint64_t)kop_mono_ns();
        state = (ns << 20) ^ (ns >> 30) ^ (uint64_t)(uintptr_t)&state;
        if (state == 0)
            state = 0x9e3779b97f4a7c15ULL;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

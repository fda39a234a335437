/*
 * fuzz_check.h - FUZZ_CHECK(cond): an invariant a fuzz target asserts on
 * every input. A violation prints the condition and aborts, which libFuzzer
 * reports as a crash and saves the input as a reproducer.
 */
#ifndef KOP_FUZZ_CHECK_H
#define KOP_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif /* KOP_FUZZ_CHECK_H */

/*
 * kop/common.h - macros every libkop header relies on: symbol visibility,
 * result checking and the library version.
 *
 * libkop is built with -fvisibility=hidden; only declarations marked KOP_API
 * are exported from the shared library.
 */
#ifndef KOP_COMMON_H
#define KOP_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KOP_VERSION_MAJOR 0
#define KOP_VERSION_MINOR 2
#define KOP_VERSION_PATCH 0
#define KOP_VERSION_STRING "0.2.0"

#if defined(__GNUC__) || defined(__clang__)
#define KOP_API        __attribute__((visibility("default")))
#define KOP_NODISCARD  __attribute__((warn_unused_result))
#define KOP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define KOP_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define KOP_API
#define KOP_NODISCARD
#define KOP_PRINTF(f, a)
#define KOP_DEPRECATED(msg)
#endif

#ifdef __cplusplus
#define KOP_BEGIN_DECLS extern "C" {
#define KOP_END_DECLS   }
#else
#define KOP_BEGIN_DECLS
#define KOP_END_DECLS
#endif

/*
 * KOP_ASSERT checks an invariant in debug builds (KOP_DEBUG defined): when
 * it does not hold, it says where and aborts. Release builds drop it, so
 * cond must have no side effects.
 */
#ifdef KOP_DEBUG
#define KOP_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", __FILE__, __LINE__, __func__,     \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define KOP_ASSERT(cond) ((void)0)
#endif

KOP_BEGIN_DECLS

/*
 * kop_streq tells whether two strings are equal, NULL being equal only to
 * NULL: for the values json_string_value hands back, which are NULL when a
 * field is missing or not a string.
 */
static inline bool kop_streq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* kop_version returns KOP_VERSION_STRING of the library actually linked. */
KOP_API const char *kop_version(void);

KOP_END_DECLS

#endif /* KOP_COMMON_H */

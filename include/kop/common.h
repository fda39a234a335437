/*
 * kop/common.h - macros every libkop header relies on: symbol visibility,
 * result checking and the library version.
 *
 * libkop is built with -fvisibility=hidden; only declarations marked KOP_API
 * are exported from the shared library.
 */
#ifndef KOP_COMMON_H
#define KOP_COMMON_H

#define KOP_VERSION_MAJOR 0
#define KOP_VERSION_MINOR 1
#define KOP_VERSION_PATCH 0
#define KOP_VERSION_STRING "0.1.0"

#if defined(__GNUC__) || defined(__clang__)
#define KOP_API        __attribute__((visibility("default")))
#define KOP_NODISCARD  __attribute__((warn_unused_result))
#define KOP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KOP_API
#define KOP_NODISCARD
#define KOP_PRINTF(f, a)
#endif

#ifdef __cplusplus
#define KOP_BEGIN_DECLS extern "C" {
#define KOP_END_DECLS   }
#else
#define KOP_BEGIN_DECLS
#define KOP_END_DECLS
#endif

KOP_BEGIN_DECLS

/* kop_version returns KOP_VERSION_STRING of the library actually linked. */
KOP_API const char *kop_version(void);

KOP_END_DECLS

#endif /* KOP_COMMON_H */

/*
 * kop/log.h - structured logging: the only way libkop (and operators built
 * on it) print anything.
 *
 * A line is a timestamp, a level, a message and typed key/value fields, in
 * one of two formats chosen process-wide with kop_log_setup:
 *
 *   text: 2026-11-21T10:00:00.123Z INFO reconciled name=web attempt=2 note="two words"
 *   json: {"ts":"2026-11-21T10:00:00.123Z","level":"info","msg":"reconciled","name":"web",...}
 *
 * Text is logfmt: a value is quoted (with JSON-style escapes) when it is
 * empty or holds a space, '=', '"', '\', a control character or invalid
 * UTF-8; the message is written bare unless it holds one of those (spaces
 * are fine), so a line stays readable and still parses. JSON is one object
 * per line, properly escaped, valid UTF-8 kept as is, invalid bytes
 * replaced by U+FFFD.
 *
 * Fields are kop_log_field values made by the KOP_LOG_* constructors, so a
 * field's type is checked by the compiler (KOP_LOG_INT("n", "x") does not
 * build with -Werror):
 *
 *   kop_log(KOP_LOG_INFO, "reconciled", KOP_LOG_STR("name", name), KOP_LOG_INT("attempt", n));
 *   kop_logv(2, "cache hit", KOP_LOG_STR("key", key));
 *   kop_log(KOP_LOG_ERROR, "update failed", KOP_LOG_ERR(err), KOP_LOG_STR("detail", st.message));
 *
 * Levels: ERROR, WARN and INFO are always written. Verbosity works like
 * klog's -v: kop_logv(n, ...) is written when n <= the configured
 * verbosity; V(0) is INFO, V(1) and above are labelled DEBUG, and
 * KOP_LOG_DEBUG is V(1). The kop_log/kop_logv macros test that first, so a
 * disabled line costs one atomic load and its fields are not evaluated.
 *
 * Loggers carry context fields (controller, namespace, name) written on
 * every line, before the line's own fields: kop_logger_with makes a child
 * holding its parent's fields plus new ones. A logger is immutable once
 * made, so any number of threads may log through it; NULL is the root
 * logger, which has no fields.
 *
 * Redaction: a KOP_LOG_SECRET field, and any field whose key ends
 * (case-insensitively) with token, password, passwd, secret, flag,
 * authorization, apikey, api_key, credential, credentials or cookie, is
 * written as [redacted] whatever its type.
 *
 * Lines are capped at KOP_LOG_LINE_MAX bytes including the newline: a value
 * that does not fit is cut at a character boundary and ends in "...", later
 * fields are dropped, and the line gets truncated=true ("truncated":true);
 * JSON lines stay valid JSON. Each line is formatted in a per-thread buffer
 * and handed to the kernel in one write(2) under a lock, so lines from
 * concurrent threads never interleave; streams without a file descriptor
 * (open_memstream) get one fwrite instead.
 */
#ifndef KOP_LOG_H
#define KOP_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

/* Longest line written, newline included. */
#define KOP_LOG_LINE_MAX 16384

typedef enum kop_log_level {
    KOP_LOG_ERROR = 0,
    KOP_LOG_WARN,
    KOP_LOG_INFO,
    KOP_LOG_DEBUG, /* the same as V(1) */
} kop_log_level;

typedef enum kop_log_format {
    KOP_LOG_TEXT = 0, /* logfmt, for people */
    KOP_LOG_JSON,     /* one object per line, for log pipelines */
} kop_log_format;

/* kop_log_config: the process-wide settings; zero is text, -v 0, stderr. */
typedef struct kop_log_config {
    kop_log_format format;
    int verbosity; /* -v N: V(n) lines with n <= N are written; < 0 is 0 */
    FILE *out;     /* borrowed, must stay open until replaced; NULL: stderr */
} kop_log_config;

/*
 * kop_log_setup replaces the process-wide settings; cfg NULL restores the
 * defaults. Safe to call while other threads log: a line is written whole
 * to either the old or the new output, and the old output is no longer
 * used once this returns.
 */
KOP_API void kop_log_setup(const kop_log_config *cfg);

/* kop_log_format_parse reads a --log-format value: "text" or "json"; else KOP_EINVAL. */
KOP_API KOP_NODISCARD kop_err kop_log_format_parse(const char *s, kop_log_format *out);

/* kop_log_enabled tells whether lines of level are written now. */
KOP_API bool kop_log_enabled(kop_log_level level);

/* kop_logv_enabled tells whether V(v) lines are written now (v <= verbosity). */
KOP_API bool kop_logv_enabled(int v);

/* ---- fields ------------------------------------------------------------- */

typedef enum kop_log_type {
    KOP_LOG_T_STR = 1,
    KOP_LOG_T_INT,
    KOP_LOG_T_UINT,
    KOP_LOG_T_FLOAT,
    KOP_LOG_T_BOOL,
    KOP_LOG_T_ERR,    /* a kop_err, written as its kop_strerror text */
    KOP_LOG_T_SECRET, /* a string never written: [redacted] */
} kop_log_type;

/*
 * kop_log_field: one key/value pair; strings are borrowed for the call
 * (kop_logger_with copies them). Make them with the constructors below.
 */
typedef struct kop_log_field {
    const char *key;
    kop_log_type type;
    union {
        const char *s; /* STR, SECRET; NULL is written as null */
        long long i;
        unsigned long long u;
        double f; /* NaN and infinities are written as strings in JSON */
        bool b;
        int err;
    } v;
} kop_log_field;

#define KOP_LOG_STR(k, val)    ((kop_log_field){.key = (k), .type = KOP_LOG_T_STR, .v.s = (val)})
#define KOP_LOG_INT(k, val)    ((kop_log_field){.key = (k), .type = KOP_LOG_T_INT, .v.i = (val)})
#define KOP_LOG_UINT(k, val)   ((kop_log_field){.key = (k), .type = KOP_LOG_T_UINT, .v.u = (val)})
#define KOP_LOG_FLOAT(k, val)  ((kop_log_field){.key = (k), .type = KOP_LOG_T_FLOAT, .v.f = (val)})
#define KOP_LOG_BOOL(k, val)   ((kop_log_field){.key = (k), .type = KOP_LOG_T_BOOL, .v.b = (val)})
#define KOP_LOG_SECRET(k, val) ((kop_log_field){.key = (k), .type = KOP_LOG_T_SECRET, .v.s = (val)})
#define KOP_LOG_ERR(e)                                                                             \
    ((kop_log_field){.key = "error", .type = KOP_LOG_T_ERR, .v.err = (e)})

/* ---- loggers ------------------------------------------------------------ */

typedef struct kop_logger kop_logger;

/*
 * kop_logger_new makes a logger with parent's context fields (parent NULL:
 * none) followed by fields[0..n). Keys and strings are copied; secret
 * values are not kept at all. *out is owned by the caller:
 * kop_logger_free. It does not refer to parent, which may be freed first.
 * KOP_ENOMEM is the only failure.
 */
KOP_API KOP_NODISCARD kop_err kop_logger_new(const kop_logger *parent,
                                             const kop_log_field *fields, size_t n,
                                             kop_logger **out);

/* kop_logger_free frees lg. NULL is ok. */
KOP_API void kop_logger_free(kop_logger *lg);

/*
 * kop_log_record: one line to write. Everything is borrowed for the call.
 * nfields follows fields, so KOP__LOG_FIELDS (which expands to "array,
 * count") fills both: {.msg = "m", .fields = KOP__LOG_FIELDS(...)}.
 */
typedef struct kop_log_record {
    kop_log_level level;
    int v;                       /* verbosity of a KOP_LOG_INFO line; 0: always */
    const char *msg;
    const kop_log_field *fields; /* may be NULL when nfields is 0 */
    size_t nfields;
} kop_log_record;

/*
 * kop_log_write writes rec as one line through lg (NULL: the root logger)
 * if it is enabled: its level, or for KOP_LOG_INFO with v > 0 a V(v) line.
 * Usually called through the macros below.
 */
KOP_API void kop_log_write(const kop_logger *lg, const kop_log_record *rec);

/* ---- the calls operators make ------------------------------------------- */

/* KOP__LOG_FIELDS(...) expands to "array, count" for zero or more fields. */
#define KOP__LOG_FIELDS(...)                                                                       \
    ((const kop_log_field[]){{.key = NULL}, ##__VA_ARGS__} + 1),                                   \
        (sizeof((const kop_log_field[]){{.key = NULL}, ##__VA_ARGS__}) / sizeof(kop_log_field) - 1)

/* kop_log(level, msg, fields...): a line through the root logger. */
#define kop_log(level, msg, ...) kop_logger_log(NULL, level, msg, ##__VA_ARGS__)

/* kop_logv(v, msg, fields...): a V(v) info line through the root logger. */
#define kop_logv(v, msg, ...) kop_loggerv(NULL, v, msg, ##__VA_ARGS__)

/* kop_logger_log(lg, level, msg, fields...): a line through lg. */
#define kop_logger_log(lg, lvl_, msg_, ...)                                                        \
    do {                                                                                           \
        kop_log_level kop__lvl = (lvl_);                                                           \
        if (kop_log_enabled(kop__lvl))                                                             \
            kop_log_write((lg), &(kop_log_record){.level = kop__lvl,                               \
                                                  .msg = (msg_),                                   \
                                                  .fields = KOP__LOG_FIELDS(__VA_ARGS__)});        \
    } while (0)

/* kop_loggerv(lg, v, msg, fields...): a V(v) info line through lg. */
#define kop_loggerv(lg, v_, msg_, ...)                                                             \
    do {                                                                                           \
        int kop__v = (v_);                                                                         \
        if (kop_logv_enabled(kop__v))                                                              \
            kop_log_write((lg), &(kop_log_record){.level = KOP_LOG_INFO,                           \
                                                  .v = kop__v,                                     \
                                                  .msg = (msg_),                                   \
                                                  .fields = KOP__LOG_FIELDS(__VA_ARGS__)});        \
    } while (0)

/*
 * kop_logger_with(parent, &child, fields...) makes child = parent plus
 * fields; returns kop_err like kop_logger_new:
 *
 *   kop_logger *lg = NULL;
 *   if (kop_logger_with(ctl_log, &lg, KOP_LOG_STR("namespace", ns), KOP_LOG_STR("name", name)))
 *       ...;
 *   kop_logger_log(lg, KOP_LOG_INFO, "reconciling");
 *   kop_logger_free(lg);
 */
#define kop_logger_with(parent, out, ...)                                                          \
    kop_logger_new((parent), KOP__LOG_FIELDS(__VA_ARGS__), (out))

KOP_END_DECLS

#endif /* KOP_LOG_H */

/*
 * kop/err.h - one error type for all of libkop, and the detail beside it.
 *
 * Every fallible libkop function returns a kop_err: KOP_OK (0) on success, a
 * negative code otherwise. Functions that talk to the apiserver also fill a
 * caller-supplied kop_status with what the server said: the HTTP code and the
 * reason and message of its metav1.Status. There is no global error state and
 * the library never prints errors; it hands them back.
 *
 * The codes come from one X-macro table, KOP_ERR_MAP, that also holds the
 * HTTP code and Kubernetes StatusReason each API error corresponds to, so the
 * enum, kop_err_name, kop_strerror and kop_err_from_status cannot drift apart.
 */
#ifndef KOP_ERR_H
#define KOP_ERR_H

#include <stdbool.h>
#include "kop/common.h"

KOP_BEGIN_DECLS

/*
 * X(NAME, http_code, "StatusReason", "text"). Local errors have code 0 and no
 * reason. API errors are listed with the reason the apiserver sends; where
 * several share a code, the first is what the bare code maps to (409 without
 * a known reason is a Conflict, 410 is Gone).
 */
#define KOP_ERR_MAP(X)                                                                             \
    X(OK, 0, NULL, "success")                                                                      \
    X(NOMEM, 0, NULL, "out of memory")                                                             \
    X(INVAL, 0, NULL, "invalid argument")                                                          \
    X(IO, 0, NULL, "input/output error")                                                           \
    X(TOOBIG, 0, NULL, "data exceeds its size cap")                                                \
    X(PARSE, 0, NULL, "malformed input")                                                           \
    X(CONFIG, 0, NULL, "invalid configuration")                                                    \
    X(CREDENTIALS, 0, NULL, "cannot obtain credentials")                                           \
    X(TLS, 0, NULL, "TLS error")                                                                   \
    X(CONNECT, 0, NULL, "cannot connect to the server")                                            \
    X(TIMEOUT, 0, NULL, "timed out")                                                               \
    X(CANCELED, 0, NULL, "canceled")                                                               \
    X(SHUTDOWN, 0, NULL, "shutting down")                                                          \
    X(EOF, 0, NULL, "end of stream")                                                               \
    X(BADREQUEST, 400, "BadRequest", "bad request")                                                \
    X(UNAUTHORIZED, 401, "Unauthorized", "unauthorized")                                           \
    X(FORBIDDEN, 403, "Forbidden", "forbidden")                                                    \
    X(NOTFOUND, 404, "NotFound", "not found")                                                      \
    X(METHODNOTALLOWED, 405, "MethodNotAllowed", "method not allowed")                             \
    X(NOTACCEPTABLE, 406, "NotAcceptable", "not acceptable")                                       \
    X(CONFLICT, 409, "Conflict", "conflict")                                                       \
    X(ALREADYEXISTS, 409, "AlreadyExists", "already exists")                                       \
    X(GONE, 410, "Gone", "resource version too old")                                               \
    X(EXPIRED, 410, "Expired", "continue token expired")                                           \
    X(TOOLARGE, 413, "RequestEntityTooLarge", "request entity too large")                          \
    X(UNSUPPORTEDMEDIA, 415, "UnsupportedMediaType", "unsupported media type")                     \
    X(INVALID, 422, "Invalid", "invalid object")                                                   \
    X(TOOMANYREQUESTS, 429, "TooManyRequests", "too many requests")                                \
    X(INTERNAL, 500, "InternalError", "internal server error")                                     \
    X(UNAVAILABLE, 503, "ServiceUnavailable", "service unavailable")                               \
    X(SERVERTIMEOUT, 504, "Timeout", "server timeout")                                             \
    X(API, 0, NULL, "the server refused the request")

/* Table positions, used to derive the codes below; not part of the API. */
enum kop__err_index {
#define KOP__ERR_INDEX(name, code, reason, text) KOP__I_##name,
    KOP_ERR_MAP(KOP__ERR_INDEX)
#undef KOP__ERR_INDEX
    KOP__ERR_COUNT
};

/* kop_err: KOP_OK (KOP_EOK) is 0; each error is minus its table position. */
typedef enum kop_err {
#define KOP__ERR_CODE(name, code, reason, text) KOP_E##name = -KOP__I_##name,
    KOP_ERR_MAP(KOP__ERR_CODE)
#undef KOP__ERR_CODE
} kop_err;

#define KOP_OK KOP_EOK

#define KOP_STATUS_REASON_MAX  64
#define KOP_STATUS_MESSAGE_MAX 1024

/*
 * kop_status is caller storage for the detail of a failure: all fields are
 * read-only to the caller and always NUL-terminated. Text longer than the
 * buffers is truncated, never overflowed.
 */
typedef struct kop_status {
    int code;                             /* HTTP status code; 0 if no response */
    char reason[KOP_STATUS_REASON_MAX];   /* metav1.Status reason, or "" */
    char message[KOP_STATUS_MESSAGE_MAX]; /* server message or local explanation */
} kop_status;

/* kop_strerror returns a static, human-readable text for err. */
KOP_API const char *kop_strerror(kop_err err);

/* kop_err_name returns the static symbolic name of err, e.g. "KOP_ENOTFOUND". */
KOP_API const char *kop_err_name(kop_err err);

/* kop_err_http_code returns the HTTP code an API error stands for, else 0. */
KOP_API int kop_err_http_code(kop_err err);

/*
 * kop_err_from_status maps an apiserver response to a kop_err: first by the
 * Status reason when it is a known one, else by the HTTP code, else KOP_EAPI.
 * 2xx codes give KOP_OK. reason may be NULL or empty.
 */
KOP_API kop_err kop_err_from_status(int http_code, const char *reason);

/*
 * kop_err_is_retryable tells whether the same request may succeed if sent
 * again later: throttling, unavailability, timeouts and lost connections.
 */
KOP_API bool kop_err_is_retryable(kop_err err);

/* kop_status_clear empties st. st may be NULL. */
KOP_API void kop_status_clear(kop_status *st);

/*
 * kop_status_setf records code, reason (may be NULL) and a printf-style
 * message into st, truncating each to its buffer. st may be NULL.
 */
KOP_API void kop_status_setf(kop_status *st, int code, const char *reason, const char *fmt, ...)
    KOP_PRINTF(4, 5);

KOP_END_DECLS

#endif /* KOP_ERR_H */

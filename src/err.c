/*
 * err.c - error names, texts and the mapping from apiserver responses.
 *
 * Everything here is derived from KOP_ERR_MAP in kop/err.h; adding an error
 * there is the only change needed. Lookups are by table position (minus the
 * code), so they are constant time and need no locking.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kop/err.h"

struct err_info {
    const char *name;
    const char *text;
    const char *reason; /* Kubernetes StatusReason, NULL for local errors */
    int http_code;      /* 0 for local errors */
};

static const struct err_info err_table[KOP__ERR_COUNT] = {
#define ERR_ROW(name, code, reason, text) {"KOP_E" #name, text, reason, code},
    KOP_ERR_MAP(ERR_ROW)
#undef ERR_ROW
};

/* info returns the table row of err, or NULL for a value outside the table. */
static const struct err_info *info(kop_err err)
{
    int idx = -(int)err;
    if (idx < 0 || idx >= KOP__ERR_COUNT)
        return NULL;
    return &err_table[idx];
}

const char *kop_version(void)
{
    return KOP_VERSION_STRING;
}

const char *kop_strerror(kop_err err)
{
    const struct err_info *i = info(err);
    return i ? i->text : "unknown error";
}

const char *kop_err_name(kop_err err)
{
    const struct err_info *i = info(err);
    return i ? i->name : "KOP_E?";
}

int kop_err_http_code(kop_err err)
{
    const struct err_info *i = info(err);
    return i ? i->http_code : 0;
}

kop_err kop_err_from_status(int http_code, const char *reason)
{
    if (http_code >= 200 && http_code < 300)
        return KOP_OK;
    /* The reason is more precise than the code: 409 is AlreadyExists or
     * Conflict, 410 is Gone or Expired, 504 and 500 may carry Timeout. */
    if (reason && reason[0]) {
        for (int idx = 0; idx < KOP__ERR_COUNT; idx++) {
            if (err_table[idx].reason && strcmp(err_table[idx].reason, reason) == 0)
                return (kop_err)-idx;
        }
    }
    for (int idx = 0; idx < KOP__ERR_COUNT; idx++) {
        if (err_table[idx].http_code != 0 && err_table[idx].http_code == http_code)
            return (kop_err)-idx;
    }
    return KOP_EAPI; /* no response (code 0) or a code we do not know */
}

bool kop_err_is_retryable(kop_err err)
{
    switch (err) {
    case KOP_ECONNECT:
    case KOP_ETIMEOUT:
    case KOP_ETOOMANYREQUESTS:
    case KOP_EUNAVAILABLE:
    case KOP_ESERVERTIMEOUT:
    case KOP_EINTERNAL:
        return true;
    default:
        return false;
    }
}

void kop_status_clear(kop_status *st)
{
    if (!st)
        return;
    st->code = 0;
    st->reason[0] = '\0';
    st->message[0] = '\0';
}

void kop_status_setf(kop_status *st, int code, const char *reason, const char *fmt, ...)
{
    if (!st)
        return;
    st->code = code;
    snprintf(st->reason, sizeof st->reason, "%s", reason ? reason : "");
    st->message[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->message, sizeof st->message, fmt, ap);
        va_end(ap);
    }
}

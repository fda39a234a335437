/*
 * client_status.c - from an apiserver error response to a kop_err and a
 * kop_status.
 *
 * The apiserver answers every failure with a metav1.Status:
 *
 *   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
 *    "message":"configmaps \"x\" not found","reason":"NotFound",
 *    "details":{"name":"x","kind":"configmaps"},"code":404}
 *
 * and a watch reports its end the same way, as the object of an ERROR
 * event. But what reaches the client is not always the apiserver's: a load
 * balancer or auth proxy in front of it answers with HTML, an empty body or
 * anything at all. Whatever arrives, the caller gets a kop_err chosen by the
 * HTTP code and Status reason, and a message that is safe to log: the
 * Status message (valid UTF-8, control characters blanked) or a short
 * printable-ASCII excerpt of the foreign body, always within kop_status's
 * fixed buffers.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client_internal.h"
#include "kop_internal.h"

/* How much of a body that is not a Status the message quotes. */
#define BODY_EXCERPT_CHARS 200

const char *kop__http_reason_phrase(int code)
{
    switch (code) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Request Entity Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
    }
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

size_t kop__text_excerpt(char *dst, size_t size, const char *src, size_t len, size_t max_chars)
{
    KOP_ASSERT(size > 0);
    if (max_chars > size - 1)
        max_chars = size - 1;
    size_t n = 0;
    bool space = false, cut = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (is_space(c)) {
            space = n > 0; /* collapsed, and never leading */
            continue;
        }
        if ((c & 0xC0) == 0x80)
            continue; /* a UTF-8 continuation byte: its lead byte already showed '?' */
        if (n + (space ? 2 : 1) > max_chars) {
            cut = true;
            break;
        }
        if (space)
            dst[n++] = ' ';
        space = false;
        dst[n++] = (c > 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (cut && max_chars >= 3) {
        if (n > max_chars - 3)
            n = max_chars - 3;
        while (n > 0 && dst[n - 1] == ' ')
            n--;
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
    return n;
}

/*
 * copy_message copies a Status message (UTF-8, as jansson validated it) into
 * dst, blanking control characters and cutting at a character boundary with
 * "..." when it does not fit.
 */
static void copy_message(char *dst, size_t size, const char *s, size_t len)
{
    size_t n = len;
    bool cut = false;
    if (n > size - 1) {
        n = size - 4;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--; /* do not split a UTF-8 sequence */
        cut = true;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    if (cut) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

/* read_fields copies reason and message of a Status object into s. */
static void read_fields(const json_t *status, kop_status *s)
{
    json_t *reason = json_object_get(status, "reason");
    json_t *message = json_object_get(status, "message");
    if (json_is_string(reason))
        kop__text_excerpt(s->reason, sizeof s->reason, json_string_value(reason),
                          json_string_length(reason), sizeof s->reason - 1);
    if (json_is_string(message))
        copy_message(s->message, sizeof s->message, json_string_value(message),
                     json_string_length(message));
}

/*
 * phrase_message writes into s->message the HTTP reason phrase of code, or
 * "HTTP <code>", followed by ": " and extra when extra is not empty.
 */
static void phrase_message(kop_status *s, int code, const char *extra)
{
    char head[32];
    const char *phrase = kop__http_reason_phrase(code);
    if (!phrase[0]) {
        if (code)
            snprintf(head, sizeof head, "HTTP %d", code);
        else
            snprintf(head, sizeof head, "error without message");
        phrase = head;
    }
    if (extra && extra[0])
        snprintf(s->message, sizeof s->message, "%s: %s", phrase, extra);
    else
        snprintf(s->message, sizeof s->message, "%s", phrase);
}

/* failure maps code and reason to a kop_err that is KOP_OK only for 2xx. */
static kop_err failure(int code, const char *reason)
{
    kop_err err = kop_err_from_status(code, reason);
    if (err == KOP_OK && (code < 200 || code > 299))
        err = KOP_EAPI; /* 0 and 1xx/3xx: not a success, and no better name */
    return err;
}

kop_err kop__status_decode(int http_code, const char *body, size_t len, kop_status *st)
{
    kop_status s;
    kop_status_clear(&s);
    s.code = http_code;

    json_t *root = NULL;
    if (body && len > 0) {
        json_error_t jerr;
        root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    }
    json_t *kind = json_object_get(root, "kind");
    if (json_is_string(kind) && strcmp(json_string_value(kind), "Status") == 0) {
        read_fields(root, &s);
        if (!s.message[0])
            phrase_message(&s, http_code, NULL);
    } else {
        /* Not the apiserver speaking: say what the HTTP code means, and quote. */
        char excerpt[BODY_EXCERPT_CHARS + 1] = "";
        if (body)
            kop__text_excerpt(excerpt, sizeof excerpt, body, len, BODY_EXCERPT_CHARS);
        phrase_message(&s, http_code, excerpt);
    }
    json_decref(root);

    kop_err err = failure(http_code, s.reason);
    if (st)
        *st = s;
    return err;
}

kop_err kop__status_from_json(const json_t *status, kop_status *st)
{
    if (!json_is_object(status)) {
        kop_status_setf(st, 0, NULL, "watch ERROR event without a Status object");
        return KOP_EPARSE;
    }
    kop_status s;
    kop_status_clear(&s);
    json_t *code = json_object_get(status, "code");
    if (json_is_integer(code) && json_integer_value(code) >= 0 &&
        json_integer_value(code) <= 999)
        s.code = (int)json_integer_value(code);
    read_fields(status, &s);
    if (!s.message[0])
        phrase_message(&s, s.code, NULL);

    kop_err err = failure(s.code, s.reason);
    if (st)
        *st = s;
    return err;
}

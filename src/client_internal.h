/*
 * client_internal.h - the pure building blocks of the REST client, shared
 * between the client's source files and their tests; not installed.
 *
 * Nothing here touches the network: the watch-stream decoder turns bytes
 * into events, the URL builder turns a resource and a name into a request
 * URL, and the Status decoder turns an error response into a kop_err plus a
 * kop_status. Each is fed by outside input (the apiserver, or a proxy in
 * front of it), so each caps what it holds and never trusts a length.
 */
#ifndef KOP_CLIENT_INTERNAL_H
#define KOP_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/buf.h"
#include "kop/client.h"
#include "kop/err.h"

/* ---- watch-stream decoder (client_watch.c) ------------------------------ */

/*
 * The most bytes a kop__watch_decoder holds in complete lines not yet taken
 * by kop__watch_decoder_next (beyond the incomplete line). libcurl may call
 * its write callback many times (16 KiB each) before the caller drains, so
 * this is generous; it only bounds a caller that never drains. A caller that
 * wants a tighter bound pauses its transfer while kop__watch_decoder_backlog
 * is large.
 */
#define KOP__WATCH_BACKLOG_MAX ((size_t)32 << 20)

/*
 * kop__watch_decoder splits a watch response body into lines (the apiserver
 * writes one JSON event per line, "\n" or "\r\n" terminated) and decodes
 * each into a kop_watch_event. Caller storage: kop__watch_decoder_init /
 * kop__watch_decoder_fini. Fields are private to client_watch.c.
 *
 * Invariants: pending.data[head, line_start) holds complete lines not yet
 * returned; pending.data[line_start, pending.len) is the incomplete last line
 * and is never longer than max_line. Once poisoned (poison != KOP_OK) the
 * decoder holds nothing and fails every call with that error.
 */
typedef struct kop__watch_decoder {
    kop_buf pending;   /* unconsumed bytes; capped at max_line + KOP__WATCH_BACKLOG_MAX */
    size_t max_line;   /* longest line accepted, not counting its "\n" */
    size_t head;       /* first byte not yet returned by _next */
    size_t line_start; /* start of the incomplete last line */
    kop_err poison;    /* KOP_OK, or the error that ended the stream */
    bool backlog_full; /* poisoned by KOP__WATCH_BACKLOG_MAX, not by a long line */
    bool drop_managed_fields; /* cut object.metadata.managedFields before parsing */
} kop__watch_decoder;

/*
 * kop__watch_decoder_init prepares d to accept lines of up to max_line bytes,
 * with drop_managed_fields off (the caller may set it before the first feed).
 */
void kop__watch_decoder_init(kop__watch_decoder *d, size_t max_line);

/* kop__watch_decoder_fini frees what d holds. d may be NULL. */
void kop__watch_decoder_fini(kop__watch_decoder *d);

/*
 * kop__watch_decoder_feed appends len bytes of the response body; they may
 * end anywhere (mid-line, mid-UTF-8 sequence, between "\r" and "\n"). Take
 * the complete lines with kop__watch_decoder_next, after every feed or after
 * several.
 *
 * Returns KOP_OK; KOP_ETOOBIG when the incomplete line would grow past
 * max_line, or the complete lines not yet drained past
 * KOP__WATCH_BACKLOG_MAX; KOP_ENOMEM. Any error poisons the decoder: every
 * later call returns it, and the caller must drop the connection and watch
 * again from the last resourceVersion it saw.
 */
KOP_NODISCARD kop_err kop__watch_decoder_feed(kop__watch_decoder *d, const char *data, size_t len);

/*
 * kop__cut_managed_fields removes the member "managedFields" of the object
 * at .object.metadata from the JSON text s[0..n) in place (json_cut.c) and
 * returns the new length; s is left as it is when the member is not found
 * or not written plainly. Whenever s parses, the result parses to the same
 * object except for that member.
 */
size_t kop__cut_managed_fields(char *s, size_t n);

/* kop__watch_decoder_backlog returns how many fed bytes _next has not yet taken. */
size_t kop__watch_decoder_backlog(const kop__watch_decoder *d);

/*
 * kop__watch_decoder_next decodes the next complete line into *ev and sets
 * *got to true; sets *got to false (and ev->object to NULL) when no complete
 * line is buffered. Blank lines are skipped.
 *
 * Ownership: on success with *got, ev->object is a new reference the caller
 * releases with kop_watch_event_fini. ERROR events are returned as
 * KOP_WATCH_ERROR with the metav1.Status as object (read it with
 * kop__status_from_json).
 *
 * Returns KOP_EPARSE, with an excerpt of the line in st, for a line that is
 * not a JSON object with a known "type" string and an "object" object; the
 * line is consumed and the next call goes on with the following line.
 * Returns KOP_ETOOBIG for a complete line longer than max_line (which
 * poisons the decoder), the poisoning error of an earlier call with its
 * explanation in st, and KOP_ENOMEM. st may be NULL.
 */
KOP_NODISCARD kop_err kop__watch_decoder_next(kop__watch_decoder *d, kop_watch_event *ev,
                                              bool *got, kop_status *st);

/* ---- URLs (client_url.c) ------------------------------------------------ */

/* The longest request URL kop__url_build produces. */
#define KOP__URL_MAX 8192

/* kop__query_param: one query parameter; value is plain text, NULL = absent. */
typedef struct kop__query_param {
    const char *key;
    const char *value;
} kop__query_param;

/*
 * kop__url_escape appends s to out percent-encoded: every byte outside the
 * RFC 3986 unreserved set (ALPHA DIGIT - . _ ~) becomes %XX. The same rule
 * serves path segments and query keys and values (is_query is accepted for
 * clarity at call sites; both encodings are identical, and "+" and " " are
 * always encoded so Go's query parser cannot confuse them).
 * Returns KOP_OK, or out's KOP_ETOOBIG / KOP_ENOMEM (out may hold a prefix).
 */
KOP_NODISCARD kop_err kop__url_escape(kop_buf *out, const char *s, bool is_query);

/*
 * kop__url_build resets out and writes the URL of a request into it:
 *
 *   {server}/api/{version}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
 *   {server}/apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/...]]
 *
 * followed by "?k=v&..." for the params whose value is not NULL. server may
 * carry a path prefix and trailing slashes. ns NULL or "" means all
 * namespaces (collections of namespaced resources only); name NULL means the
 * collection; subresource needs a name.
 *
 * Returns KOP_OK; KOP_EINVAL with a message in st for a missing server,
 * version or resource, a namespace given for a cluster-scoped resource, a
 * namespaced object addressed without namespace, or any path segment that is
 * empty, "." or ".." or contains "/" (so no input can climb out of its
 * segment); KOP_ETOOBIG when the URL exceeds KOP__URL_MAX or out's cap;
 * KOP_ENOMEM. On failure out is empty. st may be NULL.
 */
KOP_NODISCARD kop_err kop__url_build(kop_buf *out, const char *server, const kop_resource *r,
                                     const char *ns, const char *name, const char *subresource,
                                     const kop__query_param *params, size_t nparams,
                                     kop_status *st);

/* ---- metav1.Status (client_status.c) ------------------------------------ */

/*
 * kop__status_decode reads an error response: st gets http_code, and the
 * reason and message of the metav1.Status body when the body is one (JSON
 * object of kind "Status"). Otherwise (HTML from a proxy, empty, garbage)
 * reason is "" and message is the HTTP reason phrase followed by a
 * sanitized excerpt of the body (printable ASCII, whitespace collapsed,
 * capped). Returns kop_err_from_status(http_code, reason): KOP_OK for 2xx,
 * else never KOP_OK. st may be NULL.
 */
KOP_NODISCARD kop_err kop__status_decode(int http_code, const char *body, size_t len,
                                         kop_status *st);

/*
 * kop__status_from_json reads an already parsed metav1.Status (the object of
 * a watch ERROR event): st gets its code, reason and message. Returns
 * kop_err_from_status(code, reason), KOP_EAPI when that names no failure,
 * KOP_EPARSE when status is not a JSON object. st may be NULL.
 */
KOP_NODISCARD kop_err kop__status_from_json(const json_t *status, kop_status *st);

/* kop__http_reason_phrase returns the static phrase of code ("Not Found"), or "". */
const char *kop__http_reason_phrase(int code);

/*
 * kop__text_excerpt writes into dst (size > 0, always NUL-terminated) at most
 * max_chars characters of src[0, len) fit for a log line: printable ASCII
 * kept, runs of whitespace collapsed to one space and trimmed, any other byte
 * shown as '?', and "..." appended when something was cut. Returns the
 * length written.
 */
size_t kop__text_excerpt(char *dst, size_t size, const char *src, size_t len, size_t max_chars);

#endif /* KOP_CLIENT_INTERNAL_H */

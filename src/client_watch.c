/*
 * client_watch.c - the watch-stream decoder: response body bytes in, watch
 * events out.
 *
 * A watch response is an endless body of JSON objects, one per line:
 *
 *   {"type":"ADDED","object":{...}}\n
 *   {"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{...}}}\n
 *
 * The network cuts it into chunks anywhere: inside a line, inside a UTF-8
 * sequence, between "\r" and "\n". The decoder only ever splits at "\n", so
 * none of that matters; "\r" before "\n" is dropped and blank lines skipped.
 *
 * Workload: an informer's stream, from one event every few minutes to
 * thousands of small events per second during a relist storm, and now and
 * then a single object of a megabyte fed in 16 KiB chunks. So each byte is
 * searched for "\n" at most twice in total (once backwards by feed, to find
 * where the incomplete line starts, once forwards by next), complete lines
 * are consumed by moving an offset rather than the bytes, and the buffer is
 * compacted at most once per feed (not at all when every line was taken).
 *
 * Invariant (see client_internal.h): [head, line_start) are complete lines,
 * [line_start, len) the incomplete one, never longer than max_line. A line
 * over the limit poisons the decoder: the stream is out of step with us and
 * the only safe recovery is a new watch from the last resourceVersion seen.
 *
 * Duplicate keys: lines are parsed without JSON_REJECT_DUPLICATES, so the
 * last value wins. That is what Go's encoding/json does, so the decoder sees
 * the same object as the apiserver, kubectl and client-go would, and it
 * spares a second hash lookup per key on the hottest parse in the library.
 * JSON_ALLOW_NUL keeps strings holding "\u0000" (legal in Go strings, e.g. in
 * ConfigMap data) instead of failing the whole event.
 */
#include <stdint.h>
#include <string.h>

#include "client_internal.h"
#include "kop_internal.h"

/* How much of a bad line an error message quotes. */
#define EXCERPT_CHARS 96

static const char *const type_names[] = {
    [KOP_WATCH_ADDED] = "ADDED",       [KOP_WATCH_MODIFIED] = "MODIFIED",
    [KOP_WATCH_DELETED] = "DELETED",   [KOP_WATCH_BOOKMARK] = "BOOKMARK",
    [KOP_WATCH_ERROR] = "ERROR",
};

const char *kop_watch_type_name(kop_watch_type type)
{
    if ((size_t)type < KOP_ARRAY_LEN(type_names) && type_names[type])
        return type_names[type];
    return "UNKNOWN";
}

void kop_watch_event_fini(kop_watch_event *ev)
{
    if (!ev)
        return;
    json_decref(ev->object);
    ev->object = NULL;
}

/* parse_type maps the "type" string (len bytes, may hold NUL) to its enum, or 0. */
static kop_watch_type parse_type(const char *s, size_t len)
{
    for (size_t t = 1; t < KOP_ARRAY_LEN(type_names); t++) {
        if (strlen(type_names[t]) == len && memcmp(type_names[t], s, len) == 0)
            return (kop_watch_type)t;
    }
    return (kop_watch_type)0;
}

void kop__watch_decoder_init(kop__watch_decoder *d, size_t max_line)
{
    /* Keep max_line + KOP__WATCH_BACKLOG_MAX (+ the NUL) far from overflow. */
    if (max_line > SIZE_MAX / 4)
        max_line = SIZE_MAX / 4;
    kop_buf_init(&d->pending, max_line + KOP__WATCH_BACKLOG_MAX);
    d->max_line = max_line;
    d->head = 0;
    d->line_start = 0;
    d->poison = KOP_OK;
    d->backlog_full = false;
    d->drop_managed_fields = false;
}

void kop__watch_decoder_fini(kop__watch_decoder *d)
{
    if (!d)
        return;
    kop_buf_fini(&d->pending);
    d->head = d->line_start = 0;
}

/* poison ends the stream with err and frees the buffered bytes. */
static kop_err poison(kop__watch_decoder *d, kop_err err)
{
    d->poison = err;
    kop_buf_fini(&d->pending);
    d->head = d->line_start = 0;
    return err;
}

/* compact drops the bytes already returned, so the buffer holds only what is pending. */
static void compact(kop__watch_decoder *d)
{
    if (d->head == 0)
        return;
    KOP_ASSERT(d->head <= d->line_start && d->line_start <= d->pending.len);
    kop_buf_consume(&d->pending, d->head);
    d->line_start -= d->head;
    d->head = 0;
}

/* last_newline returns the offset of the last '\n' in data, or SIZE_MAX. */
static size_t last_newline(const char *data, size_t len)
{
    for (size_t i = len; i > 0; i--) {
        if (data[i - 1] == '\n')
            return i - 1;
    }
    return SIZE_MAX;
}

size_t kop__watch_decoder_backlog(const kop__watch_decoder *d)
{
    return d->pending.len - d->head;
}

kop_err kop__watch_decoder_feed(kop__watch_decoder *d, const char *data, size_t len)
{
    if (d->poison)
        return d->poison;
    if (len == 0)
        return KOP_OK;
    compact(d);

    /* Refuse before copying: the incomplete line after this chunk is either
     * what follows its last '\n', or the old incomplete line plus all of it. */
    size_t nl = last_newline(data, len);
    size_t held = d->pending.len - d->line_start;
    if (nl == SIZE_MAX ? len > d->max_line - held : len - nl - 1 > d->max_line)
        return poison(d, KOP_ETOOBIG);

    size_t old_len = d->pending.len;
    kop_err err = kop_buf_append(&d->pending, data, len);
    if (err) { /* bytes were lost: later lines would be spliced wrongly */
        d->backlog_full = err == KOP_ETOOBIG; /* the line itself fits: see above */
        return poison(d, err);
    }
    if (nl != SIZE_MAX)
        d->line_start = old_len + nl + 1;
    return KOP_OK;
}

/* is_blank tells whether a line holds only JSON whitespace. */
static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    }
    return true;
}

/* bad_line reports a line that is not a watch event. */
static kop_err bad_line(kop_status *st, const char *line, size_t n, const char *why)
{
    char excerpt[EXCERPT_CHARS + 4];
    kop__text_excerpt(excerpt, sizeof excerpt, line, n, EXCERPT_CHARS);
    kop_status_setf(st, 0, NULL, "malformed watch event (%s): \"%s\"", why, excerpt);
    return KOP_EPARSE;
}

/* decode_line parses one non-blank line into ev (the line may be changed: managedFields cut). */
static kop_err decode_line(kop__watch_decoder *d, char *line, size_t n, kop_watch_event *ev,
                           kop_status *st)
{
    json_error_t jerr;
    if (d->drop_managed_fields)
        n = kop__cut_managed_fields(line, n);
    json_t *root = json_loadb(line, n, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return bad_line(st, line, n, "not JSON");

    kop_err err = KOP_OK;
    json_t *type = json_object_get(root, "type");
    json_t *object = json_object_get(root, "object");
    kop_watch_type t = (kop_watch_type)0;
    if (!json_is_object(root))
        err = bad_line(st, line, n, "not a JSON object");
    else if (!json_is_string(type))
        err = bad_line(st, line, n, "no \"type\" string");
    else if (!(t = parse_type(json_string_value(type), json_string_length(type))))
        err = bad_line(st, line, n, "unknown type");
    else if (!json_is_object(object))
        err = bad_line(st, line, n, "no \"object\" object");
    if (err)
        goto out;

    /* The object outlives the envelope: take a reference, drop the rest. */
    ev->type = t;
    ev->object = json_incref(object);
out:
    json_decref(root);
    return err;
}

kop_err kop__watch_decoder_next(kop__watch_decoder *d, kop_watch_event *ev, bool *got,
                                kop_status *st)
{
    ev->type = (kop_watch_type)0;
    ev->object = NULL;
    *got = false;
    if (d->poison) {
        if (d->poison != KOP_ETOOBIG)
            kop_status_setf(st, 0, NULL, "watch stream: %s", kop_strerror(d->poison));
        else if (d->backlog_full)
            kop_status_setf(st, 0, NULL, "watch stream: over %zu bytes fed and not taken",
                            KOP__WATCH_BACKLOG_MAX);
        else
            kop_status_setf(st, 0, NULL, "watch stream: a line exceeds %zu bytes", d->max_line);
        return d->poison;
    }

    while (d->head < d->line_start) {
        char *line = d->pending.data + d->head;
        /* Found for certain: line_start - 1 is a '\n'. */
        const char *nl = memchr(line, '\n', d->line_start - d->head);
        KOP_ASSERT(nl != NULL);
        size_t n = (size_t)(nl - line);
        d->head += n + 1;
        if (n > d->max_line) {
            kop_status_setf(st, 0, NULL, "watch stream: a line exceeds %zu bytes", d->max_line);
            return poison(d, KOP_ETOOBIG);
        }
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (is_blank(line, n))
            continue;
        kop_err err = decode_line(d, line, n, ev, st);
        if (err == KOP_OK)
            *got = true;
        return err;
    }

    /* Everything was taken: forget it without moving a byte. */
    if (d->head == d->pending.len && d->head > 0) {
        kop_buf_reset(&d->pending);
        d->head = d->line_start = 0;
    }
    return KOP_OK;
}

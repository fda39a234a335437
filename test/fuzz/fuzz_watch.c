/*
 * fuzz_watch.c - libFuzzer target for the watch-stream decoder and the
 * Status decoder.
 *
 * Input layout: byte 0 picks max_line (64..4144), bytes 1-3 are the sizes of
 * the chunks the rest is fed in (cycled, 1..256 each), and the low bit of
 * byte 1 also turns on the managedFields cut; the rest is the stream. The
 * stream is decoded twice, once chunked (draining after every feed) and once
 * in a single feed, and the two transcripts of events and errors must be
 * identical unless a line hit the cap (where chunking decides how many
 * earlier events are seen). ERROR events go through
 * kop__status_from_json, and the raw input through kop__status_decode.
 * Crashes, sanitizer reports, leaks and transcript mismatches all fail.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

#define HEADER 4

/* note appends one transcript entry; a transcript past its cap is just not compared. */
static void note(kop_buf *t, const char *kind, const char *text)
{
    if (kop_buf_appendf(t, "%s %s\n", kind, text ? text : "(null)"))
        t->max = 0; /* mark as incomplete */
}

/* drain takes every complete line, recording what came out; returns true once poisoned. */
static bool drain(kop__watch_decoder *d, kop_buf *t)
{
    for (;;) {
        kop_watch_event ev;
        kop_status st;
        bool got = false;
        kop_err err = kop__watch_decoder_next(d, &ev, &got, &st);
        if (err == KOP_EPARSE) {
            FUZZ_CHECK(!got && !ev.object && strlen(st.message) < sizeof st.message);
            note(t, "!PARSE", st.message);
            continue;
        }
        if (err)
            return true;
        if (!got)
            return false;
        FUZZ_CHECK(json_is_object(ev.object));
        char *js = json_dumps(ev.object, JSON_COMPACT | JSON_ENCODE_ANY);
        note(t, kop_watch_type_name(ev.type), js);
        free(js);
        if (ev.type == KOP_WATCH_ERROR) {
            kop_status st2;
            kop_err e2 = kop__status_from_json(ev.object, &st2);
            FUZZ_CHECK(e2 != KOP_OK || (st2.code >= 200 && st2.code <= 299));
            note(t, kop_err_name(e2), st2.message);
        }
        kop_watch_event_fini(&ev);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    size_t max_line = 64 + (size_t)data[0] * 16;
    const char *stream = (const char *)data + HEADER;
    size_t len = size - HEADER;

    kop_buf chunked, whole;
    kop_buf_init(&chunked, 1 << 24);
    kop_buf_init(&whole, 1 << 24);
    bool poisoned = false;

    bool drop = data[1] & 1;
    kop__watch_decoder d;
    kop__watch_decoder_init(&d, max_line);
    d.drop_managed_fields = drop;
    for (size_t off = 0, k = 0; off < len && !poisoned; k++) {
        size_t n = 1 + (size_t)data[1 + k % 3];
        if (n > len - off)
            n = len - off;
        if (kop__watch_decoder_feed(&d, stream + off, n))
            poisoned = true;
        else
            poisoned = drain(&d, &chunked);
        off += n;
    }
    kop__watch_decoder_fini(&d);

    kop__watch_decoder_init(&d, max_line);
    d.drop_managed_fields = drop;
    if (kop__watch_decoder_feed(&d, stream, len) || drain(&d, &whole))
        poisoned = true;
    kop__watch_decoder_fini(&d);

    if (!poisoned && chunked.max && whole.max &&
        (chunked.len != whole.len ||
         memcmp(kop_buf_str(&chunked), kop_buf_str(&whole), chunked.len) != 0)) {
        fprintf(stderr, "chunked:\n%s\nwhole:\n%s\n", kop_buf_str(&chunked), kop_buf_str(&whole));
        abort();
    }
    kop_buf_fini(&chunked);
    kop_buf_fini(&whole);

    /* The same bytes as an error response body. */
    kop_status st;
    int code = 100 + (int)(data[0] | data[1] << 8) % 500;
    kop_err err = kop__status_decode(code, (const char *)data, size, &st);
    FUZZ_CHECK(err != KOP_OK || (code >= 200 && code <= 299));
    FUZZ_CHECK(strlen(st.reason) < sizeof st.reason && strlen(st.message) < sizeof st.message);
    return 0;
}

/*
 * fuzz_ctf_sse.c - libFuzzer target for the Server-Sent Events the instance
 * API writes (ctf_sse_event, operators/ctf/api/stream.h). The operator has no
 * SSE parser (it only writes streams; browsers and the page parse them), so
 * this target carries one, written from the WHATWG "event stream
 * interpretation" rules, and checks that what a client parses is exactly
 * what was sent, whatever the data holds (newlines, carriage returns,
 * U+2028, NUL, "data:" or "event:" inside strings, deep nesting).
 *
 * Input: any JSON document. The stream built is the API's own: the
 * "retry: 2000" hello, a "snapshot" event, a ": heartbeat" comment and an
 * "instance" event, both events carrying the document. Invariants, abort()
 * on violation:
 *  - an object or array always formats (a scalar may be refused), as one
 *    NUL-free event whose length is reported exactly;
 *  - the parser sees the retry of 2000 ms and exactly the two events, with
 *    their names, and the data of each parses back to the document;
 *  - the formatted text has no carriage return, and only the framing
 *    newlines.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/stream.h"

/* ---- a client's parser (WHATWG HTML, "Server-sent events") ---------------- */

struct parsed {
    int events;
    char name[2][64];
    char *data[2];
    long retry;
};

static void dispatch(struct parsed *p, const char *type, const char *data, size_t dlen,
                     bool has_data)
{
    if (!has_data)
        return; /* an event with an empty data buffer is not dispatched */
    if (dlen && data[dlen - 1] == '\n')
        dlen--; /* the last LF of the buffer is removed */
    if (p->events < 2) {
        snprintf(p->name[p->events], sizeof p->name[0], "%s", type[0] ? type : "message");
        p->data[p->events] = strndup(data, dlen);
    }
    p->events++;
}

/* parse_stream interprets a whole stream of n bytes. */
static void parse_stream(const char *s, size_t n, struct parsed *p)
{
    char type[64] = "";
    char *data = malloc(n + 1);
    size_t dlen = 0;
    bool has_data = false;
    size_t i = 0;
    p->retry = -1;
    if (!data)
        abort();
    while (i < n) {
        size_t start = i;
        while (i < n && s[i] != '\n' && s[i] != '\r')
            i++;
        if (i == n)
            break; /* an unterminated last line is dropped */
        size_t end = i;
        i += s[i] == '\r' && i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
        if (end == start) { /* blank line: dispatch */
            data[dlen] = '\0';
            dispatch(p, type, data, dlen, has_data);
            type[0] = '\0';
            dlen = 0;
            has_data = false;
            continue;
        }
        if (s[start] == ':')
            continue; /* a comment */
        const char *colon = memchr(s + start, ':', end - start);
        size_t flen = colon ? (size_t)(colon - (s + start)) : end - start;
        const char *v = colon ? colon + 1 : s + end;
        if (colon && v < s + end && *v == ' ')
            v++;
        size_t vlen = (size_t)(s + end - v);
        if (flen == 5 && memcmp(s + start, "event", 5) == 0) {
            snprintf(type, sizeof type, "%.*s", (int)(vlen < 63 ? vlen : 63), v);
        } else if (flen == 4 && memcmp(s + start, "data", 4) == 0) {
            memcpy(data + dlen, v, vlen);
            dlen += vlen;
            data[dlen++] = '\n';
            has_data = true;
        } else if (flen == 5 && memcmp(s + start, "retry", 5) == 0) {
            if (vlen && strspn(v, "0123456789") >= vlen)
                p->retry = strtol(v, NULL, 10);
        } /* "id" and unknown fields: ignored here */
    }
    free(data);
}

/* ---- the target --------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char hello[] = "retry: 2000\n\n", beat[] = ": heartbeat\n\n";
    static const char *const names[2] = {"snapshot", "instance"};
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!doc)
        return 0;
    char *ev[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    bool container = json_is_object(doc) || json_is_array(doc);
    for (int k = 0; k < 2; k++) {
        kop_err err = ctf_sse_event(names[k], doc, &ev[k], &len[k]);
        FUZZ_CHECK(err == KOP_OK || !container);
        if (err) {
            FUZZ_CHECK(ev[k] == NULL);
            goto out;
        }
        FUZZ_CHECK(len[k] == strlen(ev[k]) && !strchr(ev[k], '\r'));
        size_t lines = 0;
        for (size_t i = 0; i < len[k]; i++)
            lines += ev[k][i] == '\n';
        FUZZ_CHECK(lines == 3);
    }

    /* The stream as the API writes it, parsed as a client would. */
    size_t n = strlen(hello) + len[0] + strlen(beat) + len[1];
    char *stream = malloc(n + 1);
    FUZZ_CHECK(stream);
    snprintf(stream, n + 1, "%s%s%s%s", hello, ev[0], beat, ev[1]);
    struct parsed p = {0};
    parse_stream(stream, n, &p);
    FUZZ_CHECK(p.retry == 2000 && p.events == 2);
    for (int k = 0; k < 2; k++) {
        FUZZ_CHECK(strcmp(p.name[k], names[k]) == 0);
        json_t *back = json_loads(p.data[k], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        FUZZ_CHECK(back && json_equal(back, doc));
        json_decref(back);
        free(p.data[k]);
    }
    free(stream);
out:
    free(ev[0]);
    free(ev[1]);
    json_decref(doc);
    return 0;
}

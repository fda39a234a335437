/*
 * request.c - parse an HTTP/1.x request head for the sample web challenge
 * (request.h). Request line: METHOD SP TARGET SP HTTP/1.D CRLF; the head
 * ends at an empty line. Only the request line is kept; header lines are
 * checked for being lines, nothing more.
 */
#include "request.h"

#include <string.h>

/* find_head_end returns the offset just past "\r\n\r\n" (or "\n\n"), or 0. */
static size_t find_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n')
            return i + 2;
        if (i + 3 < len && memcmp(buf + i, "\r\n\r\n", 4) == 0)
            return i + 4;
    }
    return 0;
}

static int is_token_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' || c == '_';
}

/* copy_field copies [s, e) into out (cap bytes of content); -1 if too long. */
static int copy_field(const char *s, const char *e, char *out, size_t cap)
{
    size_t n = (size_t)(e - s);
    if (n == 0 || n > cap)
        return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

enum webflag_parse webflag_parse_request(const char *buf, size_t len, struct webflag_request *req)
{
    size_t end = find_head_end(buf, len);
    if (end == 0)
        return len >= WEBFLAG_HEAD_MAX ? WEBFLAG_TOO_BIG : WEBFLAG_MORE;
    if (end > WEBFLAG_HEAD_MAX)
        return WEBFLAG_TOO_BIG;

    const char *line_end = memchr(buf, '\n', end);
    const char *p = buf, *stop = line_end; /* line_end exists: the head has one */
    if (stop > p && stop[-1] == '\r')
        stop--;

    const char *sp1 = memchr(p, ' ', (size_t)(stop - p));
    if (!sp1)
        return WEBFLAG_BAD;
    for (const char *c = p; c < sp1; c++)
        if (!is_token_char(*c))
            return WEBFLAG_BAD;
    if (copy_field(p, sp1, req->method, WEBFLAG_METHOD_MAX) < 0)
        return sp1 - p > WEBFLAG_METHOD_MAX ? WEBFLAG_TOO_BIG : WEBFLAG_BAD;

    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', (size_t)(stop - target));
    if (!sp2 || target >= sp2 || *target != '/')
        return WEBFLAG_BAD;
    const char *q = memchr(target, '?', (size_t)(sp2 - target));
    const char *path_end = q ? q : sp2;
    for (const char *c = target; c < path_end; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            return WEBFLAG_BAD;
    if (copy_field(target, path_end, req->path, WEBFLAG_PATH_MAX) < 0)
        return WEBFLAG_TOO_BIG;

    const char *version = sp2 + 1;
    if (stop - version != 8 || memcmp(version, "HTTP/1.", 7) != 0 || version[7] < '0' ||
        version[7] > '9')
        return WEBFLAG_BAD;
    return WEBFLAG_COMPLETE;
}

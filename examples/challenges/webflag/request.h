/*
 * request.h - the one parser of the sample web challenge: an HTTP/1.x
 * request head, read from a capped buffer. Nothing is decoded: the path is
 * compared byte for byte, so "%2e%2e" is just a path that does not exist.
 */
#ifndef KOPC_WEBFLAG_REQUEST_H
#define KOPC_WEBFLAG_REQUEST_H

#include <stddef.h>

#define WEBFLAG_HEAD_MAX   8192 /* a longer request head is refused (431) */
#define WEBFLAG_METHOD_MAX 16
#define WEBFLAG_PATH_MAX   1024

struct webflag_request {
    char method[WEBFLAG_METHOD_MAX + 1];
    char path[WEBFLAG_PATH_MAX + 1]; /* without the query string */
};

enum webflag_parse {
    WEBFLAG_COMPLETE = 0, /* req is filled */
    WEBFLAG_MORE = 1,     /* the head has not ended yet: read more */
    WEBFLAG_BAD = -1,     /* not an HTTP/1.x request: answer 400 */
    WEBFLAG_TOO_BIG = -2, /* head over WEBFLAG_HEAD_MAX or a field over its cap */
};

/*
 * webflag_parse_request parses the len bytes of buf (not NUL terminated)
 * as the start of a request. It never reads past buf + len.
 */
enum webflag_parse webflag_parse_request(const char *buf, size_t len, struct webflag_request *req);

#endif

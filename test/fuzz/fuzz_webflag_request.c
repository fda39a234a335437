/*
 * fuzz_webflag_request.c - the sample web challenge's request parser on
 * arbitrary bytes: it never reads past the input, and what it reports as a
 * complete request holds a token method and a path that starts with "/",
 * within their caps, without control bytes.
 */
#include "fuzz_check.h"
#include "request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    struct webflag_request req;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    enum webflag_parse r = webflag_parse_request(buf, size, &req);
    FUZZ_CHECK(r == WEBFLAG_COMPLETE || r == WEBFLAG_MORE || r == WEBFLAG_BAD ||
               r == WEBFLAG_TOO_BIG);
    if (r == WEBFLAG_COMPLETE) {
        size_t m = strlen(req.method), p = strlen(req.path);
        FUZZ_CHECK(m > 0 && m <= WEBFLAG_METHOD_MAX);
        FUZZ_CHECK(p > 0 && p <= WEBFLAG_PATH_MAX && req.path[0] == '/');
        for (size_t i = 0; i < p; i++)
            FUZZ_CHECK((unsigned char)req.path[i] > ' ' && (unsigned char)req.path[i] < 0x7f &&
                       req.path[i] != '?');
    }
    if (r == WEBFLAG_MORE)
        FUZZ_CHECK(size < WEBFLAG_HEAD_MAX);
    free(buf);
    return 0;
}

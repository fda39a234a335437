/*
 * buf.c - kop_buf: growable, capped, always NUL-terminated (see
 * kop/buf.h). Growth doubles the allocation (amortised O(1) appends)
 * but never allocates more than max + 1 bytes.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/buf.h"
#include "kop_internal.h"

void kop_buf_init(kop_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap_alloc = 0;
    b->max = max;
}

void kop_buf_fini(kop_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap_alloc = 0;
}

void kop_buf_reset(kop_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* reserve makes room for extra more bytes plus the NUL. */
static kop_err reserve(kop_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return KOP_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (need <= b->cap_alloc)
        return KOP_OK;
    size_t grow = b->cap_alloc ? b->cap_alloc : 64;
    while (grow < need)
        grow = grow > SIZE_MAX / 2 ? need : grow * 2;
    if (grow > b->max + 1)
        grow = b->max + 1;
    char *p = realloc(b->data, grow);
    if (!p)
        return KOP_ENOMEM;
    b->data = p;
    b->cap_alloc = grow;
    return KOP_OK;
}

kop_err kop_buf_append(kop_buf *b, const void *data, size_t n)
{
    kop_err err = reserve(b, n);
    if (err)
        return err;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return KOP_OK;
}

kop_err kop_buf_appends(kop_buf *b, const char *s)
{
    return kop_buf_append(b, s, strlen(s));
}

kop_err kop_buf_appendf(kop_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return KOP_EINVAL;
    kop_err err = reserve(b, (size_t)n);
    if (err)
        return err;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return KOP_OK;
}

void kop_buf_consume(kop_buf *b, size_t n)
{
    KOP_ASSERT(n <= b->len);
    if (n > b->len)
        n = b->len;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    if (b->data)
        b->data[b->len] = '\0';
}

char *kop_buf_take(kop_buf *b, size_t *len_out)
{
    char *out = b->data ? b->data : calloc(1, 1);
    if (len_out)
        *len_out = out ? b->len : 0;
    b->data = NULL;
    b->len = b->cap_alloc = 0;
    return out;
}

const char *kop_buf_str(const kop_buf *b)
{
    return b->data ? b->data : "";
}

/*
 * kop/buf.h - kop_buf, a growable byte buffer with a hard cap.
 *
 * Every buffer that grows from outside input (response bodies, watch lines,
 * files, API request bodies) is a kop_buf with a cap chosen by its owner.
 * Growing past the cap fails with KOP_ETOOBIG and leaves the buffer as it
 * was, so a hostile peer can never make libkop allocate without bound. The
 * contents are always NUL-terminated (the NUL is not counted in len), so text
 * can be handed to string functions without a copy.
 *
 * Caller storage: kop_buf_init / kop_buf_fini. A zeroed buffer with a cap
 * is valid and empty. Public because operators read untrusted input too (an
 * HTTP request body, say) and should cap it the same way.
 */
#ifndef KOP_BUF_H
#define KOP_BUF_H

#include <stddef.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

typedef struct kop_buf {
    char *data; /* NUL-terminated when non-NULL; owned */
    size_t len; /* bytes used, not counting the NUL */
    size_t cap_alloc;
    size_t max; /* the cap: len never exceeds it */
} kop_buf;

/* kop_buf_init prepares b as empty, allowed to grow to max bytes. */
KOP_API void kop_buf_init(kop_buf *b, size_t max);

/* kop_buf_fini frees the contents; b may be reused after kop_buf_init. */
KOP_API void kop_buf_fini(kop_buf *b);

/* kop_buf_reset empties b, keeping its allocation. */
KOP_API void kop_buf_reset(kop_buf *b);

/* kop_buf_append adds n bytes; KOP_ETOOBIG past the cap, KOP_ENOMEM. */
KOP_API KOP_NODISCARD kop_err kop_buf_append(kop_buf *b, const void *data, size_t n);

/* kop_buf_appends adds a NUL-terminated string. */
KOP_API KOP_NODISCARD kop_err kop_buf_appends(kop_buf *b, const char *s);

/* kop_buf_appendf adds printf-style text. */
KOP_API KOP_NODISCARD kop_err kop_buf_appendf(kop_buf *b, const char *fmt, ...) KOP_PRINTF(2, 3);

/* kop_buf_consume drops the first n bytes (n <= len), moving the rest up. */
KOP_API void kop_buf_consume(kop_buf *b, size_t n);

/*
 * kop_buf_take hands the contents to the caller (free() them) and leaves b
 * empty. Returns an empty heap string for an empty buffer, NULL on ENOMEM.
 */
KOP_API char *kop_buf_take(kop_buf *b, size_t *len_out);

/* kop_buf_str borrows the contents as a string: never NULL. */
KOP_API const char *kop_buf_str(const kop_buf *b);

KOP_END_DECLS

#endif /* KOP_BUF_H */

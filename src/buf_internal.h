/*
 * buf_internal.h - kop__buf, a growable byte buffer with a hard cap.
 *
 * Every buffer that grows from outside input (response bodies, watch lines,
 * files, API request bodies) is a kop__buf with a cap chosen by its owner.
 * Growing past the cap fails with KOP_ETOOBIG and leaves the buffer as it
 * was, so a hostile peer can never make libkop allocate without bound. The
 * contents are always NUL-terminated (the NUL is not counted in len), so text
 * can be handed to string functions without a copy.
 *
 * Caller storage: kop__buf_init / kop__buf_fini. A zeroed buffer with a cap
 * is valid and empty.
 */
#ifndef KOP_BUF_INTERNAL_H
#define KOP_BUF_INTERNAL_H

#include <stddef.h>

#include "kop/err.h"

typedef struct kop__buf {
    char *data; /* NUL-terminated when non-NULL; owned */
    size_t len; /* bytes used, not counting the NUL */
    size_t cap_alloc;
    size_t max; /* the cap: len never exceeds it */
} kop__buf;

/* kop__buf_init prepares b as empty, allowed to grow to max bytes. */
void kop__buf_init(kop__buf *b, size_t max);

/* kop__buf_fini frees the contents; b may be reused after kop__buf_init. */
void kop__buf_fini(kop__buf *b);

/* kop__buf_reset empties b, keeping its allocation. */
void kop__buf_reset(kop__buf *b);

/* kop__buf_append adds n bytes; KOP_ETOOBIG past the cap, KOP_ENOMEM. */
KOP_NODISCARD kop_err kop__buf_append(kop__buf *b, const void *data, size_t n);

/* kop__buf_appends adds a NUL-terminated string. */
KOP_NODISCARD kop_err kop__buf_appends(kop__buf *b, const char *s);

/* kop__buf_appendf adds printf-style text. */
KOP_NODISCARD kop_err kop__buf_appendf(kop__buf *b, const char *fmt, ...) KOP_PRINTF(2, 3);

/* kop__buf_consume drops the first n bytes (n <= len), moving the rest up. */
void kop__buf_consume(kop__buf *b, size_t n);

/*
 * kop__buf_take hands the contents to the caller (free() them) and leaves b
 * empty. Returns an empty heap string for an empty buffer, NULL on ENOMEM.
 */
char *kop__buf_take(kop__buf *b, size_t *len_out);

/* kop__buf_str borrows the contents as a string: never NULL. */
const char *kop__buf_str(const kop__buf *b);

#endif /* KOP_BUF_INTERNAL_H */

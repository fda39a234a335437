/*
 * log.c - structured logging (see kop/log.h).
 *
 * Workload: reconcile threads logging a few lines each per object, bursts
 * of V(4) lines when debugging, and the library reporting failures. So:
 *
 * - The enabled checks are one relaxed atomic load; the macros make them
 *   before any field is evaluated.
 * - A line is rendered into a per-thread buffer of KOP_LOG_LINE_MAX bytes
 *   (no allocation, so logging works when memory runs out), then written
 *   with one write(2) while holding write_lock, which also guards the
 *   output stream against kop_log_setup.
 * - Rendering is budgeted: the line writer never passes
 *   KOP_LOG_LINE_MAX - RESERVE bytes of content, and RESERVE holds whatever
 *   a truncated line still needs ("...", a closing quote, the truncated
 *   marker, '}' and the newline), so a cut line is well-formed.
 *
 * Invariants: a kop_logger is immutable after kop_logger_new; the settings
 * are atomics, except the stream, which is read only under write_lock.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "kop/log.h"
#include "kop_internal.h"

#define RESERVE   32 /* see above; the longest tail is 23 bytes */
#define REDACTED  "[redacted]"
#define CUT_MARK  "..."

/* ---- settings ----------------------------------------------------------- */

typedef void (*log_clock_fn)(struct timespec *now);

static atomic_int cfg_format = KOP_LOG_TEXT;
static atomic_int cfg_verbosity = 0;
static _Atomic(log_clock_fn) cfg_clock; /* NULL: the real clock */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *cfg_out; /* under write_lock; NULL is stderr */

void kop_log_setup(const kop_log_config *cfg)
{
    kop_log_config c = cfg ? *cfg : (kop_log_config){0};
    pthread_mutex_lock(&write_lock);
    atomic_store_explicit(&cfg_format, c.format == KOP_LOG_JSON ? KOP_LOG_JSON : KOP_LOG_TEXT,
                          memory_order_relaxed);
    atomic_store_explicit(&cfg_verbosity, c.verbosity < 0 ? 0 : c.verbosity,
                          memory_order_relaxed);
    cfg_out = c.out;
    pthread_mutex_unlock(&write_lock);
}

/*
 * kop__log_set_clock replaces the clock lines are stamped with (NULL: the
 * real one). For libkop's own tests only, which declare it themselves.
 */
void kop__log_set_clock(log_clock_fn now);
void kop__log_set_clock(log_clock_fn now)
{
    atomic_store(&cfg_clock, now);
}

kop_err kop_log_format_parse(const char *s, kop_log_format *out)
{
    if (s && strcmp(s, "text") == 0)
        *out = KOP_LOG_TEXT;
    else if (s && strcmp(s, "json") == 0)
        *out = KOP_LOG_JSON;
    else
        return KOP_EINVAL;
    return KOP_OK;
}

bool kop_log_enabled(kop_log_level level)
{
    return level <= KOP_LOG_INFO || kop_logv_enabled(1);
}

bool kop_logv_enabled(int v)
{
    return v <= atomic_load_explicit(&cfg_verbosity, memory_order_relaxed);
}

/* ---- the line writer ---------------------------------------------------- */

/*
 * line: the buffer a line is rendered into. Content stops at limit
 * (KOP_LOG_LINE_MAX - RESERVE); once something did not fit, cut is set and
 * nothing but the closing tail is added.
 */
struct line {
    char *buf;
    size_t len, limit;
    bool cut;
};

/* put adds n bytes whole, or nothing (then cut is set). */
static bool put(struct line *l, const char *s, size_t n)
{
    if (l->cut || l->len > l->limit || n > l->limit - l->len) {
        l->cut = true;
        return false;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return true;
}

static bool puts_(struct line *l, const char *s)
{
    return put(l, s, strlen(s));
}

/* tail adds the closing bytes of a line, which RESERVE always has room for. */
static void tail(struct line *l, const char *s)
{
    size_t n = strlen(s);
    KOP_ASSERT(l->len + n <= KOP_LOG_LINE_MAX);
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

/*
 * utf8_len returns the length of the valid UTF-8 sequence at s (at most n
 * bytes available), or 0 if the bytes there are not one: overlong forms,
 * surrogates and code points past U+10FFFF are invalid.
 */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    }
    return len;
}

/*
 * put_escaped adds s as the inside of a JSON string: '"', '\' and control
 * characters escaped, valid UTF-8 as is, invalid bytes as \ufffd. A
 * sequence that does not fit is not split: the text ends with "..." and cut
 * is set.
 */
static void put_escaped(struct line *l, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0 && !l->cut) {
        char esc[8];
        const char *unit = esc;
        size_t ulen = utf8_len(p, n), used = ulen ? ulen : 1;
        if (ulen == 0) {
            unit = "\\ufffd";
            ulen = 6;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            ulen = 2;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            unit = *p == '\n' ? "\\n" : *p == '\r' ? "\\r" : "\\t";
            ulen = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            ulen = 6;
        } else {
            unit = (const char *)p;
        }
        if (!put(l, unit, ulen))
            tail(l, CUT_MARK);
        p += used;
        n -= used;
    }
}

/* needs_quotes tells whether a text-format value must be quoted. */
static bool needs_quotes(const char *s, bool is_msg)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (n == 0)
        return true;
    while (n > 0) {
        size_t ulen = utf8_len(p, n);
        if (ulen == 0 || *p < 0x20 || *p == 0x7f || *p == '=' || *p == '"' || *p == '\\' ||
            (*p == ' ' && !is_msg))
            return true;
        p += ulen;
        n -= ulen;
    }
    return false;
}

/* put_string adds a string value: quoted in JSON, quoted in text when needed. */
static void put_string(struct line *l, kop_log_format fmt, const char *s, bool is_msg)
{
    if (fmt == KOP_LOG_JSON || needs_quotes(s, is_msg)) {
        if (!put(l, "\"", 1))
            return;
        put_escaped(l, s);
        if (l->cut || !put(l, "\"", 1))
            tail(l, "\""); /* a cut string is still closed */
    } else {
        put_escaped(l, s); /* nothing in s needs escaping */
    }
}

/* put_key adds the separator and key of a field: ` key=` or `,"key":`. */
static bool put_key(struct line *l, kop_log_format fmt, const char *key)
{
    char tmp[128];
    size_t n = 0;
    if (fmt == KOP_LOG_JSON) {
        size_t start = l->len;
        if (!put(l, ",\"", 2))
            return false;
        put_escaped(l, key);
        if (l->cut || !put(l, "\":", 2)) {
            l->len = start; /* drop the half-written key */
            l->cut = true;
            return false;
        }
        return true;
    }
    /* logfmt keys: printable ASCII without '=', '"' or spaces; others become '_'. */
    tmp[n++] = ' ';
    for (const char *k = key; *k && n < sizeof tmp - 1; k++)
        tmp[n++] = (*k > ' ' && *k < 0x7f && *k != '=' && *k != '"') ? *k : '_';
    if (n == 1)
        tmp[n++] = '_';
    tmp[n++] = '=';
    return put(l, tmp, n);
}

/* is_sensitive tells whether key names something that must not be logged. */
static bool is_sensitive(const char *key)
{
    static const char *const suffixes[] = {
        "token", "password", "passwd",  "secret",     "flag",        "authorization",
        "apikey", "api_key", "cookie", "credential", "credentials",
    };
    size_t n = strlen(key);
    for (size_t i = 0; i < KOP_ARRAY_LEN(suffixes); i++) {
        size_t m = strlen(suffixes[i]);
        if (n >= m && strcasecmp(key + n - m, suffixes[i]) == 0)
            return true;
    }
    return false;
}

static void put_field(struct line *l, kop_log_format fmt, const kop_log_field *f)
{
    const char *key = f->key ? f->key : "";
    char num[64];
    if (!put_key(l, fmt, key[0] ? key : "_"))
        return;
    if (f->type == KOP_LOG_T_SECRET || is_sensitive(key)) {
        put_string(l, fmt, REDACTED, false);
        return;
    }
    switch (f->type) {
    case KOP_LOG_T_STR:
        if (f->v.s)
            put_string(l, fmt, f->v.s, false);
        else
            puts_(l, "null");
        return;
    case KOP_LOG_T_ERR:
        put_string(l, fmt, kop_strerror((kop_err)f->v.err), false);
        return;
    case KOP_LOG_T_INT:
        snprintf(num, sizeof num, "%lld", f->v.i);
        break;
    case KOP_LOG_T_UINT:
        snprintf(num, sizeof num, "%llu", f->v.u);
        break;
    case KOP_LOG_T_BOOL:
        snprintf(num, sizeof num, "%s", f->v.b ? "true" : "false");
        break;
    case KOP_LOG_T_FLOAT:
        if (isnan(f->v.f) || isinf(f->v.f)) {
            /* Not JSON numbers: written as the strings Go's encoders use. */
            put_string(l, fmt, isnan(f->v.f) ? "NaN" : f->v.f > 0 ? "+Inf" : "-Inf", false);
            return;
        }
        snprintf(num, sizeof num, "%.15g", f->v.f);
        break;
    default:
        put_string(l, fmt, "!BADTYPE", false);
        return;
    }
    puts_(l, num);
}

static const char *level_name(kop_log_level level, int v, kop_log_format fmt)
{
    static const char *const text[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    static const char *const json[] = {"error", "warn", "info", "debug"};
    int i = level == KOP_LOG_INFO && v > 0 ? KOP_LOG_DEBUG : (int)level;
    if (i < KOP_LOG_ERROR || i > KOP_LOG_DEBUG)
        i = KOP_LOG_ERROR;
    return fmt == KOP_LOG_JSON ? json[i] : text[i];
}

static void now_utc(char out[32])
{
    struct timespec ts;
    struct tm tm;
    log_clock_fn clock_fn = atomic_load(&cfg_clock);
    if (clock_fn)
        clock_fn(&ts);
    else
        clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

/*
 * render builds one whole line, newline included, in l. The context
 * fields come before the line's own.
 */
static void render(struct line *l, kop_log_format fmt, kop_log_level level, int v,
                   const char *msg, const kop_log_field *ctx, size_t nctx,
                   const kop_log_field *fields, size_t n)
{
    char ts[32];
    now_utc(ts);
    if (fmt == KOP_LOG_JSON) {
        puts_(l, "{\"ts\":\"");
        puts_(l, ts);
        puts_(l, "\",\"level\":\"");
        puts_(l, level_name(level, v, fmt));
        puts_(l, "\",\"msg\":");
    } else {
        puts_(l, ts);
        puts_(l, " ");
        puts_(l, level_name(level, v, fmt));
        puts_(l, " ");
    }
    put_string(l, fmt, msg ? msg : "", true);
    for (size_t i = 0; i < nctx && !l->cut; i++)
        put_field(l, fmt, &ctx[i]);
    for (size_t i = 0; i < n && !l->cut; i++)
        put_field(l, fmt, &fields[i]);
    if (l->cut)
        tail(l, fmt == KOP_LOG_JSON ? ",\"truncated\":true" : " truncated=true");
    tail(l, fmt == KOP_LOG_JSON ? "}\n" : "\n");
}

/* emit hands a rendered line to the output in one piece. */
static void emit(const char *buf, size_t len)
{
    pthread_mutex_lock(&write_lock);
    FILE *f = cfg_out ? cfg_out : stderr;
    int fd = fileno(f);
    fflush(f); /* anything the program wrote to f itself goes first */
    if (fd < 0) {
        fwrite(buf, 1, len, f);
        fflush(f);
    } else {
        while (len > 0) {
            ssize_t w = write(fd, buf, len);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break; /* nowhere to report it: the log is the reporting channel */
            buf += w;
            len -= (size_t)w;
        }
    }
    pthread_mutex_unlock(&write_lock);
}

/* ---- loggers ------------------------------------------------------------ */

struct kop_logger {
    size_t n;
    kop_log_field *fields; /* strings point into the same allocation */
};

void kop_log_write(const kop_logger *lg, const kop_log_record *rec)
{
    static _Thread_local char buf[KOP_LOG_LINE_MAX];
    if (!rec)
        return;
    kop_log_level level = rec->level;
    int v = rec->v;
    const char *msg = rec->msg;
    const kop_log_field *fields = rec->fields;
    size_t n = rec->nfields;
    if (level == KOP_LOG_DEBUG && v < 1)
        v = 1;
    if (level == KOP_LOG_INFO || level == KOP_LOG_DEBUG) {
        if (!kop_logv_enabled(v))
            return;
    }
    struct line l = {.buf = buf, .len = 0, .limit = KOP_LOG_LINE_MAX - RESERVE};
    kop_log_format fmt = atomic_load_explicit(&cfg_format, memory_order_relaxed);
    render(&l, fmt, level, v, msg, lg ? lg->fields : NULL, lg ? lg->n : 0, fields,
           fields ? n : 0);
    emit(buf, l.len);
}

/* kept_string tells whether a field's string is copied into a logger. */
static const char *kept_string(const kop_log_field *f)
{
    return f->type == KOP_LOG_T_STR && f->v.s && !is_sensitive(f->key ? f->key : "") ? f->v.s
                                                                                     : NULL;
}

kop_err kop_logger_new(const kop_logger *parent, const kop_log_field *fields, size_t n,
                       kop_logger **out)
{
    size_t np = parent ? parent->n : 0, total = np + (fields ? n : 0);
    size_t bytes = sizeof(kop_logger) + total * sizeof(kop_log_field);
    const kop_log_field *src[2] = {parent ? parent->fields : NULL, fields};
    size_t counts[2] = {np, fields ? n : 0};

    *out = NULL;
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < counts[s]; i++) {
            const kop_log_field *f = &src[s][i];
            bytes += (f->key ? strlen(f->key) + 1 : 0);
            bytes += kept_string(f) ? strlen(f->v.s) + 1 : 0;
        }
    }
    kop_logger *lg = malloc(bytes);
    if (!lg)
        return KOP_ENOMEM;
    lg->n = total;
    lg->fields = (kop_log_field *)(lg + 1);
    char *arena = (char *)(lg->fields + total);
    size_t k = 0;
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < counts[s]; i++, k++) {
            const kop_log_field *f = &src[s][i];
            kop_log_field *d = &lg->fields[k];
            *d = *f;
            if (f->key) {
                size_t kl = strlen(f->key) + 1;
                d->key = memcpy(arena, f->key, kl);
                arena += kl;
            }
            if (f->type == KOP_LOG_T_SECRET || is_sensitive(f->key ? f->key : "")) {
                d->type = KOP_LOG_T_SECRET; /* a secret's value is not kept */
                d->v.s = NULL;
            } else if (kept_string(f)) {
                size_t vl = strlen(f->v.s) + 1;
                d->v.s = memcpy(arena, f->v.s, vl);
                arena += vl;
            }
        }
    }
    *out = lg;
    return KOP_OK;
}

void kop_logger_free(kop_logger *lg)
{
    free(lg);
}

/*
 * metrics.c - the metrics registry and its Prometheus text rendering (see
 * kop/metrics.h).
 *
 * Workload: a few controllers, each updating a handful of families from its
 * workers on every reconcile and queue operation (hot: a hash lookup and an
 * add under the family's mutex), and a scrape every 10-60 s (cold: sort and
 * format everything). So updates are O(1) and lock one family only; the
 * rendering sorts at scrape time rather than keeping anything sorted.
 *
 * Layout: the registry keeps its families in an array sorted by name
 * (binary search on registration, render order for free). A family keeps its
 * series in libkop's hash map (map_internal.h), keyed by the tuple of label
 * values encoded as one string ("<len>:<value>" for each, so no two tuples
 * share a key); the map borrows the key each series carries. Each series is
 * one allocation holding its key, its label values and, for a histogram,
 * its bucket counts.
 *
 * Invariants: a family's name, help, type, labels and bounds never change
 * after registration; only its series table and their values do, under
 * f->lock. Lock order: collect_lock, then the registry lock, then a family
 * lock; no path takes them the other way round.
 */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kop/buf.h"
#include "kop/metrics.h"
#include "kop_internal.h"
#include "map_internal.h"

#define DROPPED_NAME "kop_metrics_dropped_series_total"
#define DROPPED_HELP                                                                               \
    "Updates dropped because their metric family reached its cap of series, by family."

/* controller-runtime's controller_runtime_reconcile_time_seconds buckets
 * (pkg/internal/controller/metrics/metrics.go, the same from v0.7 to v0.24). */
static const double default_buckets[KOP_METRICS_DEFAULT_NBUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7,   0.8,  0.9,   1,    1.25, 1.5, 1.75, 2,   2.5, 3,    3.5, 4,    4.5, 5,
    6,     7,    8,     9,    10,  15,  20,   25,  30,  40,   50,  60,
};

enum family_type { TYPE_COUNTER = 1, TYPE_GAUGE, TYPE_HISTOGRAM };

static const char *const type_names[] = {NULL, "counter", "gauge", "histogram"};

/* One series: a tuple of label values and what was recorded for it. */
struct series {
    const char *key;     /* the values encoded (series_key); stored in the same block */
    double value;        /* counter or gauge value; histogram sum */
    uint64_t count;      /* histogram: observations */
    uint64_t *buckets;   /* histogram: per-bucket counts, not cumulative; +Inf last */
    const char **values; /* nlabels values, then NULL; stored in the same block */
};

struct kop_metric {
    kop_metrics *registry;
    char *name;
    char *help; /* may be NULL */
    enum family_type type;
    size_t nlabels;
    char **label_names;
    size_t nbounds; /* histogram upper bounds, +Inf excluded */
    double *bounds;

    pthread_mutex_t lock; /* guards everything below */
    kop__map series;      /* series key (borrowed) -> struct series */
    size_t nseries;
};

struct collector {
    kop_metrics_collect_fn fn;
    void *user;
};

struct kop_metrics {
    pthread_mutex_t lock; /* guards the family array */
    kop_metric **families; /* sorted by name */
    size_t nfamilies;
    size_t cap_families;
    kop_metric *dropped; /* DROPPED_NAME{metric} */

    pthread_mutex_t collect_lock; /* held while collectors run */
    struct collector *collectors;
    size_t ncollectors;
    size_t cap_collectors;
};

/* What a registration asks for; bounds already normalised. */
struct family_spec {
    const char *name;
    const char *help;
    enum family_type type;
    const char *const *label_names;
    size_t nlabels;
    const double *bounds;
    size_t nbounds;
};

/* ---- names and hashing -------------------------------------------------- */

static bool is_alpha_(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* valid_metric_name: [a-zA-Z_:][a-zA-Z0-9_:]* */
static bool valid_metric_name(const char *s)
{
    if (!s || !(is_alpha_(s[0]) || s[0] == ':'))
        return false;
    for (const char *p = s + 1; *p; p++) {
        if (!is_alpha_(*p) && !is_digit(*p) && *p != ':')
            return false;
    }
    return true;
}

/* valid_label_name: [a-zA-Z_][a-zA-Z0-9_]*, "__" prefix reserved. */
static bool valid_label_name(const char *s)
{
    if (!s || !is_alpha_(s[0]) || strncmp(s, "__", 2) == 0)
        return false;
    for (const char *p = s + 1; *p; p++) {
        if (!is_alpha_(*p) && !is_digit(*p))
            return false;
    }
    return true;
}

/* label_value returns the i-th value of a caller's tuple; NULL stands for "". */
static const char *label_value(const char *const *values, size_t i)
{
    return values && values[i] ? values[i] : "";
}

/* Keys of series whose encoded values fit here are made on the stack. */
#define KEY_STACK 256

/*
 * series_key encodes the tuple of nlabels values as "<len>:<value>" for
 * each, into buf (size bytes) if it fits, else into a new allocation that
 * *heap receives (the caller frees it). NULL when memory runs out.
 */
static char *series_key(const kop_metric *f, const char *const *values, char *buf, size_t size,
                        char **heap)
{
    size_t need = 1;
    *heap = NULL;
    for (size_t i = 0; i < f->nlabels; i++)
        need += strlen(label_value(values, i)) + 21; /* digits of a size_t and ':' */
    char *key = need <= size ? buf : (*heap = malloc(need));
    if (!key)
        return NULL;
    size_t at = 0;
    key[0] = '\0';
    for (size_t i = 0; i < f->nlabels; i++) {
        const char *v = label_value(values, i);
        at += (size_t)snprintf(key + at, need - at, "%zu:%s", strlen(v), v);
    }
    return key;
}

/* ---- series table ------------------------------------------------------- */

/* series_alloc makes a zeroed series with copies of the key and the values,
 * in one block: the struct, the value pointers, the bucket counts, the key,
 * then the strings. */
static struct series *series_alloc(const kop_metric *f, const char *key, const char *const *values)
{
    size_t off_values = sizeof(struct series);
    size_t off_buckets = off_values + (f->nlabels + 1) * sizeof(char *);
    off_buckets = (off_buckets + alignof(uint64_t) - 1) & ~(alignof(uint64_t) - 1);
    size_t nbuckets = f->type == TYPE_HISTOGRAM ? f->nbounds + 1 : 0;
    size_t off_key = off_buckets + nbuckets * sizeof(uint64_t);
    size_t key_len = strlen(key) + 1;
    size_t total = off_key + key_len;
    for (size_t i = 0; i < f->nlabels; i++)
        total += strlen(label_value(values, i)) + 1;

    char *block = calloc(1, total);
    if (!block)
        return NULL;
    struct series *s = (struct series *)(void *)block;
    s->values = (const char **)(void *)(block + off_values);
    s->buckets = nbuckets ? (uint64_t *)(void *)(block + off_buckets) : NULL;
    memcpy(block + off_key, key, key_len);
    s->key = block + off_key;
    char *str = block + off_key + key_len;
    for (size_t i = 0; i < f->nlabels; i++) {
        size_t n = strlen(label_value(values, i)) + 1;
        memcpy(str, label_value(values, i), n);
        s->values[i] = str;
        str += n;
    }
    s->values[f->nlabels] = NULL;
    return s;
}

/*
 * series_get returns the series for values, creating it if create is set.
 * NULL when it does not exist, when memory runs out, or when the family is
 * full; *dropped tells the last case. Called with f->lock held.
 */
static struct series *series_get(kop_metric *f, const char *const *values, bool create,
                                 bool *dropped)
{
    char buf[KEY_STACK], *heap;
    char *key = series_key(f, values, buf, sizeof buf, &heap);
    struct series *s = key ? kop__map_get(&f->series, key) : NULL;
    if (s || !create || !key)
        goto out;
    if (f->nseries >= KOP_METRICS_MAX_SERIES) {
        *dropped = true;
        goto out;
    }
    s = series_alloc(f, key, values);
    if (s && kop__map_put(&f->series, s->key, s, NULL) != KOP_OK) {
        free(s);
        s = NULL;
    }
    if (s)
        f->nseries++;
out:
    free(heap);
    return s;
}

/* ---- updates ------------------------------------------------------------ */

enum op { OP_TOUCH, OP_ADD, OP_SET, OP_OBSERVE };

/* bucket_index returns the first bucket whose bound is >= v; NaN and values
 * above every bound go to +Inf (index nbounds). */
static size_t bucket_index(const kop_metric *f, double v)
{
    size_t lo = 0, hi = f->nbounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->bounds[mid] >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void update(kop_metric *f, const char *const *values, enum op op, double v)
{
    bool dropped = false;
    pthread_mutex_lock(&f->lock);
    struct series *s = series_get(f, values, true, &dropped);
    if (s) {
        switch (op) {
        case OP_TOUCH:
            break;
        case OP_ADD:
            s->value += v;
            break;
        case OP_SET:
            s->value = v;
            break;
        case OP_OBSERVE:
            s->buckets[bucket_index(f, v)]++;
            s->count++;
            s->value += v;
            break;
        }
    }
    pthread_mutex_unlock(&f->lock);
    /* Counted after unlocking: the dropped family has its own lock, and it
     * cannot itself fill up (it has one series per family at most). */
    if (dropped && f != f->registry->dropped)
        kop_metric_inc(f->registry->dropped, (const char *const[]){f->name, NULL});
}

void kop_metric_add(kop_metric *f, const char *const *label_values, double v)
{
    if (!f || f->type == TYPE_HISTOGRAM)
        return;
    if (f->type == TYPE_COUNTER && !(v >= 0))
        return; /* a counter never goes down; !(v >= 0) also catches NaN */
    update(f, label_values, OP_ADD, v);
}

void kop_metric_inc(kop_metric *f, const char *const *label_values)
{
    kop_metric_add(f, label_values, 1);
}

void kop_metric_set(kop_metric *f, const char *const *label_values, double v)
{
    if (!f || f->type != TYPE_GAUGE)
        return;
    update(f, label_values, OP_SET, v);
}

void kop_metric_observe(kop_metric *f, const char *const *label_values, double v)
{
    if (!f || f->type != TYPE_HISTOGRAM)
        return;
    update(f, label_values, OP_OBSERVE, v);
}

void kop_metric_touch(kop_metric *f, const char *const *label_values)
{
    if (f)
        update(f, label_values, OP_TOUCH, 0);
}

bool kop_metric_remove(kop_metric *f, const char *const *label_values)
{
    char buf[KEY_STACK], *heap;
    if (!f)
        return false;
    pthread_mutex_lock(&f->lock);
    char *key = series_key(f, label_values, buf, sizeof buf, &heap);
    struct series *s = key ? kop__map_remove(&f->series, key) : NULL;
    bool found = s != NULL;
    if (found) {
        f->nseries--;
        kop__map_shrink(&f->series);
    }
    pthread_mutex_unlock(&f->lock);
    free(heap);
    free(s);
    return found;
}

kop_err kop_metric_value(kop_metric *f, const char *const *label_values, double *out)
{
    if (!f || !out)
        return KOP_EINVAL;
    bool dropped = false;
    kop_err err = KOP_ENOTFOUND;
    pthread_mutex_lock(&f->lock);
    struct series *s = series_get(f, label_values, false, &dropped);
    if (s) {
        *out = f->type == TYPE_HISTOGRAM ? (double)s->count : s->value;
        err = KOP_OK;
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

/* ---- families ----------------------------------------------------------- */

static void family_free(kop_metric *f)
{
    if (!f)
        return;
    kop__map_fini(&f->series, free);
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->label_names[i]);
    free(f->label_names);
    free(f->bounds);
    free(f->name);
    free(f->help);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static kop_err family_new(kop_metrics *m, const struct family_spec *spec, kop_metric **out)
{
    kop_err err = KOP_ENOMEM;
    kop_metric *f = calloc(1, sizeof *f);
    *out = NULL;
    if (!f)
        return KOP_ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    kop__map_init_borrowing(&f->series);
    f->registry = m;
    f->type = spec->type;
    f->name = strdup(spec->name);
    f->help = spec->help ? strdup(spec->help) : NULL;
    if (!f->name || (spec->help && !f->help))
        goto out;
    if (spec->nlabels) {
        f->label_names = calloc(spec->nlabels, sizeof *f->label_names);
        if (!f->label_names)
            goto out;
        for (; f->nlabels < spec->nlabels; f->nlabels++) {
            f->label_names[f->nlabels] = strdup(spec->label_names[f->nlabels]);
            if (!f->label_names[f->nlabels])
                goto out;
        }
    }
    if (spec->nbounds) {
        f->bounds = malloc(spec->nbounds * sizeof *f->bounds);
        if (!f->bounds)
            goto out;
        memcpy(f->bounds, spec->bounds, spec->nbounds * sizeof *f->bounds);
        f->nbounds = spec->nbounds;
    }
    /* An unlabelled family has exactly one series: create it now, so that it
     * renders (as zero) before the first update, as Prometheus clients do. */
    if (f->nlabels == 0) {
        bool dropped = false;
        if (!series_get(f, NULL, true, &dropped))
            goto out;
    }
    *out = f;
    err = KOP_OK;
out:
    if (err)
        family_free(f);
    return err;
}

/* family_same tells whether f is what spec asks for (help aside: the first
 * registration's help text wins). */
static bool family_same(const kop_metric *f, const struct family_spec *spec)
{
    if (f->type != spec->type || f->nlabels != spec->nlabels || f->nbounds != spec->nbounds)
        return false;
    for (size_t i = 0; i < f->nlabels; i++) {
        if (strcmp(f->label_names[i], spec->label_names[i]) != 0)
            return false;
    }
    for (size_t i = 0; i < f->nbounds; i++) {
        if (f->bounds[i] != spec->bounds[i])
            return false;
    }
    return true;
}

/* check_spec validates names, labels and bounds. */
static kop_err check_spec(const struct family_spec *spec)
{
    if (!valid_metric_name(spec->name) || spec->nlabels > KOP_METRICS_MAX_LABELS)
        return KOP_EINVAL;
    for (size_t i = 0; i < spec->nlabels; i++) {
        const char *l = spec->label_names[i];
        if (!valid_label_name(l))
            return KOP_EINVAL;
        if (spec->type == TYPE_HISTOGRAM && strcmp(l, "le") == 0)
            return KOP_EINVAL;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(spec->label_names[j], l) == 0)
                return KOP_EINVAL;
        }
    }
    for (size_t i = 0; i < spec->nbounds; i++) {
        if (isnan(spec->bounds[i]) || isinf(spec->bounds[i]))
            return KOP_EINVAL;
        if (i > 0 && !(spec->bounds[i] > spec->bounds[i - 1]))
            return KOP_EINVAL;
    }
    return KOP_OK;
}

/* find_family returns the position of name in m->families, or where it
 * would be inserted; *found tells which. Called with m->lock held. */
static size_t find_family(const kop_metrics *m, const char *name, bool *found)
{
    size_t lo = 0, hi = m->nfamilies;
    *found = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->families[mid]->name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static kop_err family_register(kop_metrics *m, const struct family_spec *spec, kop_metric **out)
{
    kop_err err;
    bool found;
    kop_metric *f = NULL;

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!m)
        return KOP_EINVAL;
    err = check_spec(spec);
    if (err)
        return err;

    pthread_mutex_lock(&m->lock);
    size_t pos = find_family(m, spec->name, &found);
    if (found) {
        f = m->families[pos];
        err = family_same(f, spec) ? KOP_OK : KOP_EINVAL;
        goto out;
    }
    if (m->nfamilies >= KOP_METRICS_MAX_FAMILIES) {
        err = KOP_ETOOBIG;
        goto out;
    }
    if (m->nfamilies == m->cap_families) {
        size_t n = m->cap_families ? m->cap_families * 2 : 32;
        kop_metric **p = realloc(m->families, n * sizeof *p);
        if (!p) {
            err = KOP_ENOMEM;
            goto out;
        }
        m->families = p;
        m->cap_families = n;
    }
    err = family_new(m, spec, &f);
    if (err)
        goto out;
    memmove(&m->families[pos + 1], &m->families[pos], (m->nfamilies - pos) * sizeof f);
    m->families[pos] = f;
    m->nfamilies++;
out:
    pthread_mutex_unlock(&m->lock);
    if (err == KOP_OK)
        *out = f;
    return err;
}

static size_t count_labels(const char *const *label_names)
{
    size_t n = 0;
    while (label_names && label_names[n])
        n++;
    return n;
}

kop_err kop_metrics_counter(kop_metrics *m, const char *name, const char *help,
                            const char *const *label_names, kop_metric **out)
{
    struct family_spec spec = {name, help, TYPE_COUNTER, label_names, count_labels(label_names),
                               NULL, 0};
    return family_register(m, &spec, out);
}

kop_err kop_metrics_gauge(kop_metrics *m, const char *name, const char *help,
                          const char *const *label_names, kop_metric **out)
{
    struct family_spec spec = {name, help, TYPE_GAUGE, label_names, count_labels(label_names),
                               NULL, 0};
    return family_register(m, &spec, out);
}

kop_err kop_metrics_histogram(kop_metrics *m, const kop_histogram_opts *opts, kop_metric **out)
{
    if (!opts) {
        if (out)
            *out = NULL;
        return KOP_EINVAL;
    }
    const double *buckets = opts->buckets;
    size_t nbuckets = opts->nbuckets;
    if (nbuckets == 0) {
        buckets = default_buckets;
        nbuckets = KOP_ARRAY_LEN(default_buckets);
    } else if (!buckets) {
        if (out)
            *out = NULL;
        return KOP_EINVAL;
    }
    /* +Inf is always there; an explicit one at the end is not a bucket. */
    if (nbuckets > 0 && isinf(buckets[nbuckets - 1]) && buckets[nbuckets - 1] > 0)
        nbuckets--;
    if (nbuckets > KOP_METRICS_MAX_BUCKETS) {
        if (out)
            *out = NULL;
        return KOP_EINVAL;
    }
    struct family_spec spec = {opts->name,     opts->help,
                               TYPE_HISTOGRAM, opts->label_names,
                               count_labels(opts->label_names), buckets,
                               nbuckets};
    return family_register(m, &spec, out);
}

kop_err kop_metrics_exponential_buckets(double start, double factor, size_t count, double *out)
{
    if (!out || !(start > 0) || !(factor > 1) || count < 1 || count > KOP_METRICS_MAX_BUCKETS)
        return KOP_EINVAL;
    double v = start;
    for (size_t i = 0; i < count; i++) {
        out[i] = v;
        v *= factor;
    }
    return KOP_OK;
}

/* ---- registry ----------------------------------------------------------- */

kop_err kop_metrics_new(kop_metrics **out)
{
    kop_err err;
    kop_metrics *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return KOP_ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->collect_lock, NULL);
    err = kop_metrics_counter(m, DROPPED_NAME, DROPPED_HELP, (const char *const[]){"metric", NULL},
                              &m->dropped);
    if (err) {
        kop_metrics_free(m);
        return err;
    }
    *out = m;
    return KOP_OK;
}

void kop_metrics_free(kop_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nfamilies; i++)
        family_free(m->families[i]);
    free(m->families);
    free(m->collectors);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->collect_lock);
    free(m);
}

kop_err kop_metrics_add_collector(kop_metrics *m, kop_metrics_collect_fn fn, void *user)
{
    kop_err err = KOP_OK;
    if (!m || !fn)
        return KOP_EINVAL;
    pthread_mutex_lock(&m->collect_lock);
    if (m->ncollectors == m->cap_collectors) {
        size_t n = m->cap_collectors ? m->cap_collectors * 2 : 8;
        struct collector *p = realloc(m->collectors, n * sizeof *p);
        if (!p) {
            err = KOP_ENOMEM;
            goto out;
        }
        m->collectors = p;
        m->cap_collectors = n;
    }
    m->collectors[m->ncollectors++] = (struct collector){fn, user};
out:
    pthread_mutex_unlock(&m->collect_lock);
    return err;
}

void kop_metrics_remove_collector(kop_metrics *m, kop_metrics_collect_fn fn, void *user)
{
    if (!m)
        return;
    /* Taking collect_lock waits for a render that is running collectors. */
    pthread_mutex_lock(&m->collect_lock);
    for (size_t i = 0; i < m->ncollectors; i++) {
        if (m->collectors[i].fn == fn && m->collectors[i].user == user) {
            memmove(&m->collectors[i], &m->collectors[i + 1],
                    (m->ncollectors - i - 1) * sizeof *m->collectors);
            m->ncollectors--;
            break;
        }
    }
    pthread_mutex_unlock(&m->collect_lock);
}

/* ---- rendering ---------------------------------------------------------- */

/* A kop_buf whose first failure sticks, so formatting code need not check
 * every append. */
struct writer {
    kop_buf b;
    kop_err err;
};

static void put(struct writer *w, const char *s, size_t n)
{
    if (!w->err)
        w->err = kop_buf_append(&w->b, s, n);
}

static void puts_(struct writer *w, const char *s)
{
    put(w, s, strlen(s));
}

/* put_escaped writes s with backslash and newline escaped, and the double
 * quote too when quote is set (label values; HELP text leaves it alone). */
static void put_escaped(struct writer *w, const char *s, bool quote)
{
    const char *run = s;
    for (const char *p = s; *p; p++) {
        const char *esc = NULL;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '\n')
            esc = "\\n";
        else if (*p == '"' && quote)
            esc = "\\\"";
        if (esc) {
            put(w, run, (size_t)(p - run));
            puts_(w, esc);
            run = p + 1;
        }
    }
    puts_(w, run);
}

/*
 * format_double writes v as Prometheus (Go's strconv.ParseFloat) reads it:
 * the shortest of %.15g..%.17g that reads back as exactly v, so 0.1 is
 * "0.1" and not "0.10000000000000001", and +Inf, -Inf, NaN spelled so.
 * The caller has switched to the C locale, so the decimal point is '.'.
 */
static void format_double(char out[32], double v)
{
    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
}

static void put_double(struct writer *w, double v)
{
    char num[32];
    format_double(num, v);
    puts_(w, num);
}

/* put_labels writes {a="x",b="y"} plus le="..." when le is set; nothing at
 * all for no labels. */
static void put_labels(struct writer *w, const kop_metric *f, const struct series *s,
                       const char *le)
{
    if (f->nlabels == 0 && !le)
        return;
    puts_(w, "{");
    for (size_t i = 0; i < f->nlabels; i++) {
        if (i)
            puts_(w, ",");
        puts_(w, f->label_names[i]);
        puts_(w, "=\"");
        put_escaped(w, s->values[i], true);
        puts_(w, "\"");
    }
    if (le) {
        puts_(w, f->nlabels ? ",le=\"" : "le=\"");
        puts_(w, le);
        puts_(w, "\"");
    }
    puts_(w, "}");
}

/* put_sample writes one line: name[suffix]{labels} value. */
static void put_sample(struct writer *w, const kop_metric *f, const struct series *s,
                       const char *suffix, const char *le, double v)
{
    puts_(w, f->name);
    puts_(w, suffix);
    put_labels(w, f, s, le);
    puts_(w, " ");
    put_double(w, v);
    puts_(w, "\n");
}

static void put_series(struct writer *w, const kop_metric *f, const struct series *s)
{
    if (f->type != TYPE_HISTOGRAM) {
        put_sample(w, f, s, "", NULL, s->value);
        return;
    }
    uint64_t cumulative = 0;
    char le[32];
    for (size_t i = 0; i < f->nbounds; i++) {
        cumulative += s->buckets[i];
        format_double(le, f->bounds[i]);
        put_sample(w, f, s, "_bucket", le, (double)cumulative);
    }
    put_sample(w, f, s, "_bucket", "+Inf", (double)s->count);
    put_sample(w, f, s, "_sum", NULL, s->value);
    put_sample(w, f, s, "_count", NULL, (double)s->count);
}

/* compare_series orders by label values, first label first; the value
 * arrays are NULL-terminated, and all of one family have the same length. */
static int compare_series(const void *a, const void *b)
{
    const struct series *x = *(const struct series *const *)a;
    const struct series *y = *(const struct series *const *)b;
    for (size_t i = 0; x->values[i]; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

static void render_family(struct writer *w, kop_metric *f)
{
    pthread_mutex_lock(&f->lock);
    if (f->nseries == 0)
        goto out; /* a labelled family nobody has used yet */
    struct series **sorted = malloc(f->nseries * sizeof *sorted);
    if (!sorted) {
        w->err = KOP_ENOMEM;
        goto out;
    }
    size_t n = 0, pos = 0;
    const char *key;
    void *v;
    while (kop__map_next(&f->series, &pos, &key, &v))
        sorted[n++] = v;
    KOP_ASSERT(n == f->nseries);
    qsort(sorted, n, sizeof *sorted, compare_series);

    if (f->help) {
        puts_(w, "# HELP ");
        puts_(w, f->name);
        puts_(w, " ");
        put_escaped(w, f->help, false);
        puts_(w, "\n");
    }
    puts_(w, "# TYPE ");
    puts_(w, f->name);
    puts_(w, " ");
    puts_(w, type_names[f->type]);
    puts_(w, "\n");
    for (size_t i = 0; i < n && !w->err; i++)
        put_series(w, f, sorted[i]);
    free(sorted);
out:
    pthread_mutex_unlock(&f->lock);
}

static void run_collectors(kop_metrics *m)
{
    pthread_mutex_lock(&m->collect_lock);
    for (size_t i = 0; i < m->ncollectors; i++)
        m->collectors[i].fn(m->collectors[i].user);
    pthread_mutex_unlock(&m->collect_lock);
}

kop_err kop_metrics_render(kop_metrics *m, char **out, size_t *len)
{
    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (len)
        *len = 0;
    if (!m)
        return KOP_EINVAL;

    run_collectors(m);

    /* Numbers must come out with a '.', whatever locale the program set. */
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t saved = c_locale ? uselocale(c_locale) : (locale_t)0;

    struct writer w = {.err = KOP_OK};
    kop_buf_init(&w.b, KOP_METRICS_MAX_RENDER);
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->nfamilies && !w.err; i++)
        render_family(&w, m->families[i]);
    pthread_mutex_unlock(&m->lock);

    if (c_locale) {
        uselocale(saved);
        freelocale(c_locale);
    }
    if (w.err) {
        kop_buf_fini(&w.b);
        return w.err;
    }
    *out = kop_buf_take(&w.b, len);
    return *out ? KOP_OK : KOP_ENOMEM;
}

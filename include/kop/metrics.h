/*
 * kop/metrics.h - counters, gauges and histograms with labels, rendered in
 * the Prometheus text exposition format (version 0.0.4).
 *
 * A kop_metrics registry holds metric families; a family (kop_metric) has a
 * name, a help text, a type and a fixed list of label names, and holds one
 * series per distinct tuple of label values. Updates name the series by its
 * label values; the series is created on first use.
 *
 * Everything is thread-safe: families are registered, updated and rendered
 * from any thread. Each family has its own mutex, so controllers updating
 * different families never contend.
 *
 * Sharing: registering a name that exists with the same type, label names
 * (and buckets, for a histogram) returns the existing family, so several
 * workqueues or controllers can share the workqueue_* families. Any other
 * clash is KOP_EINVAL.
 *
 * Bounds: a family holds at most KOP_METRICS_MAX_SERIES series; updates that
 * would create more are dropped and counted in
 * kop_metrics_dropped_series_total{metric="<family>"}. A registry holds at
 * most KOP_METRICS_MAX_FAMILIES families.
 *
 * Every update function accepts a NULL family and then does nothing, so code
 * can run with metrics turned off by passing NULL handles around.
 *
 * Label values: label_values holds one string per label name, in the order
 * the names were registered. A NULL array, or a NULL entry, stands for the
 * empty string (an unlabelled family takes NULL).
 */
#ifndef KOP_METRICS_H
#define KOP_METRICS_H

#include <stddef.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

typedef struct kop_metrics kop_metrics; /* a registry */
typedef struct kop_metric kop_metric;   /* one family, owned by its registry */

#define KOP_METRICS_MAX_SERIES   10000          /* series per family */
#define KOP_METRICS_MAX_FAMILIES 4096           /* families per registry */
#define KOP_METRICS_MAX_LABELS   16             /* label names per family */
#define KOP_METRICS_MAX_BUCKETS  256            /* histogram buckets, +Inf excluded */
#define KOP_METRICS_MAX_RENDER   (128u << 20)   /* rendered text */
#define KOP_METRICS_DEFAULT_NBUCKETS 40

/* The Content-Type of what kop_metrics_render produces. */
#define KOP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * kop_metrics_new makes an empty registry. *out is owned by the caller:
 * kop_metrics_free.
 */
KOP_API KOP_NODISCARD kop_err kop_metrics_new(kop_metrics **out);

/*
 * kop_metrics_free frees m and every family in it; the kop_metric handles
 * become invalid. Nothing may use m concurrently. NULL is ok.
 */
KOP_API void kop_metrics_free(kop_metrics *m);

/*
 * kop_metrics_counter registers (or finds) a counter family. name must match
 * [a-zA-Z_:][a-zA-Z0-9_:]*; label_names is a NULL-terminated array of names
 * matching [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__", no duplicates),
 * or NULL for none. help may be NULL. All strings are copied. *out is
 * borrowed: it stays valid until kop_metrics_free. Returns KOP_EINVAL for a
 * bad name or a clash with an existing family, KOP_ETOOBIG past
 * KOP_METRICS_MAX_FAMILIES, KOP_ENOMEM.
 */
KOP_API KOP_NODISCARD kop_err kop_metrics_counter(kop_metrics *m, const char *name,
                                                  const char *help,
                                                  const char *const *label_names,
                                                  kop_metric **out);

/* kop_metrics_gauge registers (or finds) a gauge family; as kop_metrics_counter. */
KOP_API KOP_NODISCARD kop_err kop_metrics_gauge(kop_metrics *m, const char *name, const char *help,
                                                const char *const *label_names, kop_metric **out);

/*
 * kop_histogram_opts: a histogram family. Every pointer is borrowed for the
 * call (the names, help and bounds are copied). Zero fields take the
 * defaults: no help, no labels, the default buckets.
 */
typedef struct kop_histogram_opts {
    const char *name;               /* required; as kop_metrics_counter's */
    const char *help;               /* NULL: none */
    const char *const *label_names; /* NULL-terminated; NULL: none; "le" is not allowed */
    const double *buckets;          /* upper bounds, strictly increasing, +Inf implied */
    size_t nbuckets;                /* 0: the default buckets (buckets then ignored) */
} kop_histogram_opts;

/*
 * kop_metrics_histogram registers (or finds) the histogram family opts
 * describes. A trailing +Inf bound is accepted and ignored; nbuckets 0
 * selects the default buckets, which are controller-runtime's
 * controller_runtime_reconcile_time_seconds buckets (0.005 s to 60 s, 40
 * bounds). Re-registering finds the family only if the buckets are the
 * same. *out is borrowed, as for kop_metrics_counter; errors as there.
 *
 *   kop_metrics_histogram(m, &(kop_histogram_opts){.name = "ready_seconds",
 *       .help = "Seconds to Ready.", .label_names = labels}, &h);
 */
KOP_API KOP_NODISCARD kop_err kop_metrics_histogram(kop_metrics *m, const kop_histogram_opts *opts,
                                                    kop_metric **out);

/*
 * kop_metrics_exponential_buckets fills out[0..count) with start,
 * start*factor, start*factor^2, ... (as Prometheus' ExponentialBuckets).
 * KOP_EINVAL unless start > 0, factor > 1 and 1 <= count <=
 * KOP_METRICS_MAX_BUCKETS.
 */
KOP_API KOP_NODISCARD kop_err kop_metrics_exponential_buckets(double start, double factor,
                                                              size_t count, double *out);

/*
 * kop_metric_add adds v to a series. Counters only go up: a negative or NaN
 * v is ignored on a counter. On a gauge any v is added. Histograms ignore it.
 */
KOP_API void kop_metric_add(kop_metric *f, const char *const *label_values, double v);

/* kop_metric_inc adds 1 to a counter or gauge series. */
KOP_API void kop_metric_inc(kop_metric *f, const char *const *label_values);

/* kop_metric_set sets a gauge series to v; ignored on other types. */
KOP_API void kop_metric_set(kop_metric *f, const char *const *label_values, double v);

/* kop_metric_observe records one sample v in a histogram series; ignored on other types. */
KOP_API void kop_metric_observe(kop_metric *f, const char *const *label_values, double v);

/*
 * kop_metric_touch creates the series at zero if it does not exist yet, so
 * that it is rendered before its first update (client_golang's
 * WithLabelValues). Any type.
 */
KOP_API void kop_metric_touch(kop_metric *f, const char *const *label_values);

/*
 * kop_metric_remove deletes a series, so that it is no longer rendered (what
 * client_golang's DeleteLabelValues does for an object that is gone).
 * Returns whether it existed. Any type; a later update creates it anew at zero.
 */
KOP_API bool kop_metric_remove(kop_metric *f, const char *const *label_values);

/*
 * kop_metric_value reads a series: the value of a counter or gauge, the
 * number of observations of a histogram. KOP_ENOTFOUND if the series was
 * never created, KOP_EINVAL if f is NULL. For tests and health checks.
 */
KOP_API KOP_NODISCARD kop_err kop_metric_value(kop_metric *f, const char *const *label_values,
                                               double *out);

/*
 * kop_metrics_collect_fn is called at the start of every kop_metrics_render,
 * to bring gauges that are computed (ages, sizes) up to date. It may update
 * any family but must not register families or add or remove collectors.
 */
typedef void (*kop_metrics_collect_fn)(void *user);

/* kop_metrics_add_collector registers fn(user), called at each render. */
KOP_API KOP_NODISCARD kop_err kop_metrics_add_collector(kop_metrics *m, kop_metrics_collect_fn fn,
                                                        void *user);

/*
 * kop_metrics_remove_collector unregisters fn(user). When it returns, fn is
 * not running and will not be called again, so user may be freed. It must
 * not be called from inside a collector.
 */
KOP_API void kop_metrics_remove_collector(kop_metrics *m, kop_metrics_collect_fn fn, void *user);

/*
 * kop_metrics_render runs the collectors and writes every family in the
 * Prometheus text format: families sorted by name, each with its HELP and
 * TYPE lines, series sorted by label values. Families with labels but no
 * series yet are left out. *out is a NUL-terminated string owned by the
 * caller (free()); *len, if len is not NULL, its length. KOP_ETOOBIG past
 * KOP_METRICS_MAX_RENDER.
 */
KOP_API KOP_NODISCARD kop_err kop_metrics_render(kop_metrics *m, char **out, size_t *len);

KOP_END_DECLS

#endif /* KOP_METRICS_H */

/*
 * test_metrics.c - the registry renders exactly the Prometheus text format
 * (cases as data), escapes what must be escaped, shares families registered
 * twice and refuses clashes, ignores NULL families, counts exactly under
 * concurrency, and caps the series of a family.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>

#include <cmocka.h>

#include "kop/metrics.h"

/* ---- rendering, cases as data ------------------------------------------- */

/* One update: op is 'a' add, 'i' inc, 's' set, 'o' observe, 't' touch. */
struct update {
    char op;
    const char *lv[3];
    double v;
};

struct render_case {
    const char *title;
    char type; /* 'c' counter, 'g' gauge, 'h' histogram */
    const char *name;
    const char *help;
    const char *labels[3]; /* NULL-terminated */
    double buckets[4];
    size_t nbuckets;
    struct update updates[8]; /* up to the first with op 0 */
    const char *want;
};

static const struct render_case render_cases[] = {
    {"unlabelled counter renders as zero before any update",
     'c', "c_total", "Things counted.", {NULL}, {0}, 0, {{0}},
     "# HELP c_total Things counted.\n"
     "# TYPE c_total counter\n"
     "c_total 0\n"},
    {"counter with labels, series sorted by label values; negative adds ignored",
     'c', "req_total", "Requests.", {"code", "verb", NULL}, {0}, 0,
     {{'a', {"500", "GET"}, 2},
      {'i', {"200", "PUT"}, 0},
      {'i', {"200", "GET"}, 0},
      {'i', {"200", "PUT"}, 0},
      {'a', {"500", "GET"}, -7},
      {'a', {"500", "GET"}, NAN},
      {'a', {"200", "GET"}, 0.5}},
     "# HELP req_total Requests.\n"
     "# TYPE req_total counter\n"
     "req_total{code=\"200\",verb=\"GET\"} 1.5\n"
     "req_total{code=\"200\",verb=\"PUT\"} 2\n"
     "req_total{code=\"500\",verb=\"GET\"} 2\n"},
    {"gauge: set, add below zero, shortest round-trip floats and special values",
     'g', "g", "A gauge.", {"k", NULL}, {0}, 0,
     {{'s', {"a"}, 0.1},
      {'s', {"b"}, 1e21},
      {'s', {"c"}, -2.5},
      {'a', {"c"}, -1},
      {'s', {"d"}, INFINITY},
      {'s', {"e"}, -INFINITY},
      {'s', {"f"}, NAN},
      {'s', {"g"}, 123456789012}},
     "# HELP g A gauge.\n"
     "# TYPE g gauge\n"
     "g{k=\"a\"} 0.1\n"
     "g{k=\"b\"} 1e+21\n"
     "g{k=\"c\"} -3.5\n"
     "g{k=\"d\"} +Inf\n"
     "g{k=\"e\"} -Inf\n"
     "g{k=\"f\"} NaN\n"
     "g{k=\"g\"} 123456789012\n"},
    {"unlabelled histogram: cumulative buckets, a value on a bound goes in it",
     'h', "h_seconds", "Durations.", {NULL}, {0.1, 1, 10}, 3,
     {{'o', {NULL}, 0.0625}, {'o', {NULL}, 1}, {'o', {NULL}, 4}, {'o', {NULL}, 64}},
     "# HELP h_seconds Durations.\n"
     "# TYPE h_seconds histogram\n"
     "h_seconds_bucket{le=\"0.1\"} 1\n"
     "h_seconds_bucket{le=\"1\"} 2\n"
     "h_seconds_bucket{le=\"10\"} 3\n"
     "h_seconds_bucket{le=\"+Inf\"} 4\n"
     "h_seconds_sum 69.0625\n"
     "h_seconds_count 4\n"},
    {"labelled histogram without help; trailing +Inf bound accepted",
     'h', "lat", NULL, {"op", NULL}, {0.5, INFINITY}, 2,
     {{'o', {"w"}, 0.25}, {'o', {"r"}, 2}, {'o', {"w"}, 0.75}},
     "# TYPE lat histogram\n"
     "lat_bucket{op=\"r\",le=\"0.5\"} 0\n"
     "lat_bucket{op=\"r\",le=\"+Inf\"} 1\n"
     "lat_sum{op=\"r\"} 2\n"
     "lat_count{op=\"r\"} 1\n"
     "lat_bucket{op=\"w\",le=\"0.5\"} 1\n"
     "lat_bucket{op=\"w\",le=\"+Inf\"} 2\n"
     "lat_sum{op=\"w\"} 1\n"
     "lat_count{op=\"w\"} 2\n"},
    {"escaping: label values escape \\ \" and newline; HELP escapes \\ and newline only",
     'g', "esc", "Back\\slash, \"quoted\",\nsecond line.", {"path", NULL}, {0}, 0,
     {{'s', {"C:\\dir \"x\"\nend"}, 1}},
     "# HELP esc Back\\\\slash, \"quoted\",\\nsecond line.\n"
     "# TYPE esc gauge\n"
     "esc{path=\"C:\\\\dir \\\"x\\\"\\nend\"} 1\n"},
    {"NULL label values stand for the empty string",
     'c', "n_total", "N.", {"a", "b", NULL}, {0}, 0,
     {{'i', {NULL, "x"}, 0}, {'i', {NULL, NULL}, 0}},
     "# HELP n_total N.\n"
     "# TYPE n_total counter\n"
     "n_total{a=\"\",b=\"\"} 1\n"
     "n_total{a=\"\",b=\"x\"} 1\n"},
    {"touch creates a series at zero, and leaves an existing one alone",
     'h', "t", "T.", {"k", NULL}, {1}, 1,
     {{'t', {"x"}, 0}, {'o', {"y"}, 2}, {'t', {"y"}, 0}},
     "# HELP t T.\n"
     "# TYPE t histogram\n"
     "t_bucket{k=\"x\",le=\"1\"} 0\n"
     "t_bucket{k=\"x\",le=\"+Inf\"} 0\n"
     "t_sum{k=\"x\"} 0\n"
     "t_count{k=\"x\"} 0\n"
     "t_bucket{k=\"y\",le=\"1\"} 0\n"
     "t_bucket{k=\"y\",le=\"+Inf\"} 1\n"
     "t_sum{k=\"y\"} 2\n"
     "t_count{k=\"y\"} 1\n"},
    {"a labelled family with no series yet is left out",
     'g', "unused", "Unused.", {"x", NULL}, {0}, 0, {{0}}, ""},
};

static kop_metric *register_case(kop_metrics *m, const struct render_case *c)
{
    kop_metric *f = NULL;
    kop_err err;
    const char *const *labels = c->labels[0] ? c->labels : NULL;
    switch (c->type) {
    case 'c':
        err = kop_metrics_counter(m, c->name, c->help, labels, &f);
        break;
    case 'g':
        err = kop_metrics_gauge(m, c->name, c->help, labels, &f);
        break;
    default:
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){
                .name = c->name,
                .help = c->help,
                .label_names = labels,
                .buckets = c->buckets,
                .nbuckets = c->nbuckets},
            &f);
        break;
    }
    assert_int_equal(err, KOP_OK);
    assert_non_null(f);
    return f;
}

static void apply_update(kop_metric *f, const struct update *u)
{
    switch (u->op) {
    case 'a':
        kop_metric_add(f, u->lv, u->v);
        break;
    case 'i':
        kop_metric_inc(f, u->lv);
        break;
    case 's':
        kop_metric_set(f, u->lv, u->v);
        break;
    case 'o':
        kop_metric_observe(f, u->lv, u->v);
        break;
    case 't':
        kop_metric_touch(f, u->lv);
        break;
    }
}

/* render_string renders m and checks the returned length. Caller frees. */
static char *render_string(kop_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(kop_metrics_render(m, &text, &len), KOP_OK);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    return text;
}

static void test_render_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof render_cases / sizeof render_cases[0]; i++) {
        const struct render_case *c = &render_cases[i];
        kop_metrics *m = NULL;
        assert_int_equal(kop_metrics_new(&m), KOP_OK);
        kop_metric *f = register_case(m, c);
        for (size_t j = 0; j < 8 && c->updates[j].op; j++)
            apply_update(f, &c->updates[j]);
        char *text = render_string(m);
        if (strcmp(text, c->want) != 0)
            fail_msg("case \"%s\":\n%s\nwant:\n%s", c->title, text, c->want);
        free(text);
        kop_metrics_free(m);
    }
}

/* All cases in one registry: families come out sorted by name. */
static void test_families_sorted(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    const char *names[] = {"zeta", "alpha", "mid_total", "beta"};
    for (size_t i = 0; i < 4; i++) {
        kop_metric *f;
        assert_int_equal(kop_metrics_counter(m, names[i], "x", NULL, &f), KOP_OK);
    }
    char *text = render_string(m);
    assert_string_equal(text, "# HELP alpha x\n# TYPE alpha counter\nalpha 0\n"
                              "# HELP beta x\n# TYPE beta counter\nbeta 0\n"
                              "# HELP mid_total x\n# TYPE mid_total counter\nmid_total 0\n"
                              "# HELP zeta x\n# TYPE zeta counter\nzeta 0\n");
    free(text);
    kop_metrics_free(m);
}

/* count_lines counts the lines of text that start with prefix. */
static size_t count_lines(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (size_t i = 0; text[i]; i++) {
        if ((i == 0 || text[i - 1] == '\n') && strncmp(text + i, prefix, len) == 0)
            n++;
    }
    return n;
}

/* Default buckets are controller-runtime's reconcile_time_seconds buckets;
 * the exponential ones render as client_golang renders client-go's. */
static void test_buckets(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    kop_metric *f = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    kop_histogram_opts d = {.name = "d", .help = "x"};
    assert_int_equal(kop_metrics_histogram(m, &d, &f), KOP_OK);
    char *text = render_string(m);
    assert_int_equal(count_lines(text, "d_bucket"), KOP_METRICS_DEFAULT_NBUCKETS + 1);
    assert_non_null(strstr(text, "d_bucket{le=\"0.005\"} 0\nd_bucket{le=\"0.01\"} 0\n"));
    assert_non_null(strstr(text, "d_bucket{le=\"1.25\"} 0\n"));
    assert_non_null(strstr(text, "d_bucket{le=\"60\"} 0\nd_bucket{le=\"+Inf\"} 0\n"));
    free(text);

    double b[12];
    assert_int_equal(kop_metrics_exponential_buckets(10e-9, 10, 12, b), KOP_OK);
    assert_true(b[0] == 1e-8);
    assert_true(fabs(b[11] - 1000) < 1e-9);
    kop_histogram_opts e = {.name = "e", .help = "x", .buckets = b, .nbuckets = 12};
    assert_int_equal(kop_metrics_histogram(m, &e, &f), KOP_OK);
    text = render_string(m);
    assert_non_null(strstr(text, "e_bucket{le=\"1e-08\"} 0\ne_bucket{le=\"1e-07\"} 0\n"
                                 "e_bucket{le=\"1e-06\"} 0\n"
                                 "e_bucket{le=\"9.999999999999999e-06\"} 0\n"));
    assert_non_null(strstr(text, "e_bucket{le=\"0.1\"} 0\ne_bucket{le=\"1\"} 0\n"
                                 "e_bucket{le=\"10\"} 0\ne_bucket{le=\"100\"} 0\n"
                                 "e_bucket{le=\"1000\"} 0\ne_bucket{le=\"+Inf\"} 0\n"));
    free(text);

    assert_int_equal(kop_metrics_exponential_buckets(0, 10, 3, b), KOP_EINVAL);
    assert_int_equal(kop_metrics_exponential_buckets(1, 1, 3, b), KOP_EINVAL);
    assert_int_equal(kop_metrics_exponential_buckets(1, 2, 0, b), KOP_EINVAL);
    kop_metrics_free(m);
}

/* ---- registration ------------------------------------------------------- */

static void test_register_twice_and_clashes(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    kop_metric *a = NULL, *b = NULL;
    const char *const nc[] = {"name", "controller", NULL};
    const char *const cn[] = {"controller", "name", NULL};
    const double bk[] = {1, 2, 3};
    const double bk2[] = {1, 2, 4};
    assert_int_equal(kop_metrics_new(&m), KOP_OK);

    assert_int_equal(kop_metrics_counter(m, "adds_total", "Adds.", nc, &a), KOP_OK);
    assert_int_equal(kop_metrics_counter(m, "adds_total", "Other help.", nc, &b), KOP_OK);
    assert_ptr_equal(a, b);
    /* Different type, different labels (order matters), no labels. */
    assert_int_equal(kop_metrics_gauge(m, "adds_total", "Adds.", nc, &b), KOP_EINVAL);
    assert_null(b);
    assert_int_equal(kop_metrics_counter(m, "adds_total", "Adds.", cn, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "adds_total", "Adds.", NULL, &b), KOP_EINVAL);

    kop_histogram_opts h = {.name = "h", .help = "H.", .label_names = nc, .buckets = bk,
                            .nbuckets = 3};
    assert_int_equal(kop_metrics_histogram(m, &h, &a), KOP_OK);
    assert_int_equal(kop_metrics_histogram(m, &h, &b), KOP_OK);
    assert_ptr_equal(a, b);
    h.buckets = bk2;
    assert_int_equal(kop_metrics_histogram(m, &h, &b), KOP_EINVAL);
    h.buckets = NULL;
    h.nbuckets = 0;
    assert_int_equal(kop_metrics_histogram(m, &h, &b), KOP_EINVAL);
    kop_histogram_opts hd = {.name = "hd", .help = "H."};
    assert_int_equal(kop_metrics_histogram(m, &hd, &a), KOP_OK);
    assert_int_equal(kop_metrics_histogram(m, &hd, &b), KOP_OK);
    assert_ptr_equal(a, b);

    /* The registry's own counter is a family like any other. */
    assert_int_equal(kop_metrics_gauge(m, "kop_metrics_dropped_series_total", "", NULL, &b),
                     KOP_EINVAL);

    /* Bad names, labels and buckets. */
    const char *const dup[] = {"a", "a", NULL};
    const char *const reserved[] = {"__name__", NULL};
    const char *const le[] = {"le", NULL};
    const char *const bad[] = {"a-b", NULL};
    const double unsorted[] = {1, 3, 2};
    const double nan_bound[] = {1, NAN};
    assert_int_equal(kop_metrics_counter(m, "1abc", "", NULL, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "a.b", "", NULL, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "", "", NULL, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, NULL, "", NULL, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "ns:sub_total", "", NULL, &b), KOP_OK);
    assert_int_equal(kop_metrics_counter(m, "x", "", dup, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "x", "", reserved, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "x", "", bad, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(m, "x", "", le, &b), KOP_OK); /* le is fine here */
    kop_histogram_opts y = {.name = "y", .help = "", .label_names = le};
    assert_int_equal(kop_metrics_histogram(m, &y, &b), KOP_EINVAL);
    y = (kop_histogram_opts){.name = "y", .help = "", .buckets = unsorted, .nbuckets = 3};
    assert_int_equal(kop_metrics_histogram(m, &y, &b), KOP_EINVAL);
    y = (kop_histogram_opts){.name = "y", .help = "", .buckets = nan_bound, .nbuckets = 2};
    assert_int_equal(kop_metrics_histogram(m, &y, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_histogram(m, NULL, &b), KOP_EINVAL);
    assert_int_equal(kop_metrics_counter(NULL, "x", "", NULL, &b), KOP_EINVAL);
    kop_metrics_free(m);
    kop_metrics_free(NULL);
}

/* Updates on a NULL family, or of the wrong kind, change nothing. */
static void test_null_and_wrong_type(void **state)
{
    (void)state;
    const char *const lv[] = {"x", NULL};
    kop_metric_add(NULL, lv, 1);
    kop_metric_inc(NULL, NULL);
    kop_metric_set(NULL, lv, 1);
    kop_metric_observe(NULL, lv, 1);
    double v = 0;
    assert_int_equal(kop_metric_value(NULL, lv, &v), KOP_EINVAL);

    kop_metrics *m = NULL;
    kop_metric *c = NULL, *h = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    assert_int_equal(kop_metrics_counter(m, "c", "", NULL, &c), KOP_OK);
    kop_histogram_opts ho = {.name = "h", .help = ""};
    assert_int_equal(kop_metrics_histogram(m, &ho, &h), KOP_OK);
    kop_metric_set(c, NULL, 5);     /* not a gauge */
    kop_metric_observe(c, NULL, 5); /* not a histogram */
    kop_metric_inc(h, NULL);        /* not a counter */
    assert_int_equal(kop_metric_value(c, NULL, &v), KOP_OK);
    assert_true(v == 0);
    assert_int_equal(kop_metric_value(h, NULL, &v), KOP_OK);
    assert_true(v == 0);
    kop_metric_observe(h, NULL, 0.2);
    assert_int_equal(kop_metric_value(h, NULL, &v), KOP_OK);
    assert_true(v == 1);
    kop_metrics_free(m);
}

/* A removed series is no longer rendered; the others stay; a later update starts it at zero. */
static void test_remove_series(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    kop_metric *g = NULL;
    const char *const names[] = {"definition", "state", NULL};
    const char *const gone[] = {"web", "ready", NULL}, *const kept[] = {"pwn", "ready", NULL};
    char *text = NULL;
    double v = 0;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    assert_int_equal(kop_metrics_gauge(m, "pool", "", names, &g), KOP_OK);
    kop_metric_set(g, gone, 3);
    kop_metric_set(g, kept, 2);
    assert_true(kop_metric_remove(g, gone));
    assert_false(kop_metric_remove(g, gone)); /* no longer there */
    assert_false(kop_metric_remove(NULL, gone));
    assert_int_equal(kop_metric_value(g, gone, &v), KOP_ENOTFOUND);
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_null(strstr(text, "definition=\"web\""));
    assert_non_null(strstr(text, "pool{definition=\"pwn\",state=\"ready\"} 2"));
    free(text);
    kop_metric_inc(g, gone);
    assert_int_equal(kop_metric_value(g, gone, &v), KOP_OK);
    assert_true(v == 1);
    assert_true(kop_metric_remove(g, gone));
    assert_true(kop_metric_remove(g, kept));
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_null(strstr(text, "pool{")); /* a family with no series left renders nothing */
    free(text);
    kop_metrics_free(m);
}

/* ---- concurrency -------------------------------------------------------- */

#define THREADS 8
#define INCS    100000

struct shared {
    kop_metric *counter;
    kop_metric *hist;
    kop_metrics *m;
};

static void *incrementer(void *arg)
{
    struct shared *s = arg;
    const char *const lv[] = {"hot", NULL};
    for (int i = 0; i < INCS; i++) {
        kop_metric_inc(s->counter, lv);
        if (i % 100 == 0)
            kop_metric_observe(s->hist, lv, 0.001);
    }
    return NULL;
}

static void *renderer(void *arg)
{
    struct shared *s = arg;
    for (int i = 0; i < 20; i++) {
        char *text = NULL;
        assert_int_equal(kop_metrics_render(s->m, &text, NULL), KOP_OK);
        free(text);
    }
    return NULL;
}

static void test_concurrent_increments(void **state)
{
    (void)state;
    struct shared s = {0};
    const char *const labels[] = {"series", NULL};
    assert_int_equal(kop_metrics_new(&s.m), KOP_OK);
    assert_int_equal(kop_metrics_counter(s.m, "hits_total", "", labels, &s.counter), KOP_OK);
    kop_histogram_opts obs = {.name = "obs", .help = "", .label_names = labels};
    assert_int_equal(kop_metrics_histogram(s.m, &obs, &s.hist), KOP_OK);
    pthread_t t[THREADS + 1];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, incrementer, &s), 0);
    assert_int_equal(pthread_create(&t[THREADS], NULL, renderer, &s), 0);
    for (int i = 0; i <= THREADS; i++)
        pthread_join(t[i], NULL);
    double v = 0;
    assert_int_equal(kop_metric_value(s.counter, (const char *const[]){"hot", NULL}, &v), KOP_OK);
    assert_true(v == (double)THREADS * INCS);
    assert_int_equal(kop_metric_value(s.hist, (const char *const[]){"hot", NULL}, &v), KOP_OK);
    assert_true(v == (double)THREADS * (INCS / 100));
    char *text = render_string(s.m);
    assert_non_null(strstr(text, "hits_total{series=\"hot\"} 800000\n"));
    free(text);
    kop_metrics_free(s.m);
}

/* ---- caps --------------------------------------------------------------- */

static void test_series_cap(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    kop_metric *g = NULL;
    const char *const labels[] = {"i", NULL};
    char val[32];
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    assert_int_equal(kop_metrics_gauge(m, "big", "", labels, &g), KOP_OK);
    for (int i = 0; i < KOP_METRICS_MAX_SERIES; i++) {
        snprintf(val, sizeof val, "%05d", i);
        kop_metric_set(g, (const char *const[]){val, NULL}, i);
    }
    /* Existing series still update; new ones are dropped and counted. */
    kop_metric_set(g, (const char *const[]){"00007", NULL}, -1);
    kop_metric_set(g, (const char *const[]){"extra1", NULL}, 1);
    kop_metric_set(g, (const char *const[]){"extra2", NULL}, 1);
    kop_metric_set(g, (const char *const[]){"extra2", NULL}, 2);
    double v = 0;
    assert_int_equal(kop_metric_value(g, (const char *const[]){"00007", NULL}, &v), KOP_OK);
    assert_true(v == -1);
    assert_int_equal(kop_metric_value(g, (const char *const[]){"09999", NULL}, &v), KOP_OK);
    assert_true(v == 9999);
    assert_int_equal(kop_metric_value(g, (const char *const[]){"extra1", NULL}, &v),
                     KOP_ENOTFOUND);

    char *text = render_string(m);
    assert_non_null(strstr(text, "# TYPE kop_metrics_dropped_series_total counter\n"
                                 "kop_metrics_dropped_series_total{metric=\"big\"} 3\n"));
    assert_non_null(strstr(text, "big{i=\"00000\"} 0\nbig{i=\"00001\"} 1\n"));
    assert_non_null(strstr(text, "big{i=\"09999\"} 9999\n"));
    assert_null(strstr(text, "extra"));
    free(text);
    kop_metrics_free(m);
}

/* ---- collectors --------------------------------------------------------- */

struct collect_state {
    kop_metric *g;
    int calls;
};

static void collect(void *user)
{
    struct collect_state *cs = user;
    cs->calls++;
    kop_metric_set(cs->g, NULL, cs->calls);
}

static void test_collectors(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    struct collect_state cs = {0};
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    assert_int_equal(kop_metrics_gauge(m, "scrapes", "Scrapes.", NULL, &cs.g), KOP_OK);
    assert_int_equal(kop_metrics_add_collector(m, collect, &cs), KOP_OK);
    char *text = render_string(m);
    assert_string_equal(text, "# HELP scrapes Scrapes.\n# TYPE scrapes gauge\nscrapes 1\n");
    free(text);
    text = render_string(m);
    assert_string_equal(text, "# HELP scrapes Scrapes.\n# TYPE scrapes gauge\nscrapes 2\n");
    free(text);
    kop_metrics_remove_collector(m, collect, &cs);
    text = render_string(m);
    assert_string_equal(text, "# HELP scrapes Scrapes.\n# TYPE scrapes gauge\nscrapes 2\n");
    free(text);
    assert_int_equal(cs.calls, 2);
    kop_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_cases),
        cmocka_unit_test(test_families_sorted),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_register_twice_and_clashes),
        cmocka_unit_test(test_null_and_wrong_type),
        cmocka_unit_test(test_remove_series),
        cmocka_unit_test(test_concurrent_increments),
        cmocka_unit_test(test_series_cap),
        cmocka_unit_test(test_collectors),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}

/*
 * test_workqueue.c - the workqueue keeps client-go's promises: a key is
 * queued once, never processed by two workers at once, processed again when
 * added during processing; add_after releases keys in time order and keeps
 * the earlier time; retries back off exponentially up to the cap and the
 * overall bucket can be turned off; shutdown wakes getters and drain waits
 * for in-flight work; the workqueue_* metrics count what happened.
 *
 * Timing: only lower bounds on delays (a key never comes out early), and
 * upper bounds no tighter than seconds, so a loaded machine cannot fail them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <cmocka.h>

#include "kop/workqueue.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static kop_workqueue *new_queue(const kop_workqueue_opts *opts)
{
    kop_workqueue *q = NULL;
    assert_int_equal(kop_workqueue_new(opts, &q), KOP_OK);
    assert_non_null(q);
    return q;
}

/* get_expect takes the next key, checks it is want, and marks it done. */
static void get_expect(kop_workqueue *q, const char *want)
{
    char *key = NULL;
    assert_int_equal(kop_workqueue_get(q, &key), KOP_OK);
    assert_non_null(key);
    assert_string_equal(key, want);
    kop_workqueue_done(q, key);
    free(key);
}

/* ---- queueing ----------------------------------------------------------- */

static void test_dedup_and_fifo(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    kop_workqueue_add(q, "ns/x");
    kop_workqueue_add(q, "ns/x");
    kop_workqueue_add(q, "ns/x");
    assert_int_equal(kop_workqueue_len(q), 1);
    get_expect(q, "ns/x");
    assert_int_equal(kop_workqueue_len(q), 0);

    const char *order[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        kop_workqueue_add(q, order[i]);
    kop_workqueue_add(q, "b"); /* already queued: keeps its place */
    kop_workqueue_add(q, "a");
    assert_int_equal(kop_workqueue_len(q), 4);
    for (int i = 0; i < 4; i++)
        get_expect(q, order[i]);
    assert_int_equal(kop_workqueue_len(q), 0);

    /* NULL keys and done on a key never handed out are ignored. */
    kop_workqueue_add(q, NULL);
    kop_workqueue_done(q, "never");
    kop_workqueue_done(q, NULL);
    assert_int_equal(kop_workqueue_len(q), 0);
    kop_workqueue_shutdown(q);
    kop_workqueue_free(q);
    kop_workqueue_free(NULL);
}

static void test_readd_during_processing(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    char *key = NULL;
    kop_workqueue_add(q, "x");
    kop_workqueue_add(q, "y");
    assert_int_equal(kop_workqueue_get(q, &key), KOP_OK);
    assert_string_equal(key, "x");
    /* Added while processed: remembered, but not queued, so no second
     * worker can take it. */
    kop_workqueue_add(q, "x");
    kop_workqueue_add(q, "x");
    assert_int_equal(kop_workqueue_len(q), 1); /* y only */
    get_expect(q, "y");
    assert_int_equal(kop_workqueue_len(q), 0);
    kop_workqueue_done(q, key); /* now it is queued again, once */
    free(key);
    assert_int_equal(kop_workqueue_len(q), 1);
    get_expect(q, "x");
    assert_int_equal(kop_workqueue_len(q), 0);
    kop_workqueue_free(q);
}

/* ---- concurrency -------------------------------------------------------- */

#define NKEYS      100
#define NWORKERS   8
#define NPRODUCERS 4
#define NADDS      100000

struct conc {
    kop_workqueue *q;
    atomic_int inflight[NKEYS]; /* 1 while a worker holds the key */
    atomic_long added[NKEYS];   /* adds so far, counted before each add */
    atomic_long seen[NKEYS];    /* added[] as read when processing last started */
    atomic_long processed;
    atomic_int violations;
    atomic_uint seed;
};

static void *producer(void *arg)
{
    struct conc *c = arg;
    uint32_t x = 0x9E3779B9u ^ atomic_fetch_add(&c->seed, 0x1234567u);
    char key[16];
    for (int i = 0; i < NADDS / NPRODUCERS; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        int k = (int)(x % NKEYS);
        snprintf(key, sizeof key, "key-%03d", k);
        atomic_fetch_add(&c->added[k], 1);
        kop_workqueue_add(c->q, key);
    }
    return NULL;
}

static void *worker(void *arg)
{
    struct conc *c = arg;
    for (;;) {
        char *key = NULL;
        kop_err err = kop_workqueue_get(c->q, &key);
        if (err == KOP_ESHUTDOWN)
            break;
        if (err != KOP_OK) {
            atomic_fetch_add(&c->violations, 1);
            break;
        }
        int k = atoi(key + 4);
        if (atomic_exchange(&c->inflight[k], 1) != 0)
            atomic_fetch_add(&c->violations, 1); /* two workers hold one key */
        atomic_store(&c->seen[k], atomic_load(&c->added[k]));
        if (atomic_fetch_add(&c->processed, 1) % 64 == 0)
            sleep_ms(1); /* let adds pile up while a key is held */
        atomic_store(&c->inflight[k], 0);
        kop_workqueue_done(c->q, key);
        free(key);
    }
    return NULL;
}

/* all_caught_up: every key's last processing started after its last add. */
static bool all_caught_up(struct conc *c)
{
    if (kop_workqueue_len(c->q) != 0)
        return false;
    for (int k = 0; k < NKEYS; k++) {
        if (atomic_load(&c->inflight[k]) || atomic_load(&c->seen[k]) != atomic_load(&c->added[k]))
            return false;
    }
    return true;
}

static void test_no_concurrent_processing(void **state)
{
    (void)state;
    static struct conc c; /* zeroed; too big for some thread stacks */
    memset(&c, 0, sizeof c);
    c.q = new_queue(NULL);
    pthread_t workers[NWORKERS], producers[NPRODUCERS];
    for (int i = 0; i < NWORKERS; i++)
        assert_int_equal(pthread_create(&workers[i], NULL, worker, &c), 0);
    for (int i = 0; i < NPRODUCERS; i++)
        assert_int_equal(pthread_create(&producers[i], NULL, producer, &c), 0);
    for (int i = 0; i < NPRODUCERS; i++)
        pthread_join(producers[i], NULL);

    /* Every key added after its last processing started must be processed
     * again: wait (generously) until that holds for all keys. */
    int64_t deadline = now_ms() + 60000;
    bool caught_up = false;
    while (!(caught_up = all_caught_up(&c)) && now_ms() < deadline)
        sleep_ms(10);

    kop_workqueue_shutdown(c.q);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(workers[i], NULL);
    assert_int_equal(atomic_load(&c.violations), 0);
    assert_true(caught_up);
    long total = 0;
    for (int k = 0; k < NKEYS; k++)
        total += atomic_load(&c.added[k]);
    assert_int_equal(total, NADDS);
    /* Dedup folded many adds together, and each key was processed at least once. */
    assert_true(atomic_load(&c.processed) >= NKEYS);
    assert_true(atomic_load(&c.processed) <= NADDS);
    kop_workqueue_free(c.q);
}

/* ---- add_after ---------------------------------------------------------- */

static void test_add_after_order(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    int64_t t0 = now_ms();
    kop_workqueue_add_after(q, "late", 300);
    kop_workqueue_add_after(q, "early", 100);
    kop_workqueue_add_after(q, "middle", 200);
    assert_int_equal(kop_workqueue_len(q), 0);
    get_expect(q, "early");
    assert_true(now_ms() - t0 >= 100);
    get_expect(q, "middle");
    assert_true(now_ms() - t0 >= 200);
    get_expect(q, "late");
    assert_true(now_ms() - t0 >= 300);

    /* No delay means now. */
    kop_workqueue_add_after(q, "now", 0);
    kop_workqueue_add_after(q, "now2", -5);
    assert_int_equal(kop_workqueue_len(q), 2);
    get_expect(q, "now");
    get_expect(q, "now2");
    kop_workqueue_free(q);
}

static void test_add_after_earlier_wins(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    int64_t t0 = now_ms();
    kop_workqueue_add_after(q, "x", 30000);
    kop_workqueue_add_after(q, "x", 50); /* earlier: replaces the 30 s */
    get_expect(q, "x");
    int64_t took = now_ms() - t0;
    assert_true(took >= 50);
    assert_true(took < 10000);

    t0 = now_ms();
    kop_workqueue_add_after(q, "y", 50);
    kop_workqueue_add_after(q, "y", 30000); /* later: ignored */
    get_expect(q, "y");
    took = now_ms() - t0;
    assert_true(took >= 50);
    assert_true(took < 10000);
    kop_workqueue_free(q);
}

/* add_replacing adds key after ms, as a controller files a pass's requeue. */
static void add_replacing(kop_workqueue *q, const char *key, long ms)
{
    kop_workqueue_add_with(q, key, &(kop_workqueue_add_opts){.after_ms = ms, .replace = true});
}

/*
 * A replacing add takes the place of a held-back one a replacing add made,
 * later or not; the order of the keys as they come due shows it (no
 * timing beyond the order of the heap).
 */
static void test_add_after_replace(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    add_replacing(q, "x", 50);
    add_replacing(q, "x", 60000); /* replaces the 50 ms: x is not due before y */
    kop_workqueue_add_after(q, "y", 200);
    get_expect(q, "y");
    /* Dropped: x never comes (z, later than x's first time, comes first). */
    kop_workqueue_drop_replaceable(q, "x");
    kop_workqueue_add_after(q, "z", 100);
    get_expect(q, "z");
    assert_int_equal(kop_workqueue_len(q), 0);

    /* Rate-limited and replacing: in place of the held-back one as well. */
    add_replacing(q, "r", 60000);
    kop_workqueue_add_with(q, "r", &(kop_workqueue_add_opts){.rate_limited = true, .replace = true});
    get_expect(q, "r"); /* the base backoff (5 ms), not 60 s */
    kop_workqueue_forget(q, "r");
    kop_workqueue_free(q);
}

/* A held-back add that a plain add made, or joined, is never replaced or dropped. */
static void test_add_after_replace_keeps_plain(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    kop_workqueue_add_after(q, "x", 50);
    add_replacing(q, "x", 60000); /* joins the plain one: the earlier time stays */
    kop_workqueue_drop_replaceable(q, "x");
    kop_workqueue_add_after(q, "y", 400);
    get_expect(q, "x");
    get_expect(q, "y");

    add_replacing(q, "w", 50);
    kop_workqueue_add_after(q, "w", 60000); /* a plain add joins it: no longer replaceable */
    add_replacing(q, "w", 60000);
    kop_workqueue_drop_replaceable(q, "w");
    kop_workqueue_add_after(q, "v", 400);
    get_expect(q, "w");
    get_expect(q, "v");

    /* Replacing a key held back among others keeps the heap in order. */
    for (int i = 0; i < 32; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%02d", i);
        add_replacing(q, k, 100 + 10 * i);
    }
    add_replacing(q, "k00", 60000);
    add_replacing(q, "k07", 60000);
    kop_workqueue_drop_replaceable(q, "k15");
    for (int i = 0; i < 32; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%02d", i);
        if (i != 0 && i != 7 && i != 15)
            get_expect(q, k);
    }
    kop_workqueue_free(q);
}

/* ---- rate limiting ------------------------------------------------------ */

static void test_backoff_growth_and_forget(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.qps = -1}); /* per-key backoff only */
    assert_int_equal(kop_workqueue_num_requeues(q, "x"), 0);
    /* 5, 10, 20, 40, 80 ms: each retry waits at least twice the last. */
    long want = 5;
    for (int n = 0; n < 5; n++, want *= 2) {
        int64_t t0 = now_ms();
        kop_workqueue_add_rate_limited(q, "x");
        assert_int_equal(kop_workqueue_num_requeues(q, "x"), n + 1);
        get_expect(q, "x");
        assert_true(now_ms() - t0 >= want);
    }
    /* Without forget the next would wait 5 ms * 2^11 > 10 s; after it, 5 ms. */
    for (int n = 5; n < 11; n++)
        kop_workqueue_add_rate_limited(q, "x"); /* the first (160 ms) time wins */
    assert_int_equal(kop_workqueue_num_requeues(q, "x"), 11);
    get_expect(q, "x");
    kop_workqueue_forget(q, "x");
    assert_int_equal(kop_workqueue_num_requeues(q, "x"), 0);
    int64_t t0 = now_ms();
    kop_workqueue_add_rate_limited(q, "x");
    get_expect(q, "x");
    int64_t took = now_ms() - t0;
    assert_true(took >= 5);
    assert_true(took < 5000);
    kop_workqueue_forget(q, "x");
    kop_workqueue_forget(q, "unknown");
    kop_workqueue_free(q);
}

static void test_backoff_cap(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){
        .qps = -1, .base_delay_ms = 50, .max_delay_ms = 100});
    for (int n = 0; n < 12; n++) {
        int64_t t0 = now_ms();
        kop_workqueue_add_rate_limited(q, "x");
        get_expect(q, "x");
        int64_t took = now_ms() - t0;
        assert_true(took >= (n == 0 ? 50 : 100));
        assert_true(took < 5000); /* uncapped, the 12th would wait 50 ms * 2^11 = 102 s */
    }
    assert_int_equal(kop_workqueue_num_requeues(q, "x"), 12);
    kop_workqueue_free(q);
}

static void test_token_bucket(void **state)
{
    (void)state;
    char key[16];
    /* On: 20 qps, burst 1: five keys come out spaced by 50 ms. */
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.qps = 20, .burst = 1, .base_delay_ms = 1});
    int64_t t0 = now_ms();
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "k%d", i);
        kop_workqueue_add_rate_limited(q, key);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "k%d", i);
        get_expect(q, key);
    }
    assert_true(now_ms() - t0 >= 190); /* 4 tokens at 20/s, less a little refill */
    kop_workqueue_free(q);

    /* Off: 300 keys at once. The default bucket (10 qps, burst 100) would
     * need 20 s for them. */
    q = new_queue(&(kop_workqueue_opts){.qps = -1});
    t0 = now_ms();
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "k%d", i);
        kop_workqueue_add_rate_limited(q, key);
    }
    for (int i = 0; i < 300; i++) {
        char *got = NULL;
        assert_int_equal(kop_workqueue_get(q, &got), KOP_OK);
        kop_workqueue_done(q, got);
        free(got);
    }
    assert_true(now_ms() - t0 < 10000);
    kop_workqueue_free(q);
}

/* ---- shutdown ----------------------------------------------------------- */

struct getter {
    kop_workqueue *q;
    atomic_int started;
    kop_err err;
    char *key;
};

static void *blocked_getter(void *arg)
{
    struct getter *g = arg;
    atomic_store(&g->started, 1);
    g->err = kop_workqueue_get(g->q, &g->key);
    return NULL;
}

static void test_shutdown_wakes_getters(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    struct getter g[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        g[i] = (struct getter){.q = q, .err = KOP_OK};
        assert_int_equal(pthread_create(&t[i], NULL, blocked_getter, &g[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        while (!atomic_load(&g[i].started))
            sleep_ms(1);
    }
    sleep_ms(50); /* most likely blocked in get by now; correct either way */
    assert_false(kop_workqueue_shutting_down(q));
    kop_workqueue_shutdown(q);
    assert_true(kop_workqueue_shutting_down(q));
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(g[i].err, KOP_ESHUTDOWN);
        assert_null(g[i].key);
    }
    kop_workqueue_shutdown(q); /* idempotent */
    kop_workqueue_free(q);
}

static void test_shutdown_hands_out_queued(void **state)
{
    (void)state;
    /* Retries wait 60 s: only shutdown can make them go. */
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.base_delay_ms = 60000});
    char *key = NULL;
    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "b");
    kop_workqueue_add_after(q, "timer", 1000);
    kop_workqueue_add_rate_limited(q, "retry");
    kop_workqueue_shutdown(q);
    kop_workqueue_add(q, "late"); /* ignored */
    kop_workqueue_add_after(q, "late", 0);
    kop_workqueue_add_rate_limited(q, "late");
    assert_int_equal(kop_workqueue_len(q), 2);
    /* Queued keys still come out; then shutdown. The timers were dropped. */
    get_expect(q, "a");
    get_expect(q, "b");
    sleep_ms(1100); /* past the timer's time: it must not fire */
    assert_int_equal(kop_workqueue_len(q), 0);
    assert_int_equal(kop_workqueue_get(q, &key), KOP_ESHUTDOWN);
    assert_null(key);
    kop_workqueue_free(q);
}

struct holder {
    kop_workqueue *q;
    atomic_int holding;
    atomic_int done_called;
};

static void *slow_worker(void *arg)
{
    struct holder *h = arg;
    char *key = NULL;
    assert_int_equal(kop_workqueue_get(h->q, &key), KOP_OK);
    atomic_store(&h->holding, 1);
    sleep_ms(200);
    atomic_store(&h->done_called, 1);
    kop_workqueue_done(h->q, key);
    free(key);
    return NULL;
}

static void test_shutdown_drain_waits(void **state)
{
    (void)state;
    struct holder h = {.q = new_queue(NULL)};
    pthread_t t;
    kop_workqueue_add(h.q, "slow");
    assert_int_equal(pthread_create(&t, NULL, slow_worker, &h), 0);
    while (!atomic_load(&h.holding))
        sleep_ms(1);
    kop_workqueue_shutdown_drain(h.q);
    assert_int_equal(atomic_load(&h.done_called), 1);
    pthread_join(t, NULL);
    kop_workqueue_shutdown_drain(h.q); /* nothing in flight: returns at once */
    kop_workqueue_free(h.q);
}

/* ---- caps and options --------------------------------------------------- */

static void test_key_cap(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.name = "capped", .max_keys = 3,
                                                       .metrics = m});
    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "b");
    kop_workqueue_add(q, "c");
    assert_false(kop_workqueue_take_dropped(q));
    kop_workqueue_add(q, "d"); /* a fourth distinct key: dropped */
    kop_workqueue_add(q, "a"); /* known keys are fine */
    assert_int_equal(kop_workqueue_len(q), 3);
    /* The drop is told once, for the controller's resync. */
    assert_true(kop_workqueue_take_dropped(q));
    assert_false(kop_workqueue_take_dropped(q));
    get_expect(q, "a"); /* a is forgotten entirely: room for d */
    kop_workqueue_add(q, "d");
    assert_int_equal(kop_workqueue_len(q), 3);
    char *text = NULL;
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_non_null(
        strstr(text, "kop_workqueue_dropped_total{name=\"capped\",controller=\"capped\"} 1\n"));
    free(text);
    kop_workqueue_free(q);
    kop_metrics_free(m);
}

static void test_bad_options(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    kop_workqueue *q = (kop_workqueue *)1;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    assert_int_equal(kop_workqueue_new(&(kop_workqueue_opts){.metrics = m}, &q), KOP_EINVAL);
    assert_null(q);
    /* A family of the same name with other labels is a clash. */
    kop_metric *f = NULL;
    assert_int_equal(kop_metrics_counter(m, "workqueue_adds_total", "", NULL, &f), KOP_OK);
    assert_int_equal(kop_workqueue_new(&(kop_workqueue_opts){.name = "x", .metrics = m}, &q),
                     KOP_EINVAL);
    assert_null(q);
    assert_int_equal(kop_workqueue_get(NULL, NULL), KOP_EINVAL);
    kop_metrics_free(m);
}

/* ---- metrics ------------------------------------------------------------ */

/* metric_line returns the value on the line that starts with prefix, or -1. */
static double metric_line(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    return -1;
}

#define LV    "{name=\"q\",controller=\"q\"}"
#define DEPTH "workqueue_depth{name=\"q\",controller=\"q\",priority=\"0\"}"

static void test_metrics_after_sequence(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    char *text = NULL, *key = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    /* Retries wait 60 s, so none fires during the test. */
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){
        .name = "q", .qps = -1, .base_delay_ms = 60000, .metrics = m});
    kop_workqueue *r = new_queue(&(kop_workqueue_opts){.name = "r", .metrics = m});

    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, DEPTH) == 0);
    assert_true(metric_line(text, "workqueue_adds_total" LV) == 0);
    assert_true(metric_line(text, "workqueue_queue_duration_seconds_bucket{name=\"q\","
                                  "controller=\"q\",le=\"1e-08\"}") == 0);
    assert_true(metric_line(text, "workqueue_adds_total{name=\"r\",controller=\"r\"}") == 0);
    free(text);

    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "b");
    kop_workqueue_add(q, "a"); /* deduplicated: not an add */
    assert_int_equal(kop_workqueue_get(q, &key), KOP_OK); /* a */
    kop_workqueue_add(q, "a");                            /* dirty while processing */
    kop_workqueue_add_after(q, "c", 60000);
    kop_workqueue_add_rate_limited(q, "d");
    kop_workqueue_add(r, "z");
    sleep_ms(20);

    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, "workqueue_adds_total" LV) == 3);
    assert_true(metric_line(text, DEPTH) == 2);
    assert_true(metric_line(text, "workqueue_retries_total" LV) == 2);
    assert_true(metric_line(text, "workqueue_queue_duration_seconds_count" LV) == 1);
    assert_true(metric_line(text, "workqueue_work_duration_seconds_count" LV) == 0);
    assert_true(metric_line(text, "workqueue_longest_running_processor_seconds" LV) >= 0.02);
    assert_true(metric_line(text, "workqueue_unfinished_work_seconds" LV) >= 0.02);
    assert_true(metric_line(text, "workqueue_adds_total{name=\"r\",controller=\"r\"}") == 1);
    assert_true(metric_line(text, "kop_workqueue_dropped_total" LV) == -1); /* never dropped */
    free(text);

    kop_workqueue_done(q, key); /* a goes back in the queue */
    free(key);
    assert_int_equal(kop_workqueue_len(q), 2);
    get_expect(q, "b");
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, DEPTH) == 1);
    assert_true(metric_line(text, "workqueue_queue_duration_seconds_count" LV) == 2);
    assert_true(metric_line(text, "workqueue_work_duration_seconds_count" LV) == 2);
    assert_true(metric_line(text, "workqueue_longest_running_processor_seconds" LV) == 0);
    assert_true(metric_line(text, "workqueue_unfinished_work_seconds" LV) == 0);
    free(text);

    kop_workqueue_shutdown(q);
    kop_workqueue_free(q);
    kop_workqueue_free(r);
    /* The queues are gone, their collectors with them; rendering still works. */
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    free(text);
    kop_metrics_free(m);
}

/* ---- priorities --------------------------------------------------------- */

#define LOW    KOP_PRIORITY_LOW
#define NORMAL KOP_PRIORITY_NORMAL
#define HIGH   KOP_PRIORITY_HIGH

static void add_prio(kop_workqueue *q, const char *key, int prio)
{
    kop_workqueue_add_with(q, key, &(kop_workqueue_add_opts){.priority = prio});
}

/* get_expect_prio takes the next key, checks it and its priority, and marks it done. */
static void get_expect_prio(kop_workqueue *q, const char *want, int want_prio)
{
    char *key = NULL;
    int prio = 12345;
    assert_int_equal(kop_workqueue_get_with_priority(q, &key, &prio), KOP_OK);
    assert_non_null(key);
    assert_string_equal(key, want);
    assert_int_equal(prio, want_prio);
    kop_workqueue_done(q, key);
    free(key);
}

static void test_priority_order(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    add_prio(q, "l1", LOW);
    add_prio(q, "n1", NORMAL);
    add_prio(q, "h1", HIGH);
    add_prio(q, "l2", LOW);
    add_prio(q, "h2", HIGH);
    kop_workqueue_add(q, "n2"); /* a plain add is NORMAL */
    add_prio(q, "top", HIGH + 1);
    assert_int_equal(kop_workqueue_len(q), 7);
    get_expect_prio(q, "top", HIGH + 1);
    get_expect_prio(q, "h1", HIGH);
    get_expect_prio(q, "h2", HIGH);
    get_expect_prio(q, "n1", NORMAL);
    get_expect_prio(q, "n2", NORMAL);
    get_expect_prio(q, "l1", LOW);
    get_expect_prio(q, "l2", LOW);
    assert_int_equal(kop_workqueue_len(q), 0);
    kop_workqueue_free(q);
}

static void test_priority_fifo_within(void **state)
{
    (void)state;
    /* Strict priority, so that only the order within a priority is seen. */
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.starvation_limit = -1});
    char key[16];
    /* 200 keys, three priorities interleaved; each priority must come out in add order. */
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "k%03d", i);
        add_prio(q, key, i % 3 == 0 ? HIGH : i % 3 == 1 ? NORMAL : LOW);
    }
    int last[3] = {-1, -1, -1}, count = 0, prev_prio = HIGH;
    for (;;) {
        char *got = NULL;
        int prio = 0;
        if (kop_workqueue_len(q) == 0)
            break;
        assert_int_equal(kop_workqueue_get_with_priority(q, &got, &prio), KOP_OK);
        int i = atoi(got + 1);
        int level = prio == HIGH ? 0 : prio == NORMAL ? 1 : 2;
        assert_int_equal(level, i % 3);
        assert_true(prio <= prev_prio); /* never a higher one after a lower one */
        assert_true(i > last[level]);   /* FIFO within the priority */
        last[level] = i;
        prev_prio = prio;
        count++;
        kop_workqueue_done(q, got);
        free(got);
    }
    assert_int_equal(count, 200);
    kop_workqueue_free(q);
}

static void test_priority_dedup_raises(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    add_prio(q, "a", LOW);
    add_prio(q, "b", LOW);
    add_prio(q, "c", NORMAL);
    add_prio(q, "b", HIGH); /* raised: still one entry */
    add_prio(q, "c", LOW);  /* never lowered */
    add_prio(q, "a", LOW);  /* the same: nothing */
    assert_int_equal(kop_workqueue_len(q), 3);
    get_expect_prio(q, "b", HIGH);
    get_expect_prio(q, "c", NORMAL);
    get_expect_prio(q, "a", LOW);
    assert_int_equal(kop_workqueue_len(q), 0);

    /* A raised key keeps its place in queue order: it has waited longer than
     * keys queued at the new priority after it. */
    add_prio(q, "old", LOW);
    add_prio(q, "h1", HIGH);
    add_prio(q, "old", HIGH);
    add_prio(q, "h2", HIGH);
    get_expect_prio(q, "old", HIGH);
    get_expect_prio(q, "h1", HIGH);
    get_expect_prio(q, "h2", HIGH);
    kop_workqueue_free(q);
}

static void test_priority_readd_during_processing(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(NULL);
    char *key = NULL;
    int prio = 0;
    add_prio(q, "k", LOW);
    assert_int_equal(kop_workqueue_get_with_priority(q, &key, &prio), KOP_OK);
    assert_string_equal(key, "k");
    assert_int_equal(prio, LOW);
    /* Added twice while processed, the second time higher: one entry, not
     * queued while held, and at the highest priority when done. */
    add_prio(q, "k", NORMAL);
    add_prio(q, "k", HIGH);
    add_prio(q, "k", LOW);
    add_prio(q, "m", NORMAL);
    assert_int_equal(kop_workqueue_len(q), 1); /* m only */
    kop_workqueue_done(q, key);
    free(key);
    assert_int_equal(kop_workqueue_len(q), 2);
    get_expect_prio(q, "k", HIGH);
    get_expect_prio(q, "m", NORMAL);
    kop_workqueue_free(q);
}

/*
 * starve_run: ten LOW keys wait; then a steady stream of HIGH keys, two
 * added for every key taken, so the queue is never without a HIGH key.
 * Returns how many gets it took until every LOW key was out (or max_gets + 1).
 */
static int starve_run(kop_workqueue *q, int max_gets)
{
    char key[32];
    int lows = 0, next_high = 0, last_low = -1;
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "low-%d", i);
        add_prio(q, key, LOW);
    }
    for (int gets = 1; gets <= max_gets; gets++) {
        for (int j = 0; j < 2; j++) {
            snprintf(key, sizeof key, "high-%d", next_high++);
            add_prio(q, key, HIGH);
        }
        char *got = NULL;
        assert_int_equal(kop_workqueue_get(q, &got), KOP_OK);
        if (strncmp(got, "low-", 4) == 0) {
            int i = atoi(got + 4);
            assert_true(i > last_low); /* oldest first */
            last_low = i;
            lows++;
        }
        kop_workqueue_done(q, got);
        free(got);
        if (lows == 10)
            return gets;
    }
    return max_gets + 1;
}

static void test_priority_no_starvation(void **state)
{
    (void)state;
    /* The default bounded share: a LOW key after at most 7 others went ahead of it. */
    kop_workqueue *q = new_queue(NULL);
    int gets = starve_run(q, 1000);
    fprintf(stderr, "10 LOW keys out after %d gets under a steady HIGH stream\n", gets);
    assert_true(gets <= 10 * (KOP_WORKQUEUE_DEFAULT_STARVATION_LIMIT + 1));
    kop_workqueue_free(q);

    /* A limit of 2: one in three. */
    q = new_queue(&(kop_workqueue_opts){.starvation_limit = 2});
    assert_true(starve_run(q, 1000) <= 30);
    kop_workqueue_free(q);

    /* Strict priority (a negative limit) starves them, which is what the rule is for. */
    q = new_queue(&(kop_workqueue_opts){.starvation_limit = -1});
    assert_int_equal(starve_run(q, 500), 501);
    kop_workqueue_free(q);
}

/* wait_len waits up to 10 s for q to hold n queued keys. */
static bool wait_len(kop_workqueue *q, size_t n)
{
    for (int i = 0; i < 10000; i++) {
        if (kop_workqueue_len(q) == n)
            return true;
        sleep_ms(1);
    }
    return false;
}

static void test_priority_kept_when_due(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.qps = -1, .base_delay_ms = 20});
    /* add_after and a rate-limited add keep their priority when they become due. */
    kop_workqueue_add_with(q, "later", &(kop_workqueue_add_opts){.priority = HIGH, .after_ms = 30});
    kop_workqueue_add_with(q, "retry", &(kop_workqueue_add_opts){.priority = HIGH + 1,
                                                                 .rate_limited = true});
    add_prio(q, "n", NORMAL);
    assert_true(wait_len(q, 3));
    get_expect_prio(q, "retry", HIGH + 1);
    get_expect_prio(q, "later", HIGH);
    get_expect_prio(q, "n", NORMAL);

    /* Held back twice: the higher priority and the earlier time win. */
    kop_workqueue_add_with(q, "twice",
                           &(kop_workqueue_add_opts){.priority = HIGH, .after_ms = 60000});
    kop_workqueue_add_with(q, "twice", &(kop_workqueue_add_opts){.priority = LOW, .after_ms = 30});
    add_prio(q, "n", NORMAL);
    assert_true(wait_len(q, 2));
    get_expect_prio(q, "twice", HIGH);
    get_expect_prio(q, "n", NORMAL);

    /* An add of a key held back at a higher priority takes that priority
     * (a reconcile that asked for a high requeue is woken by its next event
     * at that priority). */
    kop_workqueue_add_with(q, "held", &(kop_workqueue_add_opts){.priority = HIGH + 1,
                                                                .after_ms = 60000});
    add_prio(q, "h", HIGH);
    add_prio(q, "held", NORMAL);
    get_expect_prio(q, "held", HIGH + 1);
    get_expect_prio(q, "h", HIGH);
    kop_workqueue_free(q);
}

static void test_priority_shutdown_drain(void **state)
{
    (void)state;
    struct holder h = {.q = new_queue(NULL)};
    pthread_t t;
    add_prio(h.q, "slow", HIGH + 1);
    assert_int_equal(pthread_create(&t, NULL, slow_worker, &h), 0);
    while (!atomic_load(&h.holding))
        sleep_ms(1);
    add_prio(h.q, "l", LOW);
    add_prio(h.q, "h", HIGH);
    add_prio(h.q, "n", NORMAL);
    add_prio(h.q, "slow", LOW); /* dirty while held: queued again at done */
    kop_workqueue_shutdown_drain(h.q);
    assert_int_equal(atomic_load(&h.done_called), 1);
    pthread_join(t, NULL);
    add_prio(h.q, "late", HIGH); /* ignored after shutdown */
    /* What was queued still comes out, in priority order, then shutdown. */
    get_expect_prio(h.q, "h", HIGH);
    get_expect_prio(h.q, "n", NORMAL);
    get_expect_prio(h.q, "l", LOW);
    get_expect_prio(h.q, "slow", LOW);
    char *key = NULL;
    assert_int_equal(kop_workqueue_get(h.q, &key), KOP_ESHUTDOWN);
    assert_null(key);
    kop_workqueue_free(h.q);
}

static void test_priority_depth_metric(void **state)
{
    (void)state;
    kop_metrics *m = NULL;
    char *text = NULL, *key = NULL;
    assert_int_equal(kop_metrics_new(&m), KOP_OK);
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.name = "p", .metrics = m});
#define PDEPTH(p) "workqueue_depth{name=\"p\",controller=\"p\",priority=\"" p "\"}"
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, PDEPTH("-100")) == 0); /* the named ones exist at zero */
    assert_true(metric_line(text, PDEPTH("0")) == 0);
    assert_true(metric_line(text, PDEPTH("100")) == 0);
    free(text);
    add_prio(q, "a", LOW);
    add_prio(q, "b", LOW);
    add_prio(q, "c", HIGH);
    add_prio(q, "d", 7);
    add_prio(q, "b", HIGH); /* moves from -100 to 100 */
    assert_int_equal(kop_workqueue_get(q, &key), KOP_OK); /* c */
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, PDEPTH("-100")) == 1);
    assert_true(metric_line(text, PDEPTH("0")) == 0);
    assert_true(metric_line(text, PDEPTH("100")) == 1);
    assert_true(metric_line(text, PDEPTH("7")) == 1);
    free(text);
    add_prio(q, key, HIGH + 1); /* dirty while in flight: counted as waiting */
    kop_workqueue_done(q, key);
    free(key);
    assert_int_equal(kop_metrics_render(m, &text, NULL), KOP_OK);
    assert_true(metric_line(text, PDEPTH("101")) == 1);
    free(text);
    kop_workqueue_free(q);
    kop_metrics_free(m);
#undef PDEPTH
}

/* ---- dropped keys ------------------------------------------------------- */

static void test_dropped_key_comes_back(void **state)
{
    (void)state;
    kop_workqueue *q = new_queue(&(kop_workqueue_opts){.max_keys = 2});
    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "b");
    /* The key of an object deleted meanwhile: dropped at the cap. No resync
     * would bring it back (its object is not cached any more), so the queue
     * must: once a record makes room, it is queued. */
    kop_workqueue_add(q, "gone");
    assert_true(kop_workqueue_take_dropped(q));
    assert_int_equal(kop_workqueue_len(q), 2);
    get_expect(q, "a"); /* a released: room for the dropped key */
    assert_int_equal(kop_workqueue_len(q), 2);
    get_expect(q, "b");
    get_expect(q, "gone");
    assert_int_equal(kop_workqueue_len(q), 0);
    assert_int_equal(kop_workqueue_take_forgotten(q), 0);
    kop_workqueue_free(q);

    /* Past the remembered set's cap a dropped key is forgotten and counted. */
    q = new_queue(&(kop_workqueue_opts){.max_keys = 1, .max_dropped = 2});
    add_prio(q, "a", NORMAL);
    add_prio(q, "x", LOW);
    add_prio(q, "y", HIGH);
    add_prio(q, "x", HIGH); /* remembered already: raised, not counted twice */
    add_prio(q, "z", NORMAL);
    assert_int_equal(kop_workqueue_take_forgotten(q), 1);
    assert_int_equal(kop_workqueue_take_forgotten(q), 0);
    /* Each release readmits the oldest drop, at the highest priority it was dropped with. */
    get_expect_prio(q, "a", NORMAL);
    get_expect_prio(q, "x", HIGH);
    get_expect_prio(q, "y", HIGH);
    assert_int_equal(kop_workqueue_len(q), 0);
    kop_workqueue_free(q);
}

/* ---- throughput (reported, not asserted) -------------------------------- */

/*
 * bench_rate adds n distinct keys, then takes them all, several rounds, and
 * returns adds + gets per second; mixed spreads the adds over three priorities.
 */
static double bench_rate(int n, bool mixed)
{
    kop_workqueue *q = new_queue(NULL);
    char (*keys)[16] = malloc((size_t)n * sizeof *keys);
    assert_non_null(keys);
    for (int i = 0; i < n; i++)
        snprintf(keys[i], sizeof keys[i], "ns/k%07d", i);
    const int rounds = n < 10000 ? 200 : 5;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            if (mixed)
                add_prio(q, keys[i], i % 3 == 0 ? HIGH : i % 3 == 1 ? NORMAL : LOW);
            else
                kop_workqueue_add(q, keys[i]);
        }
        for (int i = 0; i < n; i++) {
            char *got = NULL;
            assert_int_equal(kop_workqueue_get(q, &got), KOP_OK);
            kop_workqueue_done(q, got);
            free(got);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    free(keys);
    kop_workqueue_free(q);
    return 2.0 * n * rounds / (s > 0 ? s : 1e-9);
}

static void test_throughput_report(void **state)
{
    (void)state;
    const int sizes[] = {1000, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        fprintf(stderr, "workqueue: %d keys queued at once: %.2f M adds+gets/s one priority, "
                        "%.2f M mixed\n",
                sizes[i], bench_rate(sizes[i], false) / 1e6, bench_rate(sizes[i], true) / 1e6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedup_and_fifo),
        cmocka_unit_test(test_readd_during_processing),
        cmocka_unit_test(test_no_concurrent_processing),
        cmocka_unit_test(test_add_after_order),
        cmocka_unit_test(test_add_after_earlier_wins),
        cmocka_unit_test(test_add_after_replace),
        cmocka_unit_test(test_add_after_replace_keeps_plain),
        cmocka_unit_test(test_backoff_growth_and_forget),
        cmocka_unit_test(test_backoff_cap),
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_shutdown_wakes_getters),
        cmocka_unit_test(test_shutdown_hands_out_queued),
        cmocka_unit_test(test_shutdown_drain_waits),
        cmocka_unit_test(test_key_cap),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_metrics_after_sequence),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_priority_fifo_within),
        cmocka_unit_test(test_priority_dedup_raises),
        cmocka_unit_test(test_priority_readd_during_processing),
        cmocka_unit_test(test_priority_no_starvation),
        cmocka_unit_test(test_priority_kept_when_due),
        cmocka_unit_test(test_priority_shutdown_drain),
        cmocka_unit_test(test_priority_depth_metric),
        cmocka_unit_test(test_dropped_key_comes_back),
        cmocka_unit_test(test_throughput_report),
    };
    return cmocka_run_group_tests_name("workqueue", tests, NULL, NULL);
}

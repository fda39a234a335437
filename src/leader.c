/*
 * leader.c - Lease-based leader election (see kop/leader.h for the
 * protocol), following client-go's LeaderElector and LeaseLock.
 *
 * Workload: one elector per operator replica, a handful of small requests
 * every retry period, for the life of the process. What matters is never
 * being wrong about leadership, not speed.
 *
 * The elector thread runs, in order: acquire() until it holds the Lease or
 * is stopped, then lead() until leadership is lost or it is stopped. Each
 * attempt is one call of try_acquire_or_renew(), which mirrors client-go's
 * tryAcquireOrRenew: the leader first writes on top of the version it wrote
 * last (one request per renewal); otherwise, or if that fails, it reads the
 * Lease, creates it when missing, and judges the record it read.
 *
 * Time: every duration is measured on CLOCK_MONOTONIC in nanoseconds. A
 * foreign holder's claim is timed from observed_ns, when this elector first
 * saw the record in its current form, never from the record's renewTime,
 * which another machine's clock wrote. The remote timestamps are written
 * (RFC 3339 with microseconds, UTC) only for people and other tools.
 *
 * Invariants:
 * - Only the elector thread touches the "elector state" fields below, and
 *   kop_leader_free after joining it.
 * - leading is true only between on_started_leading and on_stopped_leading;
 *   renewed_ns is stored before leading turns true, so kop_leader_is_leader
 *   never sees a leading elector with a stale renewal time.
 * - Every write to the Lease carries the resourceVersion last read or
 *   written (optimistic concurrency), so two electors never both succeed in
 *   taking the same version of it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kop/leader.h"
#include "kop/meta.h"
#include "kop_internal.h"

#define NS_PER_MS     INT64_C(1000000)
#define JITTER_FACTOR 1.2 /* client-go's: a wait is retry_period * [1, 2.2) */

static const kop_resource LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};

/* The outcome of one attempt to acquire or renew. */
typedef enum attempt_result {
    HELD,    /* we hold the Lease: created, taken or renewed */
    OTHER,   /* another holder's claim stands (or, while leading, it replaced us) */
    FAILED,  /* the request failed; counted in the stats, tried again later */
} attempt_result;

struct kop_leader {
    kop_client *api; /* owned: the elector's own client (see kop/leader.h) */
    char *ns, *name, *identity;
    kop_leader_opts opts; /* strings point at the copies above */
    long lease_seconds;   /* leaseDurationSeconds written while holding */
    int64_t renew_deadline_ns, retry_ns;

    /* Shared with the caller's threads. */
    pthread_mutex_t lock; /* guards what follows up to the atomics */
    pthread_cond_t cond;  /* on CLOCK_MONOTONIC; signalled by kop_leader_stop */
    bool started, stopping, joined;
    pthread_t thread;
    kop_leader_stats stats;
    atomic_bool leading;
    _Atomic int64_t renewed_ns; /* start of the last successful write while holding */

    /* Elector state: the elector thread only. */
    json_t *lease;          /* the Lease as last read or written, with its resourceVersion */
    char *observed_spec;    /* its spec, compact with sorted keys, to detect changes */
    char *observed_holder;  /* its holderIdentity, "" if none */
    long observed_seconds;  /* its leaseDurationSeconds */
    int64_t observed_ns;    /* when its spec was first seen in this form */
    char *reported_leader;  /* the identity last given to on_new_leader */
};

/* ---- time ----------------------------------------------------------------- */

static int64_t now_ns(void)
{
    return kop_mono_ns();
}

/* micro_time writes the wall-clock time as a metav1.MicroTime: 2006-01-02T15:04:05.000000Z. */
static void micro_time(char out[32])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

/* jittered returns d stretched by a random factor in [1, 1 + JITTER_FACTOR). */
static int64_t jittered(int64_t d)
{
    double r = (double)(kop__random() >> 11) / 9007199254740992.0; /* [0, 1) */
    return d + (int64_t)(r * JITTER_FACTOR * (double)d);
}

/*
 * sleep_until waits until the monotonic time wake_ns or until stopped,
 * whichever comes first, and tells whether the elector is stopping.
 */
static bool sleep_until(kop_leader *l, int64_t wake_ns)
{
    struct timespec ts = {.tv_sec = wake_ns / 1000000000, .tv_nsec = wake_ns % 1000000000};
    pthread_mutex_lock(&l->lock);
    while (!l->stopping && now_ns() < wake_ns)
        pthread_cond_timedwait(&l->cond, &l->lock, &ts);
    bool stopping = l->stopping;
    pthread_mutex_unlock(&l->lock);
    return stopping;
}

static bool is_stopping(kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    bool stopping = l->stopping;
    pthread_mutex_unlock(&l->lock);
    return stopping;
}

/* ---- stats ---------------------------------------------------------------- */

static void count_attempt(kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    l->stats.attempts++;
    pthread_mutex_unlock(&l->lock);
}

static void count_failure(kop_leader *l, kop_err err, const kop_status *st)
{
    pthread_mutex_lock(&l->lock);
    l->stats.failures++;
    l->stats.last_error = err;
    l->stats.last_status = *st;
    pthread_mutex_unlock(&l->lock);
}

/* ---- the Lease record ------------------------------------------------------ */

static json_t *spec_of(const json_t *lease)
{
    return json_object_get(lease, "spec");
}

static const char *spec_string(const json_t *lease, const char *key)
{
    const char *s = json_string_value(json_object_get(spec_of(lease), key));
    return s ? s : "";
}

static long spec_long(const json_t *lease, const char *key)
{
    return (long)json_integer_value(json_object_get(spec_of(lease), key));
}

/*
 * lease_with_record returns a new Lease (owned by the caller): base with its
 * spec's election record replaced, keeping every other field and the
 * resourceVersion; a fresh object naming our Lease if base is NULL.
 * acquire_time NULL keeps base's acquireTime.
 */
static json_t *lease_with_record(kop_leader *l, const json_t *base, const char *holder,
                                 long seconds, const char *acquire_time, long transitions)
{
    char now[32];
    json_t *lease = NULL, *spec = NULL, *record = NULL;

    micro_time(now);
    if (base)
        lease = json_deep_copy(base);
    else
        lease = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "coordination.k8s.io/v1",
                          "kind", "Lease", "metadata", "name", l->name, "namespace", l->ns);
    if (!lease)
        goto fail;
    if (!acquire_time || !acquire_time[0])
        acquire_time = now;
    spec = json_object_get(lease, "spec");
    if (!json_is_object(spec) && json_object_set_new(lease, "spec", json_object()) != 0)
        goto fail;
    spec = json_object_get(lease, "spec");
    record = json_pack("{s:s, s:I, s:s, s:s, s:I}", "holderIdentity", holder,
                       "leaseDurationSeconds", (json_int_t)seconds, "acquireTime", acquire_time,
                       "renewTime", now, "leaseTransitions", (json_int_t)transitions);
    if (!record || json_object_update(spec, record) != 0)
        goto fail;
    json_decref(record);
    return lease;
fail:
    json_decref(record);
    json_decref(lease);
    return NULL;
}

/* report_leader calls on_new_leader when the observed holder changed. */
static void report_leader(kop_leader *l)
{
    const char *holder = l->observed_holder;
    if (!holder[0] || (l->reported_leader && strcmp(l->reported_leader, holder) == 0))
        return;
    char *copy = strdup(holder);
    if (!copy)
        return;
    free(l->reported_leader);
    l->reported_leader = copy;
    if (l->opts.on_new_leader)
        l->opts.on_new_leader(holder, l->opts.user);
}

/*
 * observe takes lease (owned) as the latest version of the Lease. When its
 * election record differs from the one seen before, the record's clock
 * restarts now. Returns false only when out of memory (lease is freed).
 */
static bool observe(kop_leader *l, json_t *lease)
{
    json_t *record = spec_of(lease);
    char *spec = record ? kop_meta_dumps(record, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    char *holder = strdup(spec_string(lease, "holderIdentity"));
    if (!spec || !holder) {
        free(spec);
        free(holder);
        json_decref(lease);
        return false;
    }
    json_decref(l->lease);
    l->lease = lease;
    if (!l->observed_spec || strcmp(l->observed_spec, spec) != 0) {
        free(l->observed_spec);
        free(l->observed_holder);
        l->observed_spec = spec;
        l->observed_holder = holder;
        l->observed_seconds = spec_long(lease, "leaseDurationSeconds");
        l->observed_ns = now_ns();
        report_leader(l);
    } else {
        free(spec);
        free(holder);
    }
    return true;
}

/*
 * write_lease sends obj (owned, consumed) as an update, or a create when
 * create is set, and observes what the server stored.
 */
static kop_err write_lease(kop_leader *l, json_t *obj, bool create, kop_status *st)
{
    json_t *stored = NULL;
    kop_err err;
    if (!obj) {
        kop_status_setf(st, 0, NULL, "leader: out of memory building the Lease");
        return KOP_ENOMEM;
    }
    kop_write_req write = {.target = {&LEASES, l->ns, NULL}, .object = obj};
    if (create)
        err = kop_create_object(l->api, &write, &stored, st);
    else
        err = kop_update_object(l->api, &write, &stored, st);
    json_decref(obj);
    if (err == KOP_OK && !observe(l, stored)) {
        kop_status_setf(st, 0, NULL, "leader: out of memory observing the Lease");
        err = KOP_ENOMEM;
    }
    return err;
}

/* renewal is the Lease as we hold it, renewed now, on top of base. */
static json_t *renewal(kop_leader *l, const json_t *base)
{
    return lease_with_record(l, base, l->identity, l->lease_seconds,
                             spec_string(base, "acquireTime"),
                             spec_long(base, "leaseTransitions"));
}

/*
 * try_acquire_or_renew makes one attempt, as client-go's tryAcquireOrRenew.
 * leading tells whether we hold the Lease as far as we know.
 */
static attempt_result try_acquire_or_renew(kop_leader *l, bool leading)
{
    kop_status st;
    json_t *got = NULL;
    const char *holder;
    bool ours;
    kop_err err;

    count_attempt(l);
    kop_status_clear(&st);
    /* 1. Fast path: the leader writes on top of the version it wrote last. */
    if (leading && l->lease && write_lease(l, renewal(l, l->lease), false, &st) == KOP_OK)
        return HELD;

    /* 2. Read the Lease; create it if there is none. */
    err = kop_get(l->api, &LEASES, l->ns, l->name, &got, &st);
    if (err == KOP_ENOTFOUND) {
        err = write_lease(l, lease_with_record(l, NULL, l->identity, l->lease_seconds, NULL, 0),
                          true, &st);
        goto out;
    }
    if (err)
        goto out;
    if (!observe(l, got)) {
        kop_status_setf(&st, 0, NULL, "leader: out of memory observing the Lease");
        err = KOP_ENOMEM;
        goto out;
    }

    /* 3. Judge the record. Ours: renew it. Someone else's: while we lead, we
     * have been replaced; otherwise wait until its claim expires by our clock.
     * An empty holder is a released Lease, free to take. */
    holder = l->observed_holder;
    ours = strcmp(holder, l->identity) == 0;
    if (!ours && leading)
        return OTHER;
    if (!ours && holder[0] &&
        now_ns() - l->observed_ns < (int64_t)l->observed_seconds * 1000 * NS_PER_MS)
        return OTHER;

    /* 4. Take or renew it, on top of the version just read. A taker counts
     * one more transition and starts a new acquireTime. */
    if (ours)
        err = write_lease(l, renewal(l, l->lease), false, &st);
    else
        err = write_lease(l,
                          lease_with_record(l, l->lease, l->identity, l->lease_seconds, NULL,
                                            spec_long(l->lease, "leaseTransitions") + 1),
                          false, &st);
out:
    if (err) {
        count_failure(l, err, &st);
        return FAILED;
    }
    return HELD;
}

/*
 * release gives the Lease up as client-go's ReleaseOnCancel does: no holder,
 * a one-second duration, renewed now; transitions kept. If the version we
 * wrote last is stale (a renewal whose answer was lost), it reads the Lease
 * once more and releases it if it still names us.
 */
static void release(kop_leader *l)
{
    kop_status st;
    json_t *got = NULL;
    kop_err err = KOP_OK;

    kop_status_clear(&st);
    for (int attempt = 0; attempt < 2 && l->lease; attempt++) {
        if (strcmp(spec_string(l->lease, "holderIdentity"), l->identity) != 0)
            return;
        err = write_lease(l,
                          lease_with_record(l, l->lease, "", 1, NULL,
                                            spec_long(l->lease, "leaseTransitions")),
                          false, &st);
        if (err != KOP_ECONFLICT)
            break;
        err = kop_get(l->api, &LEASES, l->ns, l->name, &got, &st);
        if (err)
            break;
        if (!observe(l, got)) {
            err = KOP_ENOMEM;
            break;
        }
    }
    if (err)
        count_failure(l, err, &st);
}

/* ---- the elector ----------------------------------------------------------- */

/* start_term marks us leader and says so. */
static void start_term(kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    l->stats.leading = true;
    pthread_mutex_unlock(&l->lock);
    atomic_store(&l->leading, true);
    if (l->opts.on_started_leading)
        l->opts.on_started_leading(l->opts.user);
}

/* end_term unmarks us first, then tells the caller to stop reconciling. */
static void end_term(kop_leader *l, bool lost)
{
    atomic_store(&l->leading, false);
    pthread_mutex_lock(&l->lock);
    l->stats.leading = false;
    l->stats.lost = lost;
    pthread_mutex_unlock(&l->lock);
    if (l->opts.on_stopped_leading)
        l->opts.on_stopped_leading(l->opts.user);
}

/*
 * acquire tries every jittered retry period until it holds the Lease (true)
 * or the elector is stopped (false). A Lease won just as a stop came in is
 * given back without a term: no callback is called.
 */
static bool acquire(kop_leader *l)
{
    for (;;) {
        if (is_stopping(l))
            return false;
        int64_t t0 = now_ns();
        if (try_acquire_or_renew(l, false) == HELD) {
            atomic_store(&l->renewed_ns, t0);
            if (!is_stopping(l))
                return true;
            if (l->opts.release_on_stop)
                release(l);
            return false;
        }
        if (sleep_until(l, now_ns() + jittered(l->retry_ns)))
            return false;
    }
}

/*
 * lead renews every retry period until stopped, until the Lease names
 * another holder, or until renew_deadline passes without a successful
 * renewal. A renewal that succeeds only after the deadline does not count:
 * kop_leader_is_leader has already said false, and it must not say true
 * again.
 */
static void lead(kop_leader *l)
{
    start_term(l);
    for (;;) {
        int64_t deadline = atomic_load(&l->renewed_ns) + l->renew_deadline_ns;
        int64_t wake = now_ns() + l->retry_ns;
        if (sleep_until(l, wake < deadline ? wake : deadline)) {
            end_term(l, false);
            if (l->opts.release_on_stop)
                release(l);
            return;
        }
        if (now_ns() >= deadline)
            break;
        int64_t t0 = now_ns();
        attempt_result r = try_acquire_or_renew(l, true);
        if (r == OTHER || now_ns() >= deadline)
            break;
        if (r == HELD) {
            atomic_store(&l->renewed_ns, t0);
            pthread_mutex_lock(&l->lock);
            l->stats.renewals++;
            pthread_mutex_unlock(&l->lock);
        }
    }
    end_term(l, true);
}

static void *elector_main(void *arg)
{
    kop_leader *l = arg;
    if (acquire(l))
        lead(l);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------- */

/* default_identity returns hostname "_" a random (v4) UUID, malloc'd. */
static char *default_identity(void)
{
    char host[256] = "", *id = NULL;
    unsigned char b[16];

    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)(kop__random() >> 56);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    size_t size = strlen(host) + 1 + 36 + 1;
    id = malloc(size);
    if (id)
        snprintf(id, size,
                 "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", host,
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                 b[13], b[14], b[15]);
    return id;
}

/* check_opts applies the defaults to o and checks client-go's constraints. */
static kop_err check_opts(kop_leader_opts *o, kop_status *st)
{
    if (!o->lease_namespace || !o->lease_namespace[0] || !o->lease_name || !o->lease_name[0]) {
        kop_status_setf(st, 0, NULL, "kop_leader_new: lease_namespace and lease_name are required");
        return KOP_EINVAL;
    }
    if (o->identity && !o->identity[0]) {
        kop_status_setf(st, 0, NULL, "kop_leader_new: identity is empty");
        return KOP_EINVAL;
    }
    if (o->lease_duration_ms == 0)
        o->lease_duration_ms = KOP_LEADER_DEFAULT_LEASE_DURATION_MS;
    if (o->renew_deadline_ms == 0)
        o->renew_deadline_ms = KOP_LEADER_DEFAULT_RENEW_DEADLINE_MS;
    if (o->retry_period_ms == 0)
        o->retry_period_ms = KOP_LEADER_DEFAULT_RETRY_PERIOD_MS;
    if (o->retry_period_ms < 0 || o->lease_duration_ms < 1000 ||
        o->lease_duration_ms <= o->renew_deadline_ms ||
        (double)o->renew_deadline_ms <= JITTER_FACTOR * (double)o->retry_period_ms) {
        kop_status_setf(st, 0, NULL,
                        "kop_leader_new: need lease_duration (%ld ms, >= 1000) > renew_deadline "
                        "(%ld ms) > 1.2 * retry_period (%ld ms) > 0",
                        o->lease_duration_ms, o->renew_deadline_ms, o->retry_period_ms);
        return KOP_EINVAL;
    }
    return KOP_OK;
}

kop_err kop_leader_new(kop_client *c, const kop_leader_opts *opts, kop_leader **out,
                       kop_status *st)
{
    kop_err err = KOP_OK;
    kop_leader *l = NULL;
    pthread_condattr_t ca;

    *out = NULL;
    if (!c || !opts) {
        kop_status_setf(st, 0, NULL, "kop_leader_new: no client or no options");
        return KOP_EINVAL;
    }
    l = calloc(1, sizeof *l);
    if (!l)
        return KOP_ENOMEM;
    l->opts = *opts;
    pthread_mutex_init(&l->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&l->leading, false);
    atomic_init(&l->renewed_ns, 0);
    err = check_opts(&l->opts, st);
    if (err)
        goto out;

    l->ns = strdup(l->opts.lease_namespace);
    l->name = strdup(l->opts.lease_name);
    l->identity = l->opts.identity ? strdup(l->opts.identity) : default_identity();
    if (!l->ns || !l->name || !l->identity) {
        err = KOP_ENOMEM;
        goto out;
    }
    l->opts.lease_namespace = l->ns;
    l->opts.lease_name = l->name;
    l->opts.identity = l->identity;
    l->lease_seconds = l->opts.lease_duration_ms / 1000;
    l->renew_deadline_ns = l->opts.renew_deadline_ms * NS_PER_MS;
    l->retry_ns = l->opts.retry_period_ms * NS_PER_MS;

    /* No request outlives half the renew deadline, and the elector retries
     * on its own schedule, so the client must not. */
    kop_client_opts co = {.timeout_ms = l->opts.renew_deadline_ms / 2, /* >= 1: checked */
                          .max_retries = -1};
    err = kop_client_new(kop_client_config(c), &co, &l->api, st);
out:
    if (err) {
        kop_leader_free(l);
        return err;
    }
    *out = l;
    return KOP_OK;
}

kop_err kop_leader_start(kop_leader *l)
{
    kop_err err = KOP_OK;
    pthread_mutex_lock(&l->lock);
    if (l->started || l->stopping)
        err = KOP_EINVAL;
    else if (pthread_create(&l->thread, NULL, elector_main, l) != 0)
        err = KOP_ENOMEM;
    else
        l->started = true;
    pthread_mutex_unlock(&l->lock);
    return err;
}

bool kop_leader_is_leader(const kop_leader *l)
{
    if (!atomic_load(&l->leading))
        return false;
    return now_ns() - atomic_load(&l->renewed_ns) < l->renew_deadline_ns;
}

const char *kop_leader_identity(const kop_leader *l)
{
    return l->identity;
}

void kop_leader_read_stats(const kop_leader *l, kop_leader_stats *out)
{
    kop_leader *m = (kop_leader *)l; /* the lock is not part of l's value */
    pthread_mutex_lock(&m->lock);
    *out = m->stats;
    pthread_mutex_unlock(&m->lock);
}

void kop_leader_stop(kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    bool join = l->started && !l->joined;
    KOP_ASSERT(!join || !pthread_equal(pthread_self(), l->thread));
    l->stopping = true;
    l->joined = l->joined || join;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    if (join)
        pthread_join(l->thread, NULL);
}

void kop_leader_free(kop_leader *l)
{
    if (!l)
        return;
    kop_leader_stop(l);
    kop_client_free(l->api);
    json_decref(l->lease);
    free(l->observed_spec);
    free(l->observed_holder);
    free(l->reported_leader);
    free(l->ns);
    free(l->name);
    free(l->identity);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

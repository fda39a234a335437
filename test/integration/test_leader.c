/*
 * test_leader.c - Lease leader election against a real apiserver (the
 * devcluster started by the ctest fixture; KOP_DEVCLUSTER_DIR names its
 * directory).
 *
 * Each scenario runs electors in this process on a Lease of its own, in a
 * namespace of this run's own. Durations are short (seconds) so the suite
 * is quick, and every assertion is about a state reached within a generous
 * bound: which elector leads, what the Lease records, which callbacks ran.
 * The only lower bound checked ("a standby does not take a crashed leader's
 * Lease before it expires") has seconds of slack, and load only widens it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "it_common.h"
#include "kop/kop.h"

static const kop_resource LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};

static it_env env;
static char ns[64];
static kop_config *cfg;
static kop_client *client;

/* Timings: "fast" expires quickly (crash and loss scenarios); "slow" leaves
 * a wide gap between a release (about one retry) and an expiry (10 s). */
typedef struct timings {
    long lease_ms, renew_ms, retry_ms;
} timings;
static const timings FAST = {3000, 2000, 500};
static const timings SLOW = {10000, 6000, 500};

/* ---- helpers ------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* probe records what an elector's callbacks saw. */
typedef struct probe {
    pthread_mutex_t lock;
    kop_leader *self;
    int started, stopped;
    bool leader_in_stop; /* kop_leader_is_leader during on_stopped_leading */
    char new_leader[256];
    int new_leaders;
} probe;

static void on_started(void *user)
{
    probe *p = user;
    pthread_mutex_lock(&p->lock);
    p->started++;
    pthread_mutex_unlock(&p->lock);
}

static void on_stopped(void *user)
{
    probe *p = user;
    bool leader = kop_leader_is_leader(p->self);
    pthread_mutex_lock(&p->lock);
    p->stopped++;
    p->leader_in_stop = p->leader_in_stop || leader;
    pthread_mutex_unlock(&p->lock);
}

static void on_new_leader(const char *identity, void *user)
{
    probe *p = user;
    pthread_mutex_lock(&p->lock);
    snprintf(p->new_leader, sizeof p->new_leader, "%s", identity);
    p->new_leaders++;
    pthread_mutex_unlock(&p->lock);
}

static int probe_count(probe *p, const int *field)
{
    pthread_mutex_lock(&p->lock);
    int n = *field;
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* elector makes and starts an elector on lease, reporting to p. */
static kop_leader *elector(probe *p, const char *lease, timings t, bool release)
{
    kop_leader *l = NULL;
    kop_status st;
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    kop_leader_opts o = {.lease_namespace = ns,
                         .lease_name = lease,
                         .lease_duration_ms = t.lease_ms,
                         .renew_deadline_ms = t.renew_ms,
                         .retry_period_ms = t.retry_ms,
                         .release_on_stop = release,
                         .on_started_leading = on_started,
                         .on_stopped_leading = on_stopped,
                         .on_new_leader = on_new_leader,
                         .user = p};
    kop_err err = kop_leader_new(client, &o, &l, &st);
    if (err)
        fprintf(stderr, "kop_leader_new: %s: %s\n", kop_err_name(err), st.message);
    assert_int_equal(err, KOP_OK);
    p->self = l;
    assert_int_equal(kop_leader_start(l), KOP_OK);
    return l;
}

static void probe_fini(probe *p)
{
    pthread_mutex_destroy(&p->lock);
}

/* leader_of returns the one of a, b that leads (NULL if none) and counts them. */
static kop_leader *leader_of(kop_leader *a, kop_leader *b, int *count)
{
    bool la = kop_leader_is_leader(a), lb = kop_leader_is_leader(b);
    *count = (int)la + (int)lb;
    return la ? a : lb ? b : NULL;
}

/* wait_leader waits up to timeout_ms for l to lead. */
static bool wait_leader(kop_leader *l, long timeout_ms)
{
    for (int64_t end = now_ms() + timeout_ms; now_ms() < end; sleep_ms(50))
        if (kop_leader_is_leader(l))
            return true;
    return kop_leader_is_leader(l);
}

/* wait_any_leader waits up to timeout_ms for a or b to lead and returns it. */
static kop_leader *wait_any_leader(kop_leader *a, kop_leader *b, long timeout_ms)
{
    int n;
    kop_leader *l = NULL;
    for (int64_t end = now_ms() + timeout_ms; !l && now_ms() < end; sleep_ms(50))
        l = leader_of(a, b, &n);
    assert_non_null(l);
    return l;
}

static json_t *get_lease(const char *name)
{
    json_t *lease = NULL;
    kop_status st;
    kop_err err = kop_get(client, &LEASES, ns, name, &lease, &st);
    if (err)
        fprintf(stderr, "get lease %s: %s: %s\n", name, kop_err_name(err), st.message);
    assert_int_equal(err, KOP_OK);
    return lease;
}

static const char *spec_str(json_t *lease, const char *key)
{
    const char *s = json_string_value(json_object_get(json_object_get(lease, "spec"), key));
    return s ? s : "";
}

static long spec_int(json_t *lease, const char *key)
{
    return (long)json_integer_value(json_object_get(json_object_get(lease, "spec"), key));
}

/* ---- fixture ------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    if (it_setup(&env, "kopc-it-leader"))
        return -1;
    cfg = env.cfg;
    client = env.client;
    snprintf(ns, sizeof ns, "%s", env.ns);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_teardown(&env);
    return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void test_options_are_checked(void **state)
{
    (void)state;
    kop_leader *l = NULL;
    kop_status st;
    kop_leader_opts o = {.lease_namespace = ns};
    assert_int_equal(kop_leader_new(client, &o, &l, &st), KOP_EINVAL);
    assert_null(l);
    assert_non_null(strstr(st.message, "lease_name"));
    o.lease_name = "x";
    o.lease_duration_ms = 5000;
    o.renew_deadline_ms = 5000; /* must be shorter than the lease */
    assert_int_equal(kop_leader_new(client, &o, &l, &st), KOP_EINVAL);
    o.renew_deadline_ms = 1000;
    o.retry_period_ms = 900; /* 1.2 * 900 > 1000 */
    assert_int_equal(kop_leader_new(client, &o, &l, &st), KOP_EINVAL);

    /* Defaults: client-go's durations and hostname_UUID identities, unique. */
    kop_leader *l2 = NULL;
    o = (kop_leader_opts){.lease_namespace = ns, .lease_name = "x"};
    assert_int_equal(kop_leader_new(client, &o, &l, &st), KOP_OK);
    assert_int_equal(kop_leader_new(client, &o, &l2, &st), KOP_OK);
    assert_non_null(strchr(kop_leader_identity(l), '_'));
    assert_string_not_equal(kop_leader_identity(l), kop_leader_identity(l2));
    assert_false(kop_leader_is_leader(l));
    kop_leader_stop(l); /* never started: nothing to do */
    assert_int_equal(kop_leader_start(l), KOP_EINVAL); /* one run per elector */
    kop_leader_free(l);
    kop_leader_free(l2);
    kop_leader_free(NULL);
}

/* (1) Two electors on one Lease: exactly one leads, and the Lease names it. */
static void test_exactly_one_leader(void **state)
{
    (void)state;
    probe pa, pb;
    kop_leader *a = elector(&pa, "pair", SLOW, true), *b = elector(&pb, "pair", SLOW, true);
    kop_leader *first = wait_any_leader(a, b, 15000);

    for (int i = 0; i < 100; i++) { /* every 50 ms for 5 s */
        int n;
        kop_leader *l = leader_of(a, b, &n);
        assert_int_equal(n, 1);
        assert_ptr_equal(l, first);
        if (i % 20 == 0) {
            json_t *lease = get_lease("pair");
            assert_string_equal(spec_str(lease, "holderIdentity"), kop_leader_identity(l));
            assert_int_equal(spec_int(lease, "leaseDurationSeconds"), SLOW.lease_ms / 1000);
            json_decref(lease);
        }
        sleep_ms(50);
    }
    probe *pl = first == a ? &pa : &pb, *pf = first == a ? &pb : &pa;
    assert_int_equal(probe_count(pl, &pl->started), 1);
    assert_int_equal(probe_count(pf, &pf->started), 0);
    pthread_mutex_lock(&pf->lock);
    assert_string_equal(pf->new_leader, kop_leader_identity(first));
    pthread_mutex_unlock(&pf->lock);

    kop_leader_stats s;
    kop_leader_read_stats(first, &s);
    assert_true(s.leading);
    assert_true(s.renewals >= 5); /* one every 500 ms */

    kop_leader_free(first == a ? b : a); /* the standby first: it must not take over */
    kop_leader_free(first);
    assert_int_equal(probe_count(pl, &pl->stopped), 1);
    assert_int_equal(probe_count(pf, &pf->stopped), 0);
    probe_fini(&pa);
    probe_fini(&pb);
}

/* (2) A leader that stops releases the Lease: the standby takes over at its
 * next retry, long before the 10 s lease would have expired. */
static void test_release_hands_over(void **state)
{
    (void)state;
    probe pa, pb;
    kop_leader *a = elector(&pa, "release", SLOW, true), *b = elector(&pb, "release", SLOW, true);
    kop_leader *l = wait_any_leader(a, b, 15000), *f = l == a ? b : a;
    probe *pl = l == a ? &pa : &pb;
    sleep_ms(1500); /* the standby has observed the leader's record */
    json_t *lease = get_lease("release");
    long transitions = spec_int(lease, "leaseTransitions");
    json_decref(lease);

    int64_t stopped_at = now_ms();
    kop_leader_stop(l);
    assert_false(kop_leader_is_leader(l));
    assert_int_equal(probe_count(pl, &pl->stopped), 1);
    assert_false(pl->leader_in_stop);
    /* Released (no holder, 1 s) unless the standby was already quicker. */
    lease = get_lease("release");
    const char *holder = spec_str(lease, "holderIdentity");
    if (strcmp(holder, kop_leader_identity(f)) != 0) {
        assert_string_equal(holder, "");
        assert_int_equal(spec_int(lease, "leaseDurationSeconds"), 1);
    }
    json_decref(lease);

    assert_true(wait_leader(f, SLOW.lease_ms - 4000));
    assert_true(now_ms() - stopped_at < SLOW.lease_ms - 4000);
    assert_false(kop_leader_is_leader(l));
    lease = get_lease("release");
    assert_string_equal(spec_str(lease, "holderIdentity"), kop_leader_identity(f));
    assert_int_equal(spec_int(lease, "leaseTransitions"), transitions + 1);
    json_decref(lease);

    kop_leader_stats s;
    kop_leader_read_stats(l, &s);
    assert_false(s.lost);
    kop_leader_free(a);
    kop_leader_free(b);
    probe_fini(&pa);
    probe_fini(&pb);
}

/* (3) A leader that vanishes without releasing (a crash, as seen from the
 * Lease): the standby waits for the lease to expire, then takes over. */
static void test_crash_takeover_after_expiry(void **state)
{
    (void)state;
    probe pa, pb;
    kop_leader *a = elector(&pa, "crash", FAST, false), *b = elector(&pb, "crash", FAST, false);
    kop_leader *l = wait_any_leader(a, b, 15000), *f = l == a ? b : a;
    sleep_ms(1000);
    json_t *lease = get_lease("crash");
    long transitions = spec_int(lease, "leaseTransitions");
    json_decref(lease);

    int64_t crashed_at = now_ms();
    kop_leader_stop(l);
    lease = get_lease("crash"); /* not released: still names the old leader */
    assert_string_equal(spec_str(lease, "holderIdentity"), kop_leader_identity(l));
    json_decref(lease);
    /* Its last renewal is at most a retry old: the claim stands for seconds. */
    while (now_ms() - crashed_at < 1000) {
        assert_false(kop_leader_is_leader(f));
        sleep_ms(50);
    }
    assert_true(wait_leader(f, FAST.lease_ms + 2 * FAST.retry_ms + 10000));
    lease = get_lease("crash");
    assert_string_equal(spec_str(lease, "holderIdentity"), kop_leader_identity(f));
    assert_int_equal(spec_int(lease, "leaseTransitions"), transitions + 1);
    json_decref(lease);

    kop_leader_free(a);
    kop_leader_free(b);
    probe_fini(&pa);
    probe_fini(&pb);
}

/* (4) The Lease changes under the leader. Deleted: the leader simply makes it
 * again (client-go's behaviour; nobody else held it). Taken by another
 * holder: the leader sees it at its next renewal and steps down, is_leader
 * false before on_stopped_leading, without overwriting the new holder. */
static void test_lease_taken_from_leader(void **state)
{
    (void)state;
    probe p;
    kop_status st;
    kop_leader *l = elector(&p, "lost", FAST, true);
    assert_true(wait_leader(l, 15000));

    assert_int_equal(
        kop_delete_object(client, &(kop_delete_req){.target = {&LEASES, ns, "lost"}}, NULL, &st),
        KOP_OK);
    json_t *lease = NULL;
    for (int64_t end = now_ms() + 10000; now_ms() < end; sleep_ms(100)) {
        if (kop_get(client, &LEASES, ns, "lost", &lease, &st) == KOP_OK)
            break;
    }
    assert_non_null(lease);
    assert_string_equal(spec_str(lease, "holderIdentity"), kop_leader_identity(l));
    json_decref(lease);
    assert_true(kop_leader_is_leader(l));
    assert_int_equal(probe_count(&p, &p.stopped), 0);

    /* Another holder takes the Lease (retrying while the leader's renewals
     * conflict with our read-modify-write). */
    kop_err err = KOP_ECONFLICT;
    for (int i = 0; i < 50 && err == KOP_ECONFLICT; i++) {
        lease = get_lease("lost");
        json_t *spec = json_object_get(lease, "spec");
        json_object_set_new(spec, "holderIdentity", json_string("intruder"));
        json_object_set_new(spec, "leaseDurationSeconds", json_integer(3600));
        err = kop_update_object(client,
                                &(kop_write_req){.target = {&LEASES, ns, NULL}, .object = lease},
                                NULL, &st);
        json_decref(lease);
    }
    assert_int_equal(err, KOP_OK);

    for (int64_t end = now_ms() + 10000; now_ms() < end && !probe_count(&p, &p.stopped);)
        sleep_ms(50);
    assert_int_equal(probe_count(&p, &p.stopped), 1);
    assert_false(p.leader_in_stop);
    assert_false(kop_leader_is_leader(l));
    pthread_mutex_lock(&p.lock);
    assert_string_equal(p.new_leader, "intruder");
    pthread_mutex_unlock(&p.lock);
    kop_leader_stats s;
    kop_leader_read_stats(l, &s);
    assert_true(s.lost);
    assert_false(s.leading);

    /* Stopping after the loss releases nothing: the intruder keeps it. */
    kop_leader_free(l);
    lease = get_lease("lost");
    assert_string_equal(spec_str(lease, "holderIdentity"), "intruder");
    json_decref(lease);
    assert_int_equal(probe_count(&p, &p.started), 1);
    assert_int_equal(probe_count(&p, &p.stopped), 1);
    probe_fini(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_are_checked),
        cmocka_unit_test(test_exactly_one_leader),
        cmocka_unit_test(test_release_hands_over),
        cmocka_unit_test(test_crash_takeover_after_expiry),
        cmocka_unit_test(test_lease_taken_from_leader),
    };
    return cmocka_run_group_tests_name("leader (integration)", tests, setup, teardown);
}

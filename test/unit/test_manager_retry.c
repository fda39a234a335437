/*
 * test_manager_retry.c - kop_manager_retry (kop/manager.h): start-up steps
 * tried again while the apiserver gives no answer, on a real manager whose
 * client points at 127.0.0.1:1 (nothing is sent: the steps are the test's).
 *
 * Asserted: a step failing without an answer (no connection, TLS refused,
 * 403, 503) runs again after a backoff that doubles (0.5 s, then 1 s), and
 * its success ends the retries; an answer (404, 422) or a local error
 * (out of memory) is returned after one run; SIGTERM sent before
 * kop_manager_run, while the step waits out its backoff, ends the retries
 * with KOP_ECANCELED and is kept as a stop (the next call runs nothing);
 * kop_manager_stop from another thread does the same; no step is an
 * error. Each manager is made in the test's thread, which it leaves with
 * SIGTERM blocked, as an operator's main thread is.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kop/kop.h"

static const char KUBECONFIG_NOWHERE[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: k, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n";

static char kubeconfig[64];

/* A step that fails with fail (fails times), then succeeds; it counts its runs. */
struct step {
    kop_err fail;
    int fails, runs;
    bool raise_term; /* sends SIGTERM to the process on its first run */
};

static kop_err step(void *user, kop_status *st)
{
    struct step *s = user;
    s->runs++;
    if (s->raise_term && s->runs == 1)
        kill(getpid(), SIGTERM); /* blocked: pending until someone takes it */
    if (s->runs <= s->fails) {
        kop_status_setf(st, 0, NULL, "attempt %d failed", s->runs);
        return s->fail;
    }
    return KOP_OK;
}

static kop_manager *manager(void)
{
    kop_manager *m = NULL;
    kop_status st;
    kop_manager_opts mo = {.name = "unit-retry", .kubeconfig = kubeconfig, .metrics_bind = "0"};
    assert_int_equal(kop_manager_new(&mo, &m, &st), KOP_OK);
    return m;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_retried_until_done(void **state)
{
    (void)state;
    kop_manager *m = manager();
    kop_status st;
    struct step s = {.fail = KOP_ECONNECT, .fails = 2};
    double t0 = now_s();
    assert_int_equal(kop_manager_retry(m, "a step", step, &s, &st), KOP_OK);
    assert_int_equal(s.runs, 3);
    assert_true(now_s() - t0 >= 1.4); /* 0.5 s, then 1 s: a lower bound only */

    /* Each failure that is no answer about the step is tried again. */
    const kop_err no_answer[] = {KOP_ETLS, KOP_EFORBIDDEN, KOP_EUNAVAILABLE, KOP_ETOOMANYREQUESTS};
    for (size_t i = 0; i < sizeof no_answer / sizeof no_answer[0]; i++) {
        s = (struct step){.fail = no_answer[i], .fails = 1};
        assert_int_equal(kop_manager_retry(m, "a step", step, &s, &st), KOP_OK);
        assert_int_equal(s.runs, 2);
    }
    kop_manager_free(m);
}

static void test_answers_returned(void **state)
{
    (void)state;
    kop_manager *m = manager();
    kop_status st;
    const kop_err answers[] = {KOP_ENOTFOUND, KOP_EINVALID, KOP_ENOMEM, KOP_EPARSE};
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        struct step s = {.fail = answers[i], .fails = 5};
        assert_int_equal(kop_manager_retry(m, "a step", step, &s, &st), answers[i]);
        assert_int_equal(s.runs, 1);
        assert_string_equal(st.message, "attempt 1 failed"); /* the step's own detail */
    }
    assert_int_equal(kop_manager_retry(m, "a step", NULL, NULL, &st), KOP_EINVAL);
    assert_int_equal(kop_manager_retry(NULL, "a step", step, NULL, NULL), KOP_EINVAL);
    kop_manager_free(m);
}

static void test_sigterm_before_run(void **state)
{
    (void)state;
    kop_manager *m = manager();
    kop_status st;
    struct step s = {.fail = KOP_ECONNECT, .fails = 1000, .raise_term = true};
    assert_int_equal(kop_manager_retry(m, "a step", step, &s, &st), KOP_ECANCELED);
    assert_int_equal(s.runs, 1);
    assert_non_null(strstr(st.message, "a step"));
    /* Kept as a stop: the next start-up step does not run at all. */
    struct step next = {.fails = 0};
    assert_int_equal(kop_manager_retry(m, "next", step, &next, &st), KOP_ECANCELED);
    assert_int_equal(next.runs, 0);
    /* Taken, not left pending for whoever unblocks it. */
    sigset_t pending;
    assert_int_equal(sigpending(&pending), 0);
    assert_false(sigismember(&pending, SIGTERM));
    kop_manager_free(m);
}

static void *stop_later(void *arg)
{
    usleep(300 * 1000);
    kop_manager_stop(arg);
    return NULL;
}

static void test_stop_from_another_thread(void **state)
{
    (void)state;
    kop_manager *m = manager();
    kop_status st;
    struct step s = {.fail = KOP_ECONNECT, .fails = 1000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, m), 0);
    assert_int_equal(kop_manager_retry(m, "a step", step, &s, &st), KOP_ECANCELED);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(s.runs >= 1);
    kop_manager_free(m);
}

int main(void)
{
    snprintf(kubeconfig, sizeof kubeconfig, "/tmp/kop-unit-retry-%d.yaml", (int)getpid());
    FILE *kc = fopen(kubeconfig, "w");
    if (!kc || fputs(KUBECONFIG_NOWHERE, kc) < 0 || fclose(kc) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retried_until_done),
        cmocka_unit_test(test_answers_returned),
        cmocka_unit_test(test_sigterm_before_run),
        cmocka_unit_test(test_stop_from_another_thread),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(kubeconfig);
    return rc;
}

/*
 * test_ctf_fresh.c - the definitions' quorum reads a burst of claims
 * shares (core/fresh.c), with a reader the test controls and a clock it
 * sets.
 *
 * Asserted: a read that started at or after a Challenge's first sight
 * serves its claim without another read, an earlier one does not; a
 * definition that does not exist is an answer (NULL) like any other; a
 * failed read keeps nothing; the answers are copies; claims arriving
 * while a read is in flight never send a second read at the same time,
 * and those the read serves send none; a full table makes room by dropping
 * the entry read longest ago, never one with a read in flight; the first sight of a Challenge is kept, the
 * later ones do not move it, and an unknown one is "now".
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/fresh.h"

static _Atomic int64_t now_ms;
static atomic_int reads, in_read, most_in_read, generation;
static atomic_bool fail_next, hold, hold_named; /* hold_named: only reads of "held" wait */

static int64_t test_clock(void)
{
    return atomic_load(&now_ms);
}

/* test_read answers a definition at the current generation ("gone": none), or fails once. */
static kop_err test_read(const char *ns, const char *name, json_t **out, void *user)
{
    (void)ns;
    (void)user;
    int n = atomic_fetch_add(&in_read, 1) + 1;
    if (n > atomic_load(&most_in_read))
        atomic_store(&most_in_read, n);
    atomic_fetch_add(&reads, 1);
    int gen = atomic_load(&generation); /* what the server holds when the read starts */
    while (atomic_load(&hold) || (atomic_load(&hold_named) && strcmp(name, "held") == 0))
        usleep(1000);
    atomic_fetch_sub(&in_read, 1);
    if (atomic_exchange(&fail_next, false))
        return KOP_EIO;
    *out = strcmp(name, "gone") == 0
               ? NULL
               : json_pack("{s:{s:s, s:i}}", "metadata", "name", name, "generation",
                           gen);
    return KOP_OK;
}

static json_int_t gen_of(const json_t *def)
{
    return json_integer_value(json_object_get(json_object_get(def, "metadata"), "generation"));
}

static json_t *claim(ctf_fresh *f, const char *name, int64_t since)
{
    json_t *out = NULL;
    assert_int_equal(ctf_fresh_definition(f, "ctf", name, since, test_read, NULL, test_clock, &out),
                     KOP_OK);
    return out;
}

static void reset(void)
{
    atomic_store(&now_ms, 1000);
    atomic_store(&reads, 0);
    atomic_store(&most_in_read, 0);
    atomic_store(&generation, 1);
    atomic_store(&fail_next, false);
    atomic_store(&hold, false);
    atomic_store(&hold_named, false);
}

static void test_reads_shared_when_late_enough(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    reset();
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    json_t *d = claim(f, "web", 900); /* no read yet: one starts at 1000 */
    assert_int_equal(gen_of(d), 1);
    assert_int_equal(atomic_load(&reads), 1);
    json_decref(d);

    atomic_store(&generation, 2); /* the definition changes on the server */
    atomic_store(&now_ms, 1500);
    d = claim(f, "web", 1000); /* first seen when the last read started: it serves */
    assert_int_equal(gen_of(d), 1);
    assert_int_equal(atomic_load(&reads), 1);
    /* The answer is a copy: changing it changes nothing kept. */
    json_object_set_new(json_object_get(d, "metadata"), "generation", json_integer(99));
    json_decref(d);
    d = claim(f, "web", 1000);
    assert_int_equal(gen_of(d), 1);
    json_decref(d);

    d = claim(f, "web", 1001); /* seen after the last read started: a new one */
    assert_int_equal(gen_of(d), 2);
    assert_int_equal(atomic_load(&reads), 2);
    json_decref(d);

    /* Another definition has its own reads. */
    d = claim(f, "pwn", 0);
    assert_int_equal(atomic_load(&reads), 3);
    json_decref(d);
    ctf_fresh_free(f);
}

static void test_absent_and_failed(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    json_t *out = NULL;
    reset();
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    assert_null(claim(f, "gone", 0)); /* none: an answer, kept like any other */
    assert_null(claim(f, "gone", 500));
    assert_int_equal(atomic_load(&reads), 1);

    atomic_store(&fail_next, true);
    assert_int_equal(ctf_fresh_definition(f, "ctf", "web", 0, test_read, NULL, test_clock, &out),
                     KOP_EIO);
    assert_null(out);
    json_t *d = claim(f, "web", 0); /* nothing was kept: read again */
    assert_int_equal(atomic_load(&reads), 3);
    assert_int_equal(gen_of(d), 1);
    json_decref(d);
    ctf_fresh_free(f);
}

struct claimer {
    ctf_fresh *f;
    int64_t since;
    json_int_t gen;
    atomic_bool calling;
};

static void *claim_thread(void *arg)
{
    struct claimer *c = arg;
    json_t *out = NULL;
    atomic_store(&c->calling, true);
    if (ctf_fresh_definition(c->f, "ctf", "web", c->since, test_read, NULL, test_clock, &out) ==
        KOP_OK)
        c->gen = gen_of(out);
    json_decref(out);
    return NULL;
}

/*
 * A read is held in flight (started at 1000) while five more claims come:
 * three seen before it started are served by it (or by the next, should that
 * end before they take the lock) and send nothing; the two
 * seen after it need a later read, which the first of them to get the lock
 * sends once the held one ends, and which serves the other. Whatever the
 * interleaving: two reads in all, never two at once.
 */
static void test_concurrent_claims(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    reset();
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    atomic_store(&hold, true);
    struct claimer cs[6] = {{.f = f, .since = 1000}, {.f = f, .since = 900},
                            {.f = f, .since = 950},  {.f = f, .since = 1000},
                            {.f = f, .since = 1200}, {.f = f, .since = 1300}};
    pthread_t ts[6];
    assert_int_equal(pthread_create(&ts[0], NULL, claim_thread, &cs[0]), 0);
    while (atomic_load(&reads) < 1) /* the first read is in flight, started at 1000 */
        usleep(1000);
    atomic_store(&now_ms, 2000); /* later reads start at 2000 */
    atomic_store(&generation, 2);
    for (int i = 1; i < 6; i++) {
        assert_int_equal(pthread_create(&ts[i], NULL, claim_thread, &cs[i]), 0);
        while (!atomic_load(&cs[i].calling))
            usleep(1000);
    }
    usleep(20 * 1000); /* let them reach the lock; correctness does not depend on it */
    atomic_store(&hold, false);
    for (int i = 0; i < 6; i++)
        pthread_join(ts[i], NULL);
    /* Served by the read in flight, or by the later one when it ended first (newer, and
     * also late enough). */
    for (int i = 0; i < 4; i++)
        assert_true(cs[i].gen == 1 || cs[i].gen == 2);
    assert_int_equal(cs[0].gen, 1); /* its own read */
    assert_int_equal(cs[4].gen, 2);
    assert_int_equal(cs[5].gen, 2);
    int n = atomic_load(&reads);
    assert_int_equal(n, 2); /* one for the first four, one for the late two */
    assert_int_equal(atomic_load(&most_in_read), 1);
    ctf_fresh_free(f);
}

/*
 * More definitions than the table holds: each new one still gets an entry,
 * made by dropping the one read longest ago, so its reads are shared again;
 * the dropped one only reads anew, with the right answer.
 */
static void test_table_full(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    char name[32];
    reset();
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    for (int i = 0; i < CTF_FRESH_DEFINITIONS; i++) {
        snprintf(name, sizeof name, "def-%d", i);
        atomic_store(&now_ms, 1000 + i); /* def-0's read is the oldest */
        json_decref(claim(f, name, 0));
    }
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS);
    atomic_store(&now_ms, 5000);
    json_decref(claim(f, "late", 0)); /* takes def-0's entry */
    json_decref(claim(f, "late", 0)); /* and shares its read */
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 1);
    json_decref(claim(f, "def-1", 0)); /* still kept */
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 1);
    atomic_store(&generation, 2);
    json_t *d = claim(f, "def-0", 0); /* dropped: read anew, the server's answer */
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 2);
    assert_int_equal(gen_of(d), 2);
    json_decref(d);
    ctf_fresh_free(f);
}

static void *claim_held(void *arg)
{
    json_t *out = NULL;
    if (ctf_fresh_definition(arg, "ctf", "held", 0, test_read, NULL, test_clock, &out) == KOP_OK)
        atomic_store(&generation, (int)gen_of(out) + 100); /* seen by the test: answered */
    json_decref(out);
    return NULL;
}

/*
 * A full table whose oldest entry has a read in flight (it has no read
 * done, so it looks the oldest of all): a new definition takes the oldest
 * idle entry instead, and the read in flight ends in its own entry, which
 * then serves the next claim of it without another read.
 */
static void test_table_full_in_flight(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    char name[32];
    pthread_t t;
    reset();
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    for (int i = 0; i < CTF_FRESH_DEFINITIONS - 1; i++) {
        snprintf(name, sizeof name, "def-%d", i);
        atomic_store(&now_ms, 1000 + i);
        json_decref(claim(f, name, 0));
    }
    atomic_store(&hold_named, true);
    atomic_store(&now_ms, 3000);
    assert_int_equal(pthread_create(&t, NULL, claim_held, f), 0);
    while (atomic_load(&reads) < CTF_FRESH_DEFINITIONS) /* "held" is in flight: table full */
        usleep(1000);
    atomic_store(&now_ms, 4000);
    json_decref(claim(f, "new", 0)); /* takes def-0's entry, not the one in flight */
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 1);
    atomic_store(&hold_named, false);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&generation), 101); /* "held" was answered */
    atomic_store(&generation, 1);
    json_decref(claim(f, "held", 0)); /* its read was kept in its entry */
    json_decref(claim(f, "new", 0));
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 1);
    json_decref(claim(f, "def-0", 0)); /* the one made room with: read anew */
    assert_int_equal(atomic_load(&reads), CTF_FRESH_DEFINITIONS + 2);
    ctf_fresh_free(f);
}

static void test_first_sight(void **state)
{
    (void)state;
    ctf_fresh *f = NULL;
    assert_int_equal(ctf_fresh_new(&f), KOP_OK);
    assert_int_equal(ctf_fresh_since(f, "uid-1", 777), 777); /* unknown: now */
    ctf_fresh_seen(f, "uid-1", 100);
    ctf_fresh_seen(f, "uid-1", 200); /* the first sight stays */
    assert_int_equal(ctf_fresh_since(f, "uid-1", 999), 100);
    ctf_fresh_gone(f, "uid-1");
    assert_int_equal(ctf_fresh_since(f, "uid-1", 999), 999);
    ctf_fresh_seen(f, NULL, 5); /* no uid: nothing recorded */
    assert_int_equal(ctf_fresh_since(f, NULL, 42), 42);
    ctf_fresh_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_shared_when_late_enough),
        cmocka_unit_test(test_absent_and_failed),
        cmocka_unit_test(test_concurrent_claims),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_table_full_in_flight),
        cmocka_unit_test(test_first_sight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

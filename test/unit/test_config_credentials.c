/*
 * test_config_credentials.c - credentials at request time
 * (config_credentials.c): token files, their rotation, and
 * kop_config_credentials called from many threads at once.
 *
 * Nothing here depends on timing except with wide margins: the rotation
 * test sleeps a little over the one-second recheck interval.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config_internal.h"
#include "kop/kop.h"
#include "config_fixture.h"

/* ---- token files -------------------------------------------------------- */

static void test_token_file_static_fixture(void **state)
{
    (void)state;
    kop_credentials c;
    kop_config *cfg = load_fixture("tokenfile.yaml", NULL);
    creds(cfg, &c);
    assert_string_equal(c.token, "file-token"); /* trimmed; the file wins over token */
    kop_credentials_fini(&c);
    kop_config_free(cfg);
}

static kop_config *token_file_config(const char *dir)
{
    char *origin = join(dir, "kubeconfig");
    static const char yaml[] = MINI_CLUSTER "users: [{name: u, user: {tokenFile: token}}]\n"
                                            MINI_CONTEXT;
    kop_config *cfg = NULL;
    kop_status st;
    kop_err err = kop_config_parse(yaml, strlen(yaml), origin, NULL, &cfg, &st);
    if (err)
        fail_msg("%s", st.message);
    free(origin);
    return cfg;
}

static void test_token_file_rotation(void **state)
{
    (void)state;
    char *dir = tmpdir(), *tok = join(dir, "token"), *tmp = join(dir, "token.new");
    kop_status st;
    kop_config *cfg;

    const char *y = MINI_CLUSTER "users: [{name: u, user: {tokenFile: token}}]\n" MINI_CONTEXT;
    /* Missing token file: an error naming the file and the field. */
    assert_int_equal(kop_config_parse(y, strlen(y), "/nonexistent/kc", NULL, &cfg, &st), KOP_EIO);
    assert_non_null(strstr(st.message, "/nonexistent/kc: users[name=u].tokenFile: "
                                       "/nonexistent/token: No such file or directory"));

    write_file(tok, "one\n", 0600);
    cfg = token_file_config(dir);
    expect_token(cfg, "one");

    /* Rewritten in place (same size), mtime moved: seen after invalidation
     * without waiting. */
    write_file(tok, "two\n", 0600);
    struct timespec times[2] = {{0, UTIME_OMIT}, {time(NULL) + 10, 0}};
    assert_int_equal(utimensat(AT_FDCWD, tok, times, 0), 0);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "two");

    /* Replaced by rename (new inode, as the kubelet does): seen once the
     * one-second recheck interval has passed. */
    write_file(tmp, "  three  \n", 0600);
    assert_int_equal(rename(tmp, tok), 0);
    struct timespec pause = {1, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    expect_token(cfg, "three");

    /* Gone or empty later: the last good token is kept. */
    assert_int_equal(unlink(tok), 0);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "three");
    write_file(tok, "\n\n", 0600);
    kop_config_invalidate_credentials(cfg);
    expect_token(cfg, "three");
    kop_config_free(cfg);

    /* An empty file with no previous token is an error. */
    kop_config *cfg2 = NULL;
    char *origin = join(dir, "kubeconfig");
    assert_int_equal(kop_config_parse(y, strlen(y), origin, NULL, &cfg2, &st), KOP_ECREDENTIALS);
    assert_non_null(strstr(st.message, "tokenFile"));
    free(origin);

    free(tok);
    free(tmp);
    rm_tree(dir);
}

struct hammer {
    kop_config *cfg;
    int bad;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 200; i++) {
        kop_credentials c;
        if (kop_config_credentials(h->cfg, &c, NULL) != KOP_OK || !c.token ||
            strncmp(c.token, "tok", 3) != 0)
            __atomic_add_fetch(&h->bad, 1, __ATOMIC_RELAXED);
        if (i % 50 == 0)
            kop_config_invalidate_credentials(h->cfg);
        kop_credentials_fini(&c);
    }
    return NULL;
}

/* Many threads reading credentials while the file rotates. */
static void test_credentials_threads(void **state)
{
    (void)state;
    char *dir = tmpdir(), *tok = join(dir, "token"), *tmp = join(dir, "t.new");
    write_file(tok, "tok-0", 0600);
    struct hammer h = {.cfg = token_file_config(dir)};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h), 0);
    for (int i = 1; i <= 20; i++) {
        char t[32];
        snprintf(t, sizeof t, "tok-%d", i);
        write_file(tmp, t, 0600);
        assert_int_equal(rename(tmp, tok), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(h.bad, 0);
    kop_config_free(h.cfg);
    free(tok);
    free(tmp);
    rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_token_file_static_fixture, clean_env),
        cmocka_unit_test_setup(test_token_file_rotation, clean_env),
        cmocka_unit_test_setup(test_credentials_threads, clean_env),
    };
    return cmocka_run_group_tests_name("config_credentials", tests, NULL, NULL);
}

/*
 * test_program.c - kop_main (kop/program.h) up to the point where it
 * would need an apiserver: the command line, the exit statuses and what
 * it prints. Its run until SIGTERM is tested on the devcluster
 * (test/integration/test_ctrlutil.c, test_main) and by every e2e test of
 * the FlightTicket operator, whose main() is kop_main.
 *
 * Asserted: --help prints the common flags, --namespace (with a
 * controller) and the operator's own to stdout and exits 0 before
 * anything starts; an unknown flag or a wrong value exits 2 naming it;
 * the operator's parse_flag sees its flags; a kubeconfig that cannot be
 * read, a setup that fails and an incomplete controller exit 1 with the
 * reason on stderr; setup gets the manager and its user pointer.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kop/kop.h"

static const char KUBECONFIG_NOWHERE[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: k, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n";

static const kop_resource SITES = {"demo.example.com", "v1", "websites", "Website", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource *const OWNS[] = {&CONFIGMAPS, NULL};

static char kubeconfig[64];

/* What one kop_main call printed and returned. */
struct run {
    int rc;
    char out[8192], err[8192];
};

static void slurp(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

/* run_main calls kop_main with argv, stdout and stderr captured in files. */
static void run_main(struct run *r, const kop_main_opts *o, int argc, char **argv)
{
    char out_path[64], err_path[64];
    snprintf(out_path, sizeof out_path, "/tmp/kop-unit-main-out-%d", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/kop-unit-main-err-%d", (int)getpid());
    int out = open(out_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(out >= 0 && err >= 0);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(out, 1);
    dup2(err, 2);
    r->rc = kop_main(argc, argv, o);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
    close(out);
    close(err);
    unlink(out_path);
    unlink(err_path);
}

static kop_result never(const kop_reconcile *req, void *user)
{
    (void)req;
    (void)user;
    return KOP_DONE;
}

/* The operator's own flag: --color C. */
struct own {
    const char *color;
    kop_manager *seen_mgr;
    int setups;
};

static int own_flag(int argc, char **argv, int *i, void *user, kop_status *st)
{
    struct own *own = user;
    if (strcmp(argv[*i], "--color") != 0)
        return 0;
    if (*i + 1 >= argc || strcmp(argv[*i + 1], "green") != 0) {
        kop_status_setf(st, 0, NULL, "--color: only green");
        return -1;
    }
    own->color = argv[*i + 1];
    *i += 2;
    return 1;
}

static kop_err failing_setup(kop_manager *m, void *user, kop_status *st)
{
    struct own *own = user;
    own->seen_mgr = m;
    own->setups++;
    kop_status_setf(st, 0, NULL, "the setup says no");
    return KOP_EINVAL;
}

static kop_main_opts opts(struct own *own)
{
    return (kop_main_opts){
        .manager = {.name = "unit-operator", .metrics_bind = "0"},
        .controller = {.name = "website", .for_resource = SITES, .reconcile = never},
        .owns = OWNS,
        .setup = failing_setup,
        .parse_flag = own_flag,
        .flags_usage = "  --color green           the operator's own flag\n",
        .user = own,
    };
}

static void test_help(void **state)
{
    (void)state;
    static struct run r;
    struct own own = {0};
    kop_main_opts o = opts(&own);
    run_main(&r, &o, 2, (char *[]){"/usr/bin/site-operator", "--help", NULL});
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "usage: site-operator [flags]"));
    assert_non_null(strstr(r.out, "--kubeconfig"));
    assert_non_null(strstr(r.out, "--namespace NS"));
    assert_non_null(strstr(r.out, "--color green"));
    assert_string_equal(r.err, "");
    assert_int_equal(own.setups, 0); /* nothing started */

    /* Without a controller, no --namespace: it would set nothing. */
    o.controller = (kop_controller_opts){0};
    run_main(&r, &o, 2, (char *[]){"op", "-h", NULL});
    assert_int_equal(r.rc, 0);
    assert_null(strstr(r.out, "--namespace"));
}

static void test_bad_flags(void **state)
{
    (void)state;
    static struct run r;
    struct own own = {0};
    kop_main_opts o = opts(&own);

    run_main(&r, &o, 2, (char *[]){"op", "--bogus", NULL});
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "op: unknown flag or missing value: --bogus"));
    assert_non_null(strstr(r.err, "usage: op"));

    run_main(&r, &o, 3, (char *[]){"op", "-v", "eleven", NULL});
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "-v: \"eleven\""));

    run_main(&r, &o, 3, (char *[]){"op", "--color", "red", NULL});
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "--color: only green"));

    /* A flag whose value is missing. */
    run_main(&r, &o, 2, (char *[]){"op", "--namespace", NULL});
    assert_int_equal(r.rc, 2);
    assert_int_equal(own.setups, 0);
}

static void test_start_errors(void **state)
{
    (void)state;
    static struct run r;
    struct own own = {0};
    kop_main_opts o = opts(&own);

    /* The common flags, --namespace both ways and the operator's own flag are
     * all taken; then the setup's refusal ends the program with status 1. */
    run_main(&r, &o, 9,
             (char *[]){"op", "--kubeconfig", kubeconfig, "--namespace", "demo", "--color",
                        "green", "--namespace=other", "--leader-elect=false", NULL});
    assert_int_equal(r.rc, 1);
    assert_non_null(own.color);
    assert_string_equal(own.color, "green");
    assert_int_equal(own.setups, 1);
    assert_non_null(own.seen_mgr);
    assert_non_null(strstr(r.err, "op: "));
    assert_non_null(strstr(r.err, "the setup says no"));

    /* A kubeconfig that does not exist: status 1, and the path named. */
    run_main(&r, &o, 3, (char *[]){"op", "--kubeconfig", "/nonexistent/kubeconfig", NULL});
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "/nonexistent/kubeconfig"));
    assert_int_equal(own.setups, 1); /* not reached */

    /* A controller without a name. */
    o.controller.name = NULL;
    run_main(&r, &o, 3, (char *[]){"op", "--kubeconfig", kubeconfig, NULL});
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "controller (no name): name, reconcile and resource"));
    assert_int_equal(own.setups, 1);

    /* NULL options: no manager name, no controller: only flags are checked. */
    run_main(&r, NULL, 2, (char *[]){"op", "--whatever", NULL});
    assert_int_equal(r.rc, 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(kubeconfig, sizeof kubeconfig, "/tmp/kop-unit-main-%d.yaml", (int)getpid());
    FILE *kc = fopen(kubeconfig, "w");
    if (!kc || fputs(KUBECONFIG_NOWHERE, kc) < 0 || fclose(kc) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(kubeconfig);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_start_errors),
    };
    return cmocka_run_group_tests_name("program", tests, setup, teardown);
}

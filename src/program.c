/*
 * program.c - kop_main (kop/program.h): the main() every operator used to
 * write by hand, once, so that a small operator is its reconcile and a
 * table of options.
 *
 * The order is the order of a kubebuilder main.go: flags, manager,
 * controller with its owned kinds, the operator's own setup, run. Each
 * failure ends the call with one line on stderr and a status a script can
 * tell apart: 2 for the command line (nothing was started), 1 for
 * everything after. The manager (kop_manager_new) blocks SIGTERM and
 * SIGINT and kop_manager_run waits for them, so no signal handler is
 * installed here.
 */
#include <stdio.h>
#include <string.h>

#include "kop/program.h"

/* program_name is argv[0] without its directories ("flightticket-operator"). */
static const char *program_name(int argc, char **argv)
{
    const char *p = argc > 0 && argv[0] && argv[0][0] ? argv[0] : "operator";
    const char *slash = strrchr(p, '/');
    return slash && slash[1] ? slash + 1 : p;
}

static void usage(FILE *f, const char *prog, const kop_main_opts *o)
{
    fprintf(f, "usage: %s [flags]\n%s", prog, kop_manager_flags_usage());
    if (o->controller.reconcile)
        fputs("  --namespace NS           watch NS only (default: all namespaces)\n", f);
    if (o->flags_usage)
        fputs(o->flags_usage, f);
}

/*
 * parse_flags fills o from argv. Returns -1 to go on, else the exit status
 * kop_main returns at once (0 after --help, 2 for a wrong command line).
 */
static int parse_flags(kop_main_opts *o, int argc, char **argv, const char *prog)
{
    kop_status st;
    kop_status_clear(&st);
    for (int i = 1; i < argc;) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout, prog, o);
            return 0;
        }
        int r = kop_manager_parse_flag(&o->manager, argc, argv, &i, &st);
        if (r == 0 && o->controller.reconcile && strncmp(arg, "--namespace", 11) == 0) {
            if (arg[11] == '=') {
                o->controller.namespace = arg + 12;
                i++;
                r = 1;
            } else if (arg[11] == '\0' && i + 1 < argc) {
                o->controller.namespace = argv[i + 1];
                i += 2;
                r = 1;
            }
        }
        if (r == 0 && o->parse_flag)
            r = o->parse_flag(argc, argv, &i, o->user, &st);
        if (r <= 0) {
            if (r == 0)
                fprintf(stderr, "%s: unknown flag or missing value: %s\n", prog, arg);
            else
                fprintf(stderr, "%s: %s\n", prog, st.message);
            usage(stderr, prog, o);
            return 2;
        }
    }
    return -1;
}

/* add_controller adds o's controller and its owned kinds to m. */
static kop_err add_controller(kop_manager *m, const kop_main_opts *o, kop_status *st)
{
    kop_controller *ctl = NULL;
    kop_err err = kop_controller_new(m, &o->controller, &ctl);
    if (err) {
        kop_status_setf(st, 0, NULL, "controller %s: %s",
                        o->controller.name ? o->controller.name : "(no name)",
                        err == KOP_EINVAL ? "name, reconcile and resource are required"
                                          : kop_strerror(err));
        return err;
    }
    for (size_t i = 0; o->owns && o->owns[i]; i++) {
        err = kop_controller_owns(ctl, o->owns[i], NULL);
        if (err) {
            kop_status_setf(st, 0, NULL, "controller %s: owning %s: %s", o->controller.name,
                            o->owns[i]->resource, kop_strerror(err));
            return err;
        }
    }
    return KOP_OK;
}

int kop_main(int argc, char **argv, const kop_main_opts *opts)
{
    static const kop_main_opts none;
    kop_main_opts o = opts ? *opts : none;
    const char *prog = program_name(argc, argv);
    kop_manager *mgr = NULL;
    kop_status st;
    kop_err err;

    int rc = parse_flags(&o, argc, argv, prog);
    if (rc >= 0)
        return rc;
    if (!o.manager.name)
        o.manager.name = prog;
    kop_status_clear(&st);
    err = kop_manager_new(&o.manager, &mgr, &st);
    if (!err && o.controller.reconcile)
        err = add_controller(mgr, &o, &st);
    if (!err && o.setup)
        err = o.setup(mgr, o.user, &st);
    if (!err)
        err = kop_manager_run(mgr, &st);
    if (err)
        fprintf(stderr, "%s: %s: %s\n", prog, kop_strerror(err), st.message);
    kop_manager_free(mgr);
    return err ? 1 : 0;
}

/*
 * kop/program.h - an operator's whole main() in one call: the common flags,
 * --help, the manager, its controller and owned kinds, the operator's own
 * setup, signal handling and the exit status. What ctrl.NewManager, the
 * builder's For/Owns/Complete and ctrl.SetupSignalHandler are to a
 * kubebuilder main.go, for C:
 *
 *   static const kop_resource *const OWNS[] = {&CONFIGMAPS, NULL};
 *
 *   int main(int argc, char **argv)
 *   {
 *       return kop_main(argc, argv, &(kop_main_opts){
 *           .manager.name = "website-operator",
 *           .controller = {.name = "website", .for_resource = WEBSITE_RESOURCE,
 *                          .reconcile = website_reconcile},
 *           .owns = OWNS});
 *   }
 *
 * kop_main is the one call of libkop that writes to stdout and stderr
 * itself, as a program's main does: the help text, a wrong flag, and the
 * error that ended the operator. Everything else goes through the logger.
 */
#ifndef KOP_PROGRAM_H
#define KOP_PROGRAM_H

#include "kop/common.h"
#include "kop/controller.h"
#include "kop/err.h"
#include "kop/manager.h"

KOP_BEGIN_DECLS

/*
 * kop_setup_fn adds what the operator needs beyond its one controller
 * (webhooks, more controllers, runnables) to m before it runs. Returns
 * KOP_OK, or an error explained in st that ends kop_main with status 1.
 */
typedef kop_err (*kop_setup_fn)(kop_manager *m, void *user, kop_status *st);

/*
 * kop_flag_fn parses one of the operator's own flags at argv[*i], as
 * kop_manager_parse_flag does: 1 and *i moved past it, 0 when it is not
 * one of them, -1 with the reason in st when its value is wrong.
 */
typedef int (*kop_flag_fn)(int argc, char **argv, int *i, void *user, kop_status *st);

/*
 * kop_main_opts: the program. Everything is borrowed for kop_main's call;
 * zero fields are defaults.
 */
typedef struct kop_main_opts {
    kop_manager_opts manager;        /* name: default the program's file name; the
                                        common flags fill in the rest */
    kop_controller_opts controller;  /* with a reconcile: kop_main adds this controller,
                                        and --namespace NS sets its watch scope */
    const kop_resource *const *owns; /* NULL-terminated: the kinds that controller owns
                                        (kop_controller_owns); NULL: none */
    kop_setup_fn setup;              /* called once the controller is added; NULL: none */
    kop_flag_fn parse_flag;          /* the operator's own flags; NULL: none */
    const char *flags_usage;         /* their help lines, appended to the common ones */
    void *user;                      /* for setup and parse_flag */
} kop_main_opts;

/*
 * kop_main runs an operator and returns its exit status, for main() to
 * return. It parses argv: the common flags (kop_manager_parse_flag),
 * --namespace NS when opts->controller has a reconcile, then
 * opts->parse_flag; -h or --help prints the usage to stdout and returns 0,
 * a flag none of them takes (or a wrong value) prints why and the usage
 * to stderr and returns 2. Then it makes the manager, adds the controller
 * and its owned kinds, calls opts->setup and runs the manager until
 * SIGTERM or SIGINT (kop_manager_run): 0 after a clean shutdown, 1 after
 * any error (printed as "PROGRAM: error text: detail" on stderr), the
 * manager freed either way.
 */
KOP_API int kop_main(int argc, char **argv, const kop_main_opts *opts);

KOP_END_DECLS

#endif /* KOP_PROGRAM_H */

/*
 * kop/manager.h - the manager: runs an operator's caches and controllers.
 *
 * One manager per process. It owns the configuration and the client, one
 * shared informer per resource (every controller that reads a resource
 * reads the same cache), the metrics registry and the HTTP endpoint
 * (/metrics, /healthz, /readyz), and optionally leader election.
 * kop_manager_run is the operator's main loop:
 *
 *   1. serve /metrics, /healthz, /readyz (ready once every cache synced
 *      and the webhook server, if any, serves), and the webhooks;
 *   2. check every watched resource through discovery: a group version,
 *      plural or kind the apiserver does not serve stops the start with an
 *      error naming all four ("no resource websites in
 *      demo.example.com/v1: is the CRD installed?"), rather than a cache
 *      that retries forever or owner references that never match (a
 *      resource not served yet is asked for again for up to 10 s, for a
 *      CRD applied just before; an apiserver that does not answer is
 *      asked again with backoff until it does, or until stopped);
 *   3. start the informers and wait until each has listed;
 *   4. with --leader-elect, wait to hold the Lease;
 *   5. start every controller's workers;
 *   6. on SIGTERM or SIGINT (or kop_manager_stop): stop taking work, let
 *      reconciles in flight finish (up to the shutdown deadline), release
 *      the Lease, stop the informers.
 *
 * A manager that loses its Lease stops reconciling at once and
 * kop_manager_run returns KOP_ESHUTDOWN, so the process exits and its
 * replacement starts over, as controller-runtime does.
 */
#ifndef KOP_MANAGER_H
#define KOP_MANAGER_H

#include <stdbool.h>
#include <time.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/config.h"
#include "kop/err.h"
#include "kop/events.h"
#include "kop/informer.h"
#include "kop/metrics.h"

KOP_BEGIN_DECLS

typedef struct kop_manager kop_manager;

typedef struct kop_manager_opts {
    const char *name;               /* operator name: user agent, Lease name, logs */
    const char *kubeconfig;         /* NULL: $KUBECONFIG, ~/.kube/config, in-cluster */
    const char *metrics_bind;       /* "127.0.0.1:9090" (default); "0" disables */
    bool leader_elect;
    const char *leader_election_namespace; /* default: the config's namespace */
    const char *leader_election_id; /* Lease name; default: name */
    long shutdown_timeout_ms;       /* reconciles in flight may finish; default 30 s */
    double client_qps;              /* client-side rate limit; 0: none */
    int client_burst;
    const char *webhook_bind;       /* webhook server (kop/webhook.h); NULL or "0": off */
    const char *webhook_cert_dir;   /* its tls.crt and tls.key; default as controller-runtime's */
} kop_manager_opts;

/*
 * kop_manager_parse_flag consumes the common flags every libkop operator
 * takes, at argv[*i]: --kubeconfig PATH, --metrics-bind ADDR,
 * --leader-elect[=true|false], --log-format text|json, -v N (also --v=N),
 * --webhook-bind ADDR, --webhook-cert-dir DIR.
 * Returns 1 and advances *i past the flag when it was one of them, 0 when
 * it was not (the operator parses it), -1 with a message in st when its
 * value is wrong. The log settings are applied at once.
 */
KOP_API int kop_manager_parse_flag(kop_manager_opts *o, int argc, char **argv, int *i,
                                   kop_status *st);

/* kop_manager_flags_usage returns the help text of the common flags (static). */
KOP_API const char *kop_manager_flags_usage(void);

/*
 * kop_manager_new loads the configuration and makes the client. It blocks
 * SIGINT and SIGTERM in the calling thread (before any thread is started,
 * so all inherit it) for kop_manager_run to take them; kop_manager_free
 * restores the mask. *out is owned: kop_manager_free.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_new(const kop_manager_opts *opts, kop_manager **out,
                                              kop_status *st);

/* kop_manager_free stops whatever runs and frees everything. NULL is ok. */
KOP_API void kop_manager_free(kop_manager *m);

/*
 * kop_manager_run runs until stopped (see above). Returns KOP_OK after a
 * clean shutdown, KOP_ESHUTDOWN when the Lease was lost, KOP_ETIMEOUT when
 * reconciles outlived shutdown_timeout_ms (they are abandoned: exit the
 * process; kop_manager_free then frees nothing), or the error that
 * prevented start-up (st says which): KOP_ENOTFOUND for a resource
 * discovery does not know, KOP_EINVAL for a kind that disagrees with it.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_run(kop_manager *m, kop_status *st);

/* kop_manager_stop makes kop_manager_run shut down. Any thread. */
KOP_API void kop_manager_stop(kop_manager *m);

/* kop_manager_client returns the manager's client (borrowed). */
KOP_API kop_client *kop_manager_client(kop_manager *m);

/* kop_manager_config returns the manager's configuration (borrowed). */
KOP_API kop_config *kop_manager_config(kop_manager *m);

/* kop_manager_metrics returns the registry served on /metrics (borrowed). */
KOP_API kop_metrics *kop_manager_metrics(kop_manager *m);

/*
 * kop_manager_informer returns the shared informer of r in ns (NULL: all
 * namespaces) restricted to label_selector (NULL: every object), making it
 * on first use (before kop_manager_run). Borrowed; r is copied, its
 * strings must outlive the manager.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_informer(kop_manager *m, const kop_resource *r,
                                                   const char *ns, const char *label_selector,
                                                   kop_informer **out);

/*
 * kop_manager_recorder returns the manager's event recorder (kop/events.h),
 * borrowed: made on first ask (any thread, before or during run), with the
 * manager's name as the reporting component, and freed by
 * kop_manager_free after every controller has stopped and before the
 * client, so a reconcile may record events without owning anything.
 * KOP_EINVAL without m or out, or what kop_recorder_new returns.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_recorder(kop_manager *m, kop_recorder **out);

/* kop_manager_is_leader tells whether this manager may reconcile now. */
KOP_API bool kop_manager_is_leader(kop_manager *m);

/* A start-up step for kop_manager_retry: KOP_OK when done, else why not (in st). */
typedef kop_err (*kop_step_fn)(void *user, kop_status *st);

/*
 * kop_manager_retry runs step until the apiserver has given it an answer,
 * for the work an operator does before kop_manager_run (apply its CRDs,
 * read or make a key Secret, ask discovery which version to read): a
 * failure without an answer about the step (no connection, TLS refused,
 * a timeout, 401/403 while RBAC or a token is being set up, 429, 5xx) is
 * logged as a warning naming what and tried again after a backoff (0.5 s,
 * doubling to 30 s), as an informer relists; any other result is
 * returned: KOP_OK, an answer (KOP_ENOTFOUND, KOP_EINVALID, ...) or a
 * local error (KOP_ENOMEM, KOP_EPARSE, ...). A stop during a backoff ends
 * it with KOP_ECANCELED: kop_manager_stop, and before kop_manager_run
 * SIGTERM or SIGINT too (they are blocked since kop_manager_new and no
 * thread takes them yet; the signal is taken and recorded as a stop), so
 * an operator told to stop while the apiserver is down exits cleanly.
 */
KOP_API KOP_NODISCARD kop_err kop_manager_retry(kop_manager *m, const char *what, kop_step_fn step,
                                                void *user, kop_status *st);

/*
 * A runnable is something the manager starts once its caches have synced
 * (and, with leader election, once it leads), stops at shutdown, waits for
 * and frees: every controller is one, and an operator may add its own. The
 * manager knows runnables only through these calls, never their types.
 */
typedef struct kop_runnable {
    const char *name; /* for logs; borrowed for the runnable's life */
    /* start begins the work; KOP_OK or an error that stops the manager. */
    kop_err (*start)(void *user);
    /* stop stops taking new work and wakes whatever waits; may come without start. */
    void (*stop)(void *user);
    /* join waits until the work in flight is done, until deadline
     * (CLOCK_REALTIME; NULL: no limit); false when some still runs. */
    bool (*join)(void *user, const struct timespec *deadline);
    /* free releases the runnable, after join returned true (or it never started). */
    void (*free)(void *user);
    void *user;
} kop_runnable;

/*
 * kop_manager_add_runnable hands r (copied; r->user's ownership with it) to
 * the manager, before kop_manager_run. KOP_EINVAL while running or with a
 * missing function, KOP_ETOOBIG past KOP_MANAGER_MAX_RUNNABLES; on error
 * nothing is taken (the caller still owns r->user).
 */
#define KOP_MANAGER_MAX_RUNNABLES 16
KOP_API KOP_NODISCARD kop_err kop_manager_add_runnable(kop_manager *m, const kop_runnable *r);

/* kop_manager_bound_port returns the port /metrics listens on (0 if none). */
KOP_API int kop_manager_bound_port(kop_manager *m);

KOP_END_DECLS

#endif /* KOP_MANAGER_H */

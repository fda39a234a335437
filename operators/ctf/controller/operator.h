/*
 * controller/operator.h - the operator's declared interface, what main.c
 * and the instance API (api/) may use of the controller layer: its settings
 * and shared caches (ctf_operator), the resources it touches (resources.c),
 * the Challenge states, the setup of both controllers, the CRD install and
 * a team's flag as the cluster defines it now. The controller's own files
 * have their own headers (apply.h, claim.h, observe.h, pool.h, reconcile.h,
 * status.h), which api/ does not include.
 */
#ifndef CTF_CONTROLLER_OPERATOR_H
#define CTF_CONTROLLER_OPERATOR_H

#include <stdbool.h>
#include <stdint.h>

#include <kop/kop.h>

#include "core/admission.h"
#include "core/applied.h"
#include "core/census.h"
#include "core/duration.h"
#include "core/flag.h"
#include "core/fresh.h"
#include "core/gateway.h"
#include "core/instance.h"
#include "core/json.h"
#include "core/pool.h"
#include "core/update.h"
#include "core/written.h"
#include "controller/resources.h"

#define CTF_FIELD_MANAGER "kopc-ctf"
#define CTF_MANAGED       "app.kubernetes.io/managed-by=kopc-ctf"

/* Challenge states (status.currentStatus). */
/*
 * A pass that applied the children and waits for them to run requeues at
 * this priority, above watch events (KOP_PRIORITY_HIGH), as a new
 * Challenge's first pass is; the child event that wakes the held-back key
 * takes its priority (kop/controller.h), so Running passes go ahead of the
 * first passes of later instances. An instance being replaced by a new
 * version waits the same way, and one woken to take a freed slot of a
 * rolling update is queued at it (update.c), so a rollout does not wait
 * behind a backlog of other events.
 */
#define CTF_PRIORITY_READINESS (KOP_PRIORITY_HIGH + 10)
/*
 * The Challenge controller's workers (--workers). A pass mostly waits on
 * round trips (a claim's makes four in a row) and uses a few ms of CPU, so
 * the workers, not the CPU, bound how many passes a second a burst gets:
 * 1,000 claims within 10 s on the 2-core bench machine reached Running
 * with a p99 of 12.7 s on 4 workers (7 s average wait in the queue) and
 * 0.8 s on 16 (docs/running-a-ctf.md).
 */
#define CTF_WORKERS_DEFAULT 16

#define CTF_STATUS_PENDING     "Pending"
#define CTF_STATUS_RUNNING     "Running"
#define CTF_STATUS_UPDATING    "Updating" /* replaced by a new version (update.c) */
#define CTF_STATUS_ERROR       "Error"
#define CTF_STATUS_TERMINATING "Terminating"
#define CTF_STATUS_DELETED     "Deleted"

typedef struct ctf_pool ctf_pool;
typedef struct ctf_webhook ctf_webhook;

/* ctf_operator: settings from the command line, and the shared caches. */
typedef struct ctf_operator {
    ctf_config instance;         /* ingress domain, node address */
    const char *watch_namespace; /* --namespace; NULL: all */
    int max_per_team;            /* --max-instances-per-team */
    int max_instances;           /* --max-instances */
    int workers;                 /* --workers: the Challenge controller's */
    bool install_crds;           /* --install-crds */
    bool migrate_storage;        /* --migrate-storage: migrate, then exit */

    kop_manager *mgr;
    kop_controller *ctl;
    ctf_admission *admission; /* the quotas, asked by the reconciler and the API */
    ctf_applied *applied;     /* what each instance was last applied as */
    ctf_written *written;     /* the status last written to each Challenge, till cached */
    ctf_census *census;       /* the Challenges of each definition by generation run */
    ctf_rollout *rollout;     /* the instances being replaced by a new version (update.c) */
    ctf_fresh *fresh;         /* the definitions' quorum reads a burst of claims shares */
    ctf_pool *pool;           /* the warm pools: their controller and the claims made */
    ctf_webhook *webhook;     /* the validating webhook (webhook.c); NULL: off */
    kop_informer *challenges, *definitions, *namespaces, *deployments, *pods, *services;
    kop_informer *endpointslices; /* of the instances' Services: is an endpoint ready? */
    kop_informer *networkpolicies; /* the isolation: a deleted one is put back at once */
    /* The gateway mode's routes (NULL when it is off): Running waits for their acceptance. */
    kop_informer *tlsroutes, *httproutes;
    kop_recorder *events;
    kop_metric *instances;     /* ctf_instances{status} */
    kop_metric *ready_seconds; /* ctf_instance_ready_seconds */
} ctf_operator;

/*
 * Indexes of the caches: Challenges by spec.definition, by spec.team and
 * by status.reason (to find those refused for quota when a slot frees);
 * instance namespaces by the name of the Challenge they were made for, to
 * find an orphan without a scan; pods with a container waiting, by
 * namespace, so that a pass reads an instance's pods only when one may
 * not start.
 */
#define CTF_INDEX_DEFINITION "definition"
#define CTF_INDEX_TEAM       "team"
#define CTF_INDEX_REASON     "reason"
#define CTF_INDEX_CHALLENGE  "challenge"
#define CTF_INDEX_POOL       "pool" /* warm namespaces by their definition's name */
#define CTF_INDEX_FAILING    "failing" /* pods with a container that cannot start, by namespace */

/* ---- setup.c: the controller, its caches, indexes and watches ---- */

/*
 * ctf_setup_controller adds the Challenge controller to op->mgr with every
 * cache, index and watch it needs, the admission and the metrics.
 */
KOP_NODISCARD kop_err ctf_setup_controller(ctf_operator *op, kop_status *st);

/* ---- gateway.c: the gateway mode's host key ---- */

/* The Secret (in the system namespace) and its key holding the gateway's host key. */
#define CTF_GATEWAY_KEY_SECRET "ctf-gateway-host-key"
#define CTF_GATEWAY_KEY_FIELD  "key"
#define CTF_GATEWAY_KEY_BYTES  32

/*
 * ctf_gateway_key_load reads the host key (ctf_host_id) from Secret
 * ns/name, key CTF_GATEWAY_KEY_FIELD, into *key (owned: cleanse and free),
 * and makes the Secret with CTF_GATEWAY_KEY_BYTES random bytes when it does
 * not exist (a replica that loses the race to create it reads the
 * winner's). The key lives as long as the Secret: every host of every team
 * derives from it, so it is never rotated by the operator. KOP_EINVAL
 * (explained in st) when the Secret's key is shorter than CTF_HOST_KEY_MIN
 * bytes; API errors as kop_get and kop_create report them.
 */
KOP_NODISCARD kop_err ctf_gateway_key_load(kop_client *c, const char *ns, const char *name,
                                           unsigned char **key, size_t *len, kop_status *st);

/* ---- webhook.c: the validating webhook for Challenges ---- */

/*
 * ctf_setup_webhook registers the Challenge validating webhook on the
 * manager's webhook server (--webhook-bind; off by default: then nothing,
 * KOP_OK and op->webhook NULL). After ctf_setup_controller, whose caches
 * and quotas it reads. op->webhook is owned: ctf_webhook_free after the
 * manager stopped.
 */
KOP_NODISCARD kop_err ctf_setup_webhook(ctf_operator *op, kop_status *st);

/* ctf_webhook_free frees what ctf_setup_webhook made. NULL is ok. */
void ctf_webhook_free(ctf_webhook *w);

/* ---- crds.c ---- */

/*
 * ctf_install_crds applies the CRDs compiled into the binary and waits until
 * they are Established (--install-crds). A CRD that already has v1beta1
 * (config/conversion) is left as it is: the built-in ones are v1alpha1's.
 * Each CRD is tried again (kop_manager_retry) while the apiserver does
 * not answer; SIGTERM or SIGINT meanwhile: KOP_ECANCELED.
 */
KOP_NODISCARD kop_err ctf_install_crds(kop_manager *m, kop_status *st);

/*
 * ctf_choose_versions reads ChallengeDefinitions at v1beta1 (sets
 * CTF_DEFINITIONS.version) when the apiserver serves it, else leaves
 * v1alpha1: with v1beta1 the storage version, the operator's own lists and
 * watches need no conversion (docs/crd-versions.md). Before any cache is
 * made. An apiserver that does not answer (no connection, TLS refused,
 * 5xx) is asked again (kop_manager_retry: backoff up to 30 s), until
 * SIGTERM or SIGINT (KOP_ECANCELED).
 */
KOP_NODISCARD kop_err ctf_choose_versions(kop_manager *m, kop_status *st);

/*
 * ctf_migrate_storage (--migrate-storage) rewrites every ChallengeDefinition
 * and Challenge unchanged, so that each is stored at its CRD's storage
 * version, then sets the CRD's status.storedVersions to that version
 * alone. A CRD already so is skipped. Needs the conversion webhook up for
 * objects stored in another version, and update on both resources and
 * on customresourcedefinitions/status. Safe to run again after a failure.
 */
KOP_NODISCARD kop_err ctf_migrate_storage(kop_client *c, kop_status *st);

/* ---- flag.c: a team's flag, from the definition and its key ---- */

/*
 * ctf_team_flag computes team's flag for def into *flag (owned: cleanse and
 * free; NULL when the definition has none), reading a dynamic flag's HMAC
 * key from its Secret now. KOP_EINVAL with st (reason InvalidDefinition)
 * when the Secret or its key is missing or unusable; KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_team_flag(ctf_operator *op, const json_t *def, const char *team,
                                    char **flag, kop_status *st);

/*
 * ctf_team_flag_owner tells whose dynamic flag of def submission is, among
 * teams[0..n) (borrowed): *owner is an index into teams, or
 * CTF_FLAG_NO_OWNER (core/flag.h: a static flag or none is never
 * attributed, and then no key is read). The key is read as ctf_team_flag
 * reads it; errors as there.
 */
KOP_NODISCARD kop_err ctf_team_flag_owner(ctf_operator *op, const json_t *def,
                                          const char *const *teams, size_t n,
                                          const char *submission, size_t *owner, kop_status *st);

/* ---- pool.c and claim.c: warm pools ---- */

/*
 * ctf_setup_pool adds the pool controller (keyed by ChallengeDefinition),
 * its index, watches, metrics and claim records. After ctf_setup_controller.
 */
KOP_NODISCARD kop_err ctf_setup_pool(ctf_operator *op, kop_status *st);

/* ctf_pool_free frees the claim records (after the manager stopped). */
void ctf_pool_free(ctf_pool *p);

#endif /* CTF_CONTROLLER_OPERATOR_H */

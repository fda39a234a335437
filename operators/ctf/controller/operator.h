/*
 * ctf_internal.h - what the CTF operator's files share: its settings, the
 * resources it touches, and each concept's entry points, one section per
 * file (docs/architecture.md has the map). Not a library interface: the
 * pure core's own header is instance.h (with core_internal.h), the API's
 * api.h.
 */
#ifndef CTF_INTERNAL_H
#define CTF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <kop/kop.h>

#include "core/admission.h"
#include "core/applied.h"
#include "core/duration.h"
#include "core/instance.h"
#include "core/json.h"
#include "core/pool.h"

/* Resources. */
extern const kop_resource CTF_CHALLENGES;
extern const kop_resource CTF_DEFINITIONS;
extern const kop_resource CTF_NAMESPACES;
extern const kop_resource CTF_DEPLOYMENTS;
extern const kop_resource CTF_PODS;
extern const kop_resource CTF_SERVICES;
extern const kop_resource CTF_ENDPOINTSLICES;
extern const kop_resource CTF_NETWORKPOLICIES;
extern const kop_resource CTF_SECRETS;

#define CTF_FINALIZER     "ctf.kopc.io/instance"
#define CTF_FIELD_MANAGER "kopc-ctf"
#define CTF_MANAGED       "app.kubernetes.io/managed-by=kopc-ctf"

/* Challenge states (status.currentStatus) and the reasons more than one file names. */
#define CTF_STATUS_PENDING     "Pending"
#define CTF_STATUS_RUNNING     "Running"
#define CTF_STATUS_ERROR       "Error"
#define CTF_STATUS_TERMINATING "Terminating"
#define CTF_STATUS_DELETED     "Deleted"

typedef struct ctf_pool ctf_pool;

/* ctf_operator: settings from the command line, and the shared caches. */
typedef struct ctf_operator {
    ctf_config instance;         /* ingress domain, node address */
    const char *watch_namespace; /* --namespace; NULL: all */
    int max_per_team;            /* --max-instances-per-team */
    int max_instances;           /* --max-instances */
    bool install_crds;           /* --install-crds */

    kop_manager *mgr;
    kop_controller *ctl;
    ctf_admission *admission; /* the quotas, asked by the reconciler and the API */
    ctf_applied *applied;     /* what each instance was last applied as */
    ctf_pool *pool;           /* the warm pools: their controller and the claims made */
    kop_informer *challenges, *definitions, *namespaces, *deployments, *pods, *services;
    kop_informer *endpointslices; /* of the instances' Services: is an endpoint ready? */
    kop_informer *networkpolicies; /* the isolation: a deleted one is put back at once */
    kop_recorder *events;
    kop_metric *instances;     /* ctf_instances{status} */
    kop_metric *ready_seconds; /* ctf_instance_ready_seconds */
} ctf_operator;

/*
 * Indexes of the caches: Challenges by spec.definition, by spec.team and
 * by status.reason (to find those refused for quota when a slot frees);
 * instance namespaces by the name of the Challenge they were made for, to
 * find an orphan without a scan.
 */
#define CTF_INDEX_DEFINITION "definition"
#define CTF_INDEX_TEAM       "team"
#define CTF_INDEX_REASON     "reason"
#define CTF_INDEX_CHALLENGE  "challenge"
#define CTF_INDEX_POOL       "pool" /* warm namespaces by their definition's name */

/* ---- setup.c: the controller, its caches, indexes and watches ---- */

/*
 * ctf_setup_controller adds the Challenge controller to op->mgr with every
 * cache, index and watch it needs, the admission and the metrics.
 */
KOP_NODISCARD kop_err ctf_setup_controller(ctf_operator *op, kop_status *st);

/* ctf_reconcile is the controller's reconcile function (reconcile.c). */
kop_result ctf_reconcile(const kop_reconcile *req, void *user);

/* ---- crds.c ---- */

/*
 * ctf_install_crds applies the CRDs compiled into the binary and waits until
 * they are Established (--install-crds).
 */
KOP_NODISCARD kop_err ctf_install_crds(kop_client *c, kop_status *st);

/* ---- observe.c: what a reconcile sees of the instance ---- */

/* ctf_observation: the status one pass decides on. */
typedef struct ctf_observation {
    const char *phase;  /* currentStatus */
    const char *reason; /* CamelCase, Error only */
    char message[512];
    json_t *endpoints; /* owned, may be NULL */
    long requeue_ms;   /* 0: none */
} ctf_observation;

/* ctf_observe_error sets o to Error with reason and the formatted message. */
void ctf_observe_error(ctf_observation *o, const char *reason, const char *fmt, ...)
    KOP_PRINTF(3, 4);

/*
 * ctf_observe_instance decides Running, Pending or a failure of chal's
 * instance in namespace ns from the caches: Running once every Deployment is
 * available, every endpoint known and every exposed Service has a ready
 * endpoint; Error on an image that cannot be pulled, a crash loop or the
 * start timeout; Pending (with a requeue at the timeout) until then.
 */
void ctf_observe_instance(ctf_operator *op, const json_t *chal, const json_t *def, const char *ns,
                          ctf_observation *o);

/*
 * ctf_instance_ready: the instance in namespace ns answers (the Running
 * rule above), with its endpoints in o->endpoints (replaced); false with o
 * set to Error when a container cannot start, false and o untouched but its
 * endpoints while it is starting.
 */
bool ctf_instance_ready(ctf_operator *op, const json_t *def, const char *ns, ctf_observation *o);

/* ctf_created_at returns chal's creation time (now when it has none). */
time_t ctf_created_at(const json_t *chal);

/* ---- team_flag.c: a team's flag, from the definition and its key ---- */

/*
 * ctf_team_flag computes team's flag for def into *flag (owned: cleanse and
 * free; NULL when the definition has none), reading a dynamic flag's HMAC
 * key from its Secret now. KOP_EINVAL with st (reason InvalidDefinition)
 * when the Secret or its key is missing or unusable; KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_team_flag(ctf_operator *op, const json_t *def, const char *team,
                                    char **flag, kop_status *st);

/* ---- status.c: writing what was observed ---- */

/*
 * ctf_write_status patches chal's status to what o says (namespace ns,
 * expiry expires when > 0) when it differs from what the cache shows, and
 * tells of a transition (log, Event, ctf_instance_ready_seconds).
 * KOP_ECONFLICT, with nothing written, when chal (the cached version) is
 * no longer the stored one: look again once the cache has caught up.
 */
KOP_NODISCARD kop_err ctf_write_status(ctf_operator *op, const kop_reconcile *req,
                                       const json_t *chal, const ctf_observation *o, const char *ns,
                                       time_t expires);

/* ---- reconcile.c ---- */

/*
 * ctf_apply_built applies an instance's children (built by instance.c)
 * unless the caches show they are what was applied last for key (a
 * Challenge's or a warm instance's uid: applied.c). A refusal by the
 * cluster fills o (Error) and returns KOP_OK; *applied (may be NULL) says
 * whether this call wrote.
 */
KOP_NODISCARD kop_err ctf_apply_built(ctf_operator *op, const char *key, json_t *children,
                                      ctf_observation *o, const kop_reconcile *req, bool *applied);

/* ---- pool.c: warm pools ---- */

/* ctf_place: where a Challenge's instance lives. */
typedef enum ctf_place {
    CTF_PLACE_UNDECIDED = 0, /* not decided yet: ask ctf_pool_claim */
    CTF_PLACE_FRESH,         /* its own namespace, named from the Challenge */
    CTF_PLACE_POOLED,        /* a warm instance it claimed */
} ctf_place;

/*
 * ctf_setup_pool adds the pool controller (keyed by ChallengeDefinition),
 * its index, watches, metrics and claim records. After ctf_setup_controller.
 */
KOP_NODISCARD kop_err ctf_setup_pool(ctf_operator *op, kop_status *st);

/* ctf_pool_free frees the claim records (after the manager stopped). */
void ctf_pool_free(ctf_pool *p);

/*
 * ctf_pool_place tells where chal's instance lives, from the claims this
 * process made and the caches; ns (size >= CTF_NAMESPACE_SIZE) gets the
 * namespace (the fresh one's name for CTF_PLACE_FRESH and UNDECIDED), id
 * (size > CTF_POOL_ID_LEN) the warm instance's id for CTF_PLACE_POOLED.
 */
ctf_place ctf_pool_place(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                         size_t id_size);

/*
 * ctf_pool_claim decides an undecided chal's place: it claims a Ready,
 * unclaimed warm instance of def (one conditional write of its Namespace's
 * labels: of two claimers exactly one wins) or, with none, fresh. The
 * decision is kept until ctf_pool_forget. ns and id as ctf_pool_place.
 * KOP_OK with *place set; an apiserver error (retry) otherwise.
 */
KOP_NODISCARD kop_err ctf_pool_claim(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                                     const json_t *def, char *ns, size_t size, char *id,
                                     size_t id_size, ctf_place *place);

/*
 * ctf_pool_build_warm builds warm instance id of def as the pool applies it
 * (ctf_build_pooled_children with no Challenge and the warm flag: a static
 * one, or "" for a dynamic one). *out owned.
 */
KOP_NODISCARD kop_err ctf_pool_build_warm(ctf_operator *op, const json_t *def, const char *id,
                                          json_t **out, kop_status *st);

/* ctf_pool_wanted: def asks for a warm pool (a claim may take a warm slot). */
bool ctf_pool_wanted(const json_t *def);

/*
 * ctf_pool_refresh_flag makes the kubelet rewrite the flag file of the
 * running pods in ns now (an annotation on each pod: a pod update makes it
 * remount its Secret volumes) rather than at its next periodic sync.
 */
void ctf_pool_refresh_flag(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                           const char *ns);

/* ctf_pool_forget drops the claim record of the Challenge uid (its finalizer ran). */
void ctf_pool_forget(ctf_operator *op, const char *uid);

#endif /* CTF_INTERNAL_H */

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

#include "core_internal.h"
#include "duration.h"
#include "instance.h"

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
#define CTF_REASON_QUOTA       "QuotaExceeded"

typedef struct ctf_admission ctf_admission;
typedef struct ctf_applied ctf_applied;
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

/* ---- admission.c: the quotas ---- */

#define CTF_TEAM_KEY_SIZE 320 /* "<namespace>/<team>" */

typedef enum ctf_verdict {
    CTF_ADMIT_OK = 0,
    CTF_ADMIT_TEAM_FULL, /* the team runs --max-instances-per-team */
    CTF_ADMIT_CTF_FULL,  /* the CTF runs --max-instances */
} ctf_verdict;

/* ctf_admission_new makes the quotas' state (empty); *out owned: ctf_admission_free. */
KOP_NODISCARD kop_err ctf_admission_new(int max_per_team, int max_instances, ctf_admission **out);
void ctf_admission_free(ctf_admission *a);

/* ctf_admission_handler: the Challenge cache's events, to keep the counts (register once). */
kop_informer_handler ctf_admission_handler(ctf_admission *a);

/* ctf_admission_namespace_handler: the instance namespaces' cache events, to count the
 * warm instances that exist (register once). */
kop_informer_handler ctf_admission_namespace_handler(ctf_admission *a);

/*
 * ctf_admission_admit admits chal if one more instance fits, and keeps it
 * admitted (asking again answers the same). pool: the pool key
 * ("<namespace>/<definition>") of chal's definition when it keeps warm
 * instances, NULL otherwise: chal is then admitted on a warm slot of that
 * pool no other claimer holds, if there is one, and must then tell how its
 * claim went (ctf_admission_claimed or ctf_admission_unclaimed); else it
 * is admitted fresh, against every instance counted, warm ones included.
 * Anything but CTF_ADMIT_OK comes with msg (size bytes) saying why, for
 * the Challenge's status.
 */
ctf_verdict ctf_admission_admit(ctf_admission *a, const json_t *chal, const char *pool, char *msg,
                                size_t size);

/*
 * ctf_admission_claimed records that chal's instance is the warm one in
 * namespace ns, which it claimed: the warm slot becomes the team's (the
 * total does not change). Counted even when chal was never admitted here
 * (a claim found by its labels after a restart): the namespace exists.
 */
void ctf_admission_claimed(ctf_admission *a, const json_t *chal, const char *ns);

/*
 * ctf_admission_unclaimed: chal, admitted on a warm slot, claimed none and
 * will be built fresh; it is admitted again as fresh, against every
 * instance counted, or refused and released (msg as above). A Challenge
 * admitted fresh already answers CTF_ADMIT_OK.
 */
ctf_verdict ctf_admission_unclaimed(ctf_admission *a, const json_t *chal, char *msg, size_t size);

/* ctf_admission_check answers, admitting nothing, whether a new instance of
 * team (Challenges in ns) might fit; msg as above. */
ctf_verdict ctf_admission_check(ctf_admission *a, const char *ns, const char *team, char *msg,
                                size_t size);

/*
 * ctf_admission_reserve_warm counts the warm namespace ns of pool before
 * the pool creates it, if one more instance fits in --max-instances; false
 * (nothing counted) when it does not. Already counted: true.
 */
bool ctf_admission_reserve_warm(ctf_admission *a, const char *pool, const char *ns);

/* ctf_admission_add_warm counts the warm namespace ns of pool, which exists, whatever
 * the cap says. */
void ctf_admission_add_warm(ctf_admission *a, const char *pool, const char *ns);

/* ctf_admission_drop_warm stops counting the warm namespace ns (not created, or going). */
void ctf_admission_drop_warm(ctf_admission *a, const char *ns);

/* ctf_admission_warm returns the warm namespaces counted of pool (NULL: of all pools). */
int ctf_admission_warm(ctf_admission *a, const char *pool);

/* ctf_admission_room returns how many more instances (warm or not) fit in --max-instances. */
int ctf_admission_room(ctf_admission *a);

/* ctf_admission_release frees uid's slot; true when it held one. */
bool ctf_admission_release(ctf_admission *a, const char *uid);

/* ctf_admission_count returns the team's admitted instances (team NULL: all). */
int ctf_admission_count(ctf_admission *a, const char *ns, const char *team);

/* ---- applied.c: skip applying what was applied already ---- */

#define CTF_DIGEST_HEX        65             /* SHA-256 in hex, NUL included */
#define CTF_APPLIED_LAG_MS    10000          /* how long the caches may lag behind an apply */
#define CTF_APPLIED_RESYNC_MS (10 * 60000L) /* every child applied again at least this often */

typedef enum ctf_applied_verdict {
    CTF_APPLY = 0,  /* apply every child */
    CTF_APPLY_SKIP, /* what the caches show is what was applied */
    CTF_APPLY_WAIT, /* applied just now: look again once the caches caught up */
} ctf_applied_verdict;

/* ctf_applied_seen: what the caches show of an instance's cached children. */
typedef struct ctf_applied_seen {
    int missing;         /* children absent from their cache, or being deleted */
    int64_t generations; /* the sum of the cached Deployments' metadata.generation */
} ctf_applied_seen;

KOP_NODISCARD kop_err ctf_applied_new(ctf_applied **out);
void ctf_applied_free(ctf_applied *a);

/* ctf_applied_digest writes the SHA-256 (hex) of children's canonical text. */
KOP_NODISCARD kop_err ctf_applied_digest(const json_t *children, char out[CTF_DIGEST_HEX]);

/* ctf_applied_decide: apply, skip or wait (*wait_ms) for uid's children of digest. */
ctf_applied_verdict ctf_applied_decide(ctf_applied *a, const char *uid, const char *digest,
                                       const ctf_applied_seen *seen, int64_t now_ms,
                                       long *wait_ms);

/* ctf_applied_record notes a full apply of digest whose Deployments are at generations. */
void ctf_applied_record(ctf_applied *a, const char *uid, const char *digest, int64_t generations,
                        int64_t now_ms);

/* ctf_applied_known: uid has a record (something applied for it was noted). */
bool ctf_applied_known(ctf_applied *a, const char *uid);

/* ctf_applied_forget drops uid's record (its instance is going). */
void ctf_applied_forget(ctf_applied *a, const char *uid);

/*
 * The last apply's digest is also kept on the server, so that a process
 * without a record (a new leader, a restart) need not apply again what the
 * one before it applied in full: a full apply stamps the digest on its last
 * child (CTF_ANNOTATION_APPLIED), and children are applied in order, each
 * only after the one before it went through, so the last child carrying a
 * digest proves every child was applied as that digest says.
 */
#define CTF_ANNOTATION_APPLIED "ctf.kopc.io/applied"

/* ctf_applied_stamp sets digest on the last of children (the one applied last). */
KOP_NODISCARD kop_err ctf_applied_stamp(json_t *children, const char *digest);

/*
 * ctf_applied_seed takes what the caches show of the last child as uid's
 * record when uid has none: stamped (its CTF_ANNOTATION_APPLIED, NULL when
 * the cache lacks it or does not hold its kind) equal to digest and no
 * cached child missing. The record then says "applied in full at now_ms,
 * the Deployments at seen->generations", so the next full apply comes with
 * the resync (CTF_APPLIED_RESYNC_MS). Returns whether it seeded.
 */
bool ctf_applied_seed(ctf_applied *a, const char *uid, const char *digest, const char *stamped,
                      const ctf_applied_seen *seen, int64_t now_ms);

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

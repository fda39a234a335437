/*
 * core/update.h - how running instances take a change of their definition
 * (update.c, issue 30): spec.update read (OnNextStart, Rolling with
 * maxUnavailable, Recreate), how many instances may be replaced at once,
 * the version of a definition an instance runs (a digest of what its pods
 * are made of), the verdict for one instance, and the rollout ledger: which
 * instances of each definition are being replaced now, so that a Rolling
 * update never replaces more than maxUnavailable at a time. Pure: the
 * caller feeds the ledger what its caches show. The ledger is thread-safe
 * (one lock).
 */
#ifndef CTF_CORE_UPDATE_H
#define CTF_CORE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include <kop/err.h>

/* ctf_update_strategy: spec.update.strategy. */
typedef enum ctf_update_strategy {
    CTF_UPDATE_ON_NEXT_START = 0, /* running instances keep their version; new starts get the new */
    CTF_UPDATE_ROLLING,           /* replaced now, at most maxUnavailable at a time */
    CTF_UPDATE_RECREATE,          /* replaced now, all at once */
} ctf_update_strategy;

/* ctf_update_spec: a definition's spec.update (defaults: OnNextStart; Rolling 25%). */
typedef struct ctf_update_spec {
    ctf_update_strategy strategy;
    int max_unavailable; /* a count, or a percentage when percent */
    bool percent;
} ctf_update_spec;

#define CTF_UPDATE_DEFAULT_PERCENT 25    /* Rolling without maxUnavailable; warm pools */
#define CTF_UPDATE_MAX_COUNT       10000 /* the schema's bound on a count */

/*
 * ctf_update_parse reads def's spec.update into *out (the defaults without
 * one). KOP_EINVAL explained in st (reason InvalidDefinition; st may be
 * NULL) for a strategy other than the three, or a maxUnavailable that is
 * not an integer in [1, CTF_UPDATE_MAX_COUNT] nor a string "N%" with N in
 * [1, 100], or a maxUnavailable without Rolling. The shape is the one of
 * def's apiVersion: ctf.kopc.io/v1beta1 has maxUnavailable in
 * spec.update.rolling (rolling itself only with Rolling), any other
 * apiVersion (v1alpha1) in spec.update.
 */
KOP_NODISCARD kop_err ctf_update_parse(const json_t *def, ctf_update_spec *out, kop_status *st);

/* ctf_update_strategy_name: "OnNextStart", "Rolling" or "Recreate" (static). */
const char *ctf_update_strategy_name(ctf_update_strategy s);

/*
 * ctf_update_budget returns how many of total running instances may be
 * being replaced at once: Rolling, maxUnavailable (a percentage of total
 * rounded down, as a Deployment does), at least 1; Recreate, all of them
 * (at least 1); OnNextStart, 0 (running instances are not replaced).
 */
int ctf_update_budget(const ctf_update_spec *u, int total);

/*
 * ctf_update_pool_budget returns how many of a pool's target warm
 * instances may be being replaced at once: Recreate all, Rolling its
 * budget, OnNextStart CTF_UPDATE_DEFAULT_PERCENT; at least 1. A warm
 * instance of an old version is never claimed; the rest of the pool keeps
 * serving while these are replaced.
 */
int ctf_update_pool_budget(const ctf_update_spec *u, int target);

/*
 * The version of a definition an instance runs: the first
 * CTF_VERSION_LEN hex digits of the SHA-256 of the definition's spec
 * without the fields that do not make its objects (title, category,
 * description, points, lifetime, pool, update) nor the flag, which is
 * delivered at once under every strategy (the Secret is re-applied, pods
 * are not restarted for it). Two generations with the same version build
 * the same pods: a change of the title or the pool does not make a single
 * instance "behind". Each Deployment of an instance carries the version and
 * the definition's generation it was applied from, in these annotations
 * (metadata, never the pod template: writing them restarts nothing).
 */
#define CTF_VERSION_LEN             16
#define CTF_ANNOTATION_VERSION      "ctf.kopc.io/definition-version"
#define CTF_ANNOTATION_GENERATION   "ctf.kopc.io/definition-generation"

/* ctf_update_version writes def's version (CTF_VERSION_LEN hex digits and a NUL). */
KOP_NODISCARD kop_err ctf_update_version(const json_t *def, char out[CTF_VERSION_LEN + 1]);

/* ctf_update_verdict: what one pass does with an instance (ctf_update_decide). */
typedef enum ctf_update_verdict {
    CTF_UPDATE_APPLY = 0, /* fresh, on the current version, unknown or never started: apply */
    CTF_UPDATE_KEEP,      /* behind, kept as it runs: its flag Secret, not its pods, is applied */
    CTF_UPDATE_ROLL,      /* behind: replace it once it holds a slot of the budget (ledger) */
} ctf_update_verdict;

/*
 * ctf_update_decide: running is the version the instance's Deployments
 * carry as the caches show them (NULL or "" when it has none yet, or
 * predates versions: applied as it always was), current the definition's,
 * started whether the instance ever ran (a Challenge with startedAt): one
 * that never did is a new start, and gets the current version whatever the
 * strategy. Behind and started: OnNextStart keeps it, Rolling and Recreate
 * replace it (their budgets differ: ctf_update_budget).
 */
ctf_update_verdict ctf_update_decide(const ctf_update_spec *u, const char *running,
                                     const char *current, bool started);

/*
 * ctf_update_deployment_rolling: a Deployment (as cached) is in the middle
 * of a rollout: its controller has not seen its latest spec, or pods of
 * another template remain, or fewer pods than wanted run the latest one.
 * A pod of an unchanged Deployment that died is not a rollout.
 */
bool ctf_update_deployment_rolling(const json_t *deployment);

/*
 * ctf_update_deployment_short: a Deployment (as cached) has fewer available
 * replicas than it wants (spec.replicas, 1 when absent).
 */
bool ctf_update_deployment_short(const json_t *deployment);

/*
 * ctf_update_deployment_down: deployment (as cached) is short of available
 * replicas (ctf_update_deployment_short: the one rule of "available" for a
 * pass, the warm pool and the wake alike); then *since is when its
 * Available condition turned not True, or 0 when that condition says True
 * (a Deployment of several replicas stays Available while one is missing)
 * or is absent or unreadable. false and *since 0 when it is not short.
 */
bool ctf_update_deployment_down(const json_t *deployment, time_t *since);

/* ---- the rollout ledger ------------------------------------------------------ */

typedef struct ctf_rollout ctf_rollout;

KOP_NODISCARD kop_err ctf_rollout_new(ctf_rollout **out);
void ctf_rollout_free(ctf_rollout *r);

/*
 * ctf_rollout_seeded: the ledger of key (a definition, "<namespace>/<name>")
 * was seeded in this process. A new process (a restart, a new leader)
 * knows nothing of the replacements the one before it began: before its
 * first one, the caller seeds the ledger with the instances the caches show
 * being replaced (ctf_rollout_seed), and maxUnavailable holds across the
 * takeover.
 */
bool ctf_rollout_seeded(ctf_rollout *r, const char *key);

/*
 * ctf_rollout_seed marks key seeded, with the uids (an array of strings)
 * being replaced; a no-op when key is seeded already. Several workers may
 * each build a seed from the caches at once: only the first one counts, so
 * a later one, read before a slot was given back, cannot put it back.
 */
void ctf_rollout_seed(ctf_rollout *r, const char *key, const json_t *uids);

/*
 * ctf_rollout_begin gives instance uid of key a slot when it holds one
 * already or fewer than budget instances hold one; true then. Refused, the
 * instance waits: name ("<namespace>/<name>" of its Challenge) is kept, and
 * handed back by the ctf_rollout_end that frees a slot. Atomic: two passes
 * never take the last slot both.
 */
bool ctf_rollout_begin(ctf_rollout *r, const char *key, const char *uid, int budget,
                       const char *name);

/*
 * ctf_rollout_end frees uid's slot of key (its replacement is over, or it
 * is gone), and stops its waiting. Returns (owned, may be NULL) an array of
 * the waiting Challenges' names to wake, as many as there are free slots
 * under budget, each handed out once.
 */
json_t *ctf_rollout_end(ctf_rollout *r, const char *key, const char *uid, int budget);

/*
 * ctf_rollout_unwait stops uid's waiting for a slot of key, if it waits: its
 * pass no longer asks for one (it went Error, the definition went back to
 * the version it runs, or the strategy became OnNextStart). Otherwise a
 * freed slot would be handed to it, and sit idle until a real waiter's
 * recheck.
 */
void ctf_rollout_unwait(ctf_rollout *r, const char *key, const char *uid);

/* ctf_rollout_holds: uid holds a slot of key. */
bool ctf_rollout_holds(ctf_rollout *r, const char *key, const char *uid);

/* ctf_rollout_count: how many instances of key hold a slot. */
int ctf_rollout_count(ctf_rollout *r, const char *key);

/*
 * ctf_rollout_report_due: whether key's progress (the definition's
 * status.update, a walk of all its instances) may be counted now, at
 * now_ms, when it is counted at most every every_ms: true (and now_ms
 * noted) the first time and once every_ms passed since it was last;
 * otherwise false with *wait_ms until it may. A rolling update of 1,000
 * instances asked for it at each of their 2,000 transitions.
 */
bool ctf_rollout_report_due(ctf_rollout *r, const char *key, int64_t now_ms, long every_ms,
                            long *wait_ms);

/*
 * ctf_rollout_report_at notes that the pass counting key's progress comes
 * again by at_ms (0: it does not, the update is over); ctf_rollout_report_coming
 * tells, at now_ms, whether it still will. An instance changing what it
 * counts as wakes that pass only when it will not come anyway: it came at
 * each of the 2,000 transitions of a rolling update of 1,000, to count
 * once a second.
 */
void ctf_rollout_report_at(ctf_rollout *r, const char *key, int64_t at_ms);
bool ctf_rollout_report_coming(ctf_rollout *r, const char *key, int64_t now_ms);

#endif /* CTF_CORE_UPDATE_H */

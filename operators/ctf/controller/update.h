/*
 * controller/update.h - running instances taking a change of their
 * definition (update.c, issue 30): what the caches show of the version an
 * instance runs, the gate a Challenge's apply passes through (apply all,
 * keep, or replace under the rollout ledger's budget), and the progress
 * reported on the definition (status.update). The rules are
 * core/update.h's.
 */
#ifndef CTF_CONTROLLER_UPDATE_H
#define CTF_CONTROLLER_UPDATE_H

#include "controller/observe.h"
#include "controller/operator.h"

#define CTF_REASON_UPDATED "Updated" /* the Event of an instance replaced by a new version */
#define CTF_UPDATED_NOTICE "updated to the new version" /* status.message's first words */

/* ctf_instance_run: what the caches show of the Deployments of an instance's namespace. */
typedef struct ctf_instance_run {
    int deployments;                   /* how many (0: a fresh instance) */
    bool rolling;                      /* one is in the middle of a rollout */
    bool available;                    /* every one has all its replicas available */
    bool mixed;                        /* they carry different versions (a partial apply) */
    char version[CTF_VERSION_LEN + 1]; /* the version they carry ("" none, or mixed) */
    int64_t generation;                /* the lowest definition generation they carry (0: none) */
} ctf_instance_run;

/* ctf_update_look fills run from the cached Deployments of namespace ns. */
void ctf_update_look(ctf_operator *op, const char *ns, ctf_instance_run *run);

/* ctf_update_current: run is on version current, rolled out and available. */
static inline bool ctf_update_current(const ctf_instance_run *run, const char *current)
{
    return run->deployments > 0 && !run->mixed && !run->rolling && run->available &&
           kop_streq(run->version, current);
}

/* ctf_update_pass: what the gate decided for one pass of a Challenge. */
typedef struct ctf_update_pass {
    ctf_update_verdict verdict;
    bool replacing;        /* in a replacement by the new version: status Updating, until */
    bool deployed;         /* ... its Deployments are on the current version, rolled out, */
    bool finished;         /* ... and the pass observes it Running (ctf_update_observed) */
    bool held;             /* it holds a slot of the rollout ledger */
    bool queued;           /* behind, waiting for a slot of the Rolling budget */
    int64_t generation;    /* the definition generation the instance runs (0: not known yet) */
    char version[CTF_VERSION_LEN + 1]; /* the version it runs ("": not known, or partly applied) */
} ctf_update_pass;

/*
 * ctf_update_gate decides how chal's children (built from def, for its
 * namespace ns; *children replaced when cut) go out this pass:
 *   - applied as built (a fresh instance, the current version, one never
 *     started), or when it holds a slot of the rollout (Rolling, Recreate);
 *   - cut to what no version changes (its Namespace, flag Secret and the
 *     NetworkPolicies that do not depend on the version) when it is kept on
 *     its version (OnNextStart) or waits for a slot (pass->queued: the
 *     ledger wakes it when one frees).
 * A replacement begun is applied to its end on the current version, even
 * when the definition says keep by then (switched to OnNextStart, or back
 * to the version the instance ran before).
 * An instance in a replacement (holding a slot, or shown Updating) stays
 * Updating until its pass finds it finished (ctf_update_observed); its slot
 * is given back only after that pass's status write (ctf_update_finish).
 * KOP_ENOMEM only.
 */
KOP_NODISCARD kop_err ctf_update_gate(ctf_operator *op, const json_t *chal, const json_t *def,
                                      const char *ns, json_t **children, ctf_update_pass *pass);

/*
 * ctf_update_observed turns what a pass observed into what the status
 * says of the update: Updating while the instance is replaced (never the
 * start timeout) and until the pass observes it Running on the current
 * version (pass->finished), and, when it comes back Running from an update, the
 * notice CTF_UPDATED_NOTICE in the message (kept while it runs). Back from
 * an update means: its status said Updating, or the version it runs is not
 * the one its status recorded (status.definitionVersion), so a pass that
 * never got to write Updating (a conflict, a SIGKILL) still tells.
 */
void ctf_update_observed(const json_t *chal, const json_t *def, ctf_update_pass *pass,
                         ctf_observation *o);

/*
 * ctf_update_finish gives back the slot of a replacement that pass found
 * finished, and wakes as many waiting as slots are free. Called once the
 * pass's status (Running, the notice) is written: the Challenges showing
 * Updating are then never more than the slots, so never more than
 * maxUnavailable (e2e_ctf_update samples it), even while a woken
 * instance's Updating races this one's Running.
 */
void ctf_update_finish(ctf_operator *op, const json_t *chal, const json_t *def,
                       const ctf_update_pass *pass);

/*
 * ctf_update_forget gives back chal's slot, or its place among the waiting
 * (its instance is going), and wakes as many waiting as slots are free.
 */
void ctf_update_forget(ctf_operator *op, const json_t *chal);

/*
 * ctf_update_forget_uid: the same for the Challenge of uid in namespace ns,
 * of definition, once it is gone from the cache (its finalizer stripped by
 * hand: finalize never ran).
 */
void ctf_update_forget_uid(ctf_operator *op, const char *ns, const char *definition,
                           const char *uid);

/*
 * ctf_update_report writes the definition's status.update (generation,
 * strategy, and how many of its instances are current, updating, behind)
 * when it changed. Called by the pool controller's pass of def, which the
 * Challenges' passes wake when one of them changes; the cache it counts
 * from may not show that change yet, so while an update is under way
 * (updating, or behind under Rolling or Recreate) it returns how soon to
 * count again (ms), else 0.
 */
long ctf_update_report(ctf_operator *op, const kop_reconcile *req, const json_t *def);

/*
 * ctf_update_report_coming: the pass counting the progress of definition
 * (in namespace ns) comes again anyway (ctf_update_report asked for it):
 * a Challenge's change need not wake it.
 */
bool ctf_update_report_coming(ctf_operator *op, const char *ns, const char *definition);

#endif /* CTF_CONTROLLER_UPDATE_H */

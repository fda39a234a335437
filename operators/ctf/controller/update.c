/*
 * update.c - running instances taking a change of their definition, by the
 * strategy its author picked (spec.update; the rules are core/update.c's,
 * issue 30).
 *
 * Every Deployment of an instance carries the version of the definition it
 * was applied from (core/instance.c), so what an instance runs is read
 * from the caches, never remembered: a restarted operator or a new leader
 * sees the same. Each pass of a Challenge goes through ctf_update_gate
 * before its apply:
 *
 *   fresh, current, or never started  -> apply every child
 *   behind, OnNextStart                -> apply what does not depend on
 *                                         the version (kept_child): the
 *                                         pods keep the version they
 *                                         started with
 *   behind, Rolling or Recreate        -> take a slot of the rollout ledger
 *                                         (maxUnavailable; Recreate: all);
 *                                         with one, apply every child (the
 *                                         Deployments roll their pods: the
 *                                         instance's namespace, Services,
 *                                         hostname or port, flag and expiry
 *                                         stay); without, wait, as kept,
 *                                         until a freed slot wakes it
 *
 * A slot is given back when the caches show the instance's Deployments on
 * the current version, rolled out and available, and the instance Running,
 * once its pass has written that status; then it wakes as many waiting
 * instances as slots are free. The ledger of a definition is seeded, before
 * its first slot in this process, with the instances in the middle of a
 * replacement (one their status has not told the end of, or Deployments
 * rolling on the current version), so maxUnavailable holds across a
 * SIGKILL, for the Deployments rolling and for the Challenges shown
 * Updating. A Challenge being replaced shows Updating, and comes back
 * Running with the notice "updated to the new version" in its message (the
 * API's views and event streams carry it to the team's page) and an Event
 * Updated; status.definitionGeneration says which generation it runs.
 *
 * The definition's status.update counts its instances current, updating
 * and behind (kubectl get chaldef shows them); the pool controller's pass
 * of the definition writes it, at most once a second, woken by the
 * Challenges' passes when one of them changes and that pass is not due
 * anyway.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/apply.h"
#include "controller/update.h"
#include "kop/clock.h"

#define UPDATE_QUEUED_RECHECK_MS 120000 /* a waiting instance looks again (a lost wake) */
#define UPDATE_REPLACING_RECHECK_MS 30000 /* an instance being replaced looks again */

/* ---- what the caches show ----------------------------------------------------- */

void ctf_update_look(ctf_operator *op, const char *ns, ctf_instance_run *run)
{
    json_t *deps = NULL, *d;
    size_t i;
    memset(run, 0, sizeof *run);
    run->available = true;
    if (!ns || !ns[0] || kop_informer_list(op->deployments, ns, &deps) != KOP_OK)
        return;
    json_array_foreach(deps, i, d)
    {
        const char *v = kop_meta_annotation(d, CTF_ANNOTATION_VERSION);
        const char *g = kop_meta_annotation(d, CTF_ANNOTATION_GENERATION);
        int64_t gen = g ? strtoll(g, NULL, 10) : 0;
        if (kop_meta_is_deleting(d))
            continue;
        if (run->deployments == 0)
            snprintf(run->version, sizeof run->version, "%s", v ? v : "");
        else if (!kop_streq(run->version, v ? v : ""))
            run->mixed = true;
        if (gen > 0 && (run->generation == 0 || gen < run->generation))
            run->generation = gen;
        run->deployments++;
        run->rolling = run->rolling || ctf_update_deployment_rolling(d);
        if (ctf_update_deployment_short(d))
            run->available = false;
    }
    if (run->mixed)
        run->version[0] = '\0';
    json_decref(deps);
}

/* ledger_key writes "<namespace>/<definition>", the ledger's key of a definition. */
static void ledger_key(const char *ns, const char *definition, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", ns ? ns : "", definition ? definition : "");
}

/* def_key writes the ledger's key of def. */
static void def_key(const json_t *def, char *out, size_t size)
{
    ledger_key(kop_meta_namespace(def), kop_meta_name(def), out, size);
}

/*
 * started: chal's instance ran once and is not in Error (otherwise it is a
 * new start, or broken anyway: either way it takes the current version, so
 * a fixed definition reaches an instance that failed under the old one).
 */
static bool started(const json_t *chal)
{
    return ctf_str2(chal, "status", "startedAt") != NULL &&
           !kop_streq(ctf_str2(chal, "status", "currentStatus"), CTF_STATUS_ERROR);
}

/*
 * instances_of counts the Challenges of def (the budget's total): the
 * census's lookup, since every pass of a rolling update asks (copying the
 * index's keys each time was O(N) per pass, 11 % of the operator's CPU in
 * a rolling update of 1,000). Those of def's namespace only (the index is
 * by name: a same-named definition elsewhere counted too) and not being
 * deleted.
 */
static int instances_of(ctf_operator *op, const json_t *def)
{
    return ctf_census_count(op->census, kop_meta_namespace(def), kop_meta_name(def),
                            kop_meta_generation(def))
        .total;
}

/* budget: how many of def's instances may be replaced at once. */
static int budget_of(ctf_operator *op, const json_t *def, const ctf_update_spec *u)
{
    if (u->strategy == CTF_UPDATE_ROLLING && !u->percent)
        return u->max_unavailable;
    return ctf_update_budget(u, instances_of(op, def));
}

/*
 * unfinished: chal's instance is in a replacement whose end its status has
 * not told yet: the status says Updating, or the Deployments carry another
 * version than the one the status records (partly applied, or applied by a
 * process killed before its status write).
 */
static bool unfinished(const json_t *chal, const ctf_instance_run *run)
{
    const char *recorded = ctf_str2(chal, "status", "definitionVersion");
    if (kop_streq(ctf_str2(chal, "status", "currentStatus"), CTF_STATUS_UPDATING))
        return true;
    return ctf_nonempty(recorded) && run->deployments > 0 &&
           (run->mixed || (run->version[0] && strcmp(run->version, recorded) != 0));
}

/*
 * seed gives the ledger of def, in a process that has not begun any of its
 * replacements, the instances in the middle of one: they ran once, and
 * their replacement is unfinished (a slot the process before this one
 * held), or their Deployments carry the current version and roll (or are
 * partly applied). The instances showing Updating are then always among
 * the slots, so never more than maxUnavailable. Not one merely short of
 * available replicas on the current version: a crash loop is no
 * replacement, and a slot given to it would hold the rollout back and,
 * once it ran again, tell its team of an update it never had.
 */
static void seed(ctf_operator *op, const json_t *def, const char *key, const char *current)
{
    json_t *chals = NULL, *c, *uids = json_array();
    size_t i;
    if (!uids || kop_informer_by_index(op->challenges, CTF_INDEX_DEFINITION, kop_meta_name(def),
                                       &chals) != KOP_OK) {
        json_decref(uids);
        return;
    }
    json_array_foreach(chals, i, c)
    {
        ctf_instance_run run;
        /* Ran once (in Error or not: a replacement that fails keeps its slot, and the
         * rollout waits on it rather than break more instances). */
        if (!kop_streq(kop_meta_namespace(c), kop_meta_namespace(def)) ||
            !ctf_str2(c, "status", "startedAt"))
            continue;
        ctf_update_look(op, ctf_str2(c, "status", "namespace"), &run);
        bool touched = run.deployments > 0 && (run.mixed || kop_streq(run.version, current));
        if (unfinished(c, &run) || (touched && (run.rolling || run.mixed)))
            json_array_append_new(uids, json_string(kop_meta_uid(c)));
    }
    ctf_rollout_seed(op->rollout, key, uids);
    json_decref(chals);
    json_decref(uids);
}

/*
 * wake enqueues the waiting Challenges names ("<namespace>/<name>"),
 * stealing the array, at the readiness priority: a freed slot is taken
 * ahead of the other events queued meanwhile (issue 30's bench: at the
 * normal priority, 100 slots of 1,000 instances sat free behind them).
 */
static void wake(ctf_operator *op, json_t *names)
{
    json_t *n;
    size_t i;
    json_array_foreach(names, i, n)
    {
        char ns[CTF_NAMESPACE_SIZE];
        const char *s = json_string_value(n), *slash = s ? strchr(s, '/') : NULL;
        if (!slash || (size_t)(slash - s) >= sizeof ns)
            continue;
        snprintf(ns, sizeof ns, "%.*s", (int)(slash - s), s);
        kop_controller_enqueue_priority(op->ctl, ns, slash + 1, CTF_PRIORITY_READINESS);
    }
    json_decref(names);
}

/*
 * kept_child: child goes out to an instance kept on an older version too:
 * its Namespace, its flag Secret (a new flag reaches every instance at
 * once), and the NetworkPolicies that no version changes (instance.c's
 * default-deny, allow-same-instance, allow-dns), so that one deleted by
 * hand is put back at once as for any instance. Its Deployments, Services,
 * Ingresses, quota, limits and the policies made from its exposures and
 * egress stay as they were applied with the version it runs: a kept
 * instance fails closed, never open.
 */
static bool kept_child(const json_t *child)
{
    static const char *const policies[] = {"default-deny", "allow-same-instance", "allow-dns"};
    const char *kind = json_string_value(json_object_get(child, "kind"));
    if (kop_streq(kind, "Namespace") || kop_streq(kind, "Secret"))
        return true;
    for (size_t i = 0; kop_streq(kind, "NetworkPolicy") && i < CTF_LEN(policies); i++)
        if (kop_streq(kop_meta_name(child), policies[i]))
            return true;
    return false;
}

/* keep_unversioned cuts children to those a kept instance takes (kept_child). */
static kop_err keep_unversioned(json_t **children)
{
    json_t *kept = json_array(), *child;
    size_t i;
    if (!kept)
        return KOP_ENOMEM;
    json_array_foreach(*children, i, child)
    {
        if (kept_child(child) && json_array_append(kept, child) != 0) {
            json_decref(kept);
            return KOP_ENOMEM;
        }
    }
    json_decref(*children);
    *children = kept;
    return KOP_OK;
}

kop_err ctf_update_gate(ctf_operator *op, const json_t *chal, const json_t *def, const char *ns,
                        json_t **children, ctf_update_pass *pass)
{
    ctf_update_spec u;
    ctf_instance_run run;
    char current[CTF_VERSION_LEN + 1], key[CTF_TEAM_KEY_SIZE], name[CTF_TEAM_KEY_SIZE];
    const char *uid = kop_meta_uid(chal);
    memset(pass, 0, sizeof *pass);
    if (ctf_update_parse(def, &u, NULL) != KOP_OK || ctf_update_version(def, current) != KOP_OK)
        return KOP_OK; /* validated before: cannot happen; applied as always */
    def_key(def, key, sizeof key);
    ctf_update_look(op, ns, &run);
    pass->generation = run.generation;
    snprintf(pass->version, sizeof pass->version, "%s", run.mixed ? "" : run.version);
    const char *running = run.mixed ? "mixed" : run.version;
    /* A replacement begun by the process before this one (a SIGKILL, a new leader), or
     * whose end was not written yet: it goes on, counted in the seeded ledger. */
    bool unended = unfinished(chal, &run);
    pass->verdict = ctf_update_decide(&u, running, current, started(chal));
    /* Nothing cached yet (a first apply): the instance runs what this pass applies. */
    if (run.generation == 0 && pass->verdict == CTF_UPDATE_APPLY) {
        pass->generation = kop_meta_generation(def);
        snprintf(pass->version, sizeof pass->version, "%s", current);
    }
    if ((pass->verdict == CTF_UPDATE_ROLL || unended) &&
        !ctf_rollout_seeded(op->rollout, key))
        seed(op, def, key, current);
    /* Only this Challenge's own passes (one at a time) take or give back its slot, so what
     * is read here holds for the pass unless ctf_rollout_begin below grants one (or another
     * pass's first seed of the ledger counts it meanwhile: the next pass sees that). */
    bool held = ctf_rollout_holds(op->rollout, key, uid);
    /* A replacement begun goes to its end, on the current version, whatever the definition
     * says now: switched to OnNextStart, or back to the version the instance ran before, a
     * KEEP would leave it half replaced, Updating for good, its slot never given back. */
    if (pass->verdict == CTF_UPDATE_KEEP && (unended || held))
        pass->verdict = CTF_UPDATE_APPLY;
    if (pass->verdict == CTF_UPDATE_ROLL) {
        snprintf(name, sizeof name, "%s/%s", kop_meta_namespace(chal), kop_meta_name(chal));
        held = ctf_rollout_begin(op->rollout, key, uid, budget_of(op, def, &u), name);
        pass->queued = !held;
    } else {
        ctf_rollout_unwait(op->rollout, key, uid); /* a freed slot goes to one that asks */
    }
    /* A slot held whose replacement is over is given back after the status says so
     * (ctf_update_finish), never before: see ctf_update_observed. */
    pass->held = held;
    pass->deployed = ctf_update_current(&run, current);
    pass->replacing = started(chal) && (pass->held || unended);
    if (pass->verdict == CTF_UPDATE_KEEP || pass->queued)
        return keep_unversioned(children);
    return KOP_OK;
}

void ctf_update_observed(const json_t *chal, const json_t *def, ctf_update_pass *pass,
                         ctf_observation *o)
{
    const char *was = ctf_str2(chal, "status", "currentStatus");
    const char *was_msg = ctf_str2(chal, "status", "message");
    const char *was_version = ctf_str2(chal, "status", "definitionVersion");
    int64_t gen = kop_meta_generation(def);
    /* A replacement is over when its Deployments are rolled out on the current version and
     * the instance is Running as a whole (its Services' endpoints too): a status written
     * Pending in between lost the notice (e2e_ctf_update, 1 run of 9). A slot held by one
     * that went Error (not replacing: started() is false) ends the same way, once fixed. */
    pass->finished = (pass->replacing || pass->held) && pass->deployed && !o->reason &&
                     strcmp(o->phase, CTF_STATUS_RUNNING) == 0;
    /* What the instance runs is said once it runs it: while it is replaced, the status keeps
     * the generation and version it ran (one status write less per replaced instance). */
    if (!pass->replacing || pass->finished) {
        o->generation = pass->generation;
        snprintf(o->version, sizeof o->version, "%s", pass->version);
    }
    if (pass->queued) /* it waits for a freed slot to wake it; this in case a wake was lost */
        o->requeue_ms = ctf_min_positive(o->requeue_ms, UPDATE_QUEUED_RECHECK_MS);
    if (o->reason)
        return; /* an Error says why; the slot stays held: the rollout waits */
    /* Updating until the replacement is over (the slot given back), also while the old pod
     * still serves beside the new one: Running with the new generation but without the
     * notice showed otherwise (e2e_ctf_update saw it, 2 runs of 4). */
    if (pass->replacing && !pass->finished) {
        o->phase = CTF_STATUS_UPDATING;
        snprintf(o->message, sizeof o->message, "updating to the new version (generation %lld)",
                 (long long)gen);
        /* No start timeout: the Deployments' events bring it back, at the readiness
         * priority this held-back pass lends them (reconcile.c), so the slot is given
         * back ahead of the events of instances still waiting for theirs. */
        o->requeue_ms = UPDATE_REPLACING_RECHECK_MS;
        return;
    }
    if (strcmp(o->phase, CTF_STATUS_RUNNING) != 0)
        return;
    if (kop_streq(was, CTF_STATUS_UPDATING) ||
        (ctf_nonempty(was_version) && o->version[0] && strcmp(was_version, o->version) != 0)) {
        o->updated = true;
        snprintf(o->message, sizeof o->message, "%s (generation %lld)", CTF_UPDATED_NOTICE,
                 (long long)(pass->generation ? pass->generation : gen));
    } else if (kop_streq(was, CTF_STATUS_RUNNING) && was_msg &&
               strncmp(was_msg, CTF_UPDATED_NOTICE, strlen(CTF_UPDATED_NOTICE)) == 0) {
        snprintf(o->message, sizeof o->message, "%s", was_msg); /* the notice stays */
    }
}

/* give_back ends uid's slot (or wait) in the ledger of key and wakes as many waiting as slots
 * are free under def's budget (def NULL or unreadable: 1). */
static void give_back(ctf_operator *op, const char *key, const char *uid, const json_t *def)
{
    ctf_update_spec u;
    int budget = def && ctf_update_parse(def, &u, NULL) == KOP_OK ? budget_of(op, def, &u) : 1;
    wake(op, ctf_rollout_end(op->rollout, key, uid, budget));
}

void ctf_update_finish(ctf_operator *op, const json_t *chal, const json_t *def,
                       const ctf_update_pass *pass)
{
    char key[CTF_TEAM_KEY_SIZE];
    if (!pass->finished || !pass->held)
        return;
    def_key(def, key, sizeof key);
    give_back(op, key, kop_meta_uid(chal), def);
}

void ctf_update_forget(ctf_operator *op, const json_t *chal)
{
    ctf_update_forget_uid(op, kop_meta_namespace(chal), ctf_str2(chal, "spec", "definition"),
                          kop_meta_uid(chal));
}

void ctf_update_forget_uid(ctf_operator *op, const char *ns, const char *definition,
                           const char *uid)
{
    json_t *def = NULL;
    char key[CTF_TEAM_KEY_SIZE];
    if (!uid)
        return;
    ledger_key(ns, definition, key, sizeof key);
    if (!ctf_rollout_seeded(op->rollout, key) && ctf_rollout_count(op->rollout, key) == 0)
        return; /* no replacement of this definition began in this process */
    if (definition && kop_informer_dup(op->definitions, ns, definition, &def) != KOP_OK)
        def = NULL;
    give_back(op, key, uid, def);
    json_decref(def);
}

/* ---- the definition's progress --------------------------------------------------- */

#define UPDATE_REPORT_AGAIN_MS 1000 /* an update under way is counted again this often */
#define UPDATE_REPORT_EVERY_MS 1000 /* and at most this often, however many instances move */

/* count_progress writes def's status.update when due; returns when to count again (ms). */
static long count_progress(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                           const char *key)
{
    ctf_update_spec u;
    int64_t gen = kop_meta_generation(def);
    long wait_ms = 0;
    /* Written at most once a second (a rolling update of 1,000 instances woke it at each of
     * their 2,000 transitions); the counts are the census's (core/census.h), not a walk. */
    if (!ctf_rollout_report_due(op->rollout, key, kop_mono_ms(), UPDATE_REPORT_EVERY_MS,
                                &wait_ms))
        return wait_ms;
    if (ctf_update_parse(def, &u, NULL) != KOP_OK)
        return 0;
    ctf_census_counts n = ctf_census_count(op->census, kop_meta_namespace(def), kop_meta_name(def),
                                           gen);
    int current = n.current, updating = n.updating, behind = n.behind;
    long again = updating > 0 || (behind > 0 && u.strategy != CTF_UPDATE_ON_NEXT_START)
                     ? UPDATE_REPORT_AGAIN_MS
                     : 0;
    json_t *want = json_pack("{s:I, s:s, s:i, s:i, s:i}", "generation", (json_int_t)gen,
                             "strategy", ctf_update_strategy_name(u.strategy), "current", current,
                             "updating", updating, "behind", behind);
    if (!want || json_equal(want, ctf_get2(def, "status", "update"))) {
        json_decref(want);
        return again;
    }
    json_t *patch = json_pack("{s:{s:o}}", "status", "update", want);
    kop_status st = {0};
    kop_patch_req pr = {.target = {&CTF_DEFINITIONS, kop_meta_namespace(def), kop_meta_name(def)},
                        .type = KOP_PATCH_MERGE,
                        .patch = patch,
                        .opts = {.subresource = "status"}};
    kop_err err = patch ? kop_patch_object(req->client, &pr, NULL, &st) : KOP_ENOMEM;
    if (err && err != KOP_ENOTFOUND)
        kop_logger_log(req->log, KOP_LOG_WARN, "update status not written", KOP_LOG_ERR(err),
                       KOP_LOG_STR("detail", st.message));
    json_decref(patch);
    return err && err != KOP_ENOTFOUND ? UPDATE_REPORT_AGAIN_MS : again;
}

long ctf_update_report(ctf_operator *op, const kop_reconcile *req, const json_t *def)
{
    char key[CTF_TEAM_KEY_SIZE];
    def_key(def, key, sizeof key);
    long again = count_progress(op, req, def, key);
    /* The pool controller's pass comes again by then (its requeue is no later). */
    ctf_rollout_report_at(op->rollout, key, again > 0 ? kop_mono_ms() + again : 0);
    return again;
}

bool ctf_update_report_coming(ctf_operator *op, const char *ns, const char *definition)
{
    char key[CTF_TEAM_KEY_SIZE];
    ledger_key(ns, definition, key, sizeof key);
    return ctf_rollout_report_coming(op->rollout, key, kop_mono_ms());
}

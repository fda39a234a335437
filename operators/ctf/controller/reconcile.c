/*
 * reconcile.c - the Challenge controller: one team's instance of one
 * definition, from request to cleanup.
 *
 * reconcile() reads as the lifecycle it implements:
 *
 *   deleted            -> finalize: Terminating, delete the namespace, wait
 *                         until it is gone, Deleted, release the finalizer
 *   no finalizer yet   -> add it (so nothing can be left behind)
 *   no definition      -> Error DefinitionNotFound (a definition event
 *                         brings it back)
 *   invalid definition -> Error InvalidDefinition
 *   expired            -> delete the Challenge
 *   over quota         -> Error QuotaExceeded
 *   otherwise          -> apply every child (server-side apply: idempotent,
 *                         a crash half-way converges) unless they are what
 *                         was applied last and the caches show them
 *                         (applied.c: no write that changes nothing), then
 *                         observe them:
 *                         Running once every Deployment is available, every
 *                         endpoint known and every exposed Service has a
 *                         ready endpoint (pods are Ready only once their
 *                         readiness probes pass, which the builder sets from
 *                         the exposed ports: Running means answering); Error
 *                         on an image that cannot be pulled, a crash loop, or
 *                         the start timeout; Pending until then. A child the
 *                         cluster refuses is Error Forbidden or
 *                         InvalidDefinition, applied again after as long as
 *                         it has been refused (5 s to 5 min).
 *
 * Children live in the instance's own namespace, where owner references
 * cannot point back at the Challenge, so every child carries labels naming
 * it, and their events are mapped back through those labels: readiness is
 * noticed from watch events, never polled. Every write is server-side apply
 * with deterministic names, so AlreadyExists cannot happen and a retry
 * never makes a second instance.
 *
 * Admission (the quotas) is core/admission.c's, which the API asks too;
 * applying the children is apply.c's, what a pass sees of the instance
 * observe.c's, and the status it writes status.c's; where an instance lives
 * (fresh, or a warm one claimed) is claim.c's. The caches, indexes and
 * watches are set up by setup.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "controller/apply.h"
#include "controller/claim.h"
#include "controller/observe.h"
#include "controller/pool.h"
#include "controller/reconcile.h"
#include "controller/status.h"
#include "controller/update.h"
#include "kop/clock.h"


#define NS_WAIT_MS 2000
/*
 * A write met a newer version than cached: look again once the cache has
 * it. Most often the newer version is our own status write of the pass
 * before (status-only events do not wake the controller). 250 ms was tried:
 * under a burst the cache lags longer, and it cost half a conflicting
 * PATCH per instance without shortening the burst's tail.
 */
#define STALE_RECHECK_MS 1000
/*
 * A flag key Secret that cannot be read (missing, or without its key) is
 * fixed by creating it, which sends no event the Challenge controller
 * watches (it caches no Secret of the definitions' namespace): look again
 * this often, so the instance recovers by itself.
 */
#define FLAG_KEY_RECHECK_MS 15000
/*
 * A child the cluster refused (Forbidden, or Invalid: apply.c) is tried
 * again after as long as the instance has been refused, from the first
 * to the last of these: a refusal that passes by itself (RBAC fixed by
 * the organizer, RBAC or the Service IP allocator catching up after an
 * apiserver restart) heals without anyone touching the Challenge, while
 * one that stays (a definition the cluster will never take, which its
 * change wakes anyway) costs an apply per instance every 5 min.
 */
#define REFUSED_RECHECK_MIN_MS 5000
#define REFUSED_RECHECK_MAX_MS 300000

/*
 * refused_recheck_ms: when to apply chal's instance again after the
 * cluster refused it for reason: as long as chal's status has said Error
 * with that reason (its Degraded condition's transition), within the bounds.
 */
static long refused_recheck_ms(const json_t *chal, const char *reason)
{
    const json_t *status = json_object_get(chal, "status");
    const char *since = json_string_value(
        json_object_get(kop_meta_find_condition(status, "Degraded"), "lastTransitionTime"));
    time_t t0 = 0;
    double refused_ms = 0;
    if (kop_streq(ctf_str2(chal, "status", "reason"), reason) &&
        kop_meta_condition_is_true(status, "Degraded") && since &&
        ctf_parse_time(since, &t0) == KOP_OK)
        refused_ms = difftime(time(NULL), t0) * 1000;
    if (refused_ms < REFUSED_RECHECK_MIN_MS)
        return REFUSED_RECHECK_MIN_MS;
    return refused_ms > REFUSED_RECHECK_MAX_MS ? REFUSED_RECHECK_MAX_MS : (long)refused_ms;
}

/* retry_after_write: a write that met a newer version waits for the cache; others back off. */
static kop_result retry_after_write(kop_err err)
{
    return err == KOP_ECONFLICT ? KOP_REQUEUE_AFTER(STALE_RECHECK_MS) : KOP_RETRY;
}

static void instance_namespace(const json_t *chal, char *out, size_t size)
{
    if (ctf_instance_namespace(kop_meta_namespace(chal), ctf_str2(chal, "spec", "definition"),
                               ctf_str2(chal, "spec", "team"), out, size) != KOP_OK)
        out[0] = '\0';
}

/*
 * admit asks the admission for chal (pool: its definition's pool key, when
 * it keeps warm instances: it may take a warm slot); false with o filled
 * when refused.
 */
static bool admit(ctf_operator *op, const json_t *chal, const char *pool, ctf_observation *o)
{
    char msg[sizeof o->message];
    if (ctf_admission_admit(op->admission, chal, pool, msg, sizeof msg) == CTF_ADMIT_OK)
        return true;
    ctf_observe_error(o, CTF_REASON_QUOTA, "%s", msg);
    return false;
}

/* ---- writes ----------------------------------------------------------------- */

/*
 * update_finalizers adds or removes our finalizer on the server with a JSON
 * patch guarded by a test of what chal (from the cache) says
 * (kop_meta_finalizers_patch): a concurrent change of the finalizers makes
 * it fail (and the reconcile retry), while our own status writes do not.
 */
static kop_err update_finalizers(ctf_operator *op, json_t *chal, bool add, json_t **stored,
                                 kop_status *st)
{
    json_t *now = json_deep_copy(chal), *patch = NULL;
    kop_err err = now ? KOP_OK : KOP_ENOMEM;
    if (!err) {
        if (add)
            kop_meta_add_finalizer(now, CTF_FINALIZER);
        else
            kop_meta_remove_finalizer(now, CTF_FINALIZER);
        err = kop_meta_finalizers_patch(
            chal, json_object_get(json_object_get(now, "metadata"), "finalizers"), &patch);
    }
    if (!err)
        err =
            kop_patch_object(kop_manager_client(op->mgr),
                             &(kop_patch_req){.target = {&CTF_CHALLENGES, kop_meta_namespace(chal),
                                                         kop_meta_name(chal)},
                                              .type = KOP_PATCH_JSON,
                                              .patch = patch},
                             stored, st);
    json_decref(patch);
    json_decref(now);
    return err;
}

/*
 * ensure_finalizer adds our finalizer if *chal lacks it, and then makes
 * *chal what the server stored: the rest of the pass (its status write is
 * guarded by the resourceVersion) sees the version its own write made,
 * as controller-runtime's Patch updates its object in place, instead of
 * the cache's older one, which would meet a conflict and wait a second.
 */
static kop_err ensure_finalizer(ctf_operator *op, json_t **chal, kop_status *st)
{
    json_t *stored = NULL;
    if (kop_meta_has_finalizer(*chal, CTF_FINALIZER))
        return KOP_OK;
    kop_err err = update_finalizers(op, *chal, true, &stored, st);
    if (!err && stored) {
        json_decref(*chal);
        *chal = stored;
    } else {
        json_decref(stored);
    }
    return err;
}

/*
 * wake_refused re-enqueues the Challenges refused for quota: a slot was just
 * freed, and nothing else would tell them.
 */
static void wake_refused(ctf_operator *op)
{
    json_t *refused = NULL, *c;
    size_t i;
    if (kop_informer_by_index(op->challenges, CTF_INDEX_REASON, CTF_REASON_QUOTA, &refused))
        return;
    json_array_foreach(refused, i, c)
        kop_controller_enqueue(op->ctl, kop_meta_namespace(c), kop_meta_name(c));
    json_decref(refused);
}

/* ---- finalization ----------------------------------------------------------- */

/*
 * delete_orphans deletes the instance namespaces labelled for the Challenge
 * ns/name, which no longer exists. A namespace can outlive its Challenge
 * when an operator is killed with its create in flight: the apiserver
 * finishes it after the next operator found no namespace and released the
 * finalizer. The namespace's own watch event brings its Challenge's key
 * here, so the orphan goes as soon as it appears.
 */
static void delete_orphans(ctf_operator *op, const kop_reconcile *req)
{
    json_t *orphans = NULL, *n;
    size_t i;
    kop_status st;
    if (kop_informer_by_index(op->namespaces, CTF_INDEX_CHALLENGE, req->name, &orphans) != KOP_OK)
        return;
    json_array_foreach(orphans, i, n)
    {
        const char *uid = kop_meta_annotation(n, CTF_ANNOTATION_CHALLENGE_UID);
        if (!kop_streq(kop_meta_label(n, CTF_LABEL_CHALLENGE_NS), req->namespace))
            continue;
        /* A Challenge whose finalizer was stripped by hand never went through finalize:
         * what this process kept of it goes now (a held update slot most of all). */
        ctf_applied_forget(op->applied, uid);
        ctf_update_forget_uid(op, req->namespace, kop_meta_label(n, CTF_LABEL_DEFINITION), uid);
        ctf_pool_forget(op, uid);
        if (kop_meta_is_deleting(n))
            continue;
        kop_delete_req del = {.target = {&CTF_NAMESPACES, NULL, kop_meta_name(n)},
                              .opts = {.precondition_uid = kop_meta_uid(n)}};
        if (kop_delete_object(req->client, &del, NULL, &st) == KOP_OK)
            kop_logger_log(req->log, KOP_LOG_INFO, "deleted an orphaned instance namespace",
                           KOP_LOG_STR("instance_namespace", kop_meta_name(n)));
    }
    json_decref(orphans);
}

/* owns_namespace: the namespace was made for this Challenge. */
static bool owns_namespace(const json_t *nsobj, const json_t *chal)
{
    const char *uid = kop_meta_annotation(nsobj, CTF_ANNOTATION_CHALLENGE_UID);
    return uid && kop_meta_uid(chal) && strcmp(uid, kop_meta_uid(chal)) == 0;
}

static kop_result finalize(ctf_operator *op, const kop_reconcile *req, json_t *chal)
{
    kop_status st;
    char ns[64];
    json_t *nsobj = NULL;
    ctf_observation o = {.phase = CTF_STATUS_TERMINATING};
    kop_client *c = kop_manager_client(op->mgr);

    char id[CTF_POOL_ID_LEN + 1];
    ctf_applied_forget(op->applied, kop_meta_uid(chal)); /* nothing is applied any more */
    ctf_update_forget(op, chal);                          /* nor being replaced */
    if (!kop_meta_has_finalizer(chal, CTF_FINALIZER))
        return KOP_DONE;
    instance_namespace(chal, ns, sizeof ns);
    if (ns[0])
        (void)ctf_pool_place(op, chal, ns, sizeof ns, id, sizeof id); /* a claimed warm one? */

    /* While the instance's namespace exists: Terminating, and delete it. */
    kop_err err = ns[0] ? kop_get(c, &CTF_NAMESPACES, NULL, ns, &nsobj, &st) : KOP_ENOTFOUND;
    if (err && err != KOP_ENOTFOUND)
        return KOP_RETRY;
    if (err == KOP_OK && owns_namespace(nsobj, chal)) {
        snprintf(o.message, sizeof o.message, "deleting namespace %s", ns);
        if ((err = ctf_write_status(op, req, chal, &o, ns, 0)) != KOP_OK) {
            json_decref(nsobj);
            return retry_after_write(err);
        }
        if (!kop_meta_is_deleting(nsobj)) {
            kop_delete_req d = {.target = {&CTF_NAMESPACES, NULL, ns},
                                .opts = {.propagation = KOP_PROPAGATION_BACKGROUND,
                                         .precondition_uid = kop_meta_uid(nsobj)}};
            err = kop_delete_object(c, &d, NULL, &st);
            if (err && err != KOP_ENOTFOUND && err != KOP_ECONFLICT) {
                json_decref(nsobj);
                return KOP_RETRY;
            }
        }
        json_decref(nsobj);
        /* The namespace's deletion event wakes us; the timer is a safety net. */
        return KOP_REQUEUE_AFTER(NS_WAIT_MS);
    }
    json_decref(nsobj);

    /* Gone (or never ours): Deleted, and let the Challenge go. */
    o.phase = CTF_STATUS_DELETED;
    snprintf(o.message, sizeof o.message, "instance removed");
    if ((err = ctf_write_status(op, req, chal, &o, ns, 0)) != KOP_OK)
        return retry_after_write(err);
    err = update_finalizers(op, chal, false, NULL, &st);
    if (err && err != KOP_ENOTFOUND)
        return KOP_RETRY;
    ctf_pool_forget(op, kop_meta_uid(chal));
    /* The slot went when the deletion began (admission.c); tell the waiting. */
    wake_refused(op);
    return KOP_DONE;
}

/* ---- the instance -------------------------------------------------------------- */

/* read_flag computes the instance's flag; *flag is owned (NULL: none). */
static bool read_flag(ctf_operator *op, const json_t *chal, const json_t *def, char **flag,
                      ctf_observation *o)
{
    kop_status st;
    kop_status_clear(&st);
    if (ctf_team_flag(op, def, ctf_str2(chal, "spec", "team"), flag, &st) == KOP_OK)
        return true;
    ctf_observe_error(o, "InvalidDefinition", "%s", st.message);
    o->requeue_ms = ctf_min_positive(o->requeue_ms, FLAG_KEY_RECHECK_MS);
    return false;
}

/*
 * apply_gated applies children, chal's instance as built, through the
 * update's gate (update.c: all, or what no version changes, the flag
 * Secret among it, while the instance keeps its version or waits for its
 * turn).
 */
static kop_err apply_gated(ctf_operator *op, const json_t *chal, const json_t *def,
                           const char *ns, json_t **children, ctf_update_pass *up,
                           ctf_observation *o, const kop_reconcile *req, bool *applied)
{
    kop_err err = ctf_update_gate(op, chal, def, ns, children, up);
    if (applied)
        *applied = false;
    if (err || json_array_size(*children) == 0)
        return err;
    return ctf_apply_built(op, kop_meta_uid(chal), *children, o, req, applied);
}

/* apply_instance builds chal's own instance (namespace ns) and applies it (apply_gated). */
static kop_err apply_instance(ctf_operator *op, const json_t *chal, const json_t *def,
                              const char *ns, const char *flag, ctf_update_pass *up,
                              ctf_observation *o, const kop_reconcile *req)
{
    kop_status st;
    json_t *children = NULL;
    kop_err err = ctf_build_children(&op->instance, def, chal, flag, &children, &st);
    if (err) {
        ctf_observe_error(o, "InvalidDefinition", "%s", st.message);
        return KOP_OK;
    }
    err = apply_gated(op, chal, def, ns, &children, up, o, req, NULL);
    json_decref(children);
    return err;
}

/* is_route: child is a gateway route, which only a claimed instance has (instance.c). */
static bool is_route(const json_t *child)
{
    const char *kind = json_string_value(json_object_get(child, "kind"));
    return kop_streq(kind, CTF_KIND_TLSROUTE) || kop_streq(kind, CTF_KIND_HTTPROUTE);
}

/*
 * apply_claim_delta: the first pass after a claim applies only the children
 * the claim changes when the caches show the warm instance as the pool
 * applied it: the flag Secret of a dynamic flag (the Namespace's labels
 * the claim wrote itself), and in the gateway mode the team's routes,
 * which come last and which a warm instance has none of (one write per
 * exposure). The rest are that already, and a claim is then
 * a write or two, not an instance's worth.
 * *done says it did; otherwise the caller applies everything.
 */
static kop_err apply_claim_delta(ctf_operator *op, const json_t *chal, const json_t *def,
                                 const char *ns, const char *id, json_t *children,
                                 ctf_observation *o, const kop_reconcile *req, bool *done)
{
    kop_status st;
    json_t *warm = NULL, *delta = NULL;
    char warm_digest[CTF_DIGEST_HEX], digest[CTF_DIGEST_HEX];
    int64_t now = kop_mono_ms(), unused = 0;
    long wait_ms = 0;
    kop_err err = KOP_OK;
    size_t routes = 0;
    *done = false;
    while (routes < json_array_size(children) &&
           is_route(json_array_get(children, json_array_size(children) - 1 - routes)))
        routes++;
    /* Only until the instance has a record as the team's: the first pass after the claim
     * (or after a takeover, when the warm instance's stamp stands in for the pool's record). */
    if (ctf_applied_known(op->applied, kop_meta_uid(chal)))
        return KOP_OK;
    if (ctf_pool_build_warm(op, def, id, &warm, &st) != KOP_OK ||
        json_array_size(warm) + routes != json_array_size(children) ||
        ctf_applied_digest(warm, warm_digest) != KOP_OK ||
        ctf_applied_digest(children, digest) != KOP_OK)
        goto out;
    /* The team's children and the warm ones are the same objects (their names and kinds
     * match one to one, but for the routes), so the caches show one thing of both. */
    ctf_applied_seen seen = ctf_apply_seen(op, warm);
    /* After a takeover: a full apply as the team's went through already. */
    ctf_apply_seed(op, kop_meta_uid(chal), children, digest, &seen, now);
    if (ctf_applied_known(op->applied, kop_meta_uid(chal)))
        goto out; /* ctf_apply_built decides, from that record */
    ctf_apply_seed(op, ns, warm, warm_digest, &seen, now);
    if (ctf_applied_decide(op->applied, ns, warm_digest, &seen, now, &wait_ms) != CTF_APPLY_SKIP)
        goto out;
    /* The Namespace differs by the claim's labels and uid alone, which the claim itself wrote
     * (pool.c): not written twice. What is left is the flag Secret of a dynamic flag. */
    delta = json_array();
    for (size_t i = 0; delta && i < json_array_size(children); i++) {
        const json_t *child = json_array_get(children, i);
        const json_t *was = json_array_get(warm, i); /* NULL for a route: new */
        if (!(was && json_equal(child, was)) &&
            !kop_streq(json_string_value(json_object_get(child, "kind")), "Namespace"))
            json_array_append(delta, json_array_get(children, i));
    }
    if (!delta)
        goto out;
    err = ctf_apply_children(op, delta, &unused, o, req);
    if (!err && !o->reason) {
        ctf_applied_record(op->applied, kop_meta_uid(chal), digest, seen.generations, now);
        *done = true;
    }
out:
    ctf_applied_forget(op->applied, ns); /* the pool's record: of no use once claimed */
    json_decref(delta);
    json_decref(warm);
    return err;
}

/*
 * apply_pooled applies the warm instance id that chal claimed, in namespace
 * ns: its Namespace now names the Challenge, and its flag Secret holds the
 * team's flag. When that changed the flag, the pods are touched so the
 * kubelet rewrites /flag/flag now.
 */
static kop_err apply_pooled(ctf_operator *op, const json_t *chal, const json_t *def, const char *ns,
                            const char *id, const char *flag, ctf_update_pass *up,
                            ctf_observation *o, const kop_reconcile *req)
{
    kop_status st;
    json_t *children = NULL;
    bool applied = false;
    const char *ignored;
    kop_err err = ctf_build_pooled_children(&op->instance, def, id, chal, flag, &children, &st);
    if (err) {
        ctf_observe_error(o, "InvalidDefinition", "%s", st.message);
        return KOP_OK;
    }
    /* A claim takes a warm instance of the current version only (claim.c): the gate lets
     * its first pass through whole; a later change of the definition may not. */
    err = ctf_update_gate(op, chal, def, ns, &children, up);
    if (!err && up->verdict == CTF_UPDATE_APPLY && !up->queued)
        err = apply_claim_delta(op, chal, def, ns, id, children, o, req, &applied);
    if (!err && !applied && !o->reason && json_array_size(children) > 0)
        err = ctf_apply_built(op, kop_meta_uid(chal), children, o, req, &applied);
    json_decref(children);
    if (!err && applied && ctf_flag_secret_ref(def, &ignored, &ignored))
        ctf_pool_refresh_flag(op, req, chal, ns);
    return err;
}

/* namespace_going: the cache shows namespace ns being deleted. */
static bool namespace_going(ctf_operator *op, const char *ns)
{
    json_t *n = NULL;
    bool going = kop_informer_dup_metadata(op->namespaces, NULL, ns, &n) == KOP_OK &&
                 kop_meta_is_deleting(n);
    json_decref(n);
    return going;
}

/*
 * read_definition is the quorum read of definition ns/name
 * (ctf_fresh_read_fn): a GET by name, which the apiserver serves from etcd.
 * Not a list by name: a list without a resourceVersion is served from the
 * apiserver's watch cache once that cache has caught up with etcd
 * (ConsistentListFromCache), and the cache of a resource that rarely
 * changes catches up only at etcd's next progress notification, which the
 * apiserver asks for every 100 ms while reads wait. In a burst of claims
 * that wait was most of a claim's time (docs/benchmarks.md).
 * *out: the definition, or NULL when there is none.
 */
static kop_err read_definition(const char *ns, const char *name, json_t **out, void *user)
{
    kop_status st;
    *out = NULL;
    kop_err err = kop_get(user, &CTF_DEFINITIONS, ns, name, out, &st);
    return err == KOP_ENOTFOUND ? KOP_OK : err;
}

/*
 * refresh_definition replaces *def (the cache's) by the definition the
 * apiserver holds when that is a newer generation and still valid. The
 * read is one that started after chal was first seen, shared with the
 * other claims of a burst (core/fresh.h). A failed read is the pass's
 * error: the claim waits for a read rather than judge the warm instances
 * by a cache that may be behind a change (it could take an old version).
 */
static kop_err refresh_definition(ctf_operator *op, const kop_reconcile *req,
                                  const json_t *chal, json_t **def)
{
    kop_status st;
    json_t *fresh = NULL;
    int64_t since = ctf_fresh_since(op->fresh, kop_meta_uid(chal), kop_mono_ms());
    kop_err err = ctf_fresh_definition(op->fresh, kop_meta_namespace(*def), kop_meta_name(*def),
                                       since, read_definition, req->client, kop_mono_ms, &fresh);
    if (!err && fresh && kop_meta_generation(fresh) > kop_meta_generation(*def) &&
        ctf_validate_definition(fresh, &st) == KOP_OK) {
        json_decref(*def);
        *def = fresh;
        return KOP_OK;
    }
    json_decref(fresh);
    return err;
}

/*
 * place_instance decides where chal's instance lives (ns, id): a warm one
 * it claimed, or its own, with admission.c's ledger told at each step so
 * that the instances counted never exceed --max-instances:
 *
 *   claimed already        -> the warm slot is the team's (counted as is);
 *   not decided, pooled    -> admitted on a free warm slot of the pool (or
 *                             fresh when it has none), then the claim: won,
 *                             the slot is the team's; lost, admitted again
 *                             as fresh, against the total with the warm
 *                             instances in it, or refused;
 *   otherwise              -> admitted fresh.
 *
 * Refused: o filled, and a pooled Challenge left undecided, so that the
 * pass a freed slot brings tries the pool again.
 *
 * A claim reads the definition from the apiserver first (*def replaced by
 * it when it is newer than the cache's; a read another claim started after
 * this Challenge was first seen serves as well, core/fresh.h): a claim made
 * right after a change of the definition, which the cache may not show
 * yet, takes a warm instance of the new version only (claim.c), and the
 * pass builds it from the new version too.
 */
static kop_err place_instance(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                              json_t **defp, char *ns, size_t size, char *id, size_t id_size,
                              ctf_place *place, ctf_observation *o)
{
    const json_t *def = *defp;
    char pool[CTF_TEAM_KEY_SIZE], msg[sizeof o->message];
    *place = ctf_pool_place(op, chal, ns, size, id, id_size);
    if (*place == CTF_PLACE_POOLED) {
        ctf_admission_claimed(op->admission, chal, ns);
        return KOP_OK;
    }
    bool pooled = *place == CTF_PLACE_UNDECIDED && ctf_pool_wanted(def);
    snprintf(pool, sizeof pool, "%s/%s", kop_meta_namespace(def), kop_meta_name(def));
    if (!admit(op, chal, pooled ? pool : NULL, o) || *place != CTF_PLACE_UNDECIDED)
        return KOP_OK;
    kop_err err = pooled ? refresh_definition(op, req, chal, defp) : KOP_OK;
    if (err)
        return err; /* undecided: the next pass reads and claims again */
    def = *defp;
    err = ctf_pool_claim(op, req, chal, def, ns, size, id, id_size, place);
    if (err)
        return err; /* undecided: the next pass claims again, on the slot it holds */
    if (*place == CTF_PLACE_POOLED) {
        ctf_admission_claimed(op->admission, chal, ns);
    } else if (ctf_admission_unclaimed(op->admission, chal, msg, sizeof msg) != CTF_ADMIT_OK) {
        ctf_observe_error(o, CTF_REASON_QUOTA, "%s", msg);
        ctf_pool_forget(op, kop_meta_uid(chal));
    }
    return KOP_OK;
}

/* ---- reconcile ------------------------------------------------------------------ */

/*
 * tell_definition wakes the pool controller's pass of chal's definition,
 * which counts its instances current, updating and behind (update.c), when
 * this pass changed what chal counts as and that pass is not coming anyway.
 */
static void tell_definition(ctf_operator *op, const json_t *chal, const ctf_observation *o)
{
    const char *was = ctf_str2(chal, "status", "currentStatus");
    json_int_t gen = json_integer_value(ctf_get2(chal, "status", "definitionGeneration"));
    if (!op->pool || (kop_streq(was, o->phase) && (o->generation == 0 || o->generation == gen)))
        return;
    const char *ns = kop_meta_namespace(chal), *def = ctf_str2(chal, "spec", "definition");
    if ((kop_streq(was, CTF_STATUS_UPDATING) || kop_streq(o->phase, CTF_STATUS_UPDATING) ||
         (o->generation > 0 && o->generation != gen)) &&
        !ctf_update_report_coming(op, ns, def))
        kop_controller_enqueue(op->pool->ctl, ns, def);
}

/*
 * expire deletes an expired Challenge, but only the version the cache
 * showed: the delete carries its uid and resourceVersion as preconditions.
 * A renewal the apiserver accepted after that version (the cache may lag
 * behind a watch by seconds) makes the delete a conflict; then the
 * reconcile looks again once the cache has caught up, and a renewed
 * instance lives on.
 */
static kop_result expire(ctf_operator *op, const kop_reconcile *req, const json_t *chal)
{
    kop_status st;
    kop_delete_req del = {
        .target = {&CTF_CHALLENGES, req->namespace, req->name},
        .opts = {.precondition_uid = kop_meta_uid(chal),
                 .precondition_resource_version = kop_meta_resource_version(chal)}};
    kop_err err = kop_delete_object(req->client, &del, NULL, &st);
    if (err == KOP_ECONFLICT) {
        kop_logger_log(req->log, KOP_LOG_INFO,
                       "expired in the cache, but changed since (renewed?); looking again");
        return KOP_REQUEUE_AFTER(STALE_RECHECK_MS);
    }
    if (err == KOP_ENOTFOUND)
        return KOP_DONE;
    if (err)
        return KOP_RETRY;
    kop_logger_log(req->log, KOP_LOG_INFO, "instance expired; deleted it");
    kop_event(op->events,
              &(kop_event_req){.object = chal, .type = KOP_EVENT_NORMAL, .reason = "Expired",
                               .action = "Delete"}, "instance expired");
    return KOP_DONE;
}

kop_result ctf_reconcile(const kop_reconcile *req, void *user)
{
    ctf_operator *op = user;
    kop_status st;
    json_t *chal = NULL, *def = NULL;
    char *flag = NULL;
    char ns[64] = "", id[CTF_POOL_ID_LEN + 1] = "";
    ctf_place place = CTF_PLACE_UNDECIDED;
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    ctf_update_pass up = {.verdict = CTF_UPDATE_APPLY};
    time_t expires = 0;
    kop_result res = KOP_DONE;
    bool waiting = false; /* children applied, Running pending */
    kop_err err;

    if (kop_informer_dup(req->cache, req->namespace, req->name, &chal) != KOP_OK) {
        delete_orphans(op, req); /* gone: the finalizer already ran */
        return KOP_DONE;
    }
    if (kop_meta_is_deleting(chal)) {
        res = finalize(op, req, chal);
        goto out;
    }
    if (ensure_finalizer(op, &chal, &st) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }

    /* The definition. */
    const char *def_name = ctf_str2(chal, "spec", "definition");
    if (!def_name || kop_informer_dup(op->definitions, req->namespace, def_name, &def) != KOP_OK) {
        char msg[sizeof o.message];
        ctf_say_no_definition(def_name, req->namespace, msg, sizeof msg);
        ctf_observe_error(&o, CTF_REASON_DEFINITION_NOT_FOUND, "%s", msg);
        goto status;
    }
    if (ctf_validate_definition(def, &st) != KOP_OK) {
        ctf_observe_error(&o, CTF_REASON_INVALID_DEFINITION, "%s", st.message);
        goto status;
    }

    /* The lifetime: past it, the instance goes away. */
    if (ctf_expiry(ctf_created_at(chal), json_object_get(def, "spec"),
                   ctf_str2(chal, "spec", "expiresAt"), &expires, &st) == KOP_OK) {
        double left = difftime(expires, time(NULL));
        if (left <= 0) {
            res = expire(op, req, chal);
            goto out;
        }
        o.requeue_ms = (long)(left * 1000) + 500;
    }

    /* Admission, then the instance itself: a warm one claimed, or its own. */
    instance_namespace(chal, ns, sizeof ns);
    if (!ns[0]) {
        ctf_observe_error(&o, "InvalidDefinition", "cannot name the instance's namespace");
        goto status;
    }
    if (place_instance(op, req, chal, &def, ns, sizeof ns, id, sizeof id, &place, &o) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }
    if (o.reason) {
        ns[0] = '\0'; /* refused: it has no instance */
        goto status;
    }
    if (place == CTF_PLACE_POOLED) {
        if (namespace_going(op, ns)) { /* deleted under it: made again once gone */
            snprintf(o.message, sizeof o.message, "waiting for namespace %s to be removed", ns);
            o.requeue_ms = NS_WAIT_MS;
            goto status;
        }
        if (!read_flag(op, chal, def, &flag, &o))
            goto status;
        if (apply_pooled(op, chal, def, ns, id, flag, &up, &o, req) != KOP_OK) {
            res = KOP_RETRY;
            goto out;
        }
        goto observe;
    }
    json_t *existing = NULL;
    if (kop_informer_dup(op->namespaces, NULL, ns, &existing) == KOP_OK) {
        bool ours = owns_namespace(existing, chal), going = kop_meta_is_deleting(existing);
        json_decref(existing);
        if (!ours && !going) {
            ctf_observe_error(&o, "DuplicateInstance",
                              "namespace %s already holds this team's instance of %s", ns,
                              def_name);
            ns[0] = '\0'; /* that namespace is another Challenge's */
            (void)ctf_admission_release(op->admission, kop_meta_uid(chal));
            goto status;
        }
        if (going) { /* a previous instance is still being removed */
            snprintf(o.message, sizeof o.message, "waiting for namespace %s to be removed", ns);
            o.requeue_ms = NS_WAIT_MS;
            goto status;
        }
    }
    if (!read_flag(op, chal, def, &flag, &o))
        goto status;
    if (apply_instance(op, chal, def, ns, flag, &up, &o, req) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }
observe:
    if (o.reason) /* the cluster refused a child: try again by itself */
        o.requeue_ms = ctf_min_positive(o.requeue_ms, refused_recheck_ms(chal, o.reason));
    if (!o.reason) {
        long expiry_ms = o.requeue_ms;
        if (up.replacing)
            o.phase = CTF_STATUS_UPDATING; /* being replaced by the new version (update.c) */
        ctf_observe_instance(op, chal, def, ns, &o);
        ctf_update_observed(chal, def, &up, &o);
        o.requeue_ms = ctf_min_positive(o.requeue_ms, expiry_ms);
        waiting = !o.reason && (strcmp(o.phase, CTF_STATUS_PENDING) == 0 ||
                                strcmp(o.phase, CTF_STATUS_UPDATING) == 0);
    }

status:
    if ((err = ctf_write_status(op, req, chal, &o, ns, expires)) != KOP_OK)
        res = retry_after_write(err);
    else if (o.requeue_ms > 0)
        res = waiting ? KOP_REQUEUE_AFTER_PRIORITY(o.requeue_ms, CTF_PRIORITY_READINESS)
                      : KOP_REQUEUE_AFTER(o.requeue_ms);
    if (err == KOP_OK) {
        ctf_update_finish(op, chal, def, &up); /* the slot, once Running is written */
        tell_definition(op, chal, &o);
    }
out:
    if (flag) {
        OPENSSL_cleanse(flag, strlen(flag));
        free(flag);
    }
    json_decref(o.endpoints);
    json_decref(def);
    json_decref(chal);
    return res;
}

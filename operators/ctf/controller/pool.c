/*
 * pool.c - the pool controller of warm pools: instances of a definition
 * built before any team asks for one, so that a team's Challenge is
 * Running the moment it claims one.
 *
 * A warm instance is an instance namespace like any other (same children,
 * same isolation) whose objects carry the pool's labels instead of a team's
 * (core/instance.c, ctf_build_pooled_children). Two controllers share it:
 * the claim side of the Challenge controller (claim.c), and the pool
 * controller, here (ctf_pool_reconcile, keyed by ChallengeDefinition),
 * which keeps ctf_pool_target unclaimed warm instances of each definition
 * applied and Ready, starts new ones as the CTF's quota allows (each start
 * reserved in the admission ledger before it is made, so warm and team
 * instances together never pass --max-instances), deletes extra, failed or
 * orphaned ones (a definition deleted, min lowered), and reports
 * status.pool on the definition and ctf_pool_* metrics.
 *
 * When the definition changes, no warm instance of the old version is
 * claimed any more (claim.c checks the version its Deployments carry), and
 * the pass replaces them in place a few at a time (ctf_update_pool_budget
 * of the target: Recreate all, Rolling its maxUnavailable, else a
 * quarter), so the rest of the pool keeps serving claims meanwhile. It also
 * writes the definition's status.update (update.c).
 *
 * A pool whose warm instances fail to start replaces them, but waits
 * before it starts new ones, longer after each pass that met a failure
 * (ctf_pool_backoff_ms): a broken image does not churn namespaces.
 *
 * The claim side (claim.c) shares the pool's state (pool.h): the pool
 * pass never writes a namespace a claim holds, nor a claim one the pass is
 * writing (hold_warm, reserve). The setup of both is setup.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "controller/apply.h"
#include "controller/observe.h"
#include "controller/pool.h"
#include "controller/update.h"
#include "kop/clock.h"

#define POOL_CREATE_BATCH 20    /* warm instances started per pass */
#define POOL_RESYNC_MS    30000 /* an autoscaled pool looks again as its window slides */
#define POOL_REPORT_EVERY_MS 1000 /* status.pool written at most this often per pool */
#define POOL_SEEN_MS      60000 /* a warm instance unchanged is looked at fully this often */
#define SEEN_CLAIMED      1     /* what a pass records of a warm namespace: claimed, */
#define SEEN_READY        2     /* or unclaimed and Ready, */
#define SEEN_GOING        3     /* or being deleted */

/* ---- the pool's records ----------------------------------------------------- */

/* recent_requests counts the Challenges that asked the pool inside the window, forgetting
 * older ones (core/pool.h's demand window). */
static int recent_requests(ctf_pool *p, const char *key)
{
    pthread_mutex_lock(&p->lock);
    size_t n = ctf_pool_demand_count(json_object_get(p->requests, key), kop_mono_ms(),
                                     (int64_t)CTF_POOL_WINDOW_S * 1000);
    pthread_mutex_unlock(&p->lock);
    return (int)n;
}

/* hold_warm marks the warm namespace ns as being written by the pool pass; false when it is
 * claimed or being claimed here (then the pass must not write it). */
static bool hold_warm(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    bool ok = !json_object_get(p->taken, ns) && json_object_set_new(p->busy, ns, json_true()) == 0;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

/* release_warm ends hold_warm: the namespace may be claimed again. */
static void release_warm(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    json_object_del(p->busy, ns);
    pthread_mutex_unlock(&p->lock);
}

/* ---- the pool controller --------------------------------------------------------- */

/* pool_view: what one pass of the pool controller saw. */
typedef struct pool_view {
    int unclaimed; /* warm, claimed by no one, not being deleted */
    int ready;     /* of those, Ready */
    int claimed;   /* claimed, not being deleted */
    int failed;    /* failed to start: deleted by this pass */
    json_t *spare; /* names of the unclaimed, not Ready first (the ones to delete first) */
    /* A change of the definition (update.c): its current version, and how many warm
     * instances may be replaced at once, and are (counted as the pass goes). */
    char version[CTF_VERSION_LEN + 1];
    int budget, replacing;
} pool_view;

/* warm_flag: the flag a warm instance holds: a static flag, "" for a dynamic one. */
static kop_err warm_flag(ctf_operator *op, const json_t *def, char **flag, kop_status *st)
{
    const char *name, *key;
    *flag = NULL;
    if (ctf_flag_secret_ref(def, &name, &key)) {
        *flag = strdup("");
        return *flag ? KOP_OK : KOP_ENOMEM;
    }
    return ctf_team_flag(op, def, "pool", flag, st);
}

kop_err ctf_pool_build_warm(ctf_operator *op, const json_t *def, const char *id, json_t **out,
                            kop_status *st)
{
    char *flag = NULL;
    kop_err err = warm_flag(op, def, &flag, st);
    *out = NULL;
    if (!err)
        err = ctf_build_pooled_children(&op->instance, def, id, NULL, flag, out, st);
    free(flag); /* static or empty: not a team's secret */
    return err;
}

/* apply_warm applies warm instance id of def (its record keyed by the namespace). */
static kop_err apply_warm(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                          const char *ns, const char *id, ctf_observation *o)
{
    kop_status st;
    json_t *children = NULL;
    kop_err err = ctf_pool_build_warm(op, def, id, &children, &st);
    if (err) {
        ctf_observe_error(o, CTF_REASON_INVALID_DEFINITION, "%s", st.message);
        return err == KOP_ENOMEM ? err : KOP_OK;
    }
    err = ctf_apply_built(op, ns, children, o, req, NULL);
    json_decref(children);
    return err;
}

/*
 * delete_warm deletes a warm namespace, unless it changed since it was
 * cached (a claim, or a deletion the cache does not show yet); true when
 * this call deleted it.
 */
static bool delete_warm(ctf_operator *op, const kop_reconcile *req, const json_t *n,
                        const char *why)
{
    kop_status st;
    kop_delete_req del = {.target = {&CTF_NAMESPACES, NULL, kop_meta_name(n)},
                          .opts = {.propagation = KOP_PROPAGATION_BACKGROUND,
                                   .precondition_uid = kop_meta_uid(n),
                                   .precondition_resource_version = kop_meta_resource_version(n)}};
    kop_err err = kop_delete_object(req->client, &del, NULL, &st);
    ctf_applied_forget(op->applied, kop_meta_name(n));
    if (err == KOP_OK)
        kop_logger_log(req->log, KOP_LOG_INFO, "deleted a warm instance",
                       KOP_LOG_STR("instance_namespace", kop_meta_name(n)),
                       KOP_LOG_STR("why", why));
    return err == KOP_OK;
}

/*
 * delete_extra deletes the spare warm namespace ns of a pool above its
 * target, unless it was claimed since the pass counted it: the cache read
 * again here may already show the claim (and its resourceVersion, which
 * the delete's precondition would then pass), and held against claims
 * (hold_warm) none can begin while it goes.
 */
static void delete_extra(ctf_operator *op, const kop_reconcile *req, const char *ns)
{
    json_t *extra = NULL;
    if (!ns || kop_informer_dup_metadata(op->namespaces, NULL, ns, &extra) != KOP_OK)
        return;
    if (!ctf_is_claimed(extra) && hold_warm(op->pool, ns)) {
        (void)delete_warm(op, req, extra, "the pool is above its target");
        release_warm(op->pool, ns);
    }
    json_decref(extra);
}

/*
 * unavailable_since: the latest time one of namespace ns's Deployments
 * became unavailable (core/update.h ctf_update_deployment_down: short of
 * available replicas, since its Available condition turned not True), at
 * least since; -1 when the cache shows all of its want Deployments (one per
 * pod of the definition) and none short (the instance lost a pod the
 * Deployments have not noticed yet: it is not starting).
 */
static time_t unavailable_since(ctf_operator *op, const char *ns, size_t want, time_t since)
{
    json_t *deps = NULL, *dep;
    size_t i;
    bool all_available = true;
    if (kop_informer_list(op->deployments, ns, &deps) != KOP_OK)
        return since;
    json_array_foreach(deps, i, dep)
    {
        time_t t = 0;
        if (!ctf_update_deployment_down(dep, &t))
            continue;
        all_available = false;
        if (t > since)
            since = t;
    }
    bool all = json_array_size(deps) >= want && want > 0;
    json_decref(deps);
    return all && all_available ? -1 : since;
}

/*
 * started_too_long: a warm instance not Ready within the definition's
 * start timeout, counted from the latest of its namespace's creation, its
 * newest pod's, and the time a Deployment of it became unavailable: one
 * that was Ready for hours and lost a pod (an eviction, a restart) has its
 * new pod's start timeout, not none left, also in the moment between its
 * pod's deletion and the new pod's creation (when the cache may show no
 * pod at all, or the Deployment still Available: then it is not starting).
 */
static bool started_too_long(ctf_operator *op, const json_t *def, const json_t *n)
{
    ctf_lifetime lt;
    int64_t timeout_ms = 5 * 60 * 1000;
    json_t *pods = NULL, *pod;
    size_t i;
    time_t since = ctf_created_at(n);
    if (ctf_lifetime_parse(json_object_get(def, "spec"), &lt, NULL) == KOP_OK)
        timeout_ms = lt.start_timeout_ms;
    if (kop_informer_list(op->pods, kop_meta_name(n), &pods) == KOP_OK) {
        json_array_foreach(pods, i, pod)
        {
            time_t created = ctf_created_at(pod);
            since = created > since ? created : since;
        }
    }
    json_decref(pods);
    since = unavailable_since(op, kop_meta_name(n), json_array_size(ctf_get2(def, "spec", "pods")),
                              since);
    return since >= 0 && difftime(time(NULL), since) * 1000 >= (double)timeout_ms;
}

/* mark_dirty records that an object of the warm namespace ns changed (pool_reconcile looks at
 * it again). A full table is emptied with the records it guards: every instance is looked at. */
void ctf_pool_mark_dirty(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    if (json_object_size(p->dirty) >= POOL_DECIDED_MAX) {
        json_object_clear(p->dirty);
        json_object_clear(p->seen);
    }
    json_object_set_new(p->dirty, ns, json_true());
    pthread_mutex_unlock(&p->lock);
}

/*
 * unchanged: what the pool's last pass recorded of warm namespace name (in
 * before) still holds: same resourceVersion and definition generation, no
 * event of its objects since (dirty), recorded less than POOL_SEEN_MS ago.
 * Returns the state recorded (SEEN_*), 0 when it must be looked at.
 */
static int unchanged(ctf_pool *p, const json_t *before, const char *name, const char *rv,
                     int64_t gen, int64_t now)
{
    const json_t *rec = json_object_get(before, name);
    if (!rec || !kop_streq(json_string_value(json_object_get(rec, "rv")), rv) ||
        json_integer_value(json_object_get(rec, "gen")) != gen ||
        now - json_integer_value(json_object_get(rec, "at")) >= POOL_SEEN_MS)
        return 0;
    pthread_mutex_lock(&p->lock);
    bool dirty = json_object_get(p->dirty, name) != NULL;
    pthread_mutex_unlock(&p->lock);
    return dirty ? 0 : (int)json_integer_value(json_object_get(rec, "state"));
}

/* take_dirty clears name's dirty mark before it is looked at: an event after this marks it
 * again (the cache is updated before the mark), so none is missed. */
static void take_dirty(ctf_pool *p, const char *name)
{
    pthread_mutex_lock(&p->lock);
    json_object_del(p->dirty, name);
    pthread_mutex_unlock(&p->lock);
}

/* see records what this pass found of name (SEEN_*; 0: nothing worth keeping) in after. */
static void see(json_t *after, const char *name, const char *rv, int64_t gen, int64_t now,
                int state)
{
    if (state)
        json_object_set_new(after, name,
                            json_pack("{s:s, s:I, s:I, s:i}", "rv", rv, "gen", (json_int_t)gen,
                                      "at", (json_int_t)now, "state", state));
}

/*
 * look_at_one looks at the warm namespace n of def (NULL: an orphan,
 * deleted): keeps it applied, counts it in v, replaces it when it failed.
 * Returns what to record of it (SEEN_*), 0 for nothing; *err the apply's.
 */
static int look_at_one(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                       const json_t *n, json_t *ready, pool_view *v, kop_err *err)
{
    const char *ns = kop_meta_name(n), *id = kop_meta_label(n, CTF_LABEL_POOL);
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    if (kop_meta_is_deleting(n))
        return SEEN_GOING;
    /* The Challenge's (or being claimed here): never touched here. From here until
     * release_warm no claim can begin on it. */
    if (ctf_is_claimed(n) || !hold_warm(op->pool, ns)) {
        v->claimed++;
        return ctf_is_claimed(n) ? SEEN_CLAIMED : 0;
    }
    if (!def) {
        (void)delete_warm(op, req, n, "its definition is gone or has no pool");
        release_warm(op->pool, ns);
        return 0;
    }
    /* Of an older version: never claimed (claim.c), replaced in place, a few at a time
     * (v->budget), so the rest of the pool keeps serving meanwhile. */
    ctf_instance_run run;
    ctf_update_look(op, ns, &run);
    bool behind = run.deployments > 0 && !kop_streq(run.version, v->version);
    bool rolling = run.deployments > 0 && run.rolling;
    if (behind && v->replacing >= v->budget) {
        release_warm(op->pool, ns); /* its turn comes when one being replaced is done */
        v->unclaimed++;
        json_array_append_new(v->spare, json_string(ns));
        return 0;
    }
    v->replacing += behind || (rolling && !run.mixed);
    /* n was read from the cache right before this (look_at); a claim on the server shows in
     * the Namespace's apply answer, which stops the apply before the flag Secret. */
    kop_err e = apply_warm(op, req, def, ns, id, &o);
    release_warm(op->pool, ns);
    if (e == KOP_ECONFLICT) {
        v->claimed++;
        return 0;
    }
    *err = *err ? *err : e;
    bool ok = !o.reason && !behind && ctf_instance_ready(op, def, ns, &o);
    json_decref(o.endpoints);
    /* One being replaced has no start timeout; one that cannot start still fails. A failure
     * counts once: a second pass before the cache shows the deletion finds the namespace
     * changed (e2e_ctf_pool saw two PoolBackoff Events for one failure). */
    if (!ok && (o.reason || (!behind && !rolling && started_too_long(op, def, n)))) {
        if (!delete_warm(op, req, n, "it failed to start"))
            return 0; /* looked at again next pass */
        kop_event(op->events,
                  &(kop_event_req){.object = def, .type = KOP_EVENT_WARNING,
                                   .reason = "WarmInstanceFailed", .action = "Replace"},
                  "warm instance %s failed (%s): replacing it", ns,
                  o.reason ? o.message : "not Ready within startTimeout");
        v->failed++;
        return 0;
    }
    v->unclaimed++;
    v->ready += ok;
    json_array_append_new(ok ? ready : v->spare, json_string(ns));
    return ok && !e ? SEEN_READY : 0;
}

/*
 * look_at keeps the unclaimed warm instances of def_ns/def_name applied
 * (def NULL: they are orphans, deleted), and counts what it sees. A warm
 * instance that cannot start (an image that cannot be pulled, a crash
 * loop, the start timeout) is deleted, with an Event, and a new one takes
 * its place.
 *
 * It reads the pool's index as keys and versions, unparsed, and skips a
 * warm instance that is Ready or claimed and unchanged since the last
 * pass (unchanged): a pass woken by one claim looks at that claim's
 * namespace and the ones whose objects changed, not at every warm
 * instance. Each is still looked at fully every POOL_SEEN_MS.
 *
 * It never writes a warm instance that is claimed: not one this process
 * claimed or is claiming (taken), held against claims while it writes
 * (hold_warm), read from the cache right before the write, and on
 * the server by the Namespace's apply, whose answer shows a claim before
 * the flag Secret is written (ctf_apply_built stops there): the empty flag
 * of a warm instance never lands on a team's.
 */
static kop_err look_at(ctf_operator *op, const kop_reconcile *req, const char *key,
                       const json_t *def, pool_view *v)
{
    ctf_pool *p = op->pool;
    json_t *keys = NULL, *rv, *ready = json_array(), *after = json_object();
    const char *name;
    int64_t now = kop_mono_ms(), gen = def ? kop_meta_generation(def) : -1;
    kop_err err = KOP_OK;
    v->spare = json_array();
    if (!ready || !after || !v->spare ||
        kop_informer_index_keys(op->namespaces, CTF_INDEX_POOL, req->name, NULL, &keys)) {
        json_decref(ready);
        json_decref(after);
        return KOP_ENOMEM;
    }
    pthread_mutex_lock(&p->lock);
    json_t *before = json_incref(json_object_get(p->seen, key));
    pthread_mutex_unlock(&p->lock);
    json_object_foreach(keys, name, rv)
    {
        const char *version = json_string_value(rv);
        int state = def ? unchanged(p, before, name, version, gen, now) : 0;
        if (state == SEEN_READY && ctf_pool_in_use(p, name))
            state = 0; /* being claimed or claimed here: the cache may not show it yet */
        if (state) { /* as the last pass left it: counted, not parsed */
            v->claimed += state == SEEN_CLAIMED;
            v->unclaimed += state == SEEN_READY;
            v->ready += state == SEEN_READY;
            if (state == SEEN_READY)
                json_array_append_new(ready, json_string(name));
            json_object_set(after, name, json_object_get(before, name));
            continue;
        }
        json_t *n = NULL;
        take_dirty(p, name);
        if (kop_informer_dup_metadata(op->namespaces, NULL, name, &n) != KOP_OK)
            continue;
        /* The index holds a definition's name; the same name may be pooled in two namespaces. */
        if (kop_streq(kop_meta_label(n, CTF_LABEL_POOL_NS), req->namespace))
            see(after, name, kop_meta_resource_version(n), gen, now,
                look_at_one(op, req, def, n, ready, v, &err));
        json_decref(n);
    }
    json_array_extend(v->spare, ready); /* not Ready first */
    pthread_mutex_lock(&p->lock);
    json_object_foreach(before, name, rv)
    {
        if (!json_object_get(keys, name))
            json_object_del(p->dirty, name); /* gone: its last events need no look */
    }
    if (def && json_object_size(p->seen) < POOL_DECIDED_MAX)
        json_object_set(p->seen, key, after); /* only the namespaces there now */
    else
        json_object_del(p->seen, key);
    pthread_mutex_unlock(&p->lock);
    json_decref(before);
    json_decref(after);
    json_decref(ready);
    json_decref(keys);
    return err;
}

/*
 * release_slot gives back the slot reserved for the warm namespace ns,
 * whose start failed, unless the cache shows that the namespace was
 * created all the same (its answer lost): then it stays counted, as it
 * exists. The cache is read after the slot is given back, so a creation
 * event before it is seen here and one after it counts the namespace again
 * (admission.c's namespace handler).
 */
static void release_slot(ctf_operator *op, const char *key, const char *ns)
{
    json_t *n = NULL;
    ctf_admission_drop_warm(op->admission, ns);
    if (kop_informer_dup_metadata(op->namespaces, NULL, ns, &n) == KOP_OK &&
        !kop_meta_is_deleting(n) && !ctf_is_claimed(n))
        ctf_admission_add_warm(op->admission, key, ns);
    json_decref(n);
}

/*
 * start_warm starts up to want new warm instances of def (pool key key),
 * each from a slot it reserved in the admission's ledger just before, under
 * the lock every admission takes: a fresh Challenge admitted meanwhile sees
 * every warm instance already started, and the pool stops at the first
 * slot refused (--max-instances reached).
 */
static kop_err start_warm(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                          const char *key, int want, int *started)
{
    kop_err err = KOP_OK;
    *started = 0;
    for (int i = 0; i < want && i < POOL_CREATE_BATCH && !err; i++) {
        unsigned char raw[CTF_POOL_ID_LEN / 2];
        char id[CTF_POOL_ID_LEN + 1], ns[CTF_NAMESPACE_SIZE];
        ctf_observation o = {.phase = CTF_STATUS_PENDING};
        if (RAND_bytes(raw, sizeof raw) != 1)
            return KOP_ENOMEM;
        for (size_t k = 0; k < sizeof raw; k++)
            snprintf(id + 2 * k, 3, "%02x", raw[k]);
        if (ctf_pool_namespace(kop_meta_namespace(def), kop_meta_name(def), id, ns, sizeof ns))
            return KOP_EINVAL;
        if (!ctf_admission_reserve_warm(op->admission, key, ns))
            break; /* no room left in --max-instances */
        err = apply_warm(op, req, def, ns, id, &o);
        if (err || o.reason)
            release_slot(op, key, ns);
        if (!err && o.reason) {
            kop_event(op->events,
                      &(kop_event_req){.object = def, .type = KOP_EVENT_WARNING,
                                       .reason = "WarmInstanceRefused", .action = "Create"},
                      "warm instance refused: %s", o.message);
            break;
        }
        *started += !err;
    }
    return err;
}

/*
 * report_wait: how long status.pool of pool key waits before it is written
 * again, at most once every POOL_REPORT_EVERY_MS (0: now, which is noted as
 * its last write). Every claim wakes the pool pass, and every pass found
 * the counts changed: a burst of 1,000 claims wrote status.pool 300 times
 * in 10 s. The pass comes again when the wait is over, so the last counts
 * are written.
 */
static long report_wait(ctf_pool *p, const char *key, int64_t now)
{
    long wait_ms = 0;
    pthread_mutex_lock(&p->lock);
    const json_t *last = json_object_get(p->reported, key);
    int64_t since = last ? now - (int64_t)json_integer_value(last) : POOL_REPORT_EVERY_MS;
    if (since < POOL_REPORT_EVERY_MS)
        wait_ms = (long)(POOL_REPORT_EVERY_MS - since);
    else
        json_object_set_new(p->reported, key, json_integer(now));
    pthread_mutex_unlock(&p->lock);
    return wait_ms;
}

/* report writes status.pool when it changed (report_wait permitting), and the pool's gauges;
 * returns when the pass must come again to write it (ms; 0: no need). */
static long report(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                   const char *key, int target, const pool_view *v)
{
    const char *ns = kop_meta_namespace(def), *name = kop_meta_name(def);
    const char *l_target[] = {ns, name, NULL};
    const char *l_ready[] = {ns, name, "ready", NULL};
    const char *l_starting[] = {ns, name, "starting", NULL};
    const char *l_claimed[] = {ns, name, "claimed", NULL};
    kop_metric_set(op->pool->target_metric, l_target, target);
    kop_metric_set(op->pool->instances_metric, l_ready, v->ready);
    kop_metric_set(op->pool->instances_metric, l_starting, v->unclaimed - v->ready);
    kop_metric_set(op->pool->instances_metric, l_claimed, v->claimed);

    json_t *want = json_pack("{s:i, s:i, s:i, s:i}", "target", target, "size", v->unclaimed,
                             "ready", v->ready, "claimed", v->claimed);
    if (!want || json_equal(want, ctf_get2(def, "status", "pool"))) {
        json_decref(want);
        return 0;
    }
    long wait_ms = report_wait(op->pool, key, kop_mono_ms());
    if (wait_ms > 0) {
        json_decref(want);
        return wait_ms;
    }
    json_t *patch = json_pack("{s:{s:o}}", "status", "pool", want);
    kop_status st;
    kop_patch_req pr = {.target = {&CTF_DEFINITIONS, ns, name},
                        .type = KOP_PATCH_MERGE,
                        .patch = patch,
                        .opts = {.subresource = "status"}};
    kop_err err = patch ? kop_patch_object(req->client, &pr, NULL, &st) : KOP_ENOMEM;
    if (err && err != KOP_ENOTFOUND)
        kop_logger_log(req->log, KOP_LOG_WARN, "pool status not written", KOP_LOG_ERR(err),
                       KOP_LOG_STR("detail", st.message));
    json_decref(patch);
    return err && err != KOP_ENOTFOUND ? POOL_REPORT_EVERY_MS : 0;
}

/* retarget tells (an Event) when an autoscaled pool's target changes. */
static void retarget(ctf_operator *op, const json_t *def, const char *key, int target, int requests)
{
    pthread_mutex_lock(&op->pool->lock);
    json_t *was = json_object_get(op->pool->targets, key);
    int before = was ? (int)json_integer_value(was) : -1;
    json_object_set_new(op->pool->targets, key, json_integer(target));
    pthread_mutex_unlock(&op->pool->lock);
    if (before >= 0 && before != target)
        kop_event(op->events,
                  &(kop_event_req){.object = def, .type = KOP_EVENT_NORMAL, .reason = "PoolScaled",
                                   .action = "Scale"},
                  "warm pool target %d -> %d: %d requests in the last %d s", before, target,
                  requests, CTF_POOL_WINDOW_S);
}

/*
 * backoff updates the pool's run of failures with what this pass saw and
 * returns how long it must still wait before starting warm instances (ms).
 * The run ends when the pool is full and every warm instance Ready, or the
 * definition changes (a fixed image is tried at once).
 */
static int64_t backoff(ctf_operator *op, const json_t *def, const char *key, int target,
                       const pool_view *v)
{
    ctf_pool *p = op->pool;
    int64_t now = kop_mono_ms(), gen = kop_meta_generation(def), wait = 0;
    int n = 0;
    pthread_mutex_lock(&p->lock);
    json_t *run = json_object_get(p->failing, key);
    if (run && json_integer_value(json_object_get(run, "gen")) != gen)
        run = NULL; /* a new generation: start the count again */
    if (v->failed > 0) {
        n = (run ? (int)json_integer_value(json_object_get(run, "n")) : 0) + 1;
        wait = ctf_pool_backoff_ms(n);
        json_object_set_new(p->failing, key,
                            json_pack("{s:i, s:I, s:I}", "n", n, "gen", (json_int_t)gen, "until",
                                      (json_int_t)(now + wait)));
    } else if (!run || (v->unclaimed >= target && v->ready == v->unclaimed)) {
        json_object_del(p->failing, key); /* healthy, or changed since */
    } else {
        wait = json_integer_value(json_object_get(run, "until")) - now;
    }
    pthread_mutex_unlock(&p->lock);
    if (v->failed > 0)
        kop_event(op->events,
                  &(kop_event_req){.object = def, .type = KOP_EVENT_WARNING,
                                   .reason = "PoolBackoff", .action = "Wait"},
                  "warm instances failed (%d time%s in a row): new ones start in %lld s", n,
                  n == 1 ? "" : "s", (long long)(wait / 1000));
    return wait > 0 ? wait : 0;
}

/* forget_pool drops what is kept of a deleted definition's pool: its metric series and
 * the records in memory. */
static void forget_pool(ctf_operator *op, const char *key, const char *ns, const char *name)
{
    ctf_pool *p = op->pool;
    static const char *const states[] = {"ready", "starting", "claimed"};
    static const char *const results[] = {"pool", "fresh"};
    const char *labels[] = {ns, name, NULL, NULL};
    kop_metric_remove(p->target_metric, labels);
    for (size_t i = 0; i < CTF_LEN(states); i++) {
        labels[2] = states[i];
        kop_metric_remove(p->instances_metric, labels);
    }
    for (size_t i = 0; i < CTF_LEN(results); i++) {
        labels[2] = results[i];
        kop_metric_remove(p->claims_metric, labels);
    }
    pthread_mutex_lock(&p->lock);
    json_object_del(p->requests, key);
    json_object_del(p->targets, key);
    json_object_del(p->reported, key);
    json_object_del(p->failing, key);
    json_object_del(p->cursors, key);
    json_object_del(p->seen, key);
    pthread_mutex_unlock(&p->lock);
}

/*
 * pool_reconcile keeps one definition's pool at its target: look at every
 * warm instance (apply, count, replace the failed), delete the extra ones
 * (not Ready first), start the missing ones, report.
 */
kop_result ctf_pool_reconcile(const kop_reconcile *req, void *user)
{
    ctf_operator *op = user;
    char key[POOL_KEY_SIZE];
    json_t *def = NULL;
    ctf_pool_spec spec = {0, 0, false};
    kop_status st;
    pool_view v = {0, 0, 0, 0, NULL, "", 0, 0};
    int target = 0, requests = 0, started = 0;
    int64_t wait_ms = 0;

    ctf_pool_key(req->namespace, req->name, key, sizeof key);
    if (kop_informer_dup(req->cache, req->namespace, req->name, &def) == KOP_OK &&
        kop_meta_is_deleting(def)) {
        json_decref(def);
        def = NULL;
    }
    /* pooled: def (still) asks for a pool; without, its warm instances go. */
    bool pooled = def && ctf_validate_definition(def, &st) == KOP_OK &&
                  ctf_pool_parse(def, &spec, &st) == KOP_OK && ctf_pool_enabled(&spec);
    ctf_update_spec update;
    if (pooled && (ctf_update_parse(def, &update, &st) != KOP_OK ||
                   ctf_update_version(def, v.version) != KOP_OK))
        pooled = false; /* validated above: cannot happen */
    if (pooled) {
        requests = recent_requests(op->pool, key);
        target = ctf_pool_target(&spec, requests);
        retarget(op, def, key, target, requests);
        v.budget = ctf_update_pool_budget(&update, target);
    }
    kop_err err = look_at(op, req, key, pooled ? def : NULL, &v);

    for (int i = 0; pooled && i < v.unclaimed - target; i++)
        delete_extra(op, req, json_string_value(json_array_get(v.spare, (size_t)i)));
    if (pooled && v.unclaimed > target) {
        v.ready = v.ready < target ? v.ready : target;
        v.unclaimed = target;
    }
    if (pooled)
        wait_ms = backoff(op, def, key, target, &v);
    if (!err && pooled && v.unclaimed < target && wait_ms == 0)
        err = start_warm(op, req, def, key, target - v.unclaimed, &started);
    if (started > 0)
        kop_logger_log(req->log, KOP_LOG_INFO, "started warm instances",
                       KOP_LOG_INT("started", started), KOP_LOG_INT("unclaimed", v.unclaimed),
                       KOP_LOG_INT("ready", v.ready), KOP_LOG_INT("claimed", v.claimed),
                       KOP_LOG_INT("target", target));
    v.unclaimed += started;
    /* A definition that never had a pool gets no status.pool written. */
    long report_ms = def && (pooled || ctf_get2(def, "status", "pool"))
                         ? report(op, req, def, key, target, &v)
                         : 0;
    if (def) /* on the current version? */
        report_ms = ctf_min_positive(report_ms, ctf_update_report(op, req, def));
    if (!def)
        forget_pool(op, key, req->namespace, req->name);
    json_decref(v.spare);
    json_decref(def);
    if (err)
        return KOP_RETRY;
    if (wait_ms > 0 && v.unclaimed < target) {
        if (spec.autoscale && wait_ms > POOL_RESYNC_MS)
            wait_ms = POOL_RESYNC_MS; /* the window slides meanwhile */
        return KOP_REQUEUE_AFTER(ctf_min_positive(wait_ms, report_ms));
    }
    if (spec.autoscale)
        return KOP_REQUEUE_AFTER(ctf_min_positive(POOL_RESYNC_MS, report_ms));
    /* Starting instances wake this through their events; the timer catches a start timeout,
     * and a refill that --max-instances refused (a freed slot wakes Challenges, not pools). */
    if (v.ready < v.unclaimed || v.unclaimed < target)
        return KOP_REQUEUE_AFTER(ctf_min_positive(POOL_RESYNC_MS, report_ms));
    return report_ms > 0 ? KOP_REQUEUE_AFTER(report_ms) : KOP_DONE;
}

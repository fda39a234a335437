/*
 * pool.c - warm pools: instances of a definition built before any team asks
 * for one, so that a team's Challenge is Running the moment it claims one.
 *
 * A warm instance is an instance namespace like any other (same children,
 * same isolation) whose objects carry the pool's labels instead of a team's
 * (instance.c, ctf_build_pooled_children). Two controllers share it:
 *
 *   the pool controller (pool_reconcile, keyed by ChallengeDefinition)
 *     keeps ctf_pool_target unclaimed warm instances of each definition
 *     applied and Ready, starts new ones as the CTF's quota allows, deletes
 *     extra, failed or orphaned ones (a definition deleted, min lowered),
 *     and reports status.pool on the definition and ctf_pool_* metrics;
 *
 *   the Challenge controller (reconcile.c) asks ctf_pool_place where a
 *     Challenge's instance lives and, when that is not decided yet,
 *     ctf_pool_claim, which claims a Ready warm instance with one
 *     conditional write: a merge patch of the Namespace's labels carrying
 *     its resourceVersion. Of two claimers exactly one wins; the other
 *     meets a conflict and tries the next, or builds fresh. The labels
 *     written are the record, so a restarted operator or a new leader
 *     finds every claim in its first list.
 *
 * After the claim the instance is the Challenge's: its finalizer deletes
 * the namespace (never returned to the pool), the team's flag is written
 * into the Secret and the pods are touched so the kubelet rewrites
 * /flag/flag at once (ctf_pool_refresh_flag). A warm instance of a
 * definition with a dynamic flag holds an empty flag file and no env FLAG:
 * it never holds any team's flag before its claim.
 *
 * A pool whose warm instances fail to start replaces them, but waits
 * before it starts new ones, longer after each pass that met a failure
 * (ctf_pool_backoff_ms): a broken image does not churn namespaces.
 *
 * In memory, per process: the places decided (a claim the cache may not
 * show yet must not be made twice), the request times that size an
 * autoscaled pool, and each pool's run of failures. Losing them on a
 * restart is safe: the caches show every claim, a pool falls back to min
 * until demand shows again, and a failing pool fails again (and waits).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "ctf_internal.h"
#include "kop/clock.h"

#define POOL_KEY_SIZE     320   /* "<namespace>/<definition>" */
#define POOL_REQUESTS_MAX 4096  /* request times kept per pool */
#define POOL_CLAIM_TRIES  4     /* warm instances tried per claim before building fresh */
#define POOL_CREATE_BATCH 20    /* warm instances started per pass */
#define POOL_RESYNC_MS    30000 /* an autoscaled pool looks again as its window slides */
#define POOL_DECIDED_MAX  200000

struct ctf_pool {
    pthread_mutex_t lock;
    json_t *decided;  /* Challenge uid -> {"ns": namespace, "id": warm id (pooled only)} */
    json_t *taken;    /* warm namespace -> Challenge uid: claimed (or being claimed) here */
    json_t *requests; /* pool key -> [monotonic ms, ...], oldest first */
    json_t *targets;  /* pool key -> the target last acted on */
    json_t *failing;  /* pool key -> {"n": passes with failures, "gen": generation, "until": ms} */
    kop_controller *ctl;
    kop_metric *target_metric, *instances_metric, *claims_metric;
};

/* ---- small helpers ------------------------------------------------------------ */

static void pool_key(const char *ns, const char *def, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", ns ? ns : "", def ? def : "");
}

static bool is_claimed(const json_t *nsobj)
{
    return kop_meta_label(nsobj, CTF_LABEL_CHALLENGE) != NULL;
}

/* warm_namespaces returns the namespaces of def_ns/def's pool, claimed or not (new array). */
static json_t *warm_namespaces(ctf_operator *op, const char *def_ns, const char *def)
{
    json_t *all = NULL, *out = json_array(), *n;
    size_t i;
    if (!out || kop_informer_by_index(op->namespaces, CTF_INDEX_POOL, def, &all) != KOP_OK)
        return out;
    json_array_foreach(all, i, n)
    {
        if (kop_streq(kop_meta_label(n, CTF_LABEL_POOL_NS), def_ns))
            json_array_append(out, n);
    }
    json_decref(all);
    return out;
}

/* recent_requests counts the pool's requests inside the window, forgetting older ones. */
static int recent_requests(ctf_pool *p, const char *key)
{
    int64_t since = kop_mono_ms() - (int64_t)CTF_POOL_WINDOW_S * 1000;
    pthread_mutex_lock(&p->lock);
    json_t *times = json_object_get(p->requests, key);
    while (json_array_size(times) > 0 &&
           json_integer_value(json_array_get(times, 0)) < (json_int_t)since)
        json_array_remove(times, 0);
    int n = (int)json_array_size(times);
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* note_request records a request for a warm instance of the pool (served or not). */
static void note_request(ctf_pool *p, const char *key)
{
    pthread_mutex_lock(&p->lock);
    json_t *times = json_object_get(p->requests, key);
    if (!times && json_object_set_new(p->requests, key, json_array()) == 0)
        times = json_object_get(p->requests, key);
    if (times && json_array_size(times) >= POOL_REQUESTS_MAX)
        json_array_remove(times, 0);
    if (times)
        json_array_append_new(times, json_integer(kop_mono_ms()));
    pthread_mutex_unlock(&p->lock);
}

/* remember records chal's place (id NULL: fresh); a full table forgets nothing, it just
 * stops remembering: the caches answer then, a moment later. */
static void remember(ctf_pool *p, const char *uid, const char *ns, const char *id)
{
    pthread_mutex_lock(&p->lock);
    if (uid && json_object_size(p->decided) < POOL_DECIDED_MAX) {
        json_t *d = json_pack("{s:s, s:s*}", "ns", ns, "id", id);
        if (d)
            json_object_set_new(p->decided, uid, d);
        if (d && id)
            json_object_set_new(p->taken, ns, json_string(uid));
    }
    pthread_mutex_unlock(&p->lock);
}

/* recall copies chal's remembered place into ns and id; CTF_PLACE_UNDECIDED when none. */
static ctf_place recall(ctf_pool *p, const char *uid, char *ns, size_t size, char *id,
                        size_t id_size)
{
    ctf_place place = CTF_PLACE_UNDECIDED;
    pthread_mutex_lock(&p->lock);
    json_t *d = uid ? json_object_get(p->decided, uid) : NULL;
    if (d) {
        const char *warm = json_string_value(json_object_get(d, "id"));
        snprintf(ns, size, "%s", json_string_value(json_object_get(d, "ns")));
        snprintf(id, id_size, "%s", warm ? warm : "");
        place = warm ? CTF_PLACE_POOLED : CTF_PLACE_FRESH;
    }
    pthread_mutex_unlock(&p->lock);
    return place;
}

/* reserve marks a warm namespace as being claimed by uid here; false when it already is. */
static bool reserve(ctf_pool *p, const char *ns, const char *uid)
{
    pthread_mutex_lock(&p->lock);
    bool ok =
        !json_object_get(p->taken, ns) && json_object_set_new(p->taken, ns, json_string(uid)) == 0;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

static void unreserve(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    json_object_del(p->taken, ns);
    pthread_mutex_unlock(&p->lock);
}

static void count_claim(ctf_operator *op, const json_t *def, const char *result)
{
    const char *labels[] = {kop_meta_namespace(def), kop_meta_name(def), result, NULL};
    kop_metric_inc(op->pool->claims_metric, labels);
}

/* ---- where an instance lives -------------------------------------------------- */

bool ctf_pool_wanted(const json_t *def)
{
    ctf_pool_spec spec;
    return ctf_pool_parse(def, &spec, NULL) == KOP_OK && ctf_pool_enabled(&spec);
}

/* claimed_by_labels finds, in the cache, the warm namespace labelled as chal's. */
static bool claimed_by_labels(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                              size_t id_size)
{
    json_t *mine = NULL, *n;
    size_t i;
    bool found = false;
    if (kop_informer_by_index(op->namespaces, CTF_INDEX_CHALLENGE, kop_meta_name(chal), &mine))
        return false;
    json_array_foreach(mine, i, n)
    {
        const char *warm = kop_meta_label(n, CTF_LABEL_POOL);
        if (!found && warm &&
            kop_streq(kop_meta_label(n, CTF_LABEL_CHALLENGE_NS), kop_meta_namespace(chal)) &&
            kop_streq(kop_meta_annotation(n, CTF_ANNOTATION_CHALLENGE_UID), kop_meta_uid(chal))) {
            snprintf(ns, size, "%s", kop_meta_name(n));
            snprintf(id, id_size, "%s", warm);
            found = true;
        }
    }
    json_decref(mine);
    return found;
}

ctf_place ctf_pool_place(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                         size_t id_size)
{
    json_t *fresh = NULL;
    const char *uid = kop_meta_uid(chal);
    id[0] = '\0';
    ctf_place place = recall(op->pool, uid, ns, size, id, id_size);
    if (place != CTF_PLACE_UNDECIDED)
        return place;
    if (claimed_by_labels(op, chal, ns, size, id, id_size)) {
        remember(op->pool, uid, ns, id);
        return CTF_PLACE_POOLED;
    }
    /* ns holds the fresh instance's name: it exists, or a pass decided before. */
    if (kop_informer_dup_metadata(op->namespaces, NULL, ns, &fresh) == KOP_OK ||
        ctf_str2(chal, "status", "namespace"))
        place = CTF_PLACE_FRESH;
    json_decref(fresh);
    return place;
}

/*
 * claim_one writes chal's labels and uid onto the warm namespace nsobj, on
 * the condition that it is still the version cached (unclaimed).
 */
static kop_err claim_one(ctf_operator *op, const json_t *chal, const json_t *nsobj)
{
    kop_status st;
    json_t *labels = NULL;
    kop_err err = ctf_instance_labels(chal, &labels, &st);
    if (err)
        return err;
    json_t *patch = json_pack("{s:{s:s?, s:o, s:{s:s?}}}", "metadata", "resourceVersion",
                              kop_meta_resource_version(nsobj), "labels", labels, "annotations",
                              CTF_ANNOTATION_CHALLENGE_UID, kop_meta_uid(chal));
    if (!patch)
        return KOP_ENOMEM;
    kop_patch_req req = {.target = {&CTF_NAMESPACES, NULL, kop_meta_name(nsobj)},
                         .type = KOP_PATCH_MERGE,
                         .patch = patch};
    err = kop_patch_object(kop_manager_client(op->mgr), &req, NULL, &st);
    json_decref(patch);
    return err;
}

/* taken_here: this process claimed (or is claiming) the warm namespace n, which the
 * cache may not show yet. */
static bool taken_here(ctf_pool *p, const json_t *n)
{
    pthread_mutex_lock(&p->lock);
    bool taken = json_object_get(p->taken, kop_meta_name(n)) != NULL;
    pthread_mutex_unlock(&p->lock);
    return taken;
}

/* claimable: a warm namespace no one claimed, not going, not being claimed here, and Ready. */
static bool claimable(ctf_operator *op, const json_t *def, const json_t *n)
{
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    if (is_claimed(n) || kop_meta_is_deleting(n) || taken_here(op->pool, n))
        return false;
    bool ready = ctf_instance_ready(op, def, kop_meta_name(n), &o);
    json_decref(o.endpoints);
    return ready;
}

/*
 * try_claims claims one of def's warm instances for chal: ns and id set and
 * true on success. Concurrent claimers start at different places in the
 * list (by uid), and each looks at no more of it than it tries, so a claim
 * costs the same with a pool of 10 or of 1,000. A conflict (another claimer
 * won) moves on to the next; another error is returned.
 */
static kop_err try_claims(ctf_operator *op, const json_t *chal, const json_t *def, char *ns,
                          size_t size, char *id, size_t id_size, bool *won)
{
    const char *uid = kop_meta_uid(chal);
    json_t *warm = warm_namespaces(op, kop_meta_namespace(def), kop_meta_name(def));
    size_t n = json_array_size(warm), start = 0;
    int tries = 0;
    kop_err err = KOP_OK;
    *won = false;
    for (const char *c = uid; c && *c; c++)
        start = start * 31 + (unsigned char)*c;
    for (size_t i = 0; i < n && tries < POOL_CLAIM_TRIES && !*won && !err; i++) {
        json_t *cand = json_array_get(warm, (start + i) % n);
        const char *name = kop_meta_name(cand);
        if (!claimable(op, def, cand) || !reserve(op->pool, name, uid))
            continue;
        tries++;
        err = claim_one(op, chal, cand);
        if (err == KOP_OK) {
            snprintf(ns, size, "%s", name);
            snprintf(id, id_size, "%s", kop_meta_label(cand, CTF_LABEL_POOL));
            *won = true;
            break;
        }
        unreserve(op->pool, name);
        if (err == KOP_ECONFLICT || err == KOP_ENOTFOUND)
            err = KOP_OK; /* another claimer won it, or it went: the next */
    }
    json_decref(warm);
    return err;
}

kop_err ctf_pool_claim(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                       const json_t *def, char *ns, size_t size, char *id, size_t id_size,
                       ctf_place *place)
{
    char key[POOL_KEY_SIZE];
    const char *uid = kop_meta_uid(chal);
    bool won = false;

    *place = CTF_PLACE_FRESH;
    id[0] = '\0';
    if (!ctf_pool_wanted(def)) {
        remember(op->pool, uid, ns, NULL);
        return KOP_OK;
    }
    pool_key(kop_meta_namespace(def), kop_meta_name(def), key, sizeof key);
    note_request(op->pool, key);
    kop_err err = try_claims(op, chal, def, ns, size, id, id_size, &won);
    if (err)
        return err; /* the apiserver failed: undecided, retried */
    *place = won ? CTF_PLACE_POOLED : CTF_PLACE_FRESH;
    remember(op->pool, uid, ns, won ? id : NULL);
    count_claim(op, def, won ? "pool" : "fresh");
    if (won) {
        kop_logger_log(req->log, KOP_LOG_INFO, "claimed a warm instance",
                       KOP_LOG_STR("instance_namespace", ns));
        kop_event(op->events, chal, KOP_EVENT_NORMAL, "Claimed", "Claim",
                  "claimed the warm instance in namespace %s", ns);
    }
    kop_controller_enqueue(op->pool->ctl, kop_meta_namespace(def), kop_meta_name(def));
    return KOP_OK;
}

void ctf_pool_refresh_flag(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                           const char *ns)
{
    json_t *pods = NULL, *pod;
    size_t i;
    kop_status st;
    if (kop_informer_list(op->pods, ns, &pods) != KOP_OK)
        return;
    json_t *patch = json_pack("{s:{s:{s:s?}}}", "metadata", "annotations",
                              "ctf.kopc.io/flag-refresh", kop_meta_uid(chal));
    json_array_foreach(pods, i, pod)
    {
        kop_patch_req pr = {
            .target = {&CTF_PODS, ns, kop_meta_name(pod)}, .type = KOP_PATCH_MERGE, .patch = patch};
        kop_err err = patch ? kop_patch_object(req->client, &pr, NULL, &st) : KOP_ENOMEM;
        if (err && err != KOP_ENOTFOUND) /* the kubelet's periodic sync still delivers it */
            kop_logger_log(req->log, KOP_LOG_WARN, "could not touch a pod for its flag",
                           KOP_LOG_ERR(err), KOP_LOG_STR("pod", kop_meta_name(pod)));
    }
    json_decref(patch);
    json_decref(pods);
}

void ctf_pool_forget(ctf_operator *op, const char *uid)
{
    ctf_pool *p = op->pool;
    if (!p || !uid)
        return;
    pthread_mutex_lock(&p->lock);
    json_t *d = json_object_get(p->decided, uid);
    const char *ns = json_string_value(json_object_get(d, "ns"));
    if (ns && kop_streq(json_string_value(json_object_get(p->taken, ns)), uid))
        json_object_del(p->taken, ns);
    json_object_del(p->decided, uid);
    pthread_mutex_unlock(&p->lock);
}

/* ---- the pool controller --------------------------------------------------------- */

/* pool_view: what one pass of the pool controller saw. */
typedef struct pool_view {
    int unclaimed; /* warm, claimed by no one, not being deleted */
    int ready;     /* of those, Ready */
    int claimed;   /* claimed, not being deleted */
    int failed;    /* failed to start: deleted by this pass */
    json_t *spare; /* the unclaimed, not Ready first (the ones to delete first) */
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

/* delete_warm deletes a warm namespace, unless a claim changed it since it was cached. */
static void delete_warm(ctf_operator *op, const kop_reconcile *req, const json_t *n,
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
}

/* started_too_long: a warm instance not Ready within the definition's start timeout. */
static bool started_too_long(const json_t *def, const json_t *n)
{
    ctf_lifetime lt;
    int64_t timeout_ms = 5 * 60 * 1000;
    if (ctf_lifetime_parse(json_object_get(def, "spec"), &lt, NULL) == KOP_OK)
        timeout_ms = lt.start_timeout_ms;
    return difftime(time(NULL), ctf_created_at(n)) * 1000 >= (double)timeout_ms;
}

/*
 * look_at keeps def's unclaimed warm instances applied (def NULL: they are
 * orphans, deleted), and counts what it sees. A warm instance that cannot
 * start (an image that cannot be pulled, a crash loop, the start timeout)
 * is deleted, with an Event, and a new one takes its place.
 */
static kop_err look_at(ctf_operator *op, const kop_reconcile *req, const json_t *def, json_t *warm,
                       pool_view *v)
{
    json_t *n, *ready = json_array();
    size_t i;
    kop_err err = KOP_OK;
    v->spare = json_array();
    json_array_foreach(warm, i, n)
    {
        const char *ns = kop_meta_name(n), *id = kop_meta_label(n, CTF_LABEL_POOL);
        ctf_observation o = {.phase = CTF_STATUS_PENDING};
        if (kop_meta_is_deleting(n))
            continue;
        if (is_claimed(n) || taken_here(op->pool, n)) { /* the Challenge's: never touched here */
            v->claimed++;
            continue;
        }
        if (!def) {
            delete_warm(op, req, n, "its definition is gone or has no pool");
            continue;
        }
        kop_err e = apply_warm(op, req, def, ns, id, &o);
        err = err ? err : e;
        bool ok = !o.reason && ctf_instance_ready(op, def, ns, &o);
        json_decref(o.endpoints);
        if (!ok && (o.reason || started_too_long(def, n))) {
            kop_event(op->events, def, KOP_EVENT_WARNING, "WarmInstanceFailed", "Replace",
                      "warm instance %s failed (%s): replacing it", ns,
                      o.reason ? o.message : "not Ready within startTimeout");
            delete_warm(op, req, n, "it failed to start");
            v->failed++;
            continue;
        }
        v->unclaimed++;
        v->ready += ok;
        json_array_append(ok ? ready : v->spare, n);
    }
    json_array_extend(v->spare, ready); /* not Ready first */
    json_decref(ready);
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
        !kop_meta_is_deleting(n) && !is_claimed(n))
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
            kop_event(op->events, def, KOP_EVENT_WARNING, "WarmInstanceRefused", "Create",
                      "warm instance refused: %s", o.message);
            break;
        }
        *started += !err;
    }
    return err;
}

/* report writes status.pool when it changed, and the pool's gauges. */
static void report(ctf_operator *op, const kop_reconcile *req, const json_t *def, int target,
                   const pool_view *v)
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
        return;
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
        kop_event(op->events, def, KOP_EVENT_NORMAL, "PoolScaled", "Scale",
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
        kop_event(op->events, def, KOP_EVENT_WARNING, "PoolBackoff", "Wait",
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
    json_object_del(p->failing, key);
    pthread_mutex_unlock(&p->lock);
}

/*
 * pool_reconcile keeps one definition's pool at its target: look at every
 * warm instance (apply, count, replace the failed), delete the extra ones
 * (not Ready first), start the missing ones, report.
 */
static kop_result pool_reconcile(const kop_reconcile *req, void *user)
{
    ctf_operator *op = user;
    char key[POOL_KEY_SIZE];
    json_t *def = NULL;
    ctf_pool_spec spec = {0, 0, false};
    kop_status st;
    pool_view v = {0, 0, 0, 0, NULL};
    int target = 0, requests = 0, started = 0;
    int64_t wait_ms = 0;

    pool_key(req->namespace, req->name, key, sizeof key);
    if (kop_informer_dup(req->cache, req->namespace, req->name, &def) == KOP_OK &&
        kop_meta_is_deleting(def)) {
        json_decref(def);
        def = NULL;
    }
    /* pooled: def (still) asks for a pool; without, its warm instances go. */
    bool pooled = def && ctf_validate_definition(def, &st) == KOP_OK &&
                  ctf_pool_parse(def, &spec, &st) == KOP_OK && ctf_pool_enabled(&spec);
    if (pooled) {
        requests = recent_requests(op->pool, key);
        target = ctf_pool_target(&spec, requests);
        retarget(op, def, key, target, requests);
    }
    json_t *warm = warm_namespaces(op, req->namespace, req->name);
    kop_err err = look_at(op, req, pooled ? def : NULL, warm, &v);
    json_decref(warm);

    for (int i = 0; pooled && i < v.unclaimed - target; i++) {
        const json_t *extra = json_array_get(v.spare, (size_t)i);
        delete_warm(op, req, extra, "the pool is above its target");
    }
    if (pooled && v.unclaimed > target) {
        v.ready = v.ready < target ? v.ready : target;
        v.unclaimed = target;
    }
    if (pooled)
        wait_ms = backoff(op, def, key, target, &v);
    if (!err && pooled && v.unclaimed < target && wait_ms == 0)
        err = start_warm(op, req, def, key, target - v.unclaimed, &started);
    v.unclaimed += started;
    /* A definition that never had a pool gets no status written. */
    if (def && (pooled || ctf_get2(def, "status", "pool")))
        report(op, req, def, target, &v);
    if (!def)
        forget_pool(op, key, req->namespace, req->name);
    json_decref(v.spare);
    json_decref(def);
    if (err)
        return KOP_RETRY;
    if (wait_ms > 0 && v.unclaimed < target) {
        if (spec.autoscale && wait_ms > POOL_RESYNC_MS)
            wait_ms = POOL_RESYNC_MS; /* the window slides meanwhile */
        return KOP_REQUEUE_AFTER(wait_ms);
    }
    if (spec.autoscale)
        return KOP_REQUEUE_AFTER(POOL_RESYNC_MS);
    /* Starting instances wake this through their events; the timer catches a start timeout. */
    return v.ready < v.unclaimed ? KOP_REQUEUE_AFTER(POOL_RESYNC_MS) : KOP_DONE;
}

/* ---- setup ---------------------------------------------------------------------- */

/* by_pool maps a warm instance's object to its definition. */
static void by_pool(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    (void)user;
    const char *ns = kop_meta_label(obj, CTF_LABEL_POOL_NS);
    const char *def = kop_meta_label(obj, CTF_LABEL_DEFINITION);
    if (ns && def && kop_meta_label(obj, CTF_LABEL_POOL))
        emit(ns, def, ctx);
}

/* index_pool: warm namespaces by their definition's name (the asker checks the namespace). */
static size_t index_pool(const json_t *n, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] =
        max && kop_meta_label(n, CTF_LABEL_POOL) ? kop_meta_label(n, CTF_LABEL_DEFINITION) : NULL;
    return values[0] ? 1 : 0;
}

static kop_err pool_metrics(ctf_operator *op)
{
    kop_metrics *m = kop_manager_metrics(op->mgr);
    static const char *const def_labels[] = {"namespace", "definition", NULL};
    static const char *const state_labels[] = {"namespace", "definition", "state", NULL};
    static const char *const result_labels[] = {"namespace", "definition", "result", NULL};
    kop_err err =
        kop_metrics_gauge(m, "ctf_pool_target", "Unclaimed warm instances each pool is kept at",
                          def_labels, &op->pool->target_metric);
    if (!err)
        err = kop_metrics_gauge(m, "ctf_pool_instances",
                                "Warm instances by state (ready, starting, claimed)", state_labels,
                                &op->pool->instances_metric);
    if (!err)
        err = kop_metrics_counter(m, "ctf_pool_claims_total",
                                  "Requests of a pooled definition, by result (pool, fresh)",
                                  result_labels, &op->pool->claims_metric);
    return err;
}

void ctf_pool_free(ctf_pool *p)
{
    if (!p)
        return;
    json_decref(p->decided);
    json_decref(p->taken);
    json_decref(p->requests);
    json_decref(p->targets);
    json_decref(p->failing);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

kop_err ctf_setup_pool(ctf_operator *op, kop_status *st)
{
    ctf_pool *p = calloc(1, sizeof *p);
    if (!p)
        return KOP_ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->decided = json_object();
    p->taken = json_object();
    p->requests = json_object();
    p->targets = json_object();
    p->failing = json_object();
    op->pool = p;
    kop_err err =
        p->decided && p->taken && p->requests && p->targets && p->failing ? KOP_OK : KOP_ENOMEM;
    kop_controller_opts co = {
        .name = "pool",
        .for_resource = CTF_DEFINITIONS,
        .namespace = op->watch_namespace,
        .reconcile = pool_reconcile,
        .user = op,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 1,
    };
    if (!err)
        err = pool_metrics(op);
    if (!err)
        err = kop_informer_add_index(op->namespaces, CTF_INDEX_POOL, index_pool, NULL);
    if (!err)
        err = kop_controller_new(op->mgr, &co, &p->ctl);
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS, &CTF_PODS,
                                      &CTF_ENDPOINTSLICES};
    for (size_t i = 0; !err && i < CTF_LEN(children); i++)
        err =
            kop_controller_watch(p->ctl, &(kop_controller_watch_opts){.resource = children[i],
                                                                      .label_selector = CTF_MANAGED,
                                                                      .fn = by_pool,
                                                                      .user = op,
                                                                      .map_reads_metadata = true});
    if (err)
        kop_status_setf(st, 0, NULL, "pool controller: %s", kop_strerror(err));
    return err;
}

/*
 * setup.c - the two controllers put together: the Challenge controller
 * (ctf_setup_controller): the caches it reads, their indexes, the watches
 * that bring a Challenge back when anything of its instance changes, the
 * admission's view of the cache, and the operator's metrics; and the pool
 * controller (ctf_setup_pool): the pool's state (pool.h), its indexes of
 * warm namespaces, its watches and metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/pool.h"
#include "controller/reconcile.h"
#include "core/wake.h"
#include "kop/clock.h"

/* ---- watches ------------------------------------------------------------------- */

/*
 * by_definition maps a ChallengeDefinition to the Challenges that use it.
 * Its watch passes spec changes only (and deletion marks): a Challenge
 * reads its definition's spec, never its status, which the pool controller
 * writes about once a second during a burst of claims; each such write
 * woke every Challenge of the definition, 1,000 passes a second at 1,000
 * teams (issue 26).
 */
static void by_definition(const json_t *def, kop_emit_fn emit, void *ctx, void *user)
{
    ctf_operator *op = user;
    json_t *chals = NULL, *c;
    size_t i;
    if (kop_informer_by_index(op->challenges, CTF_INDEX_DEFINITION, kop_meta_name(def), &chals))
        return;
    json_array_foreach(chals, i, c) if (strcmp(kop_meta_namespace(c), kop_meta_namespace(def)) == 0)
        emit(kop_meta_namespace(c), kop_meta_name(c), ctx);
    json_decref(chals);
}

/*
 * by_labels maps an instance's child to its Challenge through its labels.
 * The children of a claimed warm instance keep the pool's labels (changing
 * a pod template's labels would restart its pods): their namespace, whose
 * labels the claim wrote, names the Challenge.
 */
static void by_labels(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    ctf_operator *op = user;
    json_t *nsobj = NULL;
    const char *ns = kop_meta_label(obj, CTF_LABEL_CHALLENGE_NS);
    const char *name = kop_meta_label(obj, CTF_LABEL_CHALLENGE);
    if (ns && name) {
        emit(ns, name, ctx);
        return;
    }
    if (!kop_meta_label(obj, CTF_LABEL_POOL) || !kop_meta_namespace(obj) ||
        kop_informer_dup_metadata(op->namespaces, NULL, kop_meta_namespace(obj), &nsobj) != KOP_OK)
        return;
    ns = kop_meta_label(nsobj, CTF_LABEL_CHALLENGE_NS);
    name = kop_meta_label(nsobj, CTF_LABEL_CHALLENGE);
    if (ns && name)
        emit(ns, name, ctx);
    json_decref(nsobj);
}

/*
 * The first sight of each Challenge (core/fresh.h): a claim's quorum read
 * of its definition may be any that started after it.
 */
static void fresh_add(const json_t *c, void *user)
{
    ctf_fresh_seen(((ctf_operator *)user)->fresh, kop_meta_uid(c), kop_mono_ms());
}

/* A Challenge gone: its first sight and its last status written are of no use any more. */
static void fresh_delete(const json_t *c, void *user)
{
    ctf_fresh_gone(((ctf_operator *)user)->fresh, kop_meta_uid(c));
    ctf_written_forget(((ctf_operator *)user)->written, kop_meta_uid(c));
}

/* The census of each definition's instances follows the Challenges' cache (core/census.h). */
static void census_seen(const json_t *c, void *user)
{
    ctf_census_seen(((ctf_operator *)user)->census, c);
}

static void census_update(const json_t *old, const json_t *c, void *user)
{
    (void)old;
    ctf_census_seen(((ctf_operator *)user)->census, c);
}

static void census_gone(const json_t *c, void *user)
{
    ctf_census_gone(((ctf_operator *)user)->census, kop_meta_uid(c));
}

/* Indexes of Challenges by spec.definition and by spec.team (any namespace). */
static size_t index_definition(const json_t *c, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? ctf_str2(c, "spec", "definition") : NULL;
    return values[0] ? 1 : 0;
}

static size_t index_team(const json_t *c, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? ctf_str2(c, "spec", "team") : NULL;
    return values[0] ? 1 : 0;
}

/* index_reason: Challenges by status.reason (the refused for quota, to wake). */
static size_t index_reason(const json_t *c, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? ctf_str2(c, "status", "reason") : NULL;
    return values[0] ? 1 : 0;
}

/* index_challenge: instance namespaces by the name of the Challenge their
 * labels name (its namespace is checked by the asker). */
static size_t index_challenge(const json_t *n, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? kop_meta_label(n, "ctf.kopc.io/challenge") : NULL;
    return values[0] ? 1 : 0;
}

/* index_failing: pods by their namespace, those with a container that cannot start only
 * (an image that cannot be pulled, a crash loop: what a pass reports). */
static size_t index_failing(const json_t *pod, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max && ctf_pod_failing(pod) ? kop_meta_namespace(pod) : NULL;
    return values[0] ? 1 : 0;
}

/* count_by_status fills ctf_instances{status} at each scrape. */
static void count_by_status(void *user)
{
    ctf_operator *op = user;
    static const char *const phases[] = {
        "None",           CTF_STATUS_PENDING,     CTF_STATUS_RUNNING, CTF_STATUS_UPDATING,
        CTF_STATUS_ERROR, CTF_STATUS_TERMINATING, CTF_STATUS_DELETED};
    double n[CTF_LEN(phases)] = {0};
    json_t *all = NULL, *c;
    size_t i;
    if (kop_informer_list(op->challenges, NULL, &all))
        return;
    json_array_foreach(all, i, c)
    {
        const char *p = ctf_str2(c, "status", "currentStatus");
        size_t k = 0;
        for (size_t j = 1; p && j < CTF_LEN(phases); j++)
            if (strcmp(p, phases[j]) == 0)
                k = j;
        n[k]++;
    }
    json_decref(all);
    for (size_t j = 0; j < CTF_LEN(phases); j++) {
        const char *labels[] = {phases[j], NULL};
        kop_metric_set(op->instances, labels, n[j]);
    }
}

/*
 * watch_routes: in the gateway mode, the instances' routes are watched like
 * their other children (by their labels, which name the Challenge: they
 * live in the instance's namespace, where no owner reference can point
 * back at it), so that a change of a route's status, the gateway accepting
 * or refusing it, wakes its Challenge; and cached, for observe.c to read.
 */
static kop_err watch_routes(ctf_operator *op)
{
    const kop_resource *routes[] = {&CTF_TLSROUTES, &CTF_HTTPROUTES};
    kop_informer **caches[] = {&op->tlsroutes, &op->httproutes};
    kop_err err = KOP_OK;
    for (size_t i = 0; !err && i < CTF_LEN(routes); i++) {
        err = kop_controller_watch(op->ctl,
                                   &(kop_controller_watch_opts){.resource = routes[i],
                                                                .label_selector = CTF_MANAGED,
                                                                .fn = by_labels,
                                                                .user = op,
                                                                .map_reads_metadata = true});
        if (!err)
            err = kop_manager_informer(op->mgr, routes[i], NULL, CTF_MANAGED, caches[i]);
    }
    return err;
}

kop_err ctf_setup_controller(ctf_operator *op, kop_status *st)
{
    kop_err err;
    kop_metrics *m = kop_manager_metrics(op->mgr);
    static const char *const status_label[] = {"status", NULL};
    kop_controller_opts co = {
        .name = "challenge",
        .for_resource = CTF_CHALLENGES,
        .namespace = op->watch_namespace,
        .reconcile = ctf_reconcile,
        .user = op,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = op->workers > 0 ? op->workers : CTF_WORKERS_DEFAULT,
    };
    err = kop_metrics_gauge(m, "ctf_instances", "Challenge instances by status", status_label,
                            &op->instances);
    if (!err)
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){
                .name = "ctf_instance_ready_seconds",
                .help = "Seconds from a Challenge's creation to its instance Running"},
            &op->ready_seconds);
    if (!err)
        err = kop_metrics_add_collector(m, count_by_status, op);
    if (!err)
        err = kop_controller_new(op->mgr, &co, &op->ctl);
    if (err) {
        kop_status_setf(st, 0, NULL, "challenge controller: %s", kop_strerror(err));
        return err;
    }
    op->challenges = kop_controller_cache(op->ctl);
    err = kop_informer_add_index(op->challenges, CTF_INDEX_DEFINITION, index_definition, NULL);
    if (!err)
        err = kop_informer_add_index(op->challenges, CTF_INDEX_TEAM, index_team, NULL);
    if (!err)
        err = kop_informer_add_index(op->challenges, CTF_INDEX_REASON, index_reason, NULL);
    if (!err)
        err = ctf_admission_new(op->max_per_team, op->max_instances, &op->admission);
    if (!err)
        err = ctf_applied_new(&op->applied);
    if (!err)
        err = ctf_written_new(&op->written);
    if (!err)
        err = ctf_census_new(&op->census);
    if (!err) {
        kop_informer_handler h = {census_seen, census_update, census_gone, op, KOP_OLD_UNUSED};
        err = kop_informer_add_handler(op->challenges, &h);
    }
    if (!err)
        err = ctf_rollout_new(&op->rollout);
    if (!err)
        err = ctf_fresh_new(&op->fresh);
    if (!err) {
        kop_informer_handler h = {fresh_add, NULL, fresh_delete, op, KOP_OLD_UNUSED};
        err = kop_informer_add_handler(op->challenges, &h);
    }
    if (!err) {
        kop_informer_handler h = ctf_admission_handler(op->admission);
        err = kop_informer_add_handler(op->challenges, &h);
    }
    kop_controller_watch_opts definitions = {
        .resource = &CTF_DEFINITIONS,
        .fn = by_definition,
        .user = op,
        .map_reads_metadata = true,
        .update_predicate = kop_predicate_generation_changed,
    };
    if (!err)
        err = kop_controller_watch(op->ctl, &definitions);
    /* The children's updates wake their Challenge when they change what a pass reads of
     * them (core/wake.h); the other kinds change seldom, and every update of theirs does.
     * A pod comes or goes unnoticed unless it cannot start: the rest shows in its
     * Deployment. */
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS,   &CTF_PODS,
                                      &CTF_SERVICES,   &CTF_ENDPOINTSLICES, &CTF_NETWORKPOLICIES};
    const kop_update_predicate_fn wakes[] = {NULL, ctf_wake_deployment, ctf_wake_pod,
                                             NULL, ctf_wake_slice,      NULL};
    const kop_object_predicate_fn comings[] = {NULL, NULL, ctf_wake_pod_object, NULL, NULL, NULL};
    for (size_t i = 0; !err && i < CTF_LEN(children); i++)
        err = kop_controller_watch(op->ctl,
                                   &(kop_controller_watch_opts){.resource = children[i],
                                                                .label_selector = CTF_MANAGED,
                                                                .fn = by_labels,
                                                                .user = op,
                                                                .map_reads_metadata = true,
                                                                .update_predicate = wakes[i],
                                                                .object_predicate = comings[i]});
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_DEFINITIONS, NULL, NULL, &op->definitions);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_NAMESPACES, NULL, CTF_MANAGED, &op->namespaces);
    if (!err) { /* the warm instances that exist count against --max-instances */
        kop_informer_handler h = ctf_admission_namespace_handler(op->admission);
        err = kop_informer_add_handler(op->namespaces, &h);
    }
    if (!err)
        err = kop_informer_add_index(op->namespaces, CTF_INDEX_CHALLENGE, index_challenge, NULL);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_DEPLOYMENTS, NULL, CTF_MANAGED, &op->deployments);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_PODS, NULL, CTF_MANAGED, &op->pods);
    if (!err)
        err = kop_informer_add_index(op->pods, CTF_INDEX_FAILING, index_failing, NULL);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_SERVICES, NULL, CTF_MANAGED, &op->services);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_ENDPOINTSLICES, NULL, CTF_MANAGED,
                                   &op->endpointslices);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_NETWORKPOLICIES, NULL, CTF_MANAGED,
                                   &op->networkpolicies);
    if (!err && ctf_gateway_on(&op->instance))
        err = watch_routes(op);
    if (err)
        kop_status_setf(st, 0, NULL, "challenge watches: %s", kop_strerror(err));
    return err;
}

/* ---- the pool controller ------------------------------------------------------------ */

/* by_pool maps a warm instance's object to its definition. */
static void by_pool(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    ctf_operator *op = user;
    const char *ns = kop_meta_label(obj, CTF_LABEL_POOL_NS);
    const char *def = kop_meta_label(obj, CTF_LABEL_DEFINITION);
    const char *instance = kop_meta_namespace(obj); /* a Namespace: its own name */
    if (!ns || !def || !kop_meta_label(obj, CTF_LABEL_POOL))
        return;
    ctf_pool_mark_dirty(op->pool, ctf_nonempty(instance) ? instance : kop_meta_name(obj));
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

/* index_pool_free: the warm namespaces no one claimed (and not going), by their definition's
 * name: what a claim looks for, without parsing the claimed ones. */
static size_t index_pool_free(const json_t *n, const char **values, size_t max, void *user)
{
    (void)user;
    if (max == 0 || !kop_meta_label(n, CTF_LABEL_POOL) || ctf_is_claimed(n) ||
        kop_meta_is_deleting(n))
        return 0;
    values[0] = kop_meta_label(n, CTF_LABEL_DEFINITION);
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
    json_decref(p->pending);
    json_decref(p->busy);
    json_decref(p->cursors);
    json_decref(p->seen);
    json_decref(p->dirty);
    json_decref(p->requests);
    json_decref(p->targets);
    json_decref(p->reported);
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
    p->pending = json_object();
    p->busy = json_object();
    p->cursors = json_object();
    p->seen = json_object();
    p->dirty = json_object();
    p->requests = json_object();
    p->targets = json_object();
    p->reported = json_object();
    p->failing = json_object();
    op->pool = p;
    kop_err err =
        p->decided && p->taken && p->pending && p->busy && p->cursors && p->seen && p->dirty &&
                    p->requests && p->targets && p->reported && p->failing
            ? KOP_OK
            : KOP_ENOMEM;
    kop_controller_opts co = {
        .name = "pool",
        .for_resource = CTF_DEFINITIONS,
        .namespace = op->watch_namespace,
        .reconcile = ctf_pool_reconcile,
        .user = op,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 1,
    };
    if (!err)
        err = pool_metrics(op);
    if (!err)
        err = kop_informer_add_index(op->namespaces, CTF_INDEX_POOL, index_pool, NULL);
    if (!err)
        err = kop_informer_add_index(op->namespaces, POOL_INDEX_FREE, index_pool_free, NULL);
    if (!err)
        err = kop_controller_new(op->mgr, &co, &p->ctl);
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS, &CTF_PODS,
                                      &CTF_ENDPOINTSLICES, &CTF_NETWORKPOLICIES};
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

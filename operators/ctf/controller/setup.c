/*
 * setup.c - the Challenge controller put together (ctf_setup_controller):
 * the caches it reads, their indexes, the watches that bring a Challenge
 * back when anything of its instance changes, the admission's view of the
 * cache, and the operator's metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/operator.h"

/* ---- watches ------------------------------------------------------------------- */

/* by_definition maps a ChallengeDefinition to the Challenges that use it. */
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

/* count_by_status fills ctf_instances{status} at each scrape. */
static void count_by_status(void *user)
{
    ctf_operator *op = user;
    static const char *const phases[] = {
        "None",           CTF_STATUS_PENDING,     CTF_STATUS_RUNNING,
        CTF_STATUS_ERROR, CTF_STATUS_TERMINATING, CTF_STATUS_DELETED};
    double n[6] = {0};
    json_t *all = NULL, *c;
    size_t i;
    if (kop_informer_list(op->challenges, NULL, &all))
        return;
    json_array_foreach(all, i, c)
    {
        const char *p = ctf_str2(c, "status", "currentStatus");
        size_t k = 0;
        for (size_t j = 1; p && j < 6; j++)
            if (strcmp(p, phases[j]) == 0)
                k = j;
        n[k]++;
    }
    json_decref(all);
    for (size_t j = 0; j < 6; j++) {
        const char *labels[] = {phases[j], NULL};
        kop_metric_set(op->instances, labels, n[j]);
    }
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
        .max_concurrent = 4,
    };
    err = kop_metrics_gauge(m, "ctf_instances", "Challenge instances by status", status_label,
                            &op->instances);
    if (!err)
        err = kop_metrics_histogram(m, "ctf_instance_ready_seconds",
                                    "Seconds from a Challenge's creation to its instance Running",
                                    NULL, NULL, 0, &op->ready_seconds);
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
    if (!err) {
        kop_informer_handler h = ctf_admission_handler(op->admission);
        err = kop_informer_add_handler(op->challenges, &h);
    }
    if (!err)
        err =
            kop_controller_watch(op->ctl, &(kop_controller_watch_opts){.resource = &CTF_DEFINITIONS,
                                                                       .fn = by_definition,
                                                                       .user = op,
                                                                       .map_reads_metadata = true});
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS,   &CTF_PODS,
                                      &CTF_SERVICES,   &CTF_ENDPOINTSLICES, &CTF_NETWORKPOLICIES};
    for (size_t i = 0; !err && i < CTF_LEN(children); i++)
        err = kop_controller_watch(op->ctl,
                                   &(kop_controller_watch_opts){.resource = children[i],
                                                                .label_selector = CTF_MANAGED,
                                                                .fn = by_labels,
                                                                .user = op,
                                                                .map_reads_metadata = true});
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
        err = kop_manager_informer(op->mgr, &CTF_SERVICES, NULL, CTF_MANAGED, &op->services);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_ENDPOINTSLICES, NULL, CTF_MANAGED,
                                   &op->endpointslices);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_NETWORKPOLICIES, NULL, CTF_MANAGED,
                                   &op->networkpolicies);
    if (err)
        kop_status_setf(st, 0, NULL, "challenge watches: %s", kop_strerror(err));
    return err;
}

/*
 * controller.c - event handlers to keys, keys to reconciles.
 *
 * Handlers registered on the manager's shared informers turn events into
 * keys "namespace/name" of the primary resource: directly for the primary,
 * through the controller ownerReference for owned children, through the
 * user's map function for watched resources. Keys go into a work queue with
 * client-go semantics, so a key is never reconciled by two workers at once
 * and a burst of events for one object costs one reconcile.
 *
 * The worker loop reads like the contract in kop/controller.h: take a key,
 * reconcile it, then forget it (done), requeue it with backoff (requeue or
 * error) or hold it back (requeue-after), and count what happened under
 * controller-runtime's metric names.
 *
 * Priorities: an add during an informer's initial list (the informer has
 * not synced yet, which the handler asks on the informer's own thread, so
 * the answer is exact) and every resync go in at KOP_PRIORITY_LOW, other
 * watch events at KOP_PRIORITY_HIGH, so a change overtakes the start-up
 * backlog (controller-runtime's priority queue does the same with
 * isInInitialList).
 *
 * A resync thread enqueues every cached primary object again every
 * sync_period_ms. A key the work queue drops (its key cap, or no memory)
 * comes back from the queue itself, which remembers it (up to max_dropped)
 * and queues it again once there is room: that covers an object deleted
 * meanwhile, which no resync could enqueue, since the cache no longer holds
 * it. A dropped key the queue could not remember makes the resync thread
 * enqueue every cached object within RESYNC_POLL_MS and log the loss: late
 * for live objects, lost for deleted ones, and said so.
 *
 * A controller is one of the manager's runnables (kop_manager_add_runnable):
 * the manager starts its workers, stops and joins them, and frees it,
 * knowing it only through those calls; the controller asks the manager for
 * its client, caches and metrics registry, never the other way round.
 *
 * Invariant: one reconcile in flight per key. The work queue hands a key to
 * one worker and holds any re-add until that worker calls done, so two
 * workers never reconcile the same object at once and a reconciler needs
 * no lock of its own per object. Debug builds check it from this side too:
 * each worker files the key it holds in c->inflight and asserts that no
 * other worker holds it (in_flight_begin), and takes it out before done,
 * since after done another worker may rightly be handed the key.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/controller.h"
#include "kop/meta.h"
#include "kop/workqueue.h"
#include "kop_internal.h"
#include "manager_internal.h"
#include "map_internal.h"

#define MAX_WATCHES 16
#define RESYNC_POLL_MS         1000                /* how soon a forgotten drop is made good */
#define DEFAULT_SYNC_PERIOD_MS (10L * 3600 * 1000) /* controller-runtime's SyncPeriod */

struct watch_spec {
    kop_controller *ctl;
    kop_informer *inf; /* the watched informer: has it synced? */
    kop_map_fn fn; /* NULL: owned child, mapped through its controller reference */
    void *user;
    kop_update_predicate_fn pred; /* NULL: every update enqueues */
    kop_object_predicate_fn obj_pred; /* NULL: every add and delete enqueues */
    void *pred_user;
};

/* controller-runtime's reconcile families, labelled by controller; every
 * controller of a manager finds the same ones in its registry. */
struct reconcile_metrics {
    kop_metric *total;       /* controller_runtime_reconcile_total{controller,result} */
    kop_metric *errors;      /* controller_runtime_reconcile_errors_total{controller} */
    kop_metric *time;        /* controller_runtime_reconcile_time_seconds{controller} */
    kop_metric *workers;     /* controller_runtime_active_workers{controller} */
    kop_metric *max_workers; /* controller_runtime_max_concurrent_reconciles{controller} */
};

struct kop_controller {
    kop_manager *mgr;
    struct reconcile_metrics rm;
    kop_controller_opts opts;
    char *name, *ns;
    kop_informer *primary;
    kop_workqueue *queue;
    kop_logger *log;
    struct watch_spec watches[MAX_WATCHES];
    int nwatches;
    pthread_t workers[KOP_MAX_CONCURRENT];
    int nworkers;

    pthread_t resyncer;
    bool resyncing; /* the resync thread runs (to join) */
    pthread_mutex_t mu;
    pthread_cond_t cond; /* stopping */
    bool stopping;
    kop__map inflight; /* debug builds: the keys workers hold (under mu) */
};

/* ---- predicates --------------------------------------------------------- */

static json_int_t generation(const json_t *obj)
{
    return json_integer_value(json_object_get(json_object_get(obj, "metadata"), "generation"));
}

static const json_t *meta_field(const json_t *obj, const char *f)
{
    return json_object_get(json_object_get(obj, "metadata"), f);
}

/* same_field: a and b (either may be absent) hold the same value; json_equal calls two
 * absent fields different. */
static bool same_field(const json_t *a, const json_t *b)
{
    return a == b || (a && b && json_equal(a, b));
}

bool kop_predicate_generation_changed(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)user;
    if (generation(old_obj) != generation(new_obj))
        return true;
    /* A deletion mark does not bump the generation, but must be acted on. */
    return !same_field(meta_field(old_obj, "deletionTimestamp"),
                       meta_field(new_obj, "deletionTimestamp"));
}

bool kop_predicate_labels_changed(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)user;
    const json_t *a = meta_field(old_obj, "labels"), *b = meta_field(new_obj, "labels");
    if (!a || !b)
        return a != b && json_object_size(a ? a : b) > 0;
    return !json_equal(a, b);
}

/* predicate_reads: what an update predicate reads of the old object (libkop's own read
 * metadata only; no predicate reads nothing). */
static kop_old_use predicate_reads(kop_update_predicate_fn p)
{
    if (!p)
        return KOP_OLD_UNUSED;
    if (p == kop_predicate_generation_changed || p == kop_predicate_labels_changed)
        return KOP_OLD_METADATA;
    return KOP_OLD_FULL;
}

/* ---- keys --------------------------------------------------------------- */

void kop_controller_enqueue_priority(kop_controller *c, const char *ns, const char *name,
                                     int priority)
{
    char key[512];
    if (kop_meta_key(key, sizeof key, ns, name) == KOP_OK)
        kop_workqueue_add_with(c->queue, key, &(kop_workqueue_add_opts){.priority = priority});
}

void kop_controller_enqueue(kop_controller *c, const char *ns, const char *name)
{
    kop_controller_enqueue_priority(c, ns, name, KOP_PRIORITY_NORMAL);
}

/* An event's controller and the priority its keys go in at (emit_key's context). */
struct emit_ctx {
    kop_controller *ctl;
    int priority;
};

static void emit_key(const char *ns, const char *name, void *ctx)
{
    const struct emit_ctx *e = ctx;
    kop_controller_enqueue_priority(e->ctl, ns, name, e->priority);
}

static void enqueue_object(kop_controller *c, const json_t *obj, int priority)
{
    const char *ns = json_string_value(meta_field(obj, "namespace"));
    const char *name = json_string_value(meta_field(obj, "name"));
    kop_controller_enqueue_priority(c, ns, name, priority);
}

/* add_priority: an add of inf's initial list is backlog (LOW); any later add is news (HIGH). */
static int add_priority(kop_informer *inf)
{
    return kop_informer_has_synced(inf) ? KOP_PRIORITY_HIGH : KOP_PRIORITY_LOW;
}

/* group_of returns the group part of an apiVersion ("" for "v1"). */
static size_t group_len(const char *api_version)
{
    const char *slash = strchr(api_version, '/');
    return slash ? (size_t)(slash - api_version) : 0;
}

/* enqueue_owner enqueues the primary object that controls child, if any, at priority. */
static void enqueue_owner(kop_controller *c, const json_t *child, int priority)
{
    const kop_resource *r = &c->opts.for_resource;
    json_t *ref;
    size_t i;
    json_array_foreach(meta_field(child, "ownerReferences"), i, ref)
    {
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *api = json_string_value(json_object_get(ref, "apiVersion"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        if (!json_is_true(json_object_get(ref, "controller")) || !kind || !api || !name)
            continue;
        size_t glen = group_len(api);
        if (strcmp(kind, r->kind) != 0 || glen != strlen(r->group) ||
            strncmp(api, r->group, glen) != 0)
            continue;
        const char *ns = r->namespaced ? json_string_value(meta_field(child, "namespace")) : "";
        kop_controller_enqueue_priority(c, ns, name, priority);
        return;
    }
}

/* ---- handlers ----------------------------------------------------------- */

static void primary_add(const json_t *obj, void *user)
{
    kop_controller *c = user;
    enqueue_object(c, obj, add_priority(c->primary));
}

static void primary_delete(const json_t *obj, void *user)
{
    enqueue_object(user, obj, KOP_PRIORITY_HIGH);
}

static void primary_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    kop_controller *c = user;
    if (c->opts.update_predicate &&
        !c->opts.update_predicate(old_obj, new_obj, c->opts.predicate_user))
        return;
    enqueue_object(c, new_obj, KOP_PRIORITY_HIGH);
}

/* watched enqueues what a watched object maps to, at priority. */
static void watched(struct watch_spec *w, const json_t *obj, int priority)
{
    if (w->fn) {
        struct emit_ctx e = {w->ctl, priority};
        w->fn(obj, emit_key, &e, w->user);
    } else {
        enqueue_owner(w->ctl, obj, priority);
    }
}

static void watched_add(const json_t *obj, void *user)
{
    struct watch_spec *w = user;
    if (w->obj_pred && !w->obj_pred(obj, w->pred_user))
        return;
    watched(w, obj, add_priority(w->inf));
}

static void watched_delete(const json_t *obj, void *user)
{
    struct watch_spec *w = user;
    if (w->obj_pred && !w->obj_pred(obj, w->pred_user))
        return;
    watched(w, obj, KOP_PRIORITY_HIGH);
}

static void watched_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    struct watch_spec *w = user;
    if (w->pred && !w->pred(old_obj, new_obj, w->pred_user))
        return;
    /* A child whose owner changed must tell both owners. */
    watched(w, old_obj, KOP_PRIORITY_HIGH);
    if (!same_field(meta_field(old_obj, "ownerReferences"),
                    meta_field(new_obj, "ownerReferences")) ||
        w->fn)
        watched(w, new_obj, KOP_PRIORITY_HIGH);
}

/* ---- construction ------------------------------------------------------- */

/* register_metrics finds (or, for the first controller, registers) the
 * reconcile families in the manager's registry. */
static kop_err register_metrics(kop_metrics *m, struct reconcile_metrics *rm)
{
    static const char *const ctl[] = {"controller", NULL};
    static const char *const ctl_result[] = {"controller", "result", NULL};
    kop_err err = kop_metrics_counter(m, "controller_runtime_reconcile_total",
                                      "Total number of reconciliations per controller", ctl_result,
                                      &rm->total);
    if (!err)
        err = kop_metrics_counter(m, "controller_runtime_reconcile_errors_total",
                                  "Total number of reconciliation errors per controller", ctl,
                                  &rm->errors);
    if (!err)
        err = kop_metrics_histogram(
            m,
            &(kop_histogram_opts){
                .name = "controller_runtime_reconcile_time_seconds",
                .help = "Length of time per reconciliation per controller",
                .label_names = ctl},
            &rm->time);
    if (!err)
        err =
            kop_metrics_gauge(m, "controller_runtime_active_workers",
                              "Number of currently used workers per controller", ctl, &rm->workers);
    if (!err)
        err = kop_metrics_gauge(m, "controller_runtime_max_concurrent_reconciles",
                                "Maximum number of concurrent reconciles per controller", ctl,
                                &rm->max_workers);
    return err;
}

static kop_err controller_start(void *user);
static void controller_stop(void *user);
static bool controller_join(void *user, const struct timespec *deadline);
static void controller_free(void *user);

kop_err kop_controller_new(kop_manager *m, const kop_controller_opts *opts, kop_controller **out)
{
    kop_err err = KOP_OK;
    *out = NULL;
    if (!opts || !opts->name || !opts->reconcile || !opts->for_resource.resource ||
        !opts->for_resource.kind)
        return KOP_EINVAL;
    kop_controller *c = calloc(1, sizeof *c);
    if (!c)
        return KOP_ENOMEM;
    c->mgr = m;
    c->opts = *opts;
    pthread_mutex_init(&c->mu, NULL);
    kop__map_init(&c->inflight);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (c->opts.sync_period_ms == 0)
        c->opts.sync_period_ms = DEFAULT_SYNC_PERIOD_MS;
    c->name = strdup(opts->name);
    c->ns = opts->namespace && opts->namespace[0] ? strdup(opts->namespace) : NULL;
    c->opts.name = c->name;
    c->opts.namespace = c->ns;
    if (c->opts.max_concurrent <= 0)
        c->opts.max_concurrent = 1;
    if (c->opts.max_concurrent > KOP_MAX_CONCURRENT)
        c->opts.max_concurrent = KOP_MAX_CONCURRENT;
    if (!c->name || (opts->namespace && opts->namespace[0] && !c->ns)) {
        err = KOP_ENOMEM;
        goto out;
    }
    kop_workqueue_opts qo = {
        .name = c->name, .max_keys = opts->max_queued_keys, .metrics = kop_manager_metrics(m)};
    err = kop_workqueue_new(&qo, &c->queue);
    if (!err)
        err = kop_logger_new(NULL, &KOP_LOG_STR("controller", c->name), 1, &c->log);
    if (!err)
        err = kop_manager_informer(m, &c->opts.for_resource, c->ns, NULL, &c->primary);
    if (err)
        goto out;
    if (!err)
        err = register_metrics(kop_manager_metrics(m), &c->rm);
    if (err)
        goto out;
    kop_informer_handler h = {primary_add, primary_update, primary_delete, c,
                              predicate_reads(c->opts.update_predicate)};
    err = kop_informer_add_handler(c->primary, &h);
    if (!err)
        err = kop_manager_add_runnable(m, &(kop_runnable){.name = c->name,
                                                          .start = controller_start,
                                                          .stop = controller_stop,
                                                          .join = controller_join,
                                                          .free = controller_free,
                                                          .user = c});
    if (err)
        goto out;
    const char *labels[] = {c->name, NULL};
    kop_metric_set(c->rm.max_workers, labels, c->opts.max_concurrent);
    kop_metric_set(c->rm.workers, labels, 0);
    kop_metric_touch(c->rm.errors, labels);
    *out = c;
    c = NULL;
out:
    controller_free(c);
    return err;
}

/* old_use: what a watch reads of an update's replaced object: the more of its map's and its
 * predicate's needs. */
static kop_old_use old_use(bool map_reads_metadata, kop_update_predicate_fn pred)
{
    kop_old_use map = map_reads_metadata ? KOP_OLD_METADATA : KOP_OLD_FULL;
    kop_old_use p = predicate_reads(pred);
    return map == KOP_OLD_FULL || p == KOP_OLD_FULL ? KOP_OLD_FULL : KOP_OLD_METADATA;
}

/* add_watch registers a watch; fn NULL: owned children, mapped by their owner reference
 * (metadata only). */
static kop_err add_watch(kop_controller *c, const kop_resource *r, const char *labels,
                         kop_map_fn fn, void *user, bool map_reads_metadata,
                         kop_update_predicate_fn pred, kop_object_predicate_fn obj_pred,
                         void *pred_user)
{
    if (c->nwatches >= MAX_WATCHES)
        return KOP_ETOOBIG;
    kop_informer *inf = NULL;
    /* Children labelled with their parent may live in any namespace. */
    kop_err err = kop_manager_informer(c->mgr, r, fn ? NULL : c->ns, labels, &inf);
    if (err)
        return err;
    struct watch_spec *w = &c->watches[c->nwatches];
    *w = (struct watch_spec){.ctl = c,
                             .inf = inf,
                             .fn = fn,
                             .user = user,
                             .pred = pred,
                             .obj_pred = obj_pred,
                             .pred_user = pred_user};
    kop_informer_handler h = {watched_add, watched_update, watched_delete, w,
                              old_use(!fn || map_reads_metadata, pred)};
    err = kop_informer_add_handler(inf, &h);
    if (!err)
        c->nwatches++;
    return err;
}

kop_err kop_controller_owns(kop_controller *c, const kop_resource *child,
                            kop_informer **cache_out)
{
    if (!c || !child)
        return KOP_EINVAL;
    kop_err err = add_watch(c, child, NULL, NULL, NULL, true, NULL, NULL, NULL);
    /* add_watch appended the child's watch last: its informer is the cache. */
    if (!err && cache_out)
        *cache_out = c->watches[c->nwatches - 1].inf;
    return err;
}

kop_err kop_controller_watch(kop_controller *c, const kop_controller_watch_opts *opts)
{
    if (!c || !opts || !opts->resource || !opts->fn)
        return KOP_EINVAL;
    return add_watch(c, opts->resource, opts->label_selector, opts->fn, opts->user,
                     opts->map_reads_metadata, opts->update_predicate, opts->object_predicate,
                     opts->predicate_user);
}

kop_err kop_controller_watches(kop_controller *c, const kop_resource *r, const char *label_selector,
                               kop_map_fn fn, void *user)
{
    kop_controller_watch_opts o = {
        .resource = r, .label_selector = label_selector, .fn = fn, .user = user};
    return kop_controller_watch(c, &o);
}

kop_informer *kop_controller_owned_cache(kop_controller *c, const kop_resource *child)
{
    if (!c || !child)
        return NULL;
    /* Owned children are the watches without a map function (add_watch). */
    for (int i = 0; i < c->nwatches; i++) {
        const kop_resource *r = kop_informer_resource(c->watches[i].inf);
        if (c->watches[i].fn || !r)
            continue;
        /* The core group is "" or NULL, as a caller spells it. */
        if (kop_streq(r->group ? r->group : "", child->group ? child->group : "") &&
            kop_streq(r->version, child->version) && kop_streq(r->resource, child->resource))
            return c->watches[i].inf;
    }
    return NULL;
}

kop_informer *kop_controller_cache(kop_controller *c)
{
    return c->primary;
}

const char *kop_controller_name(const kop_controller *c)
{
    return c->name;
}

/* ---- workers ------------------------------------------------------------ */

static double now_s(void)
{
    return (double)kop_mono_ns() / 1e9;
}

static const char *result_label(kop_result_kind k)
{
    switch (k) {
    case KOP_RESULT_DONE:
        return "success";
    case KOP_RESULT_REQUEUE:
        return "requeue";
    case KOP_RESULT_REQUEUE_AFTER:
        return "requeue_after";
    case KOP_RESULT_ERROR:
        return "error";
    }
    return "error";
}

/*
 * requeue_priority: the priority of a requeue, the reconcile's choice or
 * else the priority the key came with, except that a requeue-after is a
 * deadline and goes at NORMAL (an expiry should not inherit a start-up
 * backlog's LOW, nor keep a one-off HIGH forever).
 */
static int requeue_priority(const kop_result *res, int handed_out)
{
    if (res->has_priority)
        return res->priority;
    return res->kind == KOP_RESULT_REQUEUE_AFTER ? KOP_PRIORITY_NORMAL : handed_out;
}

/* reconcile_key runs the user's reconcile for key, handed out at priority, and files the
 * outcome. */
static void reconcile_key(kop_controller *c, const char *key, int priority)
{
    char ns[256], name[256];
    if (kop_meta_split_key(key, ns, sizeof ns, name, sizeof name) != KOP_OK)
        return; /* not a key kop_controller_enqueue made */
    kop_logger *lg = NULL;
    if (kop_logger_with(c->log, &lg, KOP_LOG_STR("namespace", ns), KOP_LOG_STR("name", name)))
        lg = NULL; /* out of memory: log through the controller's logger */
    const kop_reconcile req = {
        .namespace = ns,
        .name = name,
        .client = kop_manager_client(c->mgr),
        .cache = c->primary,
        .log = lg ? lg : c->log,
        .controller = c,
        .manager = c->mgr,
        .priority = priority,
    };
    const struct reconcile_metrics *rm = &c->rm;
    const char *ctl[] = {c->name, NULL};

    kop_metric_add(rm->workers, ctl, 1);
    double t0 = now_s();
    kop_result res = c->opts.reconcile(&req, c->opts.user);
    kop_metric_observe(rm->time, ctl, now_s() - t0);
    kop_metric_add(rm->workers, ctl, -1);
    const char *outcome[] = {c->name, result_label(res.kind), NULL};
    kop_metric_inc(rm->total, outcome);
    int prio = requeue_priority(&res, priority);

    /* This pass's requeue (or none) replaces the one the key's previous pass asked for:
     * held back, that one would come as one more pass after this one, with nothing new
     * to see (controller-runtime keeps both). Held-back adds that no pass made stay. */
    switch (res.kind) {
    case KOP_RESULT_DONE:
        kop_workqueue_forget(c->queue, key);
        kop_workqueue_drop_replaceable(c->queue, key);
        break;
    case KOP_RESULT_REQUEUE_AFTER:
        kop_workqueue_forget(c->queue, key);
        /* after_ms <= 0 adds it now, as kop_workqueue_add_after does. */
        kop_workqueue_add_with(c->queue, key,
                               &(kop_workqueue_add_opts){
                                   .priority = prio, .after_ms = res.after_ms, .replace = true});
        break;
    case KOP_RESULT_ERROR:
        kop_metric_inc(rm->errors, ctl);
        kop_logger_log(req.log, KOP_LOG_ERROR, "reconcile failed; retrying with backoff",
                       KOP_LOG_INT("retries", kop_workqueue_num_requeues(c->queue, key)));
        /* fall through */
    case KOP_RESULT_REQUEUE:
        kop_workqueue_add_with(
            c->queue, key,
            &(kop_workqueue_add_opts){.priority = prio, .rate_limited = true, .replace = true});
        break;
    }
    kop_logger_free(lg);
}

/*
 * in_flight_begin files key as held by this worker, asserting that no other
 * worker holds it (debug builds; a no-op otherwise). Out of memory, the key
 * goes unchecked this once: never a false alarm.
 */
static void in_flight_begin(kop_controller *c, const char *key)
{
#ifdef KOP_DEBUG
    pthread_mutex_lock(&c->mu);
    KOP_ASSERT(kop__map_get(&c->inflight, key) == NULL); /* one in flight per key */
    kop_err err = kop__map_put(&c->inflight, key, c, NULL);
    (void)err; /* out of memory: this key is not checked this time */
    pthread_mutex_unlock(&c->mu);
#else
    (void)c;
    (void)key;
#endif
}

/* in_flight_end forgets that this worker holds key; called before done. */
static void in_flight_end(kop_controller *c, const char *key)
{
#ifdef KOP_DEBUG
    pthread_mutex_lock(&c->mu);
    kop__map_remove(&c->inflight, key);
    pthread_mutex_unlock(&c->mu);
#else
    (void)c;
    (void)key;
#endif
}

static void *worker(void *arg)
{
    kop_controller *c = arg;
    char *key = NULL;
    int priority = 0;
    kop_err err;
    while ((err = kop_workqueue_get_with_priority(c->queue, &key, &priority)) != KOP_ESHUTDOWN) {
        if (err) { /* out of memory for the key's copy: the queue kept it; try again soon */
            struct timespec pause = {0, 10 * 1000000};
            nanosleep(&pause, NULL);
            continue;
        }
        in_flight_begin(c, key);
        /* Once shutting down or no longer leading, queued keys are left alone. */
        if (kop__manager_may_reconcile(c->mgr))
            reconcile_key(c, key, priority);
        in_flight_end(c, key); /* first: once done, another worker may take the key */
        kop_workqueue_done(c->queue, key);
        free(key);
    }
    return NULL;
}

/* ---- resync ------------------------------------------------------------------ */

/* resync_all enqueues every cached primary object, behind any change (LOW). */
static void resync_all(kop_controller *c)
{
    json_t *all = NULL, *obj;
    size_t i;
    if (kop_informer_list(c->primary, c->ns, &all) != KOP_OK)
        return; /* no memory now: the next poll tries again */
    json_array_foreach(all, i, obj) enqueue_object(c, obj, KOP_PRIORITY_LOW);
    json_decref(all);
}

/* resync_wait sleeps ms unless stopped first; false when stopping. */
static bool resync_wait(kop_controller *c, long ms)
{
    struct timespec until = kop__time_after(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&c->mu);
    while (!c->stopping && pthread_cond_timedwait(&c->cond, &c->mu, &until) == 0)
        ;
    bool go_on = !c->stopping;
    pthread_mutex_unlock(&c->mu);
    return go_on;
}

static void *resyncer(void *arg)
{
    kop_controller *c = arg;
    long period = c->opts.sync_period_ms;
    int64_t next = period > 0 ? kop_mono_ms() + period : INT64_MAX;
    while (resync_wait(c, RESYNC_POLL_MS)) {
        /* A dropped key the queue remembered comes back on its own; a
         * resync would only fill the remembered set with live objects' keys
         * and crowd out a deletion's. So only the forgotten ones call for it. */
        (void)kop_workqueue_take_dropped(c->queue);
        size_t forgotten = kop_workqueue_take_forgotten(c->queue);
        bool due = kop_mono_ms() >= next;
        if (!forgotten && !due)
            continue;
        if (forgotten)
            kop_logger_log(c->log, KOP_LOG_ERROR,
                           "the work queue dropped keys it could not remember; enqueuing every "
                           "object again (deleted objects among those keys are lost)",
                           KOP_LOG_INT("keys", (long long)forgotten));
        resync_all(c);
        if (due)
            next = kop_mono_ms() + period;
    }
    return NULL;
}

/* ---- the runnable: the manager drives these ----------------------------- */

static kop_err controller_start(void *user)
{
    kop_controller *c = user;
    for (int i = 0; i < c->opts.max_concurrent; i++) {
        if (pthread_create(&c->workers[i], NULL, worker, c) != 0)
            return KOP_ENOMEM;
        c->nworkers++;
    }
    if (pthread_create(&c->resyncer, NULL, resyncer, c) != 0)
        return KOP_ENOMEM;
    c->resyncing = true;
    kop_logger_log(c->log, KOP_LOG_INFO, "starting workers",
                   KOP_LOG_INT("workers", c->opts.max_concurrent));
    return KOP_OK;
}

static void controller_stop(void *user)
{
    kop_controller *c = user;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    kop_workqueue_shutdown(c->queue);
}

static bool controller_join(void *user, const struct timespec *deadline)
{
    kop_controller *c = user;
    int joined = 0;
    if (c->resyncing) {
        if ((deadline ? pthread_timedjoin_np(c->resyncer, NULL, deadline)
                      : pthread_join(c->resyncer, NULL)) != 0)
            return false;
        c->resyncing = false;
    }
    for (int i = 0; i < c->nworkers; i++) {
        if (deadline ? pthread_timedjoin_np(c->workers[i], NULL, deadline) != 0
                     : pthread_join(c->workers[i], NULL) != 0)
            break;
        joined++;
    }
    /* Keep the workers not joined, in order, for a later try. */
    memmove(c->workers, c->workers + joined, (size_t)(c->nworkers - joined) * sizeof(pthread_t));
    c->nworkers -= joined;
    return c->nworkers == 0;
}

static void controller_free(void *user)
{
    kop_controller *c = user;
    if (!c)
        return;
    kop_workqueue_free(c->queue);
    kop_logger_free(c->log);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
    kop__map_fini(&c->inflight, NULL);
    free(c->name);
    free(c->ns);
    free(c);
}

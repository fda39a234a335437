/*
 * kop/controller.h - controllers: watch a resource, reconcile each object.
 *
 * A controller is built on a manager (kop/manager.h): it reconciles one
 * primary resource ("for"), is told about the objects it creates through
 * their controller owner reference ("owns"), and about anything else
 * through a map function ("watches"). Events become keys "namespace/name"
 * in a rate-limited work queue; max_concurrent workers call the reconcile
 * function, never two at once for the same key.
 *
 * A reconcile function reads the world (from the cache or the apiserver),
 * moves it one step toward the object's spec, writes what it saw into
 * status, and says what should happen next:
 *
 *   return KOP_DONE;                  nothing more until something changes
 *   return KOP_REQUEUE;               again soon, with per-key backoff
 *   return KOP_REQUEUE_AFTER(30000);  again in 30 s (e.g. an expiry)
 *   return KOP_RETRY;                 it failed: again with backoff, counted as an error
 *
 * It must be idempotent: it may run again at any time for the same key.
 * Each pass's answer replaces the previous pass's: a requeue-after (or a
 * retry's backoff) still held back when a later pass of the key answers
 * is forgotten, so the latest pass alone says when the next one comes
 * (controller-runtime lets the earlier time fire as one more pass).
 *
 * Priorities (kop/workqueue.h): the controller's queue hands out keys by
 * priority, higher first. Objects of an informer's initial list (the
 * primary's and every watched resource's) and of resyncs are enqueued at
 * KOP_PRIORITY_LOW, watch events (adds after the initial list, updates,
 * deletes) at KOP_PRIORITY_HIGH, kop_controller_enqueue at
 * KOP_PRIORITY_NORMAL. So at start, or after a resync, a change overtakes
 * the backlog of objects that did not change. A reconcile may choose the
 * priority of its requeue (KOP_REQUEUE_PRIORITY, KOP_REQUEUE_AFTER_PRIORITY,
 * kop_result_priority); without one, a rate-limited requeue or a retry
 * keeps the priority the key was handed out at (req->priority), and a
 * requeue-after (a deadline, not a backlog) is KOP_PRIORITY_NORMAL. A key
 * held back by a requeue-after also lends its priority to an event that
 * wakes it earlier: a pass that waits for its children at a high priority
 * runs at that priority when their event comes.
 */
#ifndef KOP_CONTROLLER_H
#define KOP_CONTROLLER_H

#include <stdbool.h>

#include <jansson.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/err.h"
#include "kop/informer.h"
#include "kop/log.h"
#include "kop/manager.h"
#include "kop/workqueue.h"

KOP_BEGIN_DECLS

typedef struct kop_controller kop_controller;

typedef enum kop_result_kind {
    KOP_RESULT_DONE = 0,
    KOP_RESULT_REQUEUE,
    KOP_RESULT_REQUEUE_AFTER,
    KOP_RESULT_ERROR,
} kop_result_kind;

/* kop_result: what a reconcile asks for next. */
typedef struct kop_result {
    kop_result_kind kind;
    long after_ms;     /* KOP_RESULT_REQUEUE_AFTER only */
    bool has_priority; /* priority is set; otherwise the defaults above */
    int priority;      /* of the requeue (kop/workqueue.h: higher first) */
} kop_result;

#define KOP_DONE               ((kop_result){KOP_RESULT_DONE, 0, false, 0})
#define KOP_REQUEUE            ((kop_result){KOP_RESULT_REQUEUE, 0, false, 0})
#define KOP_REQUEUE_AFTER(ms)  ((kop_result){KOP_RESULT_REQUEUE_AFTER, (ms), false, 0})
#define KOP_RETRY              ((kop_result){KOP_RESULT_ERROR, 0, false, 0})
#define KOP_REQUEUE_PRIORITY(p) ((kop_result){KOP_RESULT_REQUEUE, 0, true, (p)})
#define KOP_REQUEUE_AFTER_PRIORITY(ms, p) ((kop_result){KOP_RESULT_REQUEUE_AFTER, (ms), true, (p)})

/* kop_result_priority returns r with its requeue at priority (no effect on KOP_DONE). */
static inline kop_result kop_result_priority(kop_result r, int priority)
{
    r.has_priority = true;
    r.priority = priority;
    return r;
}

/*
 * kop_reconcile: one request, with what the reconcile needs; all borrowed
 * for the duration of the call.
 */
typedef struct kop_reconcile {
    const char *namespace;  /* "" for cluster-scoped objects */
    const char *name;
    kop_client *client;     /* the manager's client */
    kop_informer *cache;    /* the primary resource's informer */
    const kop_logger *log;  /* carries controller, namespace and name */
    kop_controller *controller;
    kop_manager *manager;
    int priority;           /* the priority the key was handed out at */
} kop_reconcile;

typedef kop_result (*kop_reconcile_fn)(const kop_reconcile *req, void *user);

/*
 * kop_update_predicate_fn decides whether an update of the primary object
 * (kop_controller_opts) or of a watched one (kop_controller_watch_opts) is
 * worth a reconcile. Adds and deletes always are.
 */
typedef bool (*kop_update_predicate_fn)(const json_t *old_obj, const json_t *new_obj, void *user);

/*
 * kop_object_predicate_fn decides whether an add or a delete of a watched
 * object (kop_controller_watch_opts.object_predicate) is worth a reconcile:
 * controller-runtime's CreateFunc and DeleteFunc. obj is the object added,
 * or the last state the cache held of the one deleted.
 */
typedef bool (*kop_object_predicate_fn)(const json_t *obj, void *user);

/*
 * kop_predicate_generation_changed: only spec changes (metadata.generation)
 * and deletion marks (deletionTimestamp) pass; status-only writes, which do
 * not bump the generation, do not wake the controller again.
 */
KOP_API bool kop_predicate_generation_changed(const json_t *old_obj, const json_t *new_obj,
                                              void *user);

/* kop_predicate_labels_changed: only changes of metadata.labels pass. */
KOP_API bool kop_predicate_labels_changed(const json_t *old_obj, const json_t *new_obj, void *user);

/* KOP_MAX_CONCURRENT: the most workers a controller runs (max_concurrent above it is
 * clamped to it). */
#define KOP_MAX_CONCURRENT 64

typedef struct kop_controller_opts {
    const char *name;            /* required: the "controller" metrics and log label */
    kop_resource for_resource;   /* the primary resource; strings must outlive the manager */
    const char *namespace;       /* watch scope; NULL or "": all namespaces */
    int max_concurrent;          /* workers; default 1, at most KOP_MAX_CONCURRENT */
    kop_reconcile_fn reconcile;  /* required */
    void *user;
    kop_update_predicate_fn update_predicate; /* NULL: every update */
    void *predicate_user;
    /*
     * Every sync_period_ms every cached primary object is enqueued again
     * (controller-runtime's SyncPeriod): 0 is the default, 10 hours; < 0
     * never. A key the work queue had to drop (its key cap, or no memory)
     * is queued again by the queue once there is room (deleted objects'
     * keys too); one it could not even remember makes the controller
     * enqueue every cached object again within a second and log the loss.
     */
    long sync_period_ms;
    /*
     * The work queue's key cap (kop_workqueue_opts.max_keys): 0 is its
     * default, 1,000,000. A key dropped at the cap is queued again once
     * there is room, also when its object was deleted meanwhile.
     */
    size_t max_queued_keys;
} kop_controller_opts;

/*
 * kop_controller_new adds a controller to m (before kop_manager_run). The
 * controller is owned by the manager; *out is borrowed.
 */
KOP_API KOP_NODISCARD kop_err kop_controller_new(kop_manager *m, const kop_controller_opts *opts,
                                                 kop_controller **out);

/*
 * kop_controller_owns watches child objects: a change to one enqueues the
 * primary object named by its controller ownerReference, if that reference
 * is of the primary kind. child is copied, as for_resource is (a struct
 * built in a setup function's scope will do); its strings must outlive the
 * manager. *cache_out, when cache_out is not NULL, receives the children's
 * shared informer (borrowed, owned by the manager): the cache a reconcile
 * reads them from, e.g. kop_child_req.cache (kop/ctrlutil.h).
 */
KOP_API KOP_NODISCARD kop_err kop_controller_owns(kop_controller *c, const kop_resource *child,
                                                  kop_informer **cache_out);

/*
 * kop_controller_owned_cache returns the informer kop_controller_owns made
 * for child (same group, version and plural) on c, borrowed, owned by the
 * manager; NULL when c does not own child (or either is NULL). What
 * kop_reconcile_child reads a child from.
 */
KOP_API kop_informer *kop_controller_owned_cache(kop_controller *c, const kop_resource *child);

/*
 * kop_map_fn maps a watched object to the keys to reconcile: it calls
 * emit(namespace, name, emit_ctx) once per key, during its own call (emit_ctx
 * carries the event's priority and is valid only until fn returns).
 */
typedef void (*kop_emit_fn)(const char *ns, const char *name, void *emit_ctx);
typedef void (*kop_map_fn)(const json_t *obj, kop_emit_fn emit, void *emit_ctx, void *user);

/*
 * kop_controller_watch_opts: what kop_controller_watch watches and how it maps an
 * object to the keys to reconcile.
 */
typedef struct kop_controller_watch_opts {
    const kop_resource *resource; /* required; its strings must outlive the manager */
    const char *label_selector;   /* NULL: all */
    kop_map_fn fn;                /* required */
    void *user;
    /*
     * fn reads no more of an object than its apiVersion, kind and
     * metadata (labels, owner references, names): an update's replaced
     * object is then parsed only that far (kop_old_use).
     */
    bool map_reads_metadata;
    /*
     * An update enqueues only when update_predicate(old, new, predicate_user)
     * says so (NULL: every update); adds and deletes always do. What
     * controller-runtime's Watches(..., WithPredicates(...)) does: a parent
     * that reads only a watched object's spec takes
     * kop_predicate_generation_changed, and the watched object's status
     * writes, however many parents map to it, then wake none of them.
     */
    kop_update_predicate_fn update_predicate;
    /*
     * An add or a delete enqueues only when object_predicate(obj,
     * predicate_user) says so (NULL: every one): for a parent that reads
     * of its children only what few of them carry (ctf-operator: the pods
     * with a container that cannot start), whose other children's comings
     * and goings show in what it does read.
     */
    kop_object_predicate_fn object_predicate;
    void *predicate_user;
} kop_controller_watch_opts;

/*
 * kop_controller_watch watches the objects of opts->resource that match
 * opts->label_selector and enqueues what opts->fn maps each object to; on
 * an update, what it maps the replaced object to as well (a child whose
 * labels changed tells both parents). For children in other namespaces
 * than their parent, where owner references cannot point, label the
 * children with their parent and map the labels back here.
 */
KOP_API KOP_NODISCARD kop_err kop_controller_watch(kop_controller *c,
                                                   const kop_controller_watch_opts *opts);

/*
 * kop_controller_watches is kop_controller_watch of r, label_selector (NULL:
 * all), fn and user, with a map function that may read the whole object.
 */
KOP_API KOP_NODISCARD kop_err kop_controller_watches(kop_controller *c, const kop_resource *r,
                                                     const char *label_selector, kop_map_fn fn,
                                                     void *user);

/* kop_controller_cache returns the informer of the primary resource (borrowed). */
KOP_API kop_informer *kop_controller_cache(kop_controller *c);

/* kop_controller_enqueue adds ns/name to the controller's queue at KOP_PRIORITY_NORMAL
 * (any thread). */
KOP_API void kop_controller_enqueue(kop_controller *c, const char *ns, const char *name);

/*
 * kop_controller_enqueue_priority adds ns/name at priority (any thread); a
 * key queued already is raised to it if it is higher, never lowered.
 */
KOP_API void kop_controller_enqueue_priority(kop_controller *c, const char *ns, const char *name,
                                             int priority);

/* kop_controller_name returns the controller's name (borrowed). */
KOP_API const char *kop_controller_name(const kop_controller *c);

KOP_END_DECLS

#endif /* KOP_CONTROLLER_H */

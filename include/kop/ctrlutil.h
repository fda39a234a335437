/*
 * kop/ctrlutil.h - the writes every operator makes, in one call each:
 * a finalizer kept on the server, and an owned child created or updated
 * only when it differs from what the operator wants. What
 * controller-runtime's controllerutil is to a Go operator.
 *
 *   kop_op_result did;
 *   err = kop_finalizer_ensure(req->client, &(kop_finalizer_req){&SITES, site,
 *                              "demo.example.com/cleanup"}, NULL, &st);
 *   err = kop_create_or_update(req->client, &(kop_child_req){.resource = &CONFIGMAPS,
 *             .owner = site, .object = cm, .cache = app->configmaps,
 *             .field_manager = "website-operator"}, &did, &st);
 *
 * Both read first (the object the caller holds, the child's cache or the
 * server) and write only when the server's object is not yet as wanted,
 * so a reconcile that runs again and again on a settled object makes no
 * write at all: no resourceVersion changes, no watch event, no loop.
 *
 * Children are written with server-side apply (force, one field manager):
 * the apply body is exactly what the operator wants, so a field it stops
 * setting is removed on the next write, fields others set (the apiserver's
 * defaults, another controller's annotations) are kept, and list entries
 * keyed by name (a Deployment's containers, ports, env) merge by key
 * rather than replacing the server's defaulted entries. A merge patch
 * would replace such lists whole and never remove a field; a read-modify-
 * update would need the whole object and a retry on every conflict.
 */
#ifndef KOP_CTRLUTIL_H
#define KOP_CTRLUTIL_H

#include <stdbool.h>

#include <jansson.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/controller.h"
#include "kop/err.h"
#include "kop/informer.h"

KOP_BEGIN_DECLS

/* kop_op_result: what a helper did on the server (controllerutil's OperationResult). */
typedef enum kop_op_result {
    KOP_OP_UNCHANGED = 0, /* nothing written: the server's object was as wanted */
    KOP_OP_CREATED,       /* the object did not exist and was created */
    KOP_OP_UPDATED,       /* the object existed and was written */
} kop_op_result;

/* kop_op_result_name returns "unchanged", "created" or "updated" (static). */
KOP_API const char *kop_op_result_name(kop_op_result r);

/* ---- finalizers on the server ------------------------------------------- */

/*
 * kop_finalizer_req names an object and one of its finalizers; all
 * borrowed for the call. object is the object as read (from a cache or
 * the server): its namespace and name say which object, its
 * metadata.finalizers what the server held when it was read.
 */
typedef struct kop_finalizer_req {
    const kop_resource *resource; /* required */
    const json_t *object;         /* required: apiVersion, kind and metadata as read */
    const char *finalizer;        /* required: "example.com/cleanup" */
} kop_finalizer_req;

/*
 * kop_finalizer_ensure makes req->finalizer present in the server's
 * metadata.finalizers. When req->object holds it already, nothing is
 * written (*result KOP_OP_UNCHANGED); otherwise a JSON patch tests the
 * list as read and adds the finalizer (KOP_OP_UPDATED). If the list
 * changed meanwhile the apiserver refuses the patch; the object is read
 * again and the patch retried (a few times), so another writer's
 * finalizer is never lost. An object being deleted cannot take a new
 * finalizer: KOP_EINVALID, explained in st, and nothing written. result
 * may be NULL.
 */
KOP_API KOP_NODISCARD kop_err kop_finalizer_ensure(kop_client *c, const kop_finalizer_req *req,
                                                   kop_op_result *result, kop_status *st);

/*
 * kop_finalizer_remove removes req->finalizer from the server's
 * metadata.finalizers in the same way: no write when req->object lacks
 * it, a refused patch read again and retried. An object that is gone
 * (KOP_ENOTFOUND) is success with KOP_OP_UNCHANGED: there is nothing left
 * to release. result may be NULL.
 */
KOP_API KOP_NODISCARD kop_err kop_finalizer_remove(kop_client *c, const kop_finalizer_req *req,
                                                   kop_op_result *result, kop_status *st);

/* ---- owned children ----------------------------------------------------- */

/*
 * kop_child_req: the child an operator wants, and who owns it. Everything
 * is borrowed for the call; object is not changed (the helper writes a
 * copy).
 *
 * object holds only the fields the operator sets: metadata.name, labels,
 * annotations, and the spec or data it manages. apiVersion and kind are
 * taken from resource when missing, metadata.namespace from the owner's
 * when missing (for a namespaced child).
 */
typedef struct kop_child_req {
    const kop_resource *resource; /* required: the child's resource (kind too) */
    const json_t *owner;          /* the controller to reference; NULL: none */
    const json_t *object;         /* required: the wanted child */
    kop_informer *cache;          /* the child's informer (kop_controller_owns); NULL: GET */
    const char *field_manager;    /* the apply's field manager; NULL: "kop" */
} kop_child_req;

/*
 * kop_create_or_update makes the child exist as wanted, controlled by
 * req->owner. It reads the child (from req->cache, else the apiserver):
 *   - missing: it is created (server-side apply), KOP_OP_CREATED;
 *   - present, controlled by owner, and every field of the wanted object
 *     equal on the server (kop_json_contains; owner references aside):
 *     nothing is written, KOP_OP_UNCHANGED;
 *   - present but different: it is applied (force), KOP_OP_UPDATED;
 *   - present and controlled by another owner: KOP_EALREADYEXISTS, nothing
 *     written (controller-runtime's AlreadyOwnedError).
 * With a cache the read may be stale: a child just written may be applied
 * once more (an apply that changes nothing writes nothing), and a change
 * made on the server comes back as the child's watch event, which runs
 * the reconcile again. Quantities are compared as text: write them as the
 * apiserver prints them ("1" rather than "1000m") or each pass applies
 * again (harmlessly). result may be NULL.
 */
KOP_API KOP_NODISCARD kop_err kop_create_or_update(kop_client *c, const kop_child_req *req,
                                                   kop_op_result *result, kop_status *st);

/*
 * kop_json_contains tells whether every field of want is in have with the
 * same value: objects recursively (have may hold more members), arrays of
 * the same length element by element, numbers by value (1 equals 1.0),
 * other values by json_equal. A null in want matches a missing member or a
 * null. So a Deployment the apiserver filled with defaults still contains
 * what the operator asked for. Either may be NULL: NULL want is contained
 * in anything, nothing else in NULL.
 */
KOP_API bool kop_json_contains(const json_t *have, const json_t *want);

/* ---- inside a reconcile ------------------------------------------------- */

/* kop_get_mode: whether kop_reconcile_get hands out an object being deleted. */
typedef enum kop_get_mode {
    KOP_GET_LIVE = 0, /* no: an object being deleted is NULL, like a gone one */
    KOP_GET_DELETING, /* yes: the reconcile runs a finalizer's cleanup on it */
} kop_get_mode;

/*
 * kop_reconcile_get reads the request's object from the controller's cache
 * (req->cache) into *out (owned: json_decref). *out is NULL, and KOP_OK
 * returned, when there is nothing to reconcile: the object is gone (the
 * garbage collector deletes what it owned), or it is being deleted and
 * mode is KOP_GET_LIVE. An operator with a finalizer asks for
 * KOP_GET_DELETING and checks kop_meta_is_deleting itself. KOP_EINVAL
 * without req, its cache or out; KOP_ENOMEM.
 */
KOP_API KOP_NODISCARD kop_err kop_reconcile_get(const kop_reconcile *req, kop_get_mode mode,
                                                json_t **out, kop_status *st);

/*
 * kop_reconcile_child is kop_create_or_update of child (borrowed: only the
 * fields the operator sets), of resource r, controlled by owner, from a
 * reconcile: its cache is the one kop_controller_owns made for r on
 * req->controller (none: the child is read from the apiserver), its field
 * manager the manager's name. A write is logged at V(1) with the child's
 * kind, name and what was done. result (may be NULL) says what was done.
 * A NULL child (a json_pack that failed) is KOP_ENOMEM; otherwise what
 * kop_create_or_update returns.
 */
KOP_API KOP_NODISCARD kop_err kop_reconcile_child(const kop_reconcile *req, const kop_resource *r,
                                                  const json_t *owner, const json_t *child,
                                                  kop_op_result *result, kop_status *st);

/*
 * kop_reconcile_status makes obj's status (obj as read, e.g. by
 * kop_reconcile_get) show every field of status (borrowed, not changed)
 * plus observedGeneration, the metadata.generation of obj. When obj's
 * status already contains them all (kop_json_contains) nothing is written
 * (KOP_OP_UNCHANGED); otherwise they are merge-patched into the status
 * subresource of the controller's primary resource (KOP_OP_UPDATED), so
 * fields others wrote stay. A NULL status (a json_pack that failed) is
 * KOP_ENOMEM, one that is not an object KOP_EINVAL; a 404 says whether
 * the CRD lacks the status subresource (as kop_patch_status). An obj
 * without a generation (0) gets no observedGeneration. result may be NULL.
 */
KOP_API KOP_NODISCARD kop_err kop_reconcile_status(const kop_reconcile *req, const json_t *obj,
                                                   const json_t *status, kop_op_result *result,
                                                   kop_status *st);

/*
 * kop_reconcile_end turns a reconcile's outcome into its result: KOP_DONE
 * for KOP_OK; otherwise it logs "reconcile failed" on req->log at error
 * level with the error and st's message (st may be NULL), and returns
 * KOP_RETRY, so the key comes back with per-key backoff.
 */
KOP_API kop_result kop_reconcile_end(const kop_reconcile *req, kop_err err, const kop_status *st);

KOP_END_DECLS

#endif /* KOP_CTRLUTIL_H */

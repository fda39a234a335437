/*
 * kop/meta.h - object metadata helpers: finalizers, owner references,
 * status conditions, labels, names and object keys.
 *
 * Objects are jansson documents (json_t) as the apiserver sent them. Every
 * helper here edits only the fields it is about and keeps everything else,
 * including fields libkop does not know, so a read-modify-write through
 * these helpers never drops data. Helpers that change an object tell the
 * caller whether they did, so a reconcile can skip a write that would change
 * nothing.
 *
 * Borrowed results (const char *, json_t *) point into the object and stay
 * valid until that part of the object is changed or released. Nothing here
 * takes locks: an object must not be modified by two threads at once.
 *
 * The rules are Kubernetes' own: controller-runtime's controllerutil for
 * finalizers and controller references, apimachinery's meta/v1 condition
 * helpers and metav1.Condition validation for conditions, and
 * apimachinery's validation for names, label keys and label values.
 */
#ifndef KOP_META_H
#define KOP_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

/* ---- getters ------------------------------------------------------------ */

/*
 * kop_meta_name, kop_meta_namespace, kop_meta_uid and
 * kop_meta_resource_version return metadata.<field> of obj, borrowed, or
 * NULL when it is absent or not a string. obj may be NULL.
 */
KOP_API const char *kop_meta_name(const json_t *obj);
KOP_API const char *kop_meta_namespace(const json_t *obj);
KOP_API const char *kop_meta_uid(const json_t *obj);
KOP_API const char *kop_meta_resource_version(const json_t *obj);

/* kop_meta_generation returns metadata.generation, or 0 when absent. */
KOP_API int64_t kop_meta_generation(const json_t *obj);

/* kop_meta_is_deleting tells whether metadata.deletionTimestamp is set. */
KOP_API bool kop_meta_is_deleting(const json_t *obj);

/* ---- serializing -------------------------------------------------------- */

/*
 * kop_meta_dumps serializes v as json_dumps(v, flags) does, into a string
 * the caller frees; NULL when memory runs out. Use it instead of
 * json_dumps: jansson 2.14's json_dumps ignores a failed append while it
 * writes an object's key and returns a torn text (a key short of its
 * quote) as if it had succeeded. Here any failed piece fails the whole.
 */
KOP_API char *kop_meta_dumps(const json_t *v, size_t flags);

/* ---- labels and annotations -------------------------------------------- */

/* kop_meta_label returns metadata.labels[key], borrowed, or NULL. */
KOP_API const char *kop_meta_label(const json_t *obj, const char *key);

/*
 * kop_meta_set_label sets metadata.labels[key] = value, creating metadata
 * and labels as needed; value NULL removes the label. Returns true when obj
 * changed. Keys and values are not validated here (see the validators
 * below; the apiserver validates too). false also when obj is not an object.
 */
KOP_API bool kop_meta_set_label(json_t *obj, const char *key, const char *value);

/* kop_meta_annotation and kop_meta_set_annotation: the same for annotations. */
KOP_API const char *kop_meta_annotation(const json_t *obj, const char *key);
KOP_API bool kop_meta_set_annotation(json_t *obj, const char *key, const char *value);

/* ---- finalizers --------------------------------------------------------- */

/* kop_meta_has_finalizer tells whether metadata.finalizers holds f. */
KOP_API bool kop_meta_has_finalizer(const json_t *obj, const char *f);

/*
 * kop_meta_add_finalizer appends f to metadata.finalizers (creating
 * metadata and the array as needed) unless it is already there. Returns
 * true when obj changed.
 */
KOP_API bool kop_meta_add_finalizer(json_t *obj, const char *f);

/*
 * kop_meta_remove_finalizer removes every occurrence of f. Returns true when
 * obj changed. An emptied list stays as [] rather than disappearing, so that
 * both an update and a merge patch carrying metadata.finalizers clear it.
 */
KOP_API bool kop_meta_remove_finalizer(json_t *obj, const char *f);

/*
 * kop_meta_finalizers_patch builds the JSON patch (RFC 6902, for
 * KOP_PATCH_JSON) that sets metadata.finalizers of the object obj was read
 * as (from a cache, say) to finalizers, an array of strings, and changes
 * nothing else. The patch applies only to the object as it was read:
 *   - obj has a finalizers list: "test" that list, then "replace" it; a
 *     finalizer anyone added or removed meanwhile makes the apiserver
 *     refuse the patch, while writes of other fields (status) do not;
 *   - it has none: "test" metadata.resourceVersion (when obj has one), then
 *     "add" the list, so that a list created meanwhile is never replaced.
 * A refused patch means: read the object again and retry. Returns KOP_OK
 * with *out a new reference, KOP_EINVAL when obj has no metadata object or
 * finalizers is not an array of strings, KOP_ENOMEM.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_finalizers_patch(const json_t *obj,
                                                        const json_t *finalizers, json_t **out);

/* ---- owner references --------------------------------------------------- */

/*
 * kop_meta_set_controller_ref makes owner the controller of child: an entry
 * {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}
 * in child's metadata.ownerReferences, built from owner's apiVersion, kind,
 * metadata.name and metadata.uid (all required: KOP_EINVAL otherwise).
 *
 * A reference to the same owner (same API group, kind and name, as
 * controller-runtime compares them) is replaced in place, so calling this
 * again is a no-op and a recreated owner's new uid is taken over. Other
 * owner references are kept. If child already has a different controller
 * the call fails with KOP_EALREADYEXISTS (the object is already owned;
 * controller-runtime's AlreadyOwnedError) and child is unchanged. A
 * namespaced owner in another namespace than child's is refused with
 * KOP_EINVAL (the garbage collector would ignore the reference); a child
 * without metadata.namespace is not checked, since it may be created in a
 * namespace given elsewhere. st, if not NULL, explains a failure.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_set_controller_ref(json_t *child, const json_t *owner,
                                                          kop_status *st);

/*
 * kop_meta_controller_ref returns the ownerReferences entry of obj whose
 * controller is true, borrowed, or NULL.
 */
KOP_API json_t *kop_meta_controller_ref(const json_t *obj);

/* kop_meta_is_controlled_by tells whether obj's controller has uid owner_uid. */
KOP_API bool kop_meta_is_controlled_by(const json_t *obj, const char *owner_uid);

/* ---- conditions --------------------------------------------------------- */

/* The three values of a condition's status. */
#define KOP_CONDITION_TRUE    "True"
#define KOP_CONDITION_FALSE   "False"
#define KOP_CONDITION_UNKNOWN "Unknown"

/* metav1.Condition limits, enforced by kop_meta_set_condition. */
#define KOP_CONDITION_TYPE_MAX    316
#define KOP_CONDITION_REASON_MAX  1024
#define KOP_CONDITION_MESSAGE_MAX 32768

/*
 * kop_condition describes a condition to set; all strings are borrowed for
 * the call. type is a qualified name ("Ready", "example.com/Synced"),
 * reason is CamelCase (metav1's ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$),
 * message may be NULL (""). observed_generation 0 means "not set": the field
 * is left out, as metav1 omits it.
 */
typedef struct kop_condition {
    const char *type;
    const char *status; /* KOP_CONDITION_TRUE, _FALSE or _UNKNOWN */
    const char *reason;
    const char *message;
    int64_t observed_generation;
} kop_condition;

/*
 * kop_meta_set_condition sets condition c in status.conditions, following
 * apimachinery's SetStatusCondition: status is the object's status
 * (creating conditions[] in it if needed). A condition of that type is
 * added if missing; otherwise status, reason, message and
 * observedGeneration are updated, and lastTransitionTime (RFC 3339, UTC,
 * seconds, from now) changes only when the status does. Other fields of
 * the entry and other conditions are kept.
 *
 * *changed (changed may be NULL) is set to whether anything changed, so a
 * caller can skip a status write that would change nothing. Invalid input
 * (status not an object, empty or malformed type or reason, a status other
 * than the three, a message longer than the metav1 limit, a negative
 * generation) gives KOP_EINVAL, explained in st, and changes nothing.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_set_condition(json_t *status, const kop_condition *c,
                                                     time_t now, bool *changed, kop_status *st);

/*
 * kop_meta_find_condition returns the entry of status.conditions with the
 * given type, borrowed, or NULL. status may be NULL.
 */
KOP_API json_t *kop_meta_find_condition(const json_t *status, const char *type);

/*
 * kop_meta_condition_status returns that condition's status ("True",
 * "False", "Unknown"), borrowed, or NULL when there is no such condition.
 */
KOP_API const char *kop_meta_condition_status(const json_t *status, const char *type);

/* kop_meta_condition_is_true tells whether the condition is present and "True". */
KOP_API bool kop_meta_condition_is_true(const json_t *status, const char *type);

/* kop_meta_remove_condition removes the condition; true when status changed. */
KOP_API bool kop_meta_remove_condition(json_t *status, const char *type);

/* ---- names -------------------------------------------------------------- */

#define KOP_META_DNS1123_LABEL_MAX     63
#define KOP_META_DNS1123_SUBDOMAIN_MAX 253
#define KOP_META_LABEL_VALUE_MAX       63
#define KOP_META_NAME_HASH_LEN         10 /* hex digits of the disambiguating hash */

/*
 * kop_meta_dns1123_label writes into out (size >= KOP_META_DNS1123_LABEL_MAX
 * + 1) a deterministic DNS-1123 label (at most 63 of [a-z0-9-], starting and
 * ending with a letter or digit) built from the components prefix, parts[0],
 * parts[1], ... (parts is NULL-terminated and may be NULL; a NULL or empty
 * prefix is no component). Each component is lower-cased, every other
 * character than [a-z0-9] becomes '-', runs of '-' collapse and '-' is
 * trimmed from its ends; components are joined with '-'.
 *
 * When that loses information - a component changed or was empty, a part
 * contained '-' (which would make the joins ambiguous: {"a-b","c"} against
 * {"a","b-c"}), or the result is too long - the name is cut to leave room
 * and gets "-" and 10 hex digits of the SHA-256 of the exact components
 * (each followed by a NUL byte). So a simple input reads as itself ("ctf",
 * {"web", "team1"} gives "ctf-web-team1"), distinct inputs do not collide in
 * practice, and the same input always gives the same name. The prefix may
 * contain '-' without forcing the hash: it is the call site's fixed tag, so
 * give different call sites prefixes that do not extend one another by a
 * '-' part. Returns KOP_OK, or KOP_EINVAL when out is too small.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_dns1123_label(char *out, size_t size, const char *prefix,
                                                     const char *const *parts);

/*
 * kop_meta_dns1123_subdomain is the same for a DNS-1123 subdomain (at most
 * 253, labels joined by '.'): '.' is kept inside components, and a run of
 * separators holding a '.' collapses to '.'. out needs
 * KOP_META_DNS1123_SUBDOMAIN_MAX + 1 bytes.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_dns1123_subdomain(char *out, size_t size,
                                                         const char *prefix,
                                                         const char *const *parts);

/* kop_meta_is_valid_dns1123_label: ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63. */
KOP_API bool kop_meta_is_valid_dns1123_label(const char *s);

/* kop_meta_is_valid_dns1123_subdomain: labels joined by '.', at most 253. */
KOP_API bool kop_meta_is_valid_dns1123_subdomain(const char *s);

/*
 * kop_meta_is_valid_label_value: empty, or at most 63 of
 * ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$.
 */
KOP_API bool kop_meta_is_valid_label_value(const char *s);

/*
 * kop_meta_is_valid_label_key: [prefix/]name where prefix is a DNS-1123
 * subdomain and name a qualified-name part (at most 63 of
 * ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$). Also the rule for
 * annotation keys.
 */
KOP_API bool kop_meta_is_valid_label_key(const char *s);

/* ---- object keys -------------------------------------------------------- */

/* Enough for any valid key: a 63-byte namespace, '/', a 253-byte name, NUL. */
#define KOP_META_KEY_MAX 318

/*
 * kop_meta_key writes the cache key of an object into out: "ns/name", or
 * "name" when ns is NULL or empty (cluster-scoped). KOP_EINVAL when name is
 * NULL or empty, KOP_ETOOBIG when out is too small (out is then "").
 */
KOP_API KOP_NODISCARD kop_err kop_meta_key(char *out, size_t size, const char *ns,
                                           const char *name);

/*
 * kop_meta_split_key splits a key made by kop_meta_key into ns ("" for a
 * cluster-scoped key) and name. KOP_EINVAL for a key with more than one
 * '/' or an empty part, KOP_ETOOBIG when a part does not fit its buffer.
 */
KOP_API KOP_NODISCARD kop_err kop_meta_split_key(const char *key, char *ns, size_t ns_size,
                                                 char *name, size_t name_size);

KOP_END_DECLS

#endif /* KOP_META_H */

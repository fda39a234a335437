/*
 * core/wake.h - which updates of an instance's children wake its Challenge
 * (wake.c): the Challenge controller's update predicates of its Pod,
 * EndpointSlice and Deployment watches (controller/setup.c).
 *
 * A pass reads of those children only a few fields (controller/observe.c,
 * update.c, apply.c): a container's waiting reason (an image that cannot be
 * pulled, a crash loop), whether a Service has a ready endpoint, and a
 * Deployment's generation, version annotations, replicas and rollout
 * counts. Every other update (a pod bound to its node, a condition's
 * timestamp, an endpoint's address appearing before it is ready) changes
 * nothing a pass would see, yet woke it: about 25 passes for each instance
 * of a rolling update of 1,000 (issue 30). Each predicate passes exactly
 * when something the pass reads differs, labels included (they map a child
 * to its Challenge), or the child is being deleted. Adds and deletes always
 * wake (libkop). Pure.
 */
#ifndef CTF_CORE_WAKE_H
#define CTF_CORE_WAKE_H

#include <stdbool.h>

#include <jansson.h>

/* ctf_wake_pod: a container's waiting reason, the labels or the deletion mark changed. */
bool ctf_wake_pod(const json_t *old_obj, const json_t *new_obj, void *user);

/* ctf_wake_slice: whether the slice has a ready endpoint, its labels or deletion mark changed. */
bool ctf_wake_slice(const json_t *old_obj, const json_t *new_obj, void *user);

/* ctf_wake_deployment: what a pass reads of a Deployment changed (see the note above). */
bool ctf_wake_deployment(const json_t *old_obj, const json_t *new_obj, void *user);

/* ctf_pod_waiting: a container of pod is waiting, with a reason (pulling, crashing...). */
bool ctf_pod_waiting(const json_t *pod);

/* ctf_slice_ready: slice has an endpoint that is ready (an absent condition is ready). */
bool ctf_slice_ready(const json_t *slice);

#endif /* CTF_CORE_WAKE_H */

/*
 * core/wake.h - which updates of an instance's children wake its Challenge
 * (wake.c): the Challenge controller's update predicates of its Pod,
 * EndpointSlice and Deployment watches (controller/setup.c).
 *
 * A pass reads of those children only a few things (controller/observe.c,
 * update.c, apply.c): the containers that cannot start (an image that
 * cannot be pulled, a crash loop), whether a Service has a ready endpoint,
 * and of a Deployment its generation, labels, annotations, replicas, and
 * whether it is rolling out or short of available replicas. Every other
 * update (a pod bound to its node or started, a rollout's counts moving
 * along, a condition's timestamp, an address appearing before it is ready)
 * changes nothing a pass would see, yet woke it: about 25 passes for each
 * instance of a rolling update of 1,000 (issue 30), then 13 with only the
 * fields compared. Each predicate passes exactly when something the pass
 * reads differs, labels included (they map a child to its Challenge), or
 * the child is being deleted (not a pod: a pod the pass reads wakes it when
 * it goes). A pod added or deleted wakes only when it has a container that
 * cannot start (ctf_pod_failing, the watch's object predicate); other
 * children's always do. Pure.
 */
#ifndef CTF_CORE_WAKE_H
#define CTF_CORE_WAKE_H

#include <stdbool.h>

#include <jansson.h>

/* ctf_wake_pod: the containers that cannot start, or the labels, changed. */
bool ctf_wake_pod(const json_t *old_obj, const json_t *new_obj, void *user);

/* ctf_wake_pod_object: a pod added or deleted wakes when ctf_pod_failing. */
bool ctf_wake_pod_object(const json_t *pod, void *user);

/* ctf_wake_slice: whether the slice has a ready endpoint, its labels or deletion mark changed. */
bool ctf_wake_slice(const json_t *old_obj, const json_t *new_obj, void *user);

/* ctf_wake_deployment: what a pass reads of a Deployment changed (see the note above). */
bool ctf_wake_deployment(const json_t *old_obj, const json_t *new_obj, void *user);

/*
 * ctf_failure_reason: the Challenge's status reason for a container waiting
 * for waiting_reason ("ImagePullFailed", "CrashLoop"), or NULL when that is
 * not a failure (ContainerCreating, or NULL).
 */
const char *ctf_failure_reason(const char *waiting_reason);

/* ctf_pod_failing: a container of pod cannot start (ctf_failure_reason). */
bool ctf_pod_failing(const json_t *pod);

/* ctf_slice_ready: slice has an endpoint that is ready (an absent condition is ready). */
bool ctf_slice_ready(const json_t *slice);

#endif /* CTF_CORE_WAKE_H */

/*
 * core/wake.c - which updates of an instance's children wake its Challenge
 * (see wake.h): each predicate compares, in the replaced object and the
 * new one, what a pass reads, and nothing else.
 */
#include <string.h>

#include <kop/meta.h>

#include "core/json.h"
#include "core/wake.h"

/* same_meta: the labels and the deletion mark of a and b are the same. */
static bool same_meta(const json_t *a, const json_t *b)
{
    return ctf_json_same(ctf_get2(a, "metadata", "labels"), ctf_get2(b, "metadata", "labels")) &&
           ctf_json_same(ctf_get2(a, "metadata", "deletionTimestamp"),
                         ctf_get2(b, "metadata", "deletionTimestamp"));
}

/* waiting_reason: container status cs's waiting reason, or NULL. */
static const json_t *waiting_reason(const json_t *cs)
{
    return json_object_get(ctf_get2(cs, "state", "waiting"), "reason");
}

bool ctf_wake_pod(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)user;
    const json_t *a = ctf_get2(old_obj, "status", "containerStatuses");
    const json_t *b = ctf_get2(new_obj, "status", "containerStatuses");
    if (!same_meta(old_obj, new_obj) || json_array_size(a) != json_array_size(b))
        return true;
    for (size_t i = 0; i < json_array_size(b); i++) {
        const json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
        if (!ctf_json_same(json_object_get(x, "name"), json_object_get(y, "name")) ||
            !ctf_json_same(waiting_reason(x), waiting_reason(y)))
            return true;
    }
    return false;
}

bool ctf_pod_waiting(const json_t *pod)
{
    size_t i;
    const json_t *cs;
    json_array_foreach(ctf_get2(pod, "status", "containerStatuses"), i, cs)
    {
        if (waiting_reason(cs))
            return true;
    }
    return false;
}

bool ctf_slice_ready(const json_t *slice)
{
    size_t i;
    const json_t *ep;
    json_array_foreach(json_object_get(slice, "endpoints"), i, ep)
    {
        const json_t *ready = ctf_get2(ep, "conditions", "ready");
        if (!ready || json_is_true(ready))
            return true;
    }
    return false;
}

bool ctf_wake_slice(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)user;
    return !same_meta(old_obj, new_obj) || ctf_slice_ready(old_obj) != ctf_slice_ready(new_obj);
}

bool ctf_wake_deployment(const json_t *old_obj, const json_t *new_obj, void *user)
{
    static const char *const status_fields[] = {"observedGeneration", "replicas",
                                                "updatedReplicas", "availableReplicas"};
    const json_t *a = json_object_get(old_obj, "status"), *b = json_object_get(new_obj, "status");
    (void)user;
    if (!same_meta(old_obj, new_obj) ||
        kop_meta_generation(old_obj) != kop_meta_generation(new_obj) ||
        !ctf_json_same(ctf_get2(old_obj, "metadata", "annotations"),
                       ctf_get2(new_obj, "metadata", "annotations")) ||
        !ctf_json_same(ctf_get2(old_obj, "spec", "replicas"),
                       ctf_get2(new_obj, "spec", "replicas")))
        return true;
    for (size_t i = 0; i < sizeof status_fields / sizeof status_fields[0]; i++)
        if (!ctf_json_same(json_object_get(a, status_fields[i]),
                           json_object_get(b, status_fields[i])))
            return true;
    return false;
}

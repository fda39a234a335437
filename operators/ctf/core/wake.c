/*
 * core/wake.c - which updates of an instance's children wake its Challenge
 * (see wake.h): each predicate compares, in the replaced object and the
 * new one, what a pass reads, and nothing else.
 */
#include <string.h>

#include <kop/meta.h>

#include "core/json.h"
#include "core/update.h"
#include "core/wake.h"

/* same_meta: the labels and the deletion mark of a and b are the same. */
static bool same_meta(const json_t *a, const json_t *b)
{
    return ctf_json_same(ctf_get2(a, "metadata", "labels"), ctf_get2(b, "metadata", "labels")) &&
           ctf_json_same(ctf_get2(a, "metadata", "deletionTimestamp"),
                         ctf_get2(b, "metadata", "deletionTimestamp"));
}

const char *ctf_failure_reason(const char *waiting_reason)
{
    static const char *const pulls[] = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName"};
    for (size_t i = 0; waiting_reason && i < sizeof pulls / sizeof pulls[0]; i++)
        if (strcmp(waiting_reason, pulls[i]) == 0)
            return "ImagePullFailed";
    return kop_streq(waiting_reason, "CrashLoopBackOff") ? "CrashLoop" : NULL;
}

/* failure_of: container status cs's failure (ctf_failure_reason), or NULL. */
static const char *failure_of(const json_t *cs)
{
    return ctf_failure_reason(
        json_string_value(json_object_get(ctf_get2(cs, "state", "waiting"), "reason")));
}

/* failures_within: every failing container of a fails alike, by name, in b. */
static bool failures_within(const json_t *a, const json_t *b)
{
    size_t i, j;
    const json_t *x, *y;
    json_array_foreach(a, i, x)
    {
        const char *why = failure_of(x);
        bool found = false;
        json_array_foreach(b, j, y)
        {
            if (ctf_json_same(json_object_get(x, "name"), json_object_get(y, "name")))
                found = found || kop_streq(why, failure_of(y));
        }
        if (why && !found)
            return false;
    }
    return true;
}

bool ctf_wake_pod(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)user;
    const json_t *a = ctf_get2(old_obj, "status", "containerStatuses");
    const json_t *b = ctf_get2(new_obj, "status", "containerStatuses");
    return !ctf_json_same(ctf_get2(old_obj, "metadata", "labels"),
                          ctf_get2(new_obj, "metadata", "labels")) ||
           !failures_within(a, b) || !failures_within(b, a);
}

bool ctf_pod_failing(const json_t *pod)
{
    size_t i;
    const json_t *cs;
    json_array_foreach(ctf_get2(pod, "status", "containerStatuses"), i, cs)
    {
        if (failure_of(cs))
            return true;
    }
    return false;
}

bool ctf_wake_pod_object(const json_t *pod, void *user)
{
    (void)user;
    return ctf_pod_failing(pod);
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
    (void)user;
    /* Of the status, what the rollout and readiness checks conclude (update.c's
     * ctf_update_deployment_rolling, observe.c): its counts move along several times in a
     * rollout that a pass only waits out. */
    return !same_meta(old_obj, new_obj) ||
           kop_meta_generation(old_obj) != kop_meta_generation(new_obj) ||
           !ctf_json_same(ctf_get2(old_obj, "metadata", "annotations"),
                          ctf_get2(new_obj, "metadata", "annotations")) ||
           !ctf_json_same(ctf_get2(old_obj, "spec", "replicas"),
                          ctf_get2(new_obj, "spec", "replicas")) ||
           ctf_update_deployment_rolling(old_obj) != ctf_update_deployment_rolling(new_obj) ||
           ctf_update_deployment_short(old_obj) != ctf_update_deployment_short(new_obj);
}

/*
 * meta_conditions.c - status conditions by metav1.Condition's rules (see
 * kop/meta.h).
 *
 * A condition is validated as the apiserver would (type a qualified name,
 * status True/False/Unknown, reason CamelCase, lengths capped) before the
 * status is touched, so a reconciler learns of a bad condition from its
 * own call, not from a 422 on the status update. lastTransitionTime moves
 * only when the status changes, which is what makes it useful to readers;
 * a call that changes nothing reports so, and the caller can skip the
 * write.
 *
 * Invariant: as in meta.c, a failed or unchanged call leaves status as it
 * was: the entry is edited as a copy and swapped in whole.
 */
#include <string.h>
#include <time.h>

#include "kop/clock.h"
#include "kop/meta.h"
#include "kop_internal.h"
#include "meta_internal.h"

/* is_condition_type matches metav1.Condition's type pattern: [subdomain/]name-part. */
static bool is_condition_type(const char *s)
{
    size_t n = strlen(s);
    const char *slash = strchr(s, '/');
    if (n > KOP_CONDITION_TYPE_MAX)
        return false;
    if (!slash)
        return kop__meta_is_name_part(s, n);
    size_t plen = (size_t)(slash - s);
    return kop__meta_is_subdomain(s, plen) && kop__meta_is_name_part(slash + 1, n - plen - 1);
}

/* is_reason matches ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (CamelCase). */
static bool is_reason(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > KOP_CONDITION_REASON_MAX)
        return false;
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++) {
        bool inner = kop__is_alnum(s[i]) || s[i] == '_' || s[i] == ',' || s[i] == ':';
        if (!inner || (i == n - 1 && (s[i] == ',' || s[i] == ':')))
            return false;
    }
    return true;
}

static kop_err validate_condition(const json_t *status, const kop_condition *c, kop_status *st)
{
    if (!json_is_object(status) || !c) {
        kop_status_setf(st, 0, NULL, "condition: status is not an object");
        return KOP_EINVAL;
    }
    json_t *conds = json_object_get(status, "conditions");
    if (conds && !json_is_array(conds)) {
        kop_status_setf(st, 0, NULL, "condition: status.conditions is not an array");
        return KOP_EINVAL;
    }
    if (!c->type || !is_condition_type(c->type)) {
        kop_status_setf(st, 0, NULL, "condition: invalid type \"%s\": must be a qualified name",
                        c->type ? c->type : "");
        return KOP_EINVAL;
    }
    if (!c->status || (strcmp(c->status, KOP_CONDITION_TRUE) != 0 &&
                       strcmp(c->status, KOP_CONDITION_FALSE) != 0 &&
                       strcmp(c->status, KOP_CONDITION_UNKNOWN) != 0)) {
        kop_status_setf(st, 0, NULL,
                        "condition %s: invalid status \"%s\": must be True, False or Unknown",
                        c->type, c->status ? c->status : "");
        return KOP_EINVAL;
    }
    if (!c->reason || !is_reason(c->reason)) {
        kop_status_setf(st, 0, NULL,
                        "condition %s: invalid reason \"%.64s\": must be CamelCase "
                        "([A-Za-z][A-Za-z0-9_,:]*, at most 1024)",
                        c->type, c->reason ? c->reason : "");
        return KOP_EINVAL;
    }
    if (c->message && strlen(c->message) > KOP_CONDITION_MESSAGE_MAX) {
        kop_status_setf(st, 0, NULL, "condition %s: message longer than %d bytes", c->type,
                        KOP_CONDITION_MESSAGE_MAX);
        return KOP_EINVAL;
    }
    if (c->observed_generation < 0) {
        kop_status_setf(st, 0, NULL, "condition %s: negative observedGeneration", c->type);
        return KOP_EINVAL;
    }
    return KOP_OK;
}

/* find_condition returns the index of the condition of type in conds, or -1. */
static long find_condition(const json_t *conds, const char *type)
{
    size_t i;
    json_t *v;
    if (!type)
        return -1;
    json_array_foreach(conds, i, v)
    {
        if (kop_streq(json_string_value(json_object_get(v, "type")), type))
            return (long)i;
    }
    return -1;
}

/*
 * fill_condition writes c's fields into entry, in metav1's field order for a
 * new entry. lastTransitionTime becomes now when the status changes or the
 * entry has none. Non-zero when memory runs out.
 */
static int fill_condition(json_t *entry, const kop_condition *c, time_t now)
{
    const char *old_status = json_string_value(json_object_get(entry, "status"));
    bool transition = !kop_streq(old_status, c->status) ||
                      !json_is_string(json_object_get(entry, "lastTransitionTime"));
    int rc = json_object_set_new(entry, "type", json_string(c->type));
    rc |= json_object_set_new(entry, "status", json_string(c->status));
    if (c->observed_generation > 0)
        rc |= json_object_set_new(entry, "observedGeneration",
                                  json_integer((json_int_t)c->observed_generation));
    else
        json_object_del(entry, "observedGeneration");
    if (transition) {
        char ts[KOP_RFC3339_SIZE];
        rc |= json_object_set_new(entry, "lastTransitionTime", json_string(kop_rfc3339(now, ts)));
    }
    rc |= json_object_set_new(entry, "reason", json_string(c->reason));
    rc |= json_object_set_new(entry, "message", json_string(c->message ? c->message : ""));
    return rc;
}

kop_err kop_meta_set_condition(json_t *status, const kop_condition *c, time_t now, bool *changed,
                               kop_status *st)
{
    if (changed)
        *changed = false;
    kop_err err = validate_condition(status, c, st);
    if (err)
        return err;
    json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, c->type);
    json_t *old = idx >= 0 ? json_array_get(conds, (size_t)idx) : NULL;
    /* A copy is edited and swapped in, so a failure leaves status as it was. */
    json_t *entry = json_is_object(old) ? json_copy(old) : json_object();
    if (!entry || fill_condition(entry, c, now) != 0)
        goto nomem;
    if (old && json_equal(old, entry)) {
        json_decref(entry);
        return KOP_OK;
    }
    if (!conds) {
        conds = json_array();
        if (!conds || json_object_set_new(status, "conditions", conds) != 0)
            goto nomem;
    }
    int rc = old ? json_array_set_new(conds, (size_t)idx, entry)
                 : json_array_append_new(conds, entry);
    entry = NULL; /* owned by conds now, or released by the failed setter */
    if (rc != 0)
        goto nomem;
    if (changed)
        *changed = true;
    return KOP_OK;
nomem:
    json_decref(entry);
    return KOP_ENOMEM;
}

json_t *kop_meta_find_condition(const json_t *status, const char *type)
{
    const json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, type);
    return idx >= 0 ? json_array_get(conds, (size_t)idx) : NULL;
}

const char *kop_meta_condition_status(const json_t *status, const char *type)
{
    return json_string_value(json_object_get(kop_meta_find_condition(status, type), "status"));
}

bool kop_meta_condition_is_true(const json_t *status, const char *type)
{
    return kop_streq(kop_meta_condition_status(status, type), KOP_CONDITION_TRUE);
}

bool kop_meta_remove_condition(json_t *status, const char *type)
{
    json_t *conds = json_object_get(status, "conditions");
    long idx = find_condition(conds, type);
    return idx >= 0 && json_array_remove(conds, (size_t)idx) == 0;
}

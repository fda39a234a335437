/*
 * update.c - how running instances take a change of their definition (see
 * update.h; issue 30: a fixed image pushed mid-CTF).
 *
 * The rule, per instance, from what the caches show of its Deployments:
 *
 *   no Deployment yet, or no version on them       -> apply (as always)
 *   the definition's current version               -> apply (a title or
 *                                                     flag change: nothing
 *                                                     restarts)
 *   an older version, never started                -> apply (a new start
 *                                                     gets the new version)
 *   an older version, OnNextStart                  -> keep it as it runs
 *                                                     (its flag Secret and
 *                                                     what no version
 *                                                     changes only)
 *   an older version, Rolling or Recreate          -> replace it once it
 *                                                     holds one of the
 *                                                     budget's slots
 *                                                     (Recreate: all)
 *
 * The slots are the rollout ledger's: per definition, the uids of the
 * instances being replaced. A slot is taken before the instance's first
 * write of the new version and given back only once the caches show every
 * Deployment of the instance on that version and its rollout over (new
 * pods Ready, old ones gone), so the instances the cluster shows in the
 * middle of a replacement are always a subset of those holding a slot:
 * never more than maxUnavailable, whatever the caches' lag. A new process
 * seeds the ledger from the caches before its first replacement (the
 * instances whose Deployments carry the current version and are rolling),
 * which makes the bound hold across a SIGKILL or a change of leader.
 *
 * Workload: one decision per pass of a Challenge; a definition holds at
 * most a few thousand instances, so the ledger's sets are jansson objects.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/conversion.h"
#include "core/definition.h"
#include "core/duration.h"
#include "core/json.h"
#include "core/update.h"

static const char *const STRATEGIES[] = {"OnNextStart", "Rolling", "Recreate"};

/* Fields of a definition's spec that do not make its instance's objects (ctf_update_version). */
static const char *const NOT_BUILT[] = {"title", "category", "description", "points",
                                        "lifetime", "pool", "update", "flag"};

const char *ctf_update_strategy_name(ctf_update_strategy s)
{
    return (size_t)s < CTF_LEN(STRATEGIES) ? STRATEGIES[s] : "OnNextStart";
}

/* parse_unavailable reads maxUnavailable: an integer count, or "N%"; false when malformed. */
static bool parse_unavailable(const json_t *v, ctf_update_spec *out)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > CTF_UPDATE_MAX_COUNT)
            return false;
        out->max_unavailable = (int)n;
        out->percent = false;
        return true;
    }
    const char *s = json_string_value(v);
    size_t len = s ? strlen(s) : 0;
    if (len < 2 || len > 4 || s[len - 1] != '%')
        return false;
    int n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        n = n * 10 + (s[i] - '0');
    }
    if (n < 1 || n > 100)
        return false;
    out->max_unavailable = n;
    out->percent = true;
    return true;
}

kop_err ctf_update_parse(const json_t *def, ctf_update_spec *out, kop_status *st)
{
    ctf_update_spec u = {CTF_UPDATE_ON_NEXT_START, CTF_UPDATE_DEFAULT_PERCENT, true};
    const json_t *update = ctf_get2(def, "spec", "update");
    if (out)
        *out = u;
    if (!update)
        return KOP_OK;
    if (!json_is_object(update))
        return ctf_invalid(st, "spec.update must be an object.");
    /* v1beta1 nests maxUnavailable under rolling (docs/crd-versions.md). */
    bool beta = kop_streq(json_string_value(json_object_get(def, "apiVersion")),
                          "ctf.kopc.io/" CTF_VERSION_BETA);
    const char *field = beta ? "spec.update.rolling" : "spec.update.maxUnavailable";
    const json_t *rolling = beta ? json_object_get(update, "rolling") : NULL;
    if (rolling && !json_is_object(rolling))
        return ctf_invalid(st, "spec.update.rolling must be an object.");
    const json_t *strategy = json_object_get(update, "strategy");
    const json_t *unavailable = json_object_get(beta ? rolling : update, "maxUnavailable");
    if (strategy) {
        size_t i = 0;
        while (i < CTF_LEN(STRATEGIES) && !kop_streq(json_string_value(strategy), STRATEGIES[i]))
            i++;
        if (i == CTF_LEN(STRATEGIES))
            return ctf_invalid(st,
                               "spec.update.strategy must be OnNextStart, Rolling or Recreate.");
        u.strategy = (ctf_update_strategy)i;
    }
    if ((beta ? rolling : unavailable) && u.strategy != CTF_UPDATE_ROLLING)
        return ctf_invalid(st, "%s is for the Rolling strategy only.", field);
    if (unavailable && !parse_unavailable(unavailable, &u))
        return ctf_invalid(st,
                           "%s%s must be a count from 1 to %d or a percentage from 1%% to 100%%.",
                           field, beta ? ".maxUnavailable" : "", CTF_UPDATE_MAX_COUNT);
    if (out)
        *out = u;
    return KOP_OK;
}

/* share: pct percent of total, rounded down, at least 1. */
static int share(int pct, int total)
{
    long n = (long)pct * (total > 0 ? total : 0) / 100;
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}

int ctf_update_budget(const ctf_update_spec *u, int total)
{
    switch (u->strategy) {
    case CTF_UPDATE_ROLLING:
        return u->percent ? share(u->max_unavailable, total) : u->max_unavailable;
    case CTF_UPDATE_RECREATE:
        return total > 1 ? total : 1;
    case CTF_UPDATE_ON_NEXT_START:
        break;
    }
    return 0;
}

int ctf_update_pool_budget(const ctf_update_spec *u, int target)
{
    switch (u->strategy) {
    case CTF_UPDATE_ROLLING:
        return ctf_update_budget(u, target);
    case CTF_UPDATE_RECREATE:
        return target > 1 ? target : 1;
    case CTF_UPDATE_ON_NEXT_START:
        break;
    }
    return share(CTF_UPDATE_DEFAULT_PERCENT, target);
}

kop_err ctf_update_version(const json_t *def, char out[CTF_VERSION_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int len = 0;
    out[0] = '\0';
    json_t *spec = json_copy(json_object_get(def, "spec")); /* shallow: only keys are removed */
    if (!spec)
        return json_is_object(json_object_get(def, "spec")) ? KOP_ENOMEM : KOP_EINVAL;
    for (size_t i = 0; i < CTF_LEN(NOT_BUILT); i++)
        json_object_del(spec, NOT_BUILT[i]);
    char *text = kop_meta_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(spec);
    if (!text)
        return KOP_ENOMEM;
    int ok = EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL);
    free(text);
    if (!ok || len != sizeof md)
        return KOP_ENOMEM;
    for (size_t i = 0; i < CTF_VERSION_LEN / 2; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[CTF_VERSION_LEN] = '\0';
    return KOP_OK;
}

ctf_update_verdict ctf_update_decide(const ctf_update_spec *u, const char *running,
                                     const char *current, bool started)
{
    if (!ctf_nonempty(running) || !current || strcmp(running, current) == 0 || !started)
        return CTF_UPDATE_APPLY;
    return u->strategy == CTF_UPDATE_ON_NEXT_START ? CTF_UPDATE_KEEP : CTF_UPDATE_ROLL;
}

bool ctf_update_deployment_rolling(const json_t *d)
{
    const json_t *spec = json_object_get(d, "spec"), *status = json_object_get(d, "status");
    const json_t *want_v = json_object_get(spec, "replicas");
    json_int_t want = want_v ? json_integer_value(want_v) : 1;
    json_int_t updated = json_integer_value(json_object_get(status, "updatedReplicas"));
    json_int_t total = json_integer_value(json_object_get(status, "replicas"));
    return json_integer_value(json_object_get(status, "observedGeneration")) <
               kop_meta_generation(d) ||
           updated < want || total > updated;
}

bool ctf_update_deployment_short(const json_t *d)
{
    const json_t *want = json_object_get(json_object_get(d, "spec"), "replicas");
    return json_integer_value(json_object_get(json_object_get(d, "status"), "availableReplicas")) <
           (want ? json_integer_value(want) : 1);
}

bool ctf_update_deployment_down(const json_t *d, time_t *since)
{
    const json_t *c = kop_meta_find_condition(json_object_get(d, "status"), "Available");
    const char *at = json_string_value(json_object_get(c, "lastTransitionTime"));
    time_t t = 0;
    *since = 0;
    if (!ctf_update_deployment_short(d))
        return false;
    if (c && !kop_streq(json_string_value(json_object_get(c, "status")), "True") && at &&
        ctf_parse_time(at, &t) == KOP_OK)
        *since = t;
    return true;
}

/* ---- the rollout ledger ------------------------------------------------------ */

struct ctf_rollout {
    pthread_mutex_t lock;
    json_t *defs; /* key -> {"slots": {uid: true}, "waiting": {uid: name}, "seeded": true,
                     "reported": ms (ctf_rollout_report_due),
                     "next": ms (ctf_rollout_report_at)} */
};

kop_err ctf_rollout_new(ctf_rollout **out)
{
    *out = NULL;
    ctf_rollout *r = calloc(1, sizeof *r);
    if (!r)
        return KOP_ENOMEM;
    r->defs = json_object();
    if (!r->defs) {
        free(r);
        return KOP_ENOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return KOP_OK;
}

void ctf_rollout_free(ctf_rollout *r)
{
    if (!r)
        return;
    json_decref(r->defs);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* entry returns key's record, made when make (lock held); NULL when none or no memory. */
static json_t *entry(ctf_rollout *r, const char *key, bool make)
{
    json_t *e = key ? json_object_get(r->defs, key) : NULL;
    if (e || !make || !key)
        return e;
    e = json_pack("{s:{}, s:{}, s:b}", "slots", "waiting", "seeded", 0);
    if (!e || json_object_set_new(r->defs, key, e) != 0)
        return NULL;
    return e;
}

bool ctf_rollout_seeded(ctf_rollout *r, const char *key)
{
    pthread_mutex_lock(&r->lock);
    bool seeded = json_is_true(json_object_get(entry(r, key, false), "seeded"));
    pthread_mutex_unlock(&r->lock);
    return seeded;
}

void ctf_rollout_seed(ctf_rollout *r, const char *key, const json_t *uids)
{
    const json_t *u;
    size_t i;
    pthread_mutex_lock(&r->lock);
    json_t *e = entry(r, key, true);
    json_t *slots = json_object_get(e, "slots");
    if (e && !json_is_true(json_object_get(e, "seeded"))) { /* the first seed only */
        json_array_foreach(uids, i, u)
        {
            if (json_string_value(u))
                json_object_set_new(slots, json_string_value(u), json_true());
        }
        json_object_set_new(e, "seeded", json_true());
    }
    pthread_mutex_unlock(&r->lock);
}

bool ctf_rollout_begin(ctf_rollout *r, const char *key, const char *uid, int budget,
                       const char *name)
{
    bool ok = false;
    if (!uid)
        return false;
    pthread_mutex_lock(&r->lock);
    json_t *e = entry(r, key, true);
    json_t *slots = json_object_get(e, "slots"), *waiting = json_object_get(e, "waiting");
    if (json_object_get(slots, uid))
        ok = true;
    else if (slots && (int)json_object_size(slots) < budget)
        ok = json_object_set_new(slots, uid, json_true()) == 0;
    if (ok)
        json_object_del(waiting, uid);
    else if (waiting && name)
        json_object_set_new(waiting, uid, json_string(name));
    pthread_mutex_unlock(&r->lock);
    return ok;
}

json_t *ctf_rollout_end(ctf_rollout *r, const char *key, const char *uid, int budget)
{
    json_t *wake = NULL;
    pthread_mutex_lock(&r->lock);
    json_t *e = entry(r, key, false);
    json_t *slots = json_object_get(e, "slots"), *waiting = json_object_get(e, "waiting");
    if (uid) {
        json_object_del(slots, uid);
        json_object_del(waiting, uid);
    }
    int free_slots = budget - (int)json_object_size(slots);
    if (e && free_slots > 0 && json_object_size(waiting) > 0 && (wake = json_array())) {
        const char *w;
        json_t *name, *tmp;
        json_object_foreach_safe(waiting, tmp, w, name)
        {
            if (free_slots-- <= 0)
                break;
            json_array_append(wake, name);
            json_object_del(waiting, w);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return wake;
}

void ctf_rollout_unwait(ctf_rollout *r, const char *key, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&r->lock);
    json_object_del(json_object_get(entry(r, key, false), "waiting"), uid);
    pthread_mutex_unlock(&r->lock);
}

bool ctf_rollout_holds(ctf_rollout *r, const char *key, const char *uid)
{
    pthread_mutex_lock(&r->lock);
    bool holds = uid && json_object_get(json_object_get(entry(r, key, false), "slots"), uid);
    pthread_mutex_unlock(&r->lock);
    return holds;
}

bool ctf_rollout_report_due(ctf_rollout *r, const char *key, int64_t now_ms, long every_ms,
                            long *wait_ms)
{
    bool due = true;
    *wait_ms = 0;
    pthread_mutex_lock(&r->lock);
    json_t *e = entry(r, key, true);
    json_t *at = json_object_get(e, "reported");
    int64_t since = at ? now_ms - (int64_t)json_integer_value(at) : every_ms;
    if (since >= 0 && since < every_ms) {
        due = false;
        *wait_ms = (long)(every_ms - since);
    } else if (e) {
        json_object_set_new(e, "reported", json_integer((json_int_t)now_ms));
    }
    pthread_mutex_unlock(&r->lock);
    return due;
}

void ctf_rollout_report_at(ctf_rollout *r, const char *key, int64_t at_ms)
{
    pthread_mutex_lock(&r->lock);
    json_t *e = entry(r, key, at_ms > 0);
    if (e)
        json_object_set_new(e, "next", json_integer((json_int_t)at_ms));
    pthread_mutex_unlock(&r->lock);
}

bool ctf_rollout_report_coming(ctf_rollout *r, const char *key, int64_t now_ms)
{
    pthread_mutex_lock(&r->lock);
    json_int_t at = json_integer_value(json_object_get(entry(r, key, false), "next"));
    pthread_mutex_unlock(&r->lock);
    return at > 0 && at >= now_ms;
}

int ctf_rollout_count(ctf_rollout *r, const char *key)
{
    pthread_mutex_lock(&r->lock);
    int n = (int)json_object_size(json_object_get(entry(r, key, false), "slots"));
    pthread_mutex_unlock(&r->lock);
    return n;
}

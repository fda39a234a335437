/*
 * pool.c - how big a warm pool is (see pool.h): reading a
 * definition's spec.pool, how many warm instances to keep, how long a
 * failing pool waits. The pool controller itself is controller/pool.c, the
 * claim side controller/claim.c; the objects of a warm instance are built
 * by instance.c (ctf_build_pooled_children), its namespace named by names.c.
 *
 * A pool whose new instances keep failing waits before it starts more,
 * longer each time (ctf_pool_backoff_ms), as the kubelet does for a crash
 * loop: a broken image must not churn namespaces at the pace of failure.
 *
 * The sizing rule is deliberately simple enough to state in one line and
 * to check by hand in a dashboard: keep min, plus what the last
 * CTF_POOL_WINDOW_S seconds asked for, at most max. What was asked for is
 * counted in Challenges, not in attempts: one Challenge retried, found lost
 * or refused by admission and woken again would otherwise fill the pool
 * alone, at a CTF's start exactly when the slots are short.
 */
#include <stdio.h>
#include <string.h>

#include "core/definition.h"
#include "core/json.h"
#include "core/names.h"
#include "core/pool.h"

/* pool_count reads spec.pool[key] (absent: 0); false when it is not in [0, CTF_POOL_MAX]. */
static bool pool_count(const json_t *pool, const char *key, int *out)
{
    const json_t *v = json_object_get(pool, key);
    *out = 0;
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > CTF_POOL_MAX)
        return false;
    *out = (int)json_integer_value(v);
    return true;
}

kop_err ctf_pool_parse(const json_t *def, ctf_pool_spec *out, kop_status *st)
{
    const json_t *pool = ctf_get2(def, "spec", "pool");
    const json_t *autoscale = json_object_get(pool, "autoscale");
    ctf_pool_spec p = {0, 0, false};

    if (out)
        *out = p;
    if (!pool)
        return KOP_OK;
    if (!json_is_object(pool))
        return ctf_invalid(st, "spec.pool must be an object.");
    if (!pool_count(pool, "min", &p.min) || !pool_count(pool, "max", &p.max))
        return ctf_invalid(st, "spec.pool.min and spec.pool.max must be integers from 0 to %d.",
                           CTF_POOL_MAX);
    if (!json_object_get(pool, "max"))
        p.max = p.min; /* the schema's default: max = min */
    if (p.min > p.max)
        return ctf_invalid(st, "spec.pool.min must not be more than spec.pool.max.");
    if (autoscale && !json_is_boolean(autoscale))
        return ctf_invalid(st, "spec.pool.autoscale must be true or false.");
    p.autoscale = json_is_true(autoscale);
    if (out)
        *out = p;
    return KOP_OK;
}

bool ctf_pool_enabled(const ctf_pool_spec *p)
{
    return p && p->max > 0;
}

int ctf_pool_target(const ctf_pool_spec *p, int recent_requests)
{
    if (!ctf_pool_enabled(p))
        return 0;
    if (!p->autoscale || recent_requests <= 0)
        return p->min;
    /* min + requests, without overflow, at most max. */
    return recent_requests >= p->max - p->min ? p->max : p->min + recent_requests;
}

kop_err ctf_pool_demand_note(json_t *window, const char *uid, int64_t now_ms, size_t cap)
{
    if (!json_is_object(window) || !uid || cap == 0)
        return KOP_EINVAL;
    if (json_object_get(window, uid))
        return KOP_OK; /* counted already in this window */
    while (json_object_size(window) >= cap)
        json_object_del(window, json_object_iter_key(json_object_iter(window)));
    return json_object_set_new(window, uid, json_integer(now_ms)) == 0 ? KOP_OK : KOP_ENOMEM;
}

size_t ctf_pool_demand_count(json_t *window, int64_t now_ms, int64_t window_ms)
{
    /* Oldest first: drop from the front up to the first entry still inside. */
    void *it;
    while ((it = json_object_iter(window)) &&
           json_integer_value(json_object_iter_value(it)) < now_ms - window_ms)
        json_object_del(window, json_object_iter_key(it));
    return json_object_size(window);
}

int64_t ctf_pool_backoff_ms(int failures)
{
    if (failures <= 0)
        return 0;
    int64_t ms = CTF_POOL_BACKOFF_BASE_MS;
    for (int i = 1; i < failures && ms < CTF_POOL_BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < CTF_POOL_BACKOFF_MAX_MS ? ms : CTF_POOL_BACKOFF_MAX_MS;
}

/*
 * core/pool.h - how big a definition's warm pool is (pool.c): its
 * spec.pool read, how many unclaimed warm instances to keep, the demand
 * that sizes it, and how long a failing pool waits. Pure. The claim side
 * is controller/claim.c, the pool controller controller/pool.c; the
 * objects of a warm instance are built by instance.c
 * (ctf_build_pooled_children), its namespace named by names.c
 * (ctf_pool_namespace).
 */
#ifndef CTF_CORE_POOL_H
#define CTF_CORE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>

/*
 * ctf_pool_spec: a definition's spec.pool. min instances are kept warm
 * (built, Ready, claimed by no one); with autoscale the pool may grow up to
 * max with demand (ctf_pool_target). A definition without spec.pool, or
 * with min and max 0, has no pool.
 */
typedef struct ctf_pool_spec {
    int min, max;
    bool autoscale;
} ctf_pool_spec;

#define CTF_POOL_MAX 5000 /* the schema's bound on spec.pool.min and max */

/*
 * ctf_pool_parse reads def's spec.pool into *out (all zero without one).
 * KOP_EINVAL explained in st when min or max is not an integer in
 * [0, CTF_POOL_MAX], min > max, or autoscale not a boolean.
 */
KOP_NODISCARD kop_err ctf_pool_parse(const json_t *def, ctf_pool_spec *out, kop_status *st);

/* ctf_pool_enabled: the definition asks for warm instances (max > 0). */
bool ctf_pool_enabled(const ctf_pool_spec *p);

/*
 * ctf_pool_target returns how many unclaimed warm instances to keep: min
 * without autoscale; with it, min plus the demand of the last
 * CTF_POOL_WINDOW_S seconds (the Challenges that asked for a warm instance,
 * served or not, each once: ctf_pool_demand_count), capped at max: the pool
 * holds what the last window asked for, and shrinks back to min as a quiet
 * window slides by.
 */
#define CTF_POOL_WINDOW_S 300
int ctf_pool_target(const ctf_pool_spec *p, int recent_requests);

/*
 * A pool's demand window: a JSON object, Challenge uid -> monotonic ms of
 * its first request in the window, oldest first (insertion order). A
 * Challenge asks again when its claim is retried, found lost, or refused by
 * admission and woken again; it counts once all the same.
 *
 * ctf_pool_demand_note records uid's request at now_ms; a uid already in the
 * window is left as it is. With cap entries, the oldest goes first.
 * KOP_EINVAL for no window, uid or cap; KOP_ENOMEM.
 *
 * ctf_pool_demand_count drops the entries older than window_ms before now_ms
 * and returns how many remain; a uid dropped counts again when it next asks.
 */
kop_err ctf_pool_demand_note(json_t *window, const char *uid, int64_t now_ms, size_t cap);
size_t ctf_pool_demand_count(json_t *window, int64_t now_ms, int64_t window_ms);

/*
 * ctf_pool_backoff_ms returns how long a pool waits before it starts new
 * warm instances after failures passes in a row replaced failed ones (a
 * bad image, a crash loop): 0 for none, then CTF_POOL_BACKOFF_BASE_MS,
 * doubling each time, at most CTF_POOL_BACKOFF_MAX_MS. A pass that sees
 * every warm instance Ready, or a new generation of the definition, starts
 * the count again.
 */
#define CTF_POOL_BACKOFF_BASE_MS 5000
#define CTF_POOL_BACKOFF_MAX_MS  300000
int64_t ctf_pool_backoff_ms(int failures);

#endif /* CTF_CORE_POOL_H */

/*
 * controller/pool.h - the warm pools' state, shared by the claim side
 * (claim.c) and the pool controller (pool.c), and the pool controller's
 * entry points for setup.c. Internal to controller/.
 *
 * One lock guards every table. A warm namespace is written by one of the
 * two at a time: a claim reserves it in taken, the pool pass holds it in
 * busy, and neither takes one the other holds.
 *
 * In memory, per process: the places decided (a claim the cache may not
 * show yet must not be made twice), the claims of unknown outcome, the
 * namespaces the pool pass is writing, each pool's claim cursor and last
 * look, the request times that size an autoscaled pool, and each pool's
 * run of failures. Losing them on a restart is safe: the caches show every
 * claim (an unknown one shows as its namespace's labels, or as an orphan
 * once its Challenge is gone), a pool falls back to min until demand shows
 * again, a new process looks at every warm instance once (and writes
 * nothing where the digest of the last full apply, stamped on the server,
 * still holds: core/applied.c), and a failing pool fails again (and waits).
 */
#ifndef CTF_CONTROLLER_POOL_H
#define CTF_CONTROLLER_POOL_H

#include <pthread.h>
#include <stdio.h>

#include "controller/operator.h"

#define POOL_KEY_SIZE    320 /* "<namespace>/<definition>" */
#define POOL_DECIDED_MAX 200000
#define POOL_INDEX_FREE  "pool-free" /* unclaimed warm namespaces by their definition's name */

struct ctf_pool {
    pthread_mutex_t lock;
    json_t *decided;  /* Challenge uid -> {"ns": namespace, "id": warm id (pooled only)} */
    json_t *taken;    /* warm namespace -> Challenge uid: claimed (or being claimed) here */
    json_t *pending;  /* Challenge uid -> {"ns", "id"}: a claim whose outcome is not known yet */
    json_t *busy;     /* warm namespace -> true: the pool pass is writing it; not claimable */
    json_t *cursors;  /* pool key -> where the next claim reads the free index (kop_index_page) */
    json_t *seen;     /* pool key -> {warm namespace -> {"rv", "gen", "at", "state"}}: last pass */
    json_t *dirty;    /* warm namespace -> true: an object of it changed since it was looked at */
    json_t *requests; /* pool key -> its demand window (core/pool.h): {Challenge uid -> ms} */
    json_t *targets;  /* pool key -> the target last acted on */
    json_t *reported; /* pool key -> when status.pool was last written (kop_mono_ms) */
    json_t *failing;  /* pool key -> {"n": passes with failures, "gen": generation, "until": ms} */
    kop_controller *ctl;
    kop_metric *target_metric, *instances_metric, *claims_metric;
};

/* ctf_pool_key writes a pool's key, "<namespace>/<definition>". */
static inline void ctf_pool_key(const char *ns, const char *def, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", ns ? ns : "", def ? def : "");
}

/* ctf_is_claimed: a warm namespace a Challenge claimed (its labels name it). */
static inline bool ctf_is_claimed(const json_t *nsobj)
{
    return kop_meta_label(nsobj, CTF_LABEL_CHALLENGE) != NULL;
}

/*
 * ctf_pool_build_warm builds warm instance id of def as the pool applies it
 * (ctf_build_pooled_children with no Challenge and the warm flag: a static
 * one, or "" for a dynamic one). *out owned.
 */
KOP_NODISCARD kop_err ctf_pool_build_warm(ctf_operator *op, const json_t *def, const char *id,
                                          json_t **out, kop_status *st);

/* ctf_pool_in_use: the warm namespace name is claimed, being claimed or being written here
 * (claim.c). */
bool ctf_pool_in_use(ctf_pool *p, const char *name);

/* ctf_pool_mark_dirty records that an object of the warm namespace ns changed. */
void ctf_pool_mark_dirty(ctf_pool *p, const char *ns);

/* ctf_pool_reconcile is the pool controller's reconcile function (keyed by definition). */
kop_result ctf_pool_reconcile(const kop_reconcile *req, void *user);

#endif /* CTF_CONTROLLER_POOL_H */

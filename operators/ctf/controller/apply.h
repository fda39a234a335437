/*
 * controller/apply.h - applying an instance's children (apply.c), skipping
 * what the caches show was applied already (core/applied.h).
 */
#ifndef CTF_CONTROLLER_APPLY_H
#define CTF_CONTROLLER_APPLY_H

#include "controller/operator.h"
#include "controller/observe.h"

/*
 * ctf_apply_built applies an instance's children (built by core/instance.c)
 * unless the caches show they are what was applied last for key (a
 * Challenge's or a warm instance's uid: applied.c). A refusal by the
 * cluster fills o (Error) and returns KOP_OK; *applied (may be NULL) says
 * whether this call wrote.
 */
KOP_NODISCARD kop_err ctf_apply_built(ctf_operator *op, const char *key, json_t *children,
                                      ctf_observation *o, const kop_reconcile *req, bool *applied);

/* ctf_apply_seen tells what the caches show of children (ctf_applied_seen). */
ctf_applied_seen ctf_apply_seen(ctf_operator *op, const json_t *children);

/*
 * ctf_apply_seed takes the newest digest stamped on children, as the
 * caches show them, as key's record when key has none (ctf_applied_seed).
 */
void ctf_apply_seed(ctf_operator *op, const char *key, const json_t *children, const char *digest,
                    const ctf_applied_seen *seen, int64_t now);

/*
 * ctf_apply_children applies every child in order; *generations sums the
 * Deployments' as applied. A refusal fills o (Error). KOP_ECONFLICT when a
 * warm Namespace turns out claimed: nothing after it is written.
 */
KOP_NODISCARD kop_err ctf_apply_children(ctf_operator *op, json_t *children, int64_t *generations,
                                         ctf_observation *o, const kop_reconcile *req);

/* ctf_min_positive returns the smaller of two delays, a delay <= 0 being none. */
static inline long ctf_min_positive(long a, long b)
{
    if (a <= 0)
        return b;
    if (b <= 0)
        return a;
    return a < b ? a : b;
}

#endif /* CTF_CONTROLLER_APPLY_H */

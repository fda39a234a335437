/*
 * controller/claim.h - the claim side of warm pools (claim.c): where a
 * Challenge's instance lives, and the claim of a warm instance by one
 * conditional write.
 */
#ifndef CTF_CONTROLLER_CLAIM_H
#define CTF_CONTROLLER_CLAIM_H

#include "controller/operator.h"

/* ctf_place: where a Challenge's instance lives. */
typedef enum ctf_place {
    CTF_PLACE_UNDECIDED = 0, /* not decided yet: ask ctf_pool_claim */
    CTF_PLACE_FRESH,         /* its own namespace, named from the Challenge */
    CTF_PLACE_POOLED,        /* a warm instance it claimed */
} ctf_place;

/*
 * ctf_pool_place tells where chal's instance lives, from the claims this
 * process made and the caches; ns (size >= CTF_NAMESPACE_SIZE) gets the
 * namespace (the fresh one's name for CTF_PLACE_FRESH and UNDECIDED), id
 * (size > CTF_POOL_ID_LEN) the warm instance's id for CTF_PLACE_POOLED.
 */
ctf_place ctf_pool_place(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                         size_t id_size);

/*
 * ctf_pool_claim decides an undecided chal's place: it claims a Ready,
 * unclaimed warm instance of def (one conditional write of its Namespace's
 * labels: of two claimers exactly one wins) or, with none, fresh. The
 * decision is kept until ctf_pool_forget. ns and id as ctf_pool_place.
 * KOP_OK with *place set; an apiserver error (retry) otherwise.
 */
KOP_NODISCARD kop_err ctf_pool_claim(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                                     const json_t *def, char *ns, size_t size, char *id,
                                     size_t id_size, ctf_place *place);

/* ctf_pool_wanted: def asks for a warm pool (a claim may take a warm slot). */
bool ctf_pool_wanted(const json_t *def);

/*
 * ctf_pool_refresh_flag makes the kubelet rewrite the flag file of the
 * running pods in ns now (an annotation on each pod: a pod update makes it
 * remount its Secret volumes) rather than at its next periodic sync.
 */
void ctf_pool_refresh_flag(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                           const char *ns);

/* ctf_pool_forget drops the claim record of the Challenge uid (its finalizer ran). */
void ctf_pool_forget(ctf_operator *op, const char *uid);

/*
 * A claim is a conditional write (a merge patch of the warm Namespace's
 * labels carrying the resourceVersion the claimer saw). Its answer may be
 * lost: the apiserver committed it and the connection dropped, or the
 * request timed out, or a 5xx came back from a layer in front of it. The
 * claimer then reads the Namespace from the server (never the cache, which
 * may not show the claim yet) before it lets the namespace go or tries
 * another: one Challenge never holds two warm instances.
 *
 * ctf_claim_answer sorts what the claim's write returned:
 */
typedef enum ctf_claim_answer {
    CTF_CLAIM_DONE = 0, /* 2xx: the namespace is the claimer's */
    CTF_CLAIM_GONE,     /* 404: the namespace went; try the next */
    CTF_CLAIM_REFUSED,  /* refused before it acted (400, 401, 403, 422, 429, ...): not claimed */
    CTF_CLAIM_CHECK,    /* 409, or an outcome not known (timeout, connection, 5xx): read it */
} ctf_claim_answer;

/* ctf_pool_claim_answer sorts err, returned by a claim's write. */
ctf_claim_answer ctf_pool_claim_answer(kop_err err);

/* ctf_claim_verdict: whose a warm Namespace is, as the server shows it. */
typedef enum ctf_claim_verdict {
    CTF_CLAIM_MINE = 0, /* labelled for the claimer (its uid annotation): the claim landed */
    CTF_CLAIM_FREE,     /* claimed by no one and not being deleted: it may be claimed again */
    CTF_CLAIM_LOST,     /* another Challenge's, being deleted, or gone (NULL) */
} ctf_claim_verdict;

/*
 * ctf_pool_claim_verdict judges nsobj (the Namespace as the server returned
 * it; NULL: not found) for the Challenge whose uid is uid. Pure.
 */
ctf_claim_verdict ctf_pool_claim_verdict(const json_t *nsobj, const char *uid);

#endif /* CTF_CONTROLLER_CLAIM_H */

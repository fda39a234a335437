/*
 * controller/observe.h - what a reconcile sees of an instance in the
 * caches (observe.c): Running, Pending or why it failed.
 */
#ifndef CTF_CONTROLLER_OBSERVE_H
#define CTF_CONTROLLER_OBSERVE_H

#include <time.h>

#include "controller/operator.h"

/* ctf_observation: the status one pass decides on. */
typedef struct ctf_observation {
    const char *phase;  /* currentStatus */
    const char *reason; /* CamelCase, Error only */
    const char *waiting; /* CamelCase, what a Pending instance waits for (the conditions'
                          * reason; NULL: InstanceStarting) */
    char message[512];
    json_t *endpoints; /* owned, may be NULL */
    long requeue_ms;   /* 0: none */
    int64_t generation; /* the definition generation the instance runs (0: not known) */
    bool updated;       /* back Running from an update (status.updatedAt) */
    char version[CTF_VERSION_LEN + 1]; /* the definition version it runs ("": not known) */
} ctf_observation;

/* ctf_observe_error sets o to Error with reason and the formatted message. */
void ctf_observe_error(ctf_observation *o, const char *reason, const char *fmt, ...)
    KOP_PRINTF(3, 4);

/*
 * ctf_observe_instance decides Running, Pending or a failure of chal's
 * instance in namespace ns from the caches: Running once every Deployment is
 * available, every endpoint known and every exposed Service has a ready
 * endpoint, and in the gateway mode once our Gateway accepted every route
 * (Accepted and ResolvedRefs True in its status.parents; until then
 * Pending, o->waiting CTF_REASON_GATEWAY_PENDING or CTF_REASON_ROUTE_REFUSED
 * with a message naming the Gateway, the route and why, and at the start
 * timeout Error with that reason); Error on an image that cannot be pulled,
 * a crash loop or the start timeout; Pending (with a requeue at the timeout) until then. An
 * instance being replaced by a new version (o->phase Updating on entry)
 * has no start timeout: it stays Updating until it is Running.
 */
void ctf_observe_instance(ctf_operator *op, const json_t *chal, const json_t *def, const char *ns,
                          ctf_observation *o);

/*
 * ctf_instance_ready: the instance in namespace ns answers (the Running
 * rule above; a Deployment in the middle of a rollout is not available:
 * core/update.h), with its endpoints in o->endpoints (replaced); false with o
 * set to Error when a container cannot start, false and o untouched but its
 * endpoints while it is starting.
 */
bool ctf_instance_ready(ctf_operator *op, const json_t *def, const char *ns, ctf_observation *o);

/* ctf_created_at returns chal's creation time (now when it has none). */
time_t ctf_created_at(const json_t *chal);

#endif /* CTF_CONTROLLER_OBSERVE_H */

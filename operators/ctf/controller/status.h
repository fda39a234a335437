/*
 * controller/status.h - writing what was observed to a Challenge's status
 * (status.c).
 */
#ifndef CTF_CONTROLLER_STATUS_H
#define CTF_CONTROLLER_STATUS_H

#include <time.h>

#include "controller/operator.h"
#include "controller/observe.h"

/*
 * ctf_write_status patches chal's status to what o says (namespace ns,
 * expiry expires when > 0) when it differs from what the cache shows, and
 * tells of a transition (log, Event, ctf_instance_ready_seconds).
 * KOP_ECONFLICT, with nothing written, when chal (the cached version) is
 * no longer the stored one: look again once the cache has caught up.
 */
KOP_NODISCARD kop_err ctf_write_status(ctf_operator *op, const kop_reconcile *req,
                                       const json_t *chal, const ctf_observation *o, const char *ns,
                                       time_t expires);

#endif /* CTF_CONTROLLER_STATUS_H */

/*
 * controller/reconcile.h - the Challenge controller's reconcile function
 * (reconcile.c), for setup.c.
 */
#ifndef CTF_CONTROLLER_RECONCILE_H
#define CTF_CONTROLLER_RECONCILE_H

#include "controller/operator.h"

/* ctf_reconcile is the Challenge controller's reconcile function. */
kop_result ctf_reconcile(const kop_reconcile *req, void *user);

#endif /* CTF_CONTROLLER_RECONCILE_H */

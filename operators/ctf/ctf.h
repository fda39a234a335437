/*
 * ctf.h - what the CTF operator's files share: its settings, the resources
 * it touches, and the reconciler's entry points. Not a library interface.
 */
#ifndef CTF_H
#define CTF_H

#include <stdbool.h>

#include <kop/kop.h>

#include "duration.h"
#include "instance.h"

/* Resources. */
extern const kop_resource CTF_CHALLENGES;
extern const kop_resource CTF_DEFINITIONS;
extern const kop_resource CTF_NAMESPACES;
extern const kop_resource CTF_DEPLOYMENTS;
extern const kop_resource CTF_PODS;
extern const kop_resource CTF_SERVICES;
extern const kop_resource CTF_ENDPOINTSLICES;
extern const kop_resource CTF_SECRETS;

#define CTF_FINALIZER     "ctf.kopc.io/instance"
#define CTF_FIELD_MANAGER "kopc-ctf"
#define CTF_MANAGED       "app.kubernetes.io/managed-by=kopc-ctf"

/* ctf_operator: settings from the command line, and the shared caches. */
typedef struct ctf_operator {
    ctf_config instance;         /* ingress domain, node address */
    const char *watch_namespace; /* --namespace; NULL: all */
    int max_per_team;            /* --max-instances-per-team */
    int max_instances;           /* --max-instances */
    bool install_crds;           /* --install-crds */

    kop_manager *mgr;
    kop_controller *ctl;
    kop_informer *challenges, *definitions, *namespaces, *deployments, *pods, *services;
    kop_informer *endpointslices; /* of the instances' Services: is an endpoint ready? */
    kop_recorder *events;
    kop_metric *instances;     /* ctf_instances{status} */
    kop_metric *ready_seconds; /* ctf_instance_ready_seconds */
} ctf_operator;

/* Indexes of the Challenge cache: by spec.definition and by spec.team. */
#define CTF_INDEX_DEFINITION "definition"
#define CTF_INDEX_TEAM       "team"

/*
 * ctf_setup_controller adds the Challenge controller to op->mgr with every
 * watch it needs, and the metrics.
 */
KOP_NODISCARD kop_err ctf_setup_controller(ctf_operator *op, kop_status *st);

/*
 * ctf_install_crds applies the CRDs compiled into the binary and waits until
 * they are Established (--install-crds).
 */
KOP_NODISCARD kop_err ctf_install_crds(kop_client *c, kop_status *st);

#endif /* CTF_H */

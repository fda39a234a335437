/*
 * core/definition.h - the checks of a ChallengeDefinition (definition.c):
 * what the CRD schema cannot express, and what it does, re-checked for
 * definitions stored by older CRDs. Pure.
 */
#ifndef CTF_CORE_DEFINITION_H
#define CTF_CORE_DEFINITION_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

/* status.reason of a Challenge whose definition fails ctf_validate_definition. */
#define CTF_REASON_INVALID_DEFINITION "InvalidDefinition"

/*
 * ctf_validate_definition checks a ChallengeDefinition (the whole object,
 * with spec) for what the CRD schema cannot express, and re-checks what it
 * does, since definitions may come from older CRDs:
 *  - pods: 1-10, names unique DNS labels, replicas 1-5, a template with
 *    containers; every container and initContainer has a unique DNS-label
 *    name and an image;
 *  - what restricted Pod Security refuses anyway: hostNetwork, hostPID,
 *    hostIPC, hostPort, privileged, runAsUser 0, capabilities added other
 *    than NET_BIND_SERVICE, volumes other than configMap, csi, downwardAPI,
 *    emptyDir, ephemeral, persistentVolumeClaim, projected and secret;
 *  - what the operator injects: a volume named "flag", a mount at /flag;
 *  - expose: at most 10, names unique DNS-1035 labels (they name Services),
 *    naming a pod, port 1-65535 and, when that pod's containers declare any
 *    containerPort, one of those; type HTTP or TCP;
 *  - flag: not both static and dynamic, static non-empty, dynamic with a
 *    secretRef name; lifetime and startTimeout parse, are positive, default
 *    <= max; network.egress None or Internet; security and resources well
 *    formed (quantities); spec.update well formed (core/update.h).
 * Returns KOP_OK, or KOP_EINVAL with one sentence naming the field in
 * st->message and st->reason CTF_REASON_INVALID_DEFINITION. st may be NULL.
 */
KOP_NODISCARD kop_err ctf_validate_definition(const json_t *def, kop_status *st);

/*
 * ctf_invalid records a failure of the definition in st (reason
 * CTF_REASON_INVALID_DEFINITION, the message formatted; st may be NULL) and
 * returns KOP_EINVAL.
 */
kop_err ctf_invalid(kop_status *st, const char *fmt, ...) KOP_PRINTF(2, 3);

#endif /* CTF_CORE_DEFINITION_H */

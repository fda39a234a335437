/*
 * core/pod.h - what the operator does to every pod template of a
 * definition (pod.c): harden it, and make its readiness mean that the
 * program answers. Pure.
 */
#ifndef CTF_CORE_POD_H
#define CTF_CORE_POD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

#include "core/flag.h"

/* How often the default readiness probe (a TCP connect to the exposed port)
 * runs: what bounds the delay between a program listening and Running. */
#define CTF_PROBE_PERIOD_S 1

/*
 * ctf_harden_pod_spec hardens a pod spec (a copy the caller owns) in place,
 * keeping every field it does not need to change:
 *  - automountServiceAccountToken false, enableServiceLinks false;
 *    hostNetwork, hostPID and hostIPC removed;
 *  - pod securityContext: runAsNonRoot true, seccompProfile RuntimeDefault
 *    (a Localhost profile is kept). No uid is forced: an image that runs as
 *    a numeric non-root USER works as built; one that runs as root or as a
 *    named user is refused by the kubelet with a clear event, and the author
 *    sets runAsUser in the template (forcing 65534 would silently break the
 *    images that follow the rules and own their files as their USER);
 *  - every container and initContainer: allowPrivilegeEscalation false,
 *    privileged false, runAsNonRoot true, capabilities {drop: [ALL]} plus
 *    add: [NET_BIND_SERVICE] only when the template added it,
 *    readOnlyRootFilesystem true when security.readOnlyRootFilesystem, a
 *    seccompProfile other than RuntimeDefault/Localhost replaced by
 *    RuntimeDefault, and resources (requests cpu 50m memory 64Mi, limits cpu
 *    500m memory 256Mi) when it sets neither requests nor limits;
 *  - flag CTF_FLAG_ENV_AND_FILE: env FLAG from secretKeyRef flag/flag
 *    (first, replacing any FLAG of the template) and the volume "flag"
 *    (Secret flag, key flag to path flag, mode 0444) mounted read-only at
 *    /flag in every container; CTF_FLAG_FILE: the volume only, and any FLAG
 *    of the template removed;
 *  - runtimeClassName from security.runtimeClassName.
 * security is the definition's spec.security (may be NULL). Returns KOP_OK,
 * KOP_EINVAL when spec is not an object, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_harden_pod_spec(json_t *spec, const json_t *security,
                                          ctf_flag_delivery flag);

/*
 * ctf_default_probes gives every container of the definition's pod named pod
 * (its template spec, a copy the builder owns) that has no readinessProbe a
 * TCP one: on the port the pod is exposed on in def_spec, else on the
 * container's first declared TCP port. False when memory ran out.
 */
bool ctf_default_probes(const json_t *def_spec, const char *pod, json_t *tmpl);

#endif /* CTF_CORE_POD_H */

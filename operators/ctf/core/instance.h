/*
 * core/instance.h - the builder (instance.c): from a ChallengeDefinition
 * and a Challenge (or a warm instance's id), every object of the instance,
 * and its endpoints. No network, no cluster, no clock. Its names come from
 * names.h, its flag from flag.h, its pods' hardening from pod.h.
 *
 * The contract is docs/ctf-resources.md. Objects here are jansson documents
 * shaped as the apiserver wants them for server-side apply: complete
 * (apiVersion, kind, metadata.name, metadata.namespace, labels) and free of
 * status and server-set fields. Everything is deterministic: the same inputs
 * give the same names and the same objects, so creating twice is creating
 * once.
 *
 * Ownership: inputs are borrowed for the call. Every json_t * handed back is
 * a new reference the caller must json_decref; every char * handed back is
 * malloc'ed and the caller frees it. Failures leave *out NULL.
 */
#ifndef CTF_CORE_INSTANCE_H
#define CTF_CORE_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

#include "core/definition.h"
#include "core/flag.h"
#include "core/names.h"
#include "core/pod.h"
#include "core/update.h"

/*
 * ctf_build_children returns in *out a new array of every object of the
 * challenge's instance, in apply order:
 *   Namespace; Secret "flag" (only when flag is not NULL); ResourceQuota
 *   "instance"; LimitRange "defaults"; NetworkPolicies "default-deny", one
 *   "allow-exposed-<pod>" per exposed pod (in order of first exposure),
 *   "allow-same-instance", "allow-dns", and "allow-internet" with egress
 *   Internet; a Deployment per pod; a Service per exposure; a ClusterIP
 *   Service named after each pod with every port its containers declare
 *   (unless the pod declares none, or an exposure has the pod's name), so
 *   the pods of an instance reach each other by name; an Ingress per HTTP
 *   exposure when cfg->ingress_domain is set (and the gateway mode is off).
 * In the gateway mode (core/gateway.h: cfg->gateway.domain set) every
 * exposure's Service is ClusterIP, the quota allows no NodePort, the
 * allow-exposed policies admit the gateway's pods only
 * (ctf_gateway_peer), no Ingress is made, and a route per exposure comes
 * last: a TLSRoute (TCP) or HTTPRoute (HTTP) named as the exposure, for
 * the host ctf_gateway_host gives the Challenge's team (a warm instance
 * has none until claimed). Each Deployment is annotated
 *   with the definition's version and generation (core/update.h). Every
 *   container without a readinessProbe gets a TCP one (every
 *   CTF_PROBE_PERIOD_S) on the port it is exposed on, else on its first
 *   declared TCP port, so that Ready means the program accepts connections.
 * def is the ChallengeDefinition (validated here with
 * ctf_validate_definition), challenge the Challenge (see
 * ctf_instance_labels; its metadata.uid, when present, is annotated on the
 * Namespace), flag the value from ctf_flag (NULL: the definition has none,
 * so no Secret and nothing injected). KOP_EINVAL explained in st,
 * KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_build_children(const ctf_config *cfg, const json_t *def,
                                         const json_t *challenge, const char *flag, json_t **out,
                                         kop_status *st);

/*
 * ctf_build_pooled_children returns, like ctf_build_children, every object
 * of warm instance id of def, in namespace ctf_pool_namespace. Every object
 * carries the pool's labels (managed-by, definition, pool, pool-namespace)
 * instead of a team's, so nothing but the Namespace changes when a team
 * claims it: challenge (NULL while warm) is the claiming Challenge, whose
 * labels (ctf_instance_labels) and uid annotation go on the Namespace only.
 * flag: NULL when the definition has none; a static flag is delivered as
 * ctf_build_children does; a dynamic one by file only (CTF_FLAG_FILE), ""
 * while warm, the team's once claimed: the kubelet refreshes the file in a
 * running pod. KOP_EINVAL explained in st, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_build_pooled_children(const ctf_config *cfg, const json_t *def,
                                                const char *id, const json_t *challenge,
                                                const char *flag, json_t **out, kop_status *st);

/*
 * ctf_endpoints computes status.endpoints of an instance in namespace ns from
 * the definition and the instance's Services as stored (an array of Service
 * objects, e.g. from the cache; may be NULL). One entry {name, type,
 * address} per exposure, in expose[] order:
 *  - HTTP with cfg->ingress_domain: "http://<host>" (ctf_ingress_host);
 *  - HTTP without: "http://<node_address>:<nodePort>";
 *  - TCP: "<node_address>:<nodePort>" (an IPv6 node address in brackets).
 * In the gateway mode the list is empty and *complete true: the endpoints
 * are the team's hosts (ctf_gateway_endpoints), and no port is waited for.
 * An exposure whose Service has no nodePort yet is left out and *complete
 * is set false; otherwise true. *out is a new array. KOP_EINVAL for bad
 * arguments, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_endpoints(const ctf_config *cfg, const json_t *def, const char *ns,
                                    const json_t *services, json_t **out, bool *complete);

#endif /* CTF_CORE_INSTANCE_H */

/*
 * instance.h - the pure part of the CTF operator: from a ChallengeDefinition
 * and a Challenge, every object of the instance, its namespace name, its flag
 * and its endpoints. No network, no cluster, no clock.
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
 *
 * The flag is a secret: it is written only into the Secret "flag" (base64
 * data) and reaches the pods through a secretKeyRef and a secret volume;
 * no label, annotation, env literal or message ever carries it.
 */
#ifndef CTF_INSTANCE_H
#define CTF_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>
#include <kop/meta.h>

#include "duration.h"

/* Labels and annotations the contract puts on every object of an instance. */
#define CTF_LABEL_MANAGED_BY       "app.kubernetes.io/managed-by"
#define CTF_MANAGED_BY             "kopc-ctf"
#define CTF_LABEL_TEAM             "ctf.kopc.io/team"
#define CTF_LABEL_DEFINITION       "ctf.kopc.io/definition"
#define CTF_LABEL_CHALLENGE        "ctf.kopc.io/challenge"
#define CTF_LABEL_CHALLENGE_NS     "ctf.kopc.io/challenge-namespace"
#define CTF_LABEL_POD              "ctf.kopc.io/pod"
#define CTF_ANNOTATION_CHALLENGE_UID "ctf.kopc.io/challenge-uid"
/* A warm pool's instance (pool.c): its id, and its definition's namespace.
 * Once a Challenge claims it, its Namespace also carries the labels above
 * that name the Challenge, and the Challenge's uid annotation. */
#define CTF_LABEL_POOL    "ctf.kopc.io/pool"
#define CTF_LABEL_POOL_NS "ctf.kopc.io/pool-namespace"
#define CTF_POOL_ID_LEN   10 /* hex digits of a warm instance's random id */

/* How often the default readiness probe (a TCP connect to the exposed port)
 * runs: what bounds the delay between a program listening and Running. */
#define CTF_PROBE_PERIOD_S 1

/* The Secret holding the flag, its key, and where pods see it. */
#define CTF_FLAG_SECRET     "flag"
#define CTF_FLAG_KEY        "flag"
#define CTF_FLAG_ENV        "FLAG"
#define CTF_FLAG_MOUNT_PATH "/flag"

/* status.reason of a Challenge whose definition fails ctf_validate_definition. */
#define CTF_REASON_INVALID_DEFINITION "InvalidDefinition"

/* Buffer sizes: a DNS label and NUL; a DNS subdomain (host name) and NUL. */
#define CTF_NAMESPACE_SIZE (KOP_META_DNS1123_LABEL_MAX + 1)
#define CTF_HOST_SIZE      (KOP_META_DNS1123_SUBDOMAIN_MAX + 1)

/* The part of a namespace name taken from the definition, and the hash after it. */
#define CTF_NAMESPACE_DEF_MAX  30
#define CTF_NAMESPACE_HASH_LEN 12

/*
 * ctf_config: operator settings that shape instances. Borrowed strings, all
 * optional.
 */
typedef struct ctf_config {
    const char *ingress_domain; /* NULL or "": HTTP exposures use NodePort */
    const char *node_address;   /* host in NodePort endpoints; NULL: "127.0.0.1" */
    const char *ingress_class;  /* Ingress spec.ingressClassName; NULL: cluster default */
} ctf_config;

/*
 * ctf_instance_namespace writes the instance's namespace name into out
 * (size >= CTF_NAMESPACE_SIZE): "ctf-" + the definition (lower-cased, other
 * characters than [a-z0-9] as '-', at most CTF_NAMESPACE_DEF_MAX) + "-" +
 * CTF_NAMESPACE_HASH_LEN hex digits of SHA-256 over the challenge
 * namespace, the definition and the team, each followed by a NUL byte. The
 * hash covers the definition too, so definitions that read the same once
 * sanitized or cut ("a.b", "a-b") still get different namespaces. Always a
 * valid DNS label of at most 47 characters. KOP_EINVAL when an input is NULL
 * or empty or out is too small.
 */
KOP_NODISCARD kop_err ctf_instance_namespace(const char *challenge_ns, const char *definition,
                                             const char *team, char *out, size_t size);

/*
 * ctf_ingress_host writes "<expose>-<namespace>.<domain>" into out (size >=
 * CTF_HOST_SIZE). When "<expose>-<namespace>" is longer than a DNS label
 * (63), it is cut and ends in "-" + 10 hex digits of SHA-256 over expose and
 * namespace, so the host stays valid and distinct. KOP_EINVAL when the
 * domain is unset or the host would exceed 253 characters.
 */
KOP_NODISCARD kop_err ctf_ingress_host(const ctf_config *cfg, const char *expose, const char *ns,
                                       char *out, size_t size);

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
 *    formed (quantities).
 * Returns KOP_OK, or KOP_EINVAL with one sentence naming the field in
 * st->message and st->reason CTF_REASON_INVALID_DEFINITION. st may be NULL.
 */
KOP_NODISCARD kop_err ctf_validate_definition(const json_t *def, kop_status *st);

/*
 * ctf_flag_secret_ref tells whether the definition's flag is dynamic and,
 * if so, sets *name and *key (borrowed from def; key defaults to "key") to
 * the Secret holding the HMAC key, in the definition's namespace.
 */
bool ctf_flag_secret_ref(const json_t *def, const char **name, const char **key);

/*
 * ctf_secret_value decodes data[key] of a Secret into *out (malloc'ed,
 * caller cleanses and frees; NUL-terminated beyond *len for convenience).
 * KOP_ENOTFOUND when the Secret has no such key, KOP_EPARSE when it is not
 * base64, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_secret_value(const json_t *secret, const char *key, unsigned char **out,
                                       size_t *len);

/*
 * ctf_flag computes the flag of a team's instance into *out (malloc'ed,
 * caller frees): spec.flag.static as is, or for spec.flag.dynamic
 * prefix (default "flag{") + the first 32 hex digits of
 * HMAC-SHA256(key, "<definition_name>:<team>") + suffix (default "}"). The
 * caller reads the key bytes from the Secret named by ctf_flag_secret_ref.
 * A definition without a flag gives KOP_OK and *out NULL. KOP_EINVAL
 * (explained in st) for a dynamic flag without a key or bad arguments,
 * KOP_ENOMEM when memory or OpenSSL fails.
 */
KOP_NODISCARD kop_err ctf_flag(const json_t *def, const char *definition_name, const char *team,
                               const unsigned char *key, size_t key_len, char **out,
                               kop_status *st);

/*
 * ctf_instance_labels returns the labels every object of the challenge's
 * instance carries (managed-by, team, definition, challenge,
 * challenge-namespace), as a new object. KOP_EINVAL (explained in st) when
 * the challenge lacks metadata.name, metadata.namespace, spec.definition or
 * spec.team, or one of them is not a valid label value.
 */
KOP_NODISCARD kop_err ctf_instance_labels(const json_t *challenge, json_t **out, kop_status *st);

/* ctf_flag_delivery: how the pods see the flag Secret. */
typedef enum ctf_flag_delivery {
    CTF_FLAG_NONE = 0,         /* no flag: nothing injected */
    CTF_FLAG_ENV_AND_FILE = 1, /* env FLAG and the file /flag/flag */
    CTF_FLAG_FILE = 2,         /* the file only: it changes under a running pod, env cannot */
} ctf_flag_delivery;

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
 *   exposure when cfg->ingress_domain is set. Every container without a
 *   readinessProbe gets a TCP one (every CTF_PROBE_PERIOD_S) on the port it
 *   is exposed on, else on its first declared TCP port, so that Ready means
 *   the program accepts connections.
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

/* ---- warm pools ------------------------------------------------------------- */

/*
 * ctf_pool_spec: a definition's spec.pool. min instances are kept warm
 * (built, Ready, claimed by no one); with autoscale the pool may grow up to
 * max with demand (ctf_pool_target). A definition without spec.pool, or
 * with min and max 0, has no pool.
 */
typedef struct ctf_pool_spec {
    int min, max;
    bool autoscale;
} ctf_pool_spec;

#define CTF_POOL_MAX 1000 /* the schema's bound on spec.pool.min and max */

/*
 * ctf_pool_parse reads def's spec.pool into *out (all zero without one).
 * KOP_EINVAL explained in st when min or max is not an integer in
 * [0, CTF_POOL_MAX], min > max, or autoscale not a boolean.
 */
KOP_NODISCARD kop_err ctf_pool_parse(const json_t *def, ctf_pool_spec *out, kop_status *st);

/* ctf_pool_enabled: the definition asks for warm instances (max > 0). */
bool ctf_pool_enabled(const ctf_pool_spec *p);

/*
 * ctf_pool_target returns how many unclaimed warm instances to keep: min
 * without autoscale; with it, min plus the requests (claims, and requests
 * the pool could not serve) of the last CTF_POOL_WINDOW_S seconds, capped
 * at max: the pool holds what the last window asked for, and shrinks back
 * to min as a quiet window slides by.
 */
#define CTF_POOL_WINDOW_S 300
int ctf_pool_target(const ctf_pool_spec *p, int recent_requests);

/*
 * ctf_pool_backoff_ms returns how long a pool waits before it starts new
 * warm instances after failures passes in a row replaced failed ones (a
 * bad image, a crash loop): 0 for none, then CTF_POOL_BACKOFF_BASE_MS,
 * doubling each time, at most CTF_POOL_BACKOFF_MAX_MS. A pass that sees
 * every warm instance Ready, or a new generation of the definition, starts
 * the count again.
 */
#define CTF_POOL_BACKOFF_BASE_MS 5000
#define CTF_POOL_BACKOFF_MAX_MS  300000
int64_t ctf_pool_backoff_ms(int failures);

/*
 * ctf_pool_namespace writes the namespace name of warm instance id (hex,
 * CTF_POOL_ID_LEN) of definition in def_ns, like ctf_instance_namespace
 * with the team "pool:<id>", which no team can be (':' is not allowed in a
 * label value). KOP_EINVAL for a bad argument or size.
 */
KOP_NODISCARD kop_err ctf_pool_namespace(const char *def_ns, const char *definition, const char *id,
                                         char *out, size_t size);

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
 * An exposure whose Service has no nodePort yet is left out and *complete
 * is set false; otherwise true. *out is a new array. KOP_EINVAL for bad
 * arguments, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_endpoints(const ctf_config *cfg, const json_t *def, const char *ns,
                                    const json_t *services, json_t **out, bool *complete);

#endif /* CTF_INSTANCE_H */

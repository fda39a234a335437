/*
 * core/names.h - the names and labels of an instance's objects, made
 * deterministically (names.c): the instance namespace (a team's, or a warm
 * instance's), the Ingress hosts, the Challenge the API creates for a team,
 * the labels tying every object back to its Challenge or pool, and the name
 * checks the rest of the core shares. Deterministic names are what make
 * creating twice the same as creating once.
 *
 * Pure: no network, no cluster, no clock. Ownership: inputs are borrowed;
 * names are written into caller buffers; a json_t * handed back is a new
 * reference.
 */
#ifndef CTF_CORE_NAMES_H
#define CTF_CORE_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>
#include <kop/meta.h>

/* Labels and annotations the contract puts on every object of an instance. */
#define CTF_LABEL_MANAGED_BY       "app.kubernetes.io/managed-by"
#define CTF_MANAGED_BY             "kopc-ctf"
#define CTF_LABEL_TEAM             "ctf.kopc.io/team"
#define CTF_LABEL_DEFINITION       "ctf.kopc.io/definition"
#define CTF_LABEL_CHALLENGE        "ctf.kopc.io/challenge"
#define CTF_LABEL_CHALLENGE_NS     "ctf.kopc.io/challenge-namespace"
#define CTF_LABEL_POD              "ctf.kopc.io/pod"
#define CTF_ANNOTATION_CHALLENGE_UID "ctf.kopc.io/challenge-uid"
/* A warm pool's instance (controller/pool.c): its id, and its definition's namespace.
 * Once a Challenge claims it, its Namespace also carries the labels above
 * that name the Challenge, and the Challenge's uid annotation. */
#define CTF_LABEL_POOL    "ctf.kopc.io/pool"
#define CTF_LABEL_POOL_NS "ctf.kopc.io/pool-namespace"
#define CTF_POOL_ID_LEN   10 /* hex digits of a warm instance's random id */
/* The operator's finalizer on a Challenge: its instance is cleaned up before
 * the Challenge goes (controller/reconcile.c). A Challenge the API creates
 * carries it from the start (api/write.c), so its first pass writes no patch. */
#define CTF_FINALIZER "ctf.kopc.io/instance"

/* Buffer sizes: a DNS label and NUL; a DNS subdomain (host name) and NUL. */
#define CTF_NAMESPACE_SIZE (KOP_META_DNS1123_LABEL_MAX + 1)
#define CTF_HOST_SIZE      (KOP_META_DNS1123_SUBDOMAIN_MAX + 1)

/* The part of a namespace name taken from the definition, and the hash after it. */
#define CTF_NAMESPACE_DEF_MAX  30
#define CTF_NAMESPACE_HASH_LEN 12

/*
 * ctf_gateway: the gateway exposure mode (core/gateway.h), on when domain is
 * set. Borrowed strings and key; NULL or 0 fields take the defaults named.
 */
typedef struct ctf_gateway {
    const char *domain;         /* hosts are <id>.<domain>; NULL or "": the mode is off */
    const char *namespace;      /* the Gateway's namespace (default "kopc-gateway") */
    const char *name;           /* the Gateway's name (default "ctf") */
    const char *tls_listener;   /* its TLS Terminate listener, for TLSRoutes (default "tls") */
    const char *https_listener; /* its HTTPS listener, for HTTPRoutes (default "https") */
    int port;                   /* the port participants connect to (default 443) */
    const char *connect_address; /* the address participants connect to, when <id>.<domain>
                                  * does not resolve to the gateway (a demo on 127.0.0.1):
                                  * TCP endpoints' address is "<it>:<port>", the host stays
                                  * the SNI; NULL or "": the host itself */
    const char *pod_namespace;  /* where the gateway's pods run (default: the Gateway's) */
    const char *pod_selector;   /* "k=v,k2=v2" of those pods; NULL or "": every pod there */
    const char *probe_address;  /* "host:port" the operator reaches the gateway at, to check
                                 * that a host is served before Running (controller/probe.h);
                                 * NULL or "": no probe, Running waits for Accepted only */
    const char *probe_ca;       /* PEM file of the CA(s) the probe verifies the gateway's
                                 * certificate against (the wildcard's CA, or a self-signed
                                 * certificate itself); NULL or "": the system's CA store */
    const unsigned char *key;   /* the host key (ctf_host_id), key_len bytes */
    size_t key_len;
} ctf_gateway;

/*
 * ctf_config: operator settings that shape instances. Borrowed strings, all
 * optional.
 */
typedef struct ctf_config {
    const char *ingress_domain; /* NULL or "": HTTP exposures use NodePort */
    const char *node_address;   /* host in NodePort endpoints; NULL: "127.0.0.1" */
    const char *ingress_class;  /* Ingress spec.ingressClassName; NULL: cluster default */
    ctf_gateway gateway;        /* the gateway mode; replaces NodePort and Ingress when on */
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
 * ctf_pool_namespace writes the namespace name of warm instance id (hex,
 * CTF_POOL_ID_LEN) of definition in def_ns, like ctf_instance_namespace
 * with the team "pool:<id>", which no team can be (':' is not allowed in a
 * label value). KOP_EINVAL for a bad argument or size.
 */
KOP_NODISCARD kop_err ctf_pool_namespace(const char *def_ns, const char *definition, const char *id,
                                         char *out, size_t size);

/*
 * ctf_challenge_name writes the name of the Challenge the instance API
 * creates for team's instance of challenge (the definition's name):
 * deterministic, so that concurrent PUTs meet at one object
 * (KOP_META_DNS1123_LABEL_MAX + 1 bytes). KOP_EINVAL for a NULL input.
 */
KOP_NODISCARD kop_err ctf_challenge_name(const char *team, const char *challenge, char *out,
                                         size_t size);

/*
 * ctf_instance_labels returns the labels every object of the challenge's
 * instance carries (managed-by, team, definition, challenge,
 * challenge-namespace), as a new object. KOP_EINVAL (explained in st) when
 * the challenge lacks metadata.name, metadata.namespace, spec.definition or
 * spec.team, or one of them is not a valid label value.
 */
KOP_NODISCARD kop_err ctf_instance_labels(const json_t *challenge, json_t **out, kop_status *st);

/*
 * ctf_sha256_hex writes the first n (even, <= 64) hex digits of SHA-256 over
 * the parts, each followed by a NUL byte, and a NUL; hex holds n + 1 bytes.
 */
KOP_NODISCARD kop_err ctf_sha256_hex(char *hex, size_t n, const char *const *parts, size_t count);

/* ctf_is_dns1035_label: a DNS-1123 label that starts with a letter (Service names). */
bool ctf_is_dns1035_label(const char *s);

/* ctf_is_svc_port_name: an IANA_SVC_NAME, at most 15 of [a-z0-9-] with a letter, no "--". */
bool ctf_is_svc_port_name(const char *s);

#endif /* CTF_CORE_NAMES_H */

/*
 * instance.c - the objects of one CTF instance, built from a
 * ChallengeDefinition and a Challenge (ctf_build_children) or a warm
 * instance's id (ctf_build_pooled_children: a warm pool's, claimed later
 * by controller/claim.c), and the endpoints a team connects to (ctf_endpoints); see instance.h and
 * docs/ctf-resources.md. The definition is checked by definition.c, the
 * flag computed by flag.c, the pod templates hardened by pod.c and the
 * names made by names.c.
 *
 * Workload: one call per reconcile of a Challenge; a definition holds at
 * most 10 pods and 10 exposures, so everything is built directly as jansson
 * trees and linear scans are the right data structure.
 *
 * Invariants:
 *  - ctf_build_children only builds from a definition that passed
 *    ctf_validate_definition, so the builders below may rely on its shape
 *    (pods[] non-empty, every exposure names a pod, ports in range).
 *  - The flag string is read in exactly one place, secret_object; the pods
 *    reference the Secret by name.
 *  - Pod templates are deep copies: the definition passed in is never
 *    modified.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/gateway.h"
#include "core/instance.h"
#include "core/json.h"

/* Private and special ranges allow-internet never opens. */
static const char *const PRIVATE_V4[] = {"10.0.0.0/8",    "172.16.0.0/12",  "192.168.0.0/16",
                                         "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"};
static const char *const PRIVATE_V6[] = {"fc00::/7", "fe80::/10", "::1/128"};

/* ---- the children ------------------------------------------------------- */

/* inst is what every builder needs: the definition, the names and the labels. */
struct inst {
    const ctf_config *cfg;
    const json_t *def;        /* the definition */
    const json_t *spec;       /* the definition's spec, validated */
    const json_t *challenge;  /* the Challenge (a pool's warm instance: NULL until claimed) */
    json_t *labels;           /* ctf_instance_labels (a pool's: pool_labels), owned */
    json_t *claim_labels;     /* a claimed warm instance: ctf_instance_labels, owned */
    ctf_flag_delivery flag;   /* how the pods see the flag */
    char ns[CTF_NAMESPACE_SIZE];
    char version[CTF_VERSION_LEN + 1]; /* the definition's version (core/update.h) */
    char generation[24];               /* and its metadata.generation, in decimal */
};

/* labels_for returns a new copy of the instance labels, plus ctf.kopc.io/pod when pod is set. */
static json_t *labels_for(const struct inst *in, const char *pod)
{
    json_t *l = json_deep_copy(in->labels);
    if (l && pod && json_object_set_new(l, CTF_LABEL_POD, json_string(pod)) != 0) {
        json_decref(l);
        return NULL;
    }
    return l;
}

/* meta returns {name, namespace, labels} for an object of the instance. */
static json_t *meta(const struct inst *in, const char *name, const char *pod)
{
    return json_pack("{s:s, s:s, s:o}", "name", name, "namespace", in->ns, "labels",
                     labels_for(in, pod));
}

/* object returns {apiVersion, kind, metadata, <key>: body}, stealing metadata and body. */
static json_t *object(const char *api_version, const char *kind, json_t *metadata,
                      const char *key, json_t *body)
{
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", api_version, "kind", kind, "metadata",
                     metadata, key, body);
}

static bool is_http(const json_t *expose)
{
    return kop_streq(json_string_value(json_object_get(expose, "type")), "HTTP");
}

/* gateway: the instance is exposed through the gateway (core/gateway.h): no NodePort, no Ingress. */
static bool gateway(const struct inst *in)
{
    return ctf_gateway_on(in->cfg);
}

static bool use_ingress(const struct inst *in, const json_t *expose)
{
    return is_http(expose) && ctf_nonempty(in->cfg->ingress_domain) && !gateway(in);
}

static json_t *namespace_object(const struct inst *in)
{
    const char *uid = kop_meta_uid(in->challenge);
    json_t *labels = labels_for(in, NULL);
    if (labels && in->claim_labels && json_object_update(labels, in->claim_labels) != 0) {
        json_decref(labels);
        return NULL;
    }
    if (!labels || json_object_set_new(labels, "pod-security.kubernetes.io/enforce",
                                       json_string("restricted")) != 0 ||
        json_object_set_new(labels, "pod-security.kubernetes.io/enforce-version",
                            json_string("latest")) != 0) {
        json_decref(labels);
        return NULL;
    }
    json_t *annotations = uid ? json_pack("{s:s}", CTF_ANNOTATION_CHALLENGE_UID, uid) : NULL;
    return json_pack("{s:s, s:s, s:{s:s, s:o, s:o*}}", "apiVersion", "v1", "kind", "Namespace",
                     "metadata", "name", in->ns, "labels", labels, "annotations", annotations);
}

/* secret_object is the only place the flag goes: base64 in data.flag. */
static json_t *secret_object(const struct inst *in, const char *flag)
{
    size_t n = strlen(flag);
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!b64)
        return NULL;
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)flag, (int)n);
    json_t *secret = json_pack("{s:s, s:s, s:o, s:s, s:{s:s}}", "apiVersion", "v1", "kind",
                               "Secret", "metadata", meta(in, CTF_FLAG_SECRET, NULL), "type",
                               "Opaque", "data", CTF_FLAG_KEY, b64);
    OPENSSL_cleanse(b64, strlen(b64));
    free(b64);
    return secret;
}

/* quantity returns spec.resources[key] as a string (integers converted), or dflt. */
static json_t *quantity(const struct inst *in, const char *key, const char *dflt)
{
    const json_t *q = ctf_get2(in->spec, "resources", key);
    if (json_is_integer(q))
        return json_sprintf("%" JSON_INTEGER_FORMAT, json_integer_value(q));
    return json_string(json_is_string(q) ? json_string_value(q) : dflt);
}

static json_t *quota_object(const struct inst *in)
{
    json_t *hard = json_pack("{s:o, s:o, s:o, s:o, s:s, s:s, s:s, s:s, s:s, s:s}", "limits.cpu",
                             quantity(in, "cpu", "1"), "limits.memory",
                             quantity(in, "memory", "1Gi"), "requests.cpu",
                             quantity(in, "cpu", "1"), "requests.memory",
                             quantity(in, "memory", "1Gi"), "pods", "20", "services", "20",
                             /* The gateway mode makes none: the quota enforces it. */
                             "services.nodeports", gateway(in) ? "0" : "10", "secrets", "10", "configmaps", "10",
                             "persistentvolumeclaims", "0");
    return object("v1", "ResourceQuota", meta(in, "instance", NULL), "spec",
                  json_pack("{s:o}", "hard", hard));
}

static json_t *limit_range_object(const struct inst *in)
{
    return object("v1", "LimitRange", meta(in, "defaults", NULL), "spec",
                  json_pack("{s:[{s:s, s:{s:s, s:s}, s:{s:s, s:s}}]}", "limits", "type",
                            "Container", "default", "cpu", "500m", "memory", "256Mi",
                            "defaultRequest", "cpu", "50m", "memory", "64Mi"));
}

static json_t *policy(const struct inst *in, const char *name, json_t *spec)
{
    return object("networking.k8s.io/v1", "NetworkPolicy", meta(in, name, NULL), "spec", spec);
}

/*
 * exposed_policy opens the ports exposed on pod to that pod only: from
 * anywhere (NodePort and Ingress traffic arrive from outside), or in the
 * gateway mode from the gateway's pods only.
 */
static json_t *exposed_policy(const struct inst *in, const char *pod)
{
    char name[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    json_t *ports = json_array();
    size_t i;
    const json_t *e;

    json_array_foreach(json_object_get(in->spec, "expose"), i, e)
    {
        if (!kop_streq(json_string_value(json_object_get(e, "pod")), pod))
            continue;
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        bool seen = false;
        for (size_t j = 0; j < json_array_size(ports) && !seen; j++)
            seen = json_integer_value(json_object_get(json_array_get(ports, j), "port")) == port;
        if (!seen && !ctf_push(ports, json_pack("{s:s, s:I}", "protocol", "TCP", "port", port))) {
            json_decref(ports);
            return NULL;
        }
    }
    snprintf(name, sizeof name, "allow-exposed-%s", pod);
    json_t *rule = json_pack("{s:o}", "ports", ports);
    if (rule && gateway(in) && !ctf_put(rule, "from", json_pack("[o]", ctf_gateway_peer(in->cfg)))) {
        json_decref(rule);
        return NULL;
    }
    return policy(in, name,
                  json_pack("{s:{s:{s:s}}, s:[s], s:[o]}", "podSelector", "matchLabels",
                            CTF_LABEL_POD, pod, "policyTypes", "Ingress", "ingress", rule));
}

/* ip_block returns {ipBlock: {cidr, except}}. */
static json_t *ip_block(const char *cidr, const char *const *except, size_t n)
{
    json_t *ex = json_array();
    for (size_t i = 0; ex && i < n; i++) {
        if (!ctf_push(ex, json_string(except[i]))) {
            json_decref(ex);
            return NULL;
        }
    }
    return json_pack("{s:{s:s, s:o}}", "ipBlock", "cidr", cidr, "except", ex);
}

/* network_policies appends the instance's NetworkPolicies to out, in apply order. */
static bool network_policies(const struct inst *in, json_t *out)
{
    const json_t *expose = json_object_get(in->spec, "expose");
    bool ok = ctf_push(out, policy(in, "default-deny",
                                   json_pack("{s:{}, s:[s, s]}", "podSelector", "policyTypes",
                                             "Ingress", "Egress")));

    /* One allow-exposed per exposed pod, in the order the pods are first exposed. */
    for (size_t i = 0; ok && i < json_array_size(expose); i++) {
        const char *pod = json_string_value(json_object_get(json_array_get(expose, i), "pod"));
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = !kop_streq(json_string_value(json_object_get(json_array_get(expose, j), "pod")),
                               pod);
        if (first)
            ok = ctf_push(out, exposed_policy(in, pod));
    }

    ok =
        ok &&
        ctf_push(out, policy(in, "allow-same-instance",
                             json_pack("{s:{}, s:[s, s], s:[{s:[{s:{}}]}], s:[{s:[{s:{}}]}]}",
                                       "podSelector", "policyTypes", "Ingress", "Egress", "ingress",
                                       "from", "podSelector", "egress", "to", "podSelector")));
    ok = ok && ctf_push(out, policy(in, "allow-dns",
                                    json_pack("{s:{}, s:[s], s:[{s:[{s:{s:{s:s}}}], s:[{s:s, s:i}, "
                                              "{s:s, s:i}]}]}",
                                              "podSelector", "policyTypes", "Egress", "egress",
                                              "to", "namespaceSelector", "matchLabels",
                                              "kubernetes.io/metadata.name", "kube-system", "ports",
                                              "protocol", "UDP", "port", 53, "protocol", "TCP",
                                              "port", 53)));
    if (ok && kop_streq(ctf_str2(in->spec, "network", "egress"), "Internet"))
        ok = ctf_push(out, policy(in, "allow-internet",
                                  json_pack("{s:{}, s:[s], s:[{s:[o, o]}]}", "podSelector",
                                            "policyTypes", "Egress", "egress", "to",
                                            ip_block("0.0.0.0/0", PRIVATE_V4, CTF_LEN(PRIVATE_V4)),
                                            ip_block("::/0", PRIVATE_V6, CTF_LEN(PRIVATE_V6)))));
    return ok;
}

static json_t *deployment_object(const struct inst *in, const json_t *pod)
{
    const char *name = json_string_value(json_object_get(pod, "name"));
    const json_t *replicas = json_object_get(pod, "replicas");
    json_t *tmpl = json_deep_copy(json_object_get(pod, "template"));

    if (!tmpl || ctf_harden_pod_spec(tmpl, json_object_get(in->spec, "security"), in->flag) ||
        !ctf_default_probes(in->spec, name, tmpl)) {
        json_decref(tmpl);
        return NULL;
    }
    json_t *spec = json_pack("{s:I, s:{s:{s:s}}, s:{s:{s:o}, s:o}}", "replicas",
                             replicas ? json_integer_value(replicas) : (json_int_t)1, "selector",
                             "matchLabels", CTF_LABEL_POD, name, "template", "metadata", "labels",
                             labels_for(in, name), "spec", tmpl);
    /* Which version of the definition this Deployment runs (core/update.h): on its
     * metadata only, so that writing it restarts nothing. */
    json_t *md = meta(in, name, name);
    if (md && json_object_set_new(md, "annotations",
                                  json_pack("{s:s, s:s}", CTF_ANNOTATION_VERSION, in->version,
                                            CTF_ANNOTATION_GENERATION, in->generation)) != 0) {
        json_decref(md);
        md = NULL;
    }
    if (!md) {
        json_decref(spec);
        return NULL;
    }
    return object("apps/v1", "Deployment", md, "spec", spec);
}

static json_t *service_object(const struct inst *in, const json_t *expose)
{
    const char *name = json_string_value(json_object_get(expose, "name"));
    json_int_t port = json_integer_value(json_object_get(expose, "port"));
    /* A Service port name must be an IANA service name; the expose name usually is one. */
    const char *port_name = ctf_is_svc_port_name(name) ? name : is_http(expose) ? "http" : "tcp";
    json_t *spec = json_pack(
        "{s:s, s:{s:s}, s:[{s:s, s:s, s:I, s:I}]}", "type",
        use_ingress(in, expose) || gateway(in) ? "ClusterIP" : "NodePort", "selector", CTF_LABEL_POD,
        json_string_value(json_object_get(expose, "pod")), "ports", "name", port_name, "protocol",
        "TCP", "port", port, "targetPort", port);
    return object("v1", "Service", meta(in, name, NULL), "spec", spec);
}

/* exposure_named reports whether an exposure of the definition is called name. */
static bool exposure_named(const struct inst *in, const char *name)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(in->spec, "expose"), i, e)
    {
        if (kop_streq(json_string_value(json_object_get(e, "name")), name))
            return true;
    }
    return false;
}

/*
 * pod_service_object returns the ClusterIP Service named after pod, with
 * every port its containers declare, so the pods of an instance reach each
 * other by name (an app's DB_HOST=db). *none is set (and NULL returned) when
 * the pod declares no port, or when an exposure already has the pod's name:
 * that exposure's Service then answers to it.
 */
static json_t *pod_service_object(const struct inst *in, const json_t *pod, bool *none)
{
    const char *name = json_string_value(json_object_get(pod, "name"));
    json_t *ports = json_array(), *c, *p;
    size_t i, j;

    *none = false;
    json_array_foreach(ctf_get2(pod, "template", "containers"), i, c)
    {
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            json_int_t port = json_integer_value(json_object_get(p, "containerPort"));
            const char *proto = json_string_value(json_object_get(p, "protocol"));
            char port_name[32];
            bool seen = false;
            proto = proto ? proto : "TCP";
            for (size_t k = 0; k < json_array_size(ports) && !seen; k++) {
                json_t *q = json_array_get(ports, k);
                seen = json_integer_value(json_object_get(q, "port")) == port &&
                       kop_streq(json_string_value(json_object_get(q, "protocol")), proto);
            }
            if (seen || port <= 0 || port > 65535)
                continue;
            /* "tcp-5432": an IANA service name, unique per port and protocol. */
            snprintf(port_name, sizeof port_name, "%s-%d",
                     kop_streq(proto, "UDP")    ? "udp"
                     : kop_streq(proto, "SCTP") ? "sctp"
                                                : "tcp",
                     (int)port);
            if (!ports ||
                !ctf_push(ports, json_pack("{s:s, s:s, s:I, s:I}", "name", port_name, "protocol",
                                           proto, "port", port, "targetPort", port))) {
                json_decref(ports);
                return NULL;
            }
        }
    }
    if (!ports || json_array_size(ports) == 0 || exposure_named(in, name)) {
        json_decref(ports);
        *none = ports != NULL;
        return NULL;
    }
    json_t *spec = json_pack("{s:s, s:{s:s}, s:o}", "type", "ClusterIP", "selector", CTF_LABEL_POD,
                             name, "ports", ports);
    return object("v1", "Service", meta(in, name, NULL), "spec", spec);
}

static json_t *ingress_object(const struct inst *in, const json_t *expose)
{
    const char *name = json_string_value(json_object_get(expose, "name"));
    const char *cls = in->cfg->ingress_class;
    char host[CTF_HOST_SIZE];

    if (ctf_ingress_host(in->cfg, name, in->ns, host, sizeof host) != KOP_OK)
        return NULL;
    json_t *spec =
        json_pack("{s:s*, s:[{s:s, s:{s:[{s:s, s:s, s:{s:{s:s, s:{s:I}}}}]}}]}", "ingressClassName",
                  ctf_nonempty(cls) ? cls : NULL, "rules", "host", host, "http", "paths", "path",
                  "/", "pathType", "Prefix", "backend", "service", "name", name, "port", "number",
                  json_integer_value(json_object_get(expose, "port")));
    return object("networking.k8s.io/v1", "Ingress", meta(in, name, NULL), "spec", spec);
}

/*
 * route_object returns the gateway's route of an exposure of a team's
 * instance (a TLSRoute for TCP, an HTTPRoute for HTTP, named as the
 * exposure), with the labels of the Challenge it serves: on a claimed warm
 * instance those of its claim, written at the claim, so that its status
 * events map to the Challenge directly.
 */
static json_t *route_object(const struct inst *in, const json_t *expose)
{
    const char *name = json_string_value(json_object_get(expose, "name"));
    char host[CTF_HOST_SIZE];
    kop_status st;
    if (ctf_gateway_host(in->cfg, in->def, ctf_str2(in->challenge, "spec", "team"), name, host,
                         sizeof host, &st) != KOP_OK)
        return NULL;
    json_t *md = meta(in, name, NULL);
    json_t *labels = json_object_get(md, "labels");
    if (md && in->claim_labels && json_object_update(labels, in->claim_labels) != 0) {
        json_decref(md);
        return NULL;
    }
    return object(CTF_GATEWAY_API, ctf_gateway_route_kind(expose), md, "spec",
                  ctf_gateway_route_spec(in->cfg, expose, host));
}

/* children appends every object to out, in apply order; false when memory ran out. */
static bool children(const struct inst *in, const char *flag, json_t *out)
{
    const json_t *pods = json_object_get(in->spec, "pods");
    const json_t *expose = json_object_get(in->spec, "expose");
    size_t i;
    const json_t *v;

    bool ok = ctf_push(out, namespace_object(in));
    if (ok && flag)
        ok = ctf_push(out, secret_object(in, flag));
    ok = ok && ctf_push(out, quota_object(in)) && ctf_push(out, limit_range_object(in)) &&
         network_policies(in, out);
    json_array_foreach(pods, i, v)
    {
        ok = ok && ctf_push(out, deployment_object(in, v));
    }
    json_array_foreach(expose, i, v)
    {
        ok = ok && ctf_push(out, service_object(in, v));
    }
    json_array_foreach(pods, i, v)
    {
        bool none = false;
        json_t *svc = ok ? pod_service_object(in, v, &none) : NULL;
        ok = ok && (none || ctf_push(out, svc));
    }
    json_array_foreach(expose, i, v)
    {
        if (use_ingress(in, v))
            ok = ok && ctf_push(out, ingress_object(in, v));
    }
    /* The routes come last: a warm instance has none until a team claims it. */
    json_array_foreach(expose, i, v)
    {
        if (gateway(in) && in->challenge)
            ok = ok && ctf_push(out, route_object(in, v));
    }
    return ok;
}

/* build makes every object of the instance in describes (from def); in->labels is freed. */
static kop_err build(struct inst *in, const json_t *def, const char *flag, json_t **out,
                     kop_status *st)
{
    json_t *list = json_array();
    kop_err err = KOP_OK;
    snprintf(in->generation, sizeof in->generation, "%lld", (long long)kop_meta_generation(def));
    if (gateway(in) && (err = ctf_gateway_check(in->cfg, st)) != KOP_OK) {
        json_decref(list);
        list = NULL;
    } else if (!list || !in->labels || ctf_update_version(def, in->version) != KOP_OK ||
        !children(in, flag, list)) {
        kop_status_setf(st, 0, NULL, "Out of memory building the instance.");
        err = KOP_ENOMEM;
        json_decref(list);
        list = NULL;
    }
    *out = list;
    json_decref(in->labels);
    json_decref(in->claim_labels);
    return err;
}

kop_err ctf_build_children(const ctf_config *cfg, const json_t *def, const json_t *challenge,
                           const char *flag, json_t **out, kop_status *st)
{
    struct inst in = {
        .cfg = cfg, .def = def, .spec = json_object_get(def, "spec"), .challenge = challenge};
    kop_err err;

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!cfg)
        return KOP_EINVAL;
    in.flag = flag ? CTF_FLAG_ENV_AND_FILE : CTF_FLAG_NONE;
    err = ctf_validate_definition(def, st);
    if (!err)
        err = ctf_instance_labels(challenge, &in.labels, st);
    if (!err)
        err = ctf_instance_namespace(kop_meta_namespace(challenge),
                                     ctf_str2(challenge, "spec", "definition"),
                                     ctf_str2(challenge, "spec", "team"), in.ns, sizeof in.ns);
    if (err) {
        json_decref(in.labels);
        return err;
    }
    return build(&in, def, flag, out, st);
}

/* ---- warm pools ----------------------------------------------------------- */

/* pool_labels returns the labels of every object of warm instance id of def. */
static json_t *pool_labels(const json_t *def, const char *id)
{
    return json_pack("{s:s, s:s, s:s, s:s}", CTF_LABEL_MANAGED_BY, CTF_MANAGED_BY,
                     CTF_LABEL_DEFINITION, kop_meta_name(def), CTF_LABEL_POOL, id,
                     CTF_LABEL_POOL_NS, kop_meta_namespace(def));
}

kop_err ctf_build_pooled_children(const ctf_config *cfg, const json_t *def, const char *id,
                                  const json_t *challenge, const char *flag, json_t **out,
                                  kop_status *st)
{
    struct inst in = {
        .cfg = cfg, .def = def, .spec = json_object_get(def, "spec"), .challenge = challenge};
    const char *ignored;
    kop_err err;

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!cfg)
        return KOP_EINVAL;
    in.flag = !flag                                          ? CTF_FLAG_NONE
              : ctf_flag_secret_ref(def, &ignored, &ignored) ? CTF_FLAG_FILE
                                                             : CTF_FLAG_ENV_AND_FILE;
    err = ctf_validate_definition(def, st);
    if (!err && (!kop_meta_is_valid_label_value(kop_meta_name(def)) ||
                 !kop_meta_is_valid_label_value(kop_meta_namespace(def))))
        err = ctf_invalid(st, "The definition's name and namespace must be label values.");
    if (!err && ctf_pool_namespace(kop_meta_namespace(def), kop_meta_name(def), id, in.ns,
                                   sizeof in.ns) != KOP_OK)
        err = ctf_invalid(st, "The warm instance's id must be %d hex digits.", CTF_POOL_ID_LEN);
    if (!err && challenge)
        err = ctf_instance_labels(challenge, &in.claim_labels, st);
    if (err) {
        json_decref(in.claim_labels);
        return err;
    }
    in.labels = pool_labels(def, id);
    return build(&in, def, flag, out, st);
}

/* ---- endpoints ---------------------------------------------------------- */

/* node_port returns the nodePort of service name's port port among services, or 0. */
static json_int_t node_port(const json_t *services, const char *name, json_int_t port)
{
    size_t i, j;
    const json_t *svc, *p;
    json_array_foreach(services, i, svc)
    {
        if (!kop_streq(kop_meta_name(svc), name))
            continue;
        json_array_foreach(ctf_get2(svc, "spec", "ports"), j, p)
        {
            if (json_integer_value(json_object_get(p, "port")) == port)
                return json_integer_value(json_object_get(p, "nodePort"));
        }
    }
    return 0;
}

kop_err ctf_endpoints(const ctf_config *cfg, const json_t *def, const char *ns,
                      const json_t *services, json_t **out, bool *complete)
{
    const json_t *expose = json_object_get(json_object_get(def, "spec"), "expose");
    const char *node = cfg && ctf_nonempty(cfg->node_address) ? cfg->node_address : "127.0.0.1";
    /* An IPv6 address goes in brackets before ":port". */
    bool bracket = strchr(node, ':') && node[0] != '[';
    size_t i;
    const json_t *e;

    if (!out || !complete)
        return KOP_EINVAL;
    *out = NULL;
    *complete = false;
    if (!cfg || !ctf_nonempty(ns))
        return KOP_EINVAL;
    json_t *list = json_array();
    if (list && ctf_gateway_on(cfg)) {
        /* The gateway's hosts are the team's (ctf_gateway_endpoints): no port to wait for. */
        *out = list;
        *complete = true;
        return KOP_OK;
    }
    bool ok = list != NULL, all = true;
    json_array_foreach(expose, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *type = is_http(e) ? "HTTP" : "TCP";
        char address[CTF_HOST_SIZE + 64];
        if (!ok || !name)
            break;
        if (is_http(e) && ctf_nonempty(cfg->ingress_domain)) {
            char host[CTF_HOST_SIZE];
            if (ctf_ingress_host(cfg, name, ns, host, sizeof host) != KOP_OK) {
                all = false;
                continue;
            }
            snprintf(address, sizeof address, "http://%s", host);
        } else {
            json_int_t np = node_port(services, name,
                                      json_integer_value(json_object_get(e, "port")));
            if (np <= 0) {
                all = false; /* the Service has no nodePort yet */
                continue;
            }
            snprintf(address, sizeof address, "%s%s%s%s:%" JSON_INTEGER_FORMAT,
                     is_http(e) ? "http://" : "", bracket ? "[" : "", node, bracket ? "]" : "",
                     np);
        }
        ok = ctf_push(list,
                      json_pack("{s:s, s:s, s:s}", "name", name, "type", type, "address", address));
    }
    if (!ok) {
        json_decref(list);
        return KOP_ENOMEM;
    }
    *out = list;
    *complete = all;
    return KOP_OK;
}

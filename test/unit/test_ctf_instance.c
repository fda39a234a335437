/*
 * test_ctf_instance.c - the instance builder (operators/ctf/core/
 * instance.c): every child object of an instance (kinds and order, complete
 * and labelled metadata, the definition never modified, a broken Challenge
 * refused), the flag only in the instance's Secret, the NetworkPolicies,
 * quota and limits, the Services and Ingresses of exposures and of pods, and
 * the endpoints a team is shown. Names, definition checks, flags, pod
 * hardening and durations have their own test files (test_ctf_names.c,
 * test_ctf_definition.c, test_ctf_flag.c, test_ctf_pod.c,
 * test_ctf_duration.c); the fixtures are in ctf_definitions.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/instance.h"

/* b64 returns base64 of s (malloc'ed): the Secret's encoding. */
static char *b64(const char *s)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), o = 0;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)(unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* The flag (plain or base64) appears in the Secret's data.flag and nowhere else. */
static void test_flag_only_in_secret(void **state)
{
    (void)state;
    static const struct {
        const char *def;
        const ctf_config *cfg;
        const char *flag;
    } cases[] = {
        {DEF_TCP, &NODEPORT_CFG, "flag{static_one}"},
        {DEF_HTTP, &INGRESS_CFG, "flag{30f24671fb6e529656e5371dfefa1017}"},
        {DEF_TWO, &INGRESS_CFG, "flag{two_pods}"},
    };
    char *known = b64("flag{static_one}");
    assert_string_equal(known, "ZmxhZ3tzdGF0aWNfb25lfQ=="); /* printf ... | base64 */
    free(known);
    for (size_t c = 0; c < LEN(cases); c++) {
        json_t *kids = build(cases[c].cfg, cases[c].def, cases[c].flag);
        char *enc = b64(cases[c].flag);
        size_t i, secrets = 0;
        json_t *o;
        json_array_foreach(kids, i, o)
        {
            char *text = json_dumps(o, JSON_COMPACT);
            bool secret = strcmp(json_string_value(json_object_get(o, "kind")), "Secret") == 0;
            if (secret) {
                secrets++;
                assert_string_equal(kop_meta_name(o), "flag");
                assert_string_equal(json_string_value(at(o, "data.flag")), enc);
                assert_null(json_object_get(o, "stringData"));
                /* Only in data: not in labels or annotations of the Secret either. */
                char *m = json_dumps(json_object_get(o, "metadata"), JSON_COMPACT);
                assert_null(strstr(m, cases[c].flag));
                assert_null(strstr(m, enc));
                free(m);
            } else if (strstr(text, cases[c].flag) || strstr(text, enc) ||
                       strstr(text, "static_one") || strstr(text, "two_pods")) {
                fail_msg("case %zu: the flag leaks into %s", c, text);
            }
            free(text);
        }
        assert_int_equal(secrets, 1);
        free(enc);
        json_decref(kids);
    }
    free(b64("")); /* the empty case of the helper */
}

/* ---- children ----------------------------------------------------------- */

struct kinds_case {
    const char *def;
    const ctf_config *cfg;
    const char *flag;
    const char *want; /* "Kind/name" joined with spaces, in order */
};

#define HEAD_WITH_SECRET "Namespace/ns Secret/flag ResourceQuota/instance LimitRange/defaults "

static const struct kinds_case kinds_cases[] = {
    {DEF_TCP, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-app "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "Deployment/app Service/pwn Service/app"},
    /* Without a flag: no Secret. */
    {DEF_TCP, &INGRESS_CFG, NULL,
     "Namespace/ns ResourceQuota/instance LimitRange/defaults "
     "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-app "
     "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns Deployment/app Service/pwn "
     "Service/app"},
    {DEF_HTTP, &INGRESS_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "NetworkPolicy/allow-internet Deployment/web Service/web Ingress/web"},
    {DEF_HTTP, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "NetworkPolicy/allow-internet Deployment/web Service/web"},
    {DEF_TWO, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-exposed-db NetworkPolicy/allow-same-instance "
                      "NetworkPolicy/allow-dns Deployment/web Deployment/db Service/web "
                      "Service/admin Service/ssh Service/db"},
    {DEF_TWO, &INGRESS_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-exposed-db NetworkPolicy/allow-same-instance "
                      "NetworkPolicy/allow-dns Deployment/web Deployment/db Service/web "
                      "Service/admin Service/ssh Service/db Ingress/web"},
};

static void test_children_kinds(void **state)
{
    (void)state;
    for (size_t c = 0; c < LEN(kinds_cases); c++) {
        json_t *kids = build(kinds_cases[c].cfg, kinds_cases[c].def, kinds_cases[c].flag);
        char got[1024] = "";
        size_t i;
        json_t *o;
        json_array_foreach(kids, i, o)
        {
            const char *kind = json_string_value(json_object_get(o, "kind"));
            size_t n = strlen(got);
            snprintf(got + n, sizeof got - n, "%s%s/%s", i ? " " : "", kind,
                     strcmp(kind, "Namespace") == 0 ? "ns" : kop_meta_name(o));
        }
        if (strcmp(got, kinds_cases[c].want) != 0)
            fail_msg("case %zu:\n got %s\nwant %s", c, got, kinds_cases[c].want);
        json_decref(kids);
    }
}

/* Every object is complete and labelled; the Namespace carries Pod Security and the uid. */
static void test_children_metadata(void **state)
{
    (void)state;
    json_t *kids = build(&INGRESS_CFG, DEF_TWO, "f");
    char ns[CTF_NAMESPACE_SIZE];
    assert_int_equal(ctf_instance_namespace("ctf", "shop", "team1", ns, sizeof ns), KOP_OK);
    size_t i;
    json_t *o;
    static const char *const api[][2] = {
        {"Namespace", "v1"},      {"Secret", "v1"},       {"ResourceQuota", "v1"},
        {"LimitRange", "v1"},     {"Service", "v1"},      {"Deployment", "apps/v1"},
        {"NetworkPolicy", "networking.k8s.io/v1"},        {"Ingress", "networking.k8s.io/v1"},
    };
    json_array_foreach(kids, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        bool known = false;
        for (size_t k = 0; k < LEN(api); k++) {
            if (strcmp(kind, api[k][0]) == 0) {
                assert_string_equal(json_string_value(json_object_get(o, "apiVersion")),
                                    api[k][1]);
                known = true;
            }
        }
        assert_true(known);
        assert_non_null(kop_meta_name(o));
        assert_true(kop_meta_is_valid_dns1123_subdomain(kop_meta_name(o)));
        if (strcmp(kind, "Namespace") == 0) {
            assert_string_equal(kop_meta_name(o), ns);
            assert_null(kop_meta_namespace(o));
            assert_string_equal(kop_meta_label(o, "pod-security.kubernetes.io/enforce"),
                                "restricted");
            assert_string_equal(kop_meta_label(o, "pod-security.kubernetes.io/enforce-version"),
                                "latest");
            assert_string_equal(kop_meta_annotation(o, CTF_ANNOTATION_CHALLENGE_UID), "uid-123");
        } else if (strcmp(kind, "Deployment") == 0) {
            /* The version it runs (core/update.h), on its metadata, never its pods'. */
            assert_string_equal(kop_meta_namespace(o), ns);
            assert_int_equal(strlen(kop_meta_annotation(o, CTF_ANNOTATION_VERSION)),
                             CTF_VERSION_LEN);
            assert_non_null(kop_meta_annotation(o, CTF_ANNOTATION_GENERATION));
            assert_null(at(o, "spec.template.metadata.annotations"));
        } else {
            assert_string_equal(kop_meta_namespace(o), ns);
            assert_null(json_object_get(json_object_get(o, "metadata"), "annotations"));
        }
        assert_string_equal(kop_meta_label(o, CTF_LABEL_MANAGED_BY), "kopc-ctf");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_TEAM), "team1");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_DEFINITION), "shop");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_CHALLENGE), "shop-team1");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_CHALLENGE_NS), "ctf");
        assert_null(json_object_get(o, "status"));
        if (strcmp(kind, "Deployment") == 0) {
            const char *pod = kop_meta_name(o);
            assert_string_equal(kop_meta_label(o, CTF_LABEL_POD), pod);
            json_t *tmpl = at(o, "spec.template");
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_POD), pod);
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_TEAM), "team1");
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_CHALLENGE), "shop-team1");
            char sel[128];
            snprintf(sel, sizeof sel, "{'matchLabels':{'ctf.kopc.io/pod':'%s'}}", pod);
            assert_json_eq(at(o, "spec.selector"), sel, "selector");
            assert_int_equal(json_integer_value(at(o, "spec.replicas")), 1);
        }
    }
    json_decref(kids);

    /* Replicas are taken over. */
    kids = build(&INGRESS_CFG, DEF_HTTP, "f");
    assert_int_equal(json_integer_value(at(find(kids, "Deployment", "web"), "spec.replicas")), 2);
    json_decref(kids);

    /* No uid: no annotation. */
    json_t *def = parse(DEF_TCP), *chal = challenge_for("pwn"), *out = NULL;
    json_object_del(json_object_get(chal, "metadata"), "uid");
    assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &out, NULL), KOP_OK);
    assert_null(at(json_array_get(out, 0), "metadata.annotations"));
    json_decref(out);
    json_decref(chal);
    json_decref(def);
}

/* The definition passed in is never modified. */
static void test_definition_untouched(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO), *copy = parse(DEF_TWO), *chal = challenge_for("shop");
    json_t *out = NULL;
    assert_int_equal(ctf_build_children(&INGRESS_CFG, def, chal, "f", &out, NULL), KOP_OK);
    assert_true(json_equal(def, copy));
    json_decref(out);
    json_decref(chal);
    json_decref(copy);
    json_decref(def);
}

struct chal_case {
    const char *path, *value, *msg;
};

static void test_challenge_refused(void **state)
{
    (void)state;
    static const struct chal_case cases[] = {
        {"spec.team", NULL, "spec.team"},
        {"spec.team", "''", "spec.team"},
        {"metadata.namespace", NULL, "metadata.namespace"},
        {"metadata.name",
         "'a-challenge-name-that-is-much-longer-than-a-label-value-may-be-0123456789'",
         "metadata.name is missing or longer than 63"},
        {"spec.definition", NULL, "spec.definition"},
    };
    json_t *def = parse(DEF_TWO);
    for (size_t i = 0; i < LEN(cases); i++) {
        json_t *chal = challenge_for("shop"), *out = NULL;
        kop_status st;
        mutate(chal, cases[i].path, cases[i].value);
        assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &out, &st),
                         KOP_EINVAL);
        assert_null(out);
        if (!strstr(st.message, cases[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, st.message, cases[i].msg);
        json_decref(chal);
    }
    json_decref(def);
}

/* ---- policies, quota, services, ingress -------------------------------- */

static void test_network_policies(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO);
    mutate(def, "spec.network", "{'egress':'Internet'}");
    char *text = json_dumps(def, JSON_COMPACT);
    json_t *kids = build(&NODEPORT_CFG, text, "f");
    free(text);

    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "default-deny"), "spec"),
                   "{'podSelector':{},'policyTypes':['Ingress','Egress']}", "default-deny");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-exposed-web"), "spec"),
                   "{'podSelector':{'matchLabels':{'ctf.kopc.io/pod':'web'}},"
                   "'policyTypes':['Ingress'],"
                   "'ingress':[{'ports':[{'protocol':'TCP','port':80},"
                   "{'protocol':'TCP','port':2222}]}]}",
                   "allow-exposed-web");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-exposed-db"), "spec"),
                   "{'podSelector':{'matchLabels':{'ctf.kopc.io/pod':'db'}},"
                   "'policyTypes':['Ingress'],"
                   "'ingress':[{'ports':[{'protocol':'TCP','port':5432}]}]}",
                   "allow-exposed-db");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-same-instance"), "spec"),
                   "{'podSelector':{},'policyTypes':['Ingress','Egress'],"
                   "'ingress':[{'from':[{'podSelector':{}}]}],"
                   "'egress':[{'to':[{'podSelector':{}}]}]}",
                   "allow-same-instance");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-dns"), "spec"),
                   "{'podSelector':{},'policyTypes':['Egress'],"
                   "'egress':[{'to':[{'namespaceSelector':{'matchLabels':"
                   "{'kubernetes.io/metadata.name':'kube-system'}}}],"
                   "'ports':[{'protocol':'UDP','port':53},{'protocol':'TCP','port':53}]}]}",
                   "allow-dns");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-internet"), "spec"),
                   "{'podSelector':{},'policyTypes':['Egress'],'egress':[{'to':["
                   "{'ipBlock':{'cidr':'0.0.0.0/0','except':['10.0.0.0/8','172.16.0.0/12',"
                   "'192.168.0.0/16','100.64.0.0/10','169.254.0.0/16','127.0.0.0/8']}},"
                   "{'ipBlock':{'cidr':'::/0','except':['fc00::/7','fe80::/10','::1/128']}}"
                   "]}]}",
                   "allow-internet");
    json_decref(kids);
    json_decref(def);
}

static void test_quota_and_limits(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TCP, "f");
    assert_json_eq(json_object_get(find(kids, "ResourceQuota", "instance"), "spec"),
                   "{'hard':{'limits.cpu':'1','limits.memory':'1Gi','requests.cpu':'1',"
                   "'requests.memory':'1Gi','pods':'20','services':'20',"
                   "'services.nodeports':'10','secrets':'10','configmaps':'10',"
                   "'persistentvolumeclaims':'0'}}",
                   "default quota");
    assert_json_eq(json_object_get(find(kids, "LimitRange", "defaults"), "spec"),
                   "{'limits':[{'type':'Container',"
                   "'default':{'cpu':'500m','memory':'256Mi'},"
                   "'defaultRequest':{'cpu':'50m','memory':'64Mi'}}]}",
                   "limit range");
    json_decref(kids);

    json_t *def = parse(DEF_HTTP);
    mutate(def, "spec.resources.cpu", "3");
    char *text = json_dumps(def, JSON_COMPACT);
    kids = build(&NODEPORT_CFG, text, "f");
    json_t *hard = at(find(kids, "ResourceQuota", "instance"), "spec.hard");
    assert_string_equal(json_string_value(json_object_get(hard, "limits.cpu")), "3");
    assert_string_equal(json_string_value(json_object_get(hard, "requests.cpu")), "3");
    assert_string_equal(json_string_value(json_object_get(hard, "limits.memory")), "2Gi");
    assert_string_equal(json_string_value(json_object_get(hard, "requests.memory")), "2Gi");
    free(text);
    json_decref(kids);
    json_decref(def);
}

static void test_services_and_ingress(void **state)
{
    (void)state;
    char ns[CTF_NAMESPACE_SIZE], want[512];
    assert_int_equal(ctf_instance_namespace("ctf", "shop", "team1", ns, sizeof ns), KOP_OK);

    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    assert_json_eq(json_object_get(find(kids, "Service", "web"), "spec"),
                   "{'type':'NodePort','selector':{'ctf.kopc.io/pod':'web'},"
                   "'ports':[{'name':'web','protocol':'TCP','port':80,'targetPort':80}]}",
                   "web NodePort");
    assert_json_eq(json_object_get(find(kids, "Service", "admin"), "spec"),
                   "{'type':'NodePort','selector':{'ctf.kopc.io/pod':'db'},"
                   "'ports':[{'name':'admin','protocol':'TCP','port':5432,'targetPort':5432}]}",
                   "admin");
    json_decref(kids);

    kids = build(&INGRESS_CFG, DEF_TWO, "f");
    assert_string_equal(json_string_value(at(find(kids, "Service", "web"), "spec.type")),
                        "ClusterIP");
    assert_string_equal(json_string_value(at(find(kids, "Service", "ssh"), "spec.type")),
                        "NodePort");
    snprintf(want, sizeof want,
             "{'ingressClassName':'nginx','rules':[{'host':'web-%s.ctf.example.com',"
             "'http':{'paths':[{'path':'/','pathType':'Prefix','backend':{'service':"
             "{'name':'web','port':{'number':80}}}}]}}]}",
             ns);
    assert_json_eq(json_object_get(find(kids, "Ingress", "web"), "spec"), want, "ingress");
    json_decref(kids);

    /* No class configured: the field is left out. A long exposure name gets another port name. */
    json_t *def = parse(DEF_TWO);
    mutate(def, "spec.expose.0.name", "'storefront-frontend'");
    char *text = json_dumps(def, JSON_COMPACT);
    ctf_config cfg = {.ingress_domain = "ctf.example.com"};
    kids = build(&cfg, text, "f");
    assert_null(at(find(kids, "Ingress", "storefront-frontend"), "spec.ingressClassName"));
    assert_string_equal(json_string_value(at(find(kids, "Service", "storefront-frontend"),
                                             "spec.ports.0.name")),
                        "http");
    free(text);
    json_decref(kids);
    json_decref(def);
}

/* has reports whether children holds an object of kind and name. */
static bool has(const json_t *children, const char *kind, const char *name)
{
    size_t i;
    const json_t *o;
    json_array_foreach(children, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
            strcmp(json_string_value(at(o, "metadata.name")), name) == 0)
            return true;
    }
    return false;
}

/*
 * The pods of an instance reach each other by name: a ClusterIP Service per
 * pod with every declared port, except where an exposure already has the
 * pod's name or the pod declares no port.
 */
static void test_pod_services(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    assert_json_eq(json_object_get(find(kids, "Service", "db"), "spec"),
                   "{'type':'ClusterIP','selector':{'ctf.kopc.io/pod':'db'},"
                   "'ports':[{'name':'tcp-5432','protocol':'TCP','port':5432,'targetPort':5432}]}",
                   "db by name");
    /* "web" is an exposure's name too: that Service (NodePort, port 80) keeps it. */
    assert_string_equal(json_string_value(at(find(kids, "Service", "web"), "spec.type")),
                        "NodePort");
    json_decref(kids);

    /* Every port once, UDP too; a pod that declares none gets no Service. */
    json_t *def = parse(DEF_TWO);
    json_object_set_new(json_object_get(def, "spec"), "expose",
                        parse("[{'name':'shop','pod':'web','port':80,'type':'HTTP'}]"));
    json_array_append_new(at(def, "spec.pods.1.template.containers.0.ports"),
                          parse("{'containerPort':5432,'protocol':'UDP'}"));
    json_array_append_new(at(def, "spec.pods.1.template.containers.0.ports"),
                          parse("{'containerPort':5432}"));
    json_object_del(at(def, "spec.pods.0.template.containers.0"), "ports");
    char *text = json_dumps(def, JSON_COMPACT);
    kids = build(&NODEPORT_CFG, text, "f");
    assert_json_eq(at(find(kids, "Service", "db"), "spec.ports"),
                   "[{'name':'tcp-5432','protocol':'TCP','port':5432,'targetPort':5432},"
                   "{'name':'udp-5432','protocol':'UDP','port':5432,'targetPort':5432}]",
                   "db ports");
    assert_false(has(kids, "Service", "web"));
    assert_true(has(kids, "Service", "shop"));
    free(text);
    json_decref(kids);
    json_decref(def);
}

/* ---- endpoints ---------------------------------------------------------- */

/* service returns a stored Service with one port and, when node_port > 0, its nodePort. */
static json_t *service(const char *name, int port, int node_port)
{
    json_t *s = json_pack("{s:s, s:{s:s}, s:{s:[{s:i, s:i}]}}", "kind", "Service", "metadata",
                          "name", name, "spec", "ports", "port", port, "targetPort", port);
    if (node_port > 0)
        json_object_set_new(at(s, "spec.ports.0"), "nodePort", json_integer(node_port));
    return s;
}

static void test_endpoints(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO);
    json_t *svcs = json_array(), *out = NULL;
    bool complete = true;
    const char *ns = "ctf-shop-x";

    json_array_append_new(svcs, service("web", 80, 30080));
    json_array_append_new(svcs, service("admin", 5432, 31432));
    json_array_append_new(svcs, service("ssh", 2222, 0)); /* not allocated yet */
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_false(complete);
    assert_json_eq(out,
                   "[{'name':'web','type':'HTTP','address':'http://10.0.0.5:30080'},"
                   "{'name':'admin','type':'TCP','address':'10.0.0.5:31432'}]",
                   "partial");
    json_decref(out);

    json_array_set_new(svcs, 2, service("ssh", 2222, 32222));
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_true(complete);
    assert_int_equal(json_array_size(out), 3);
    assert_string_equal(json_string_value(at(out, "2.address")), "10.0.0.5:32222");
    json_decref(out);

    /* With an ingress domain, HTTP needs no nodePort. */
    assert_int_equal(ctf_endpoints(&INGRESS_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_true(complete);
    assert_json_eq(at(out, "0"),
                   "{'name':'web','type':'HTTP','address':'http://web-ctf-shop-x.ctf.example.com'}",
                   "ingress endpoint");
    json_decref(out);

    /* Nothing stored yet; default and IPv6 node addresses. */
    assert_int_equal(ctf_endpoints(&INGRESS_CFG, def, ns, NULL, &out, &complete), KOP_OK);
    assert_false(complete);
    assert_int_equal(json_array_size(out), 1);
    json_decref(out);
    ctf_config dflt = {0}, v6 = {.node_address = "fd00::1"};
    assert_int_equal(ctf_endpoints(&dflt, def, ns, svcs, &out, &complete), KOP_OK);
    assert_string_equal(json_string_value(at(out, "1.address")), "127.0.0.1:31432");
    json_decref(out);
    assert_int_equal(ctf_endpoints(&v6, def, ns, svcs, &out, &complete), KOP_OK);
    assert_string_equal(json_string_value(at(out, "1.address")), "[fd00::1]:31432");
    json_decref(out);

    /* A Service whose port differs from the exposure's does not count. */
    json_array_set_new(svcs, 1, service("admin", 5433, 31433));
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_false(complete);
    json_decref(out);

    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, NULL, svcs, &out, &complete), KOP_EINVAL);
    assert_null(out);
    json_decref(svcs);
    json_decref(def);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_only_in_secret),
        cmocka_unit_test(test_children_kinds),
        cmocka_unit_test(test_children_metadata),
        cmocka_unit_test(test_definition_untouched),
        cmocka_unit_test(test_challenge_refused),
        cmocka_unit_test(test_network_policies),
        cmocka_unit_test(test_quota_and_limits),
        cmocka_unit_test(test_services_and_ingress),
        cmocka_unit_test(test_pod_services),
        cmocka_unit_test(test_endpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

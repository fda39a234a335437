/*
 * test_ctf_gateway.c - the gateway exposure mode of the CTF core
 * (operators/ctf/core/gateway.c, and instance.c in that mode): the objects
 * an instance is made of (no NodePort anywhere, the quota forbidding one,
 * ClusterIP Services, no Ingress, one route per exposure with the team's
 * host on the right listener, NetworkPolicies that admit the gateway's pods
 * only), a warm instance without routes and the same one claimed with its
 * team's routes and nothing else changed, the hosts and endpoints, what a
 * route's status says of our Gateway, the settings refused at start-up,
 * and the probe's verdict on what the gateway answered (the instance's
 * bytes, or the gateway's own 404/503/close). The ids themselves are tested in test_ctf_host.c.
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
#include "core/gateway.h"
#include "core/host.h"

static const unsigned char KEY[] = "0123456789abcdef0123456789abcdef";
static const unsigned char KEY2[] = "fedcba9876543210fedcba9876543210";

/* GATEWAY_CFG: the mode on, a Gateway of its own, the gateway's pods by label. */
static const ctf_config GATEWAY_CFG = {.node_address = "10.0.0.5",
                                       .gateway = {.domain = "ctf.example.test",
                                                   .namespace = "edge",
                                                   .name = "door",
                                                   .tls_listener = "tls",
                                                   .https_listener = "https",
                                                   .pod_namespace = "edge-pods",
                                                   .pod_selector = "app=traefik,tier=edge",
                                                   .key = KEY,
                                                   .key_len = 32}};

/* DEFAULT_CFG: only the domain and key; everything else defaulted. */
static const ctf_config DEFAULT_CFG = {
    .gateway = {.domain = "ctf.localhost", .key = KEY, .key_len = 32}};

/* host_of computes the host of exposure for team of def_text under cfg (static buffer). */
static const char *host_of(const ctf_config *cfg, const char *def_text, const char *team,
                           const char *exposure)
{
    static char host[CTF_HOST_SIZE];
    json_t *def = parse(def_text);
    kop_status st;
    kop_err err = ctf_gateway_host(cfg, def, team, exposure, host, sizeof host, &st);
    json_decref(def);
    if (err)
        fail_msg("host: %s", st.message);
    return host;
}

/* Every object of a gateway-mode instance: no NodePort, the routes, the policies. */
static void test_children(void **state)
{
    (void)state;
    json_t *kids = build(&GATEWAY_CFG, DEF_TWO, "flag{two_pods}");
    size_t i, n = json_array_size(kids);
    json_t *o;

    /* No NodePort Service, no Ingress; the quota allows no NodePort either. */
    json_array_foreach(kids, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        assert_string_not_equal(kind, "Ingress");
        if (strcmp(kind, "Service") == 0)
            assert_string_equal(json_string_value(at(o, "spec.type")), "ClusterIP");
    }

    json_t *hard = at(find(kids, "ResourceQuota", "instance"), "spec.hard");
    assert_string_equal(json_string_value(json_object_get(hard, "services.nodeports")), "0");

    /* One route per exposure, last, in expose[] order. */
    assert_true(n > 3);
    const char *kinds[] = {"HTTPRoute", "TLSRoute", "TLSRoute"};
    const char *names[] = {"web", "admin", "ssh"};
    for (size_t r = 0; r < 3; r++) {
        json_t *route = json_array_get(kids, n - 3 + r);
        assert_string_equal(json_string_value(json_object_get(route, "kind")), kinds[r]);
        assert_string_equal(kop_meta_name(route), names[r]);
        assert_string_equal(json_string_value(json_object_get(route, "apiVersion")),
                            "gateway.networking.k8s.io/v1");
        assert_string_equal(kop_meta_label(route, CTF_LABEL_TEAM), "team1");
        assert_string_equal(kop_meta_label(route, CTF_LABEL_CHALLENGE), "shop-team1");
        assert_string_equal(kop_meta_label(route, CTF_LABEL_CHALLENGE_NS), "ctf");
        assert_string_equal(json_string_value(at(route, "spec.hostnames.0")),
                            host_of(&GATEWAY_CFG, DEF_TWO, "team1", names[r]));
        assert_string_equal(json_string_value(at(route, "spec.parentRefs.0.sectionName")),
                            r == 0 ? "https" : "tls");
    }
    /* The TLSRoute exactly: TLS terminated at our Gateway, plain TCP to the Service. */
    char want[1024];
    snprintf(want, sizeof want,
             "{'parentRefs':[{'group':'gateway.networking.k8s.io','kind':'Gateway',"
             "'namespace':'edge','name':'door','sectionName':'tls'}],"
             "'hostnames':['%s'],'rules':[{'backendRefs':[{'name':'admin','port':5432}]}]}",
             host_of(&GATEWAY_CFG, DEF_TWO, "team1", "admin"));
    assert_json_eq(at(find(kids, "TLSRoute", "admin"), "spec"), want, "TLSRoute spec");
    /* The host: 16 base32 characters under the domain. */
    const char *h = host_of(&GATEWAY_CFG, DEF_TWO, "team1", "admin");
    assert_int_equal(strlen(h), CTF_HOST_ID_LEN + 1 + strlen("ctf.example.test"));
    assert_string_equal(h + CTF_HOST_ID_LEN, ".ctf.example.test");

    /* The exposed ports admit the gateway's pods only, every other policy as before. */
    json_t *web = find(kids, "NetworkPolicy", "allow-exposed-web");
    assert_json_eq(json_object_get(json_object_get(web, "spec"), "ingress"),
                   "[{'ports':[{'protocol':'TCP','port':80},{'protocol':'TCP','port':2222}],"
                   "'from':[{'namespaceSelector':{'matchLabels':"
                   "{'kubernetes.io/metadata.name':'edge-pods'}},"
                   "'podSelector':{'matchLabels':{'app':'traefik','tier':'edge'}}}]}]",
                   "allow-exposed-web in the gateway mode");
    assert_non_null(at(find(kids, "NetworkPolicy", "allow-exposed-db"), "spec.ingress.0.from"));
    json_decref(kids);

    /* NodePort mode is unchanged: NodePort Services, no route, open exposed ports. */
    kids = build(&NODEPORT_CFG, DEF_TWO, "flag{two_pods}");
    assert_null(child_of(kids, "TLSRoute", "admin"));
    assert_null(child_of(kids, "HTTPRoute", "web"));
    assert_string_equal(json_string_value(at(find(kids, "Service", "admin"), "spec.type")),
                        "NodePort");
    assert_null(at(find(kids, "NetworkPolicy", "allow-exposed-web"), "spec.ingress.0.from"));
    json_decref(kids);

    /* The defaults: Gateway kopc-gateway/ctf, its own namespace's pods, every one of them. */
    kids = build(&DEFAULT_CFG, DEF_NC, "flag{x}");
    assert_json_eq(at(find(kids, "TLSRoute", "nc"), "spec.parentRefs"),
                   "[{'group':'gateway.networking.k8s.io','kind':'Gateway',"
                   "'namespace':'kopc-gateway','name':'ctf','sectionName':'tls'}]",
                   "default parent");
    assert_json_eq(at(find(kids, "NetworkPolicy", "allow-exposed-app"), "spec.ingress.0.from"),
                   "[{'namespaceSelector':{'matchLabels':"
                   "{'kubernetes.io/metadata.name':'kopc-gateway'}},"
                   "'podSelector':{'matchLabels':{}}}]",
                   "default peer");
    json_decref(kids);
}

/* Hosts: stable for the same inputs, different for another team, exposure or key. */
static void test_hosts(void **state)
{
    (void)state;
    char a[CTF_HOST_SIZE], id[CTF_HOST_ID_SIZE];
    kop_status st;
    snprintf(a, sizeof a, "%s", host_of(&GATEWAY_CFG, DEF_TWO, "team1", "ssh"));
    assert_string_equal(a, host_of(&GATEWAY_CFG, DEF_TWO, "team1", "ssh"));
    assert_string_not_equal(a, host_of(&GATEWAY_CFG, DEF_TWO, "team2", "ssh"));
    assert_string_not_equal(a, host_of(&GATEWAY_CFG, DEF_TWO, "team1", "admin"));
    ctf_config other = GATEWAY_CFG;
    other.gateway.key = KEY2;
    assert_string_not_equal(a, host_of(&other, DEF_TWO, "team1", "ssh"));
    /* It is ctf_host_id of the team, the definition's namespace and name, the exposure. */
    ctf_host_parts parts = {
        .team = "team1", .challenge_ns = "ctf", .challenge = "shop", .exposure = "ssh"};
    assert_int_equal(ctf_host_id(KEY, 32, &parts, id, sizeof id, &st), KOP_OK);
    assert_memory_equal(a, id, CTF_HOST_ID_LEN);

    /* Off, or without a key: refused. */
    json_t *def = parse(DEF_TWO);
    char h[CTF_HOST_SIZE];
    assert_int_equal(ctf_gateway_host(&NODEPORT_CFG, def, "team1", "ssh", h, sizeof h, &st),
                     KOP_EINVAL);
    ctf_config nokey = GATEWAY_CFG;
    nokey.gateway.key = NULL;
    assert_int_equal(ctf_gateway_host(&nokey, def, "team1", "ssh", h, sizeof h, &st), KOP_EINVAL);
    json_decref(def);
}

/* Endpoints: the hosts with port 443, or the configured port in the address. */
static void test_endpoints(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO), *eps = NULL;
    kop_status st;
    char want[2048], web[CTF_HOST_SIZE], admin[CTF_HOST_SIZE], ssh[CTF_HOST_SIZE];
    snprintf(web, sizeof web, "%s", host_of(&GATEWAY_CFG, DEF_TWO, "team1", "web"));
    snprintf(admin, sizeof admin, "%s", host_of(&GATEWAY_CFG, DEF_TWO, "team1", "admin"));
    snprintf(ssh, sizeof ssh, "%s", host_of(&GATEWAY_CFG, DEF_TWO, "team1", "ssh"));

    assert_int_equal(ctf_gateway_endpoints(&GATEWAY_CFG, def, "team1", &eps, &st), KOP_OK);
    snprintf(want, sizeof want,
             "[{'name':'web','type':'HTTP','address':'https://%s','host':'%s','port':443},"
             "{'name':'admin','type':'TCP','address':'%s:443','host':'%s','port':443},"
             "{'name':'ssh','type':'TCP','address':'%s:443','host':'%s','port':443}]",
             web, web, admin, admin, ssh, ssh);
    assert_json_eq(eps, want, "gateway endpoints");
    json_decref(eps);

    ctf_config p = GATEWAY_CFG;
    p.gateway.port = 8443;
    assert_int_equal(ctf_gateway_endpoints(&p, def, "team1", &eps, &st), KOP_OK);
    snprintf(want, sizeof want, "https://%s:8443", web);
    assert_string_equal(json_string_value(at(eps, "0.address")), want);
    snprintf(want, sizeof want, "%s:8443", admin);
    assert_string_equal(json_string_value(at(eps, "1.address")), want);
    assert_int_equal(json_integer_value(at(eps, "1.port")), 8443);
    json_decref(eps);

    /* A connect address: TCP addresses dial it, the host stays the SNI; HTTP keeps its host. */
    p.gateway.connect_address = "127.0.0.1";
    assert_int_equal(ctf_gateway_check(&p, &st), KOP_OK);
    assert_int_equal(ctf_gateway_endpoints(&p, def, "team1", &eps, &st), KOP_OK);
    assert_string_equal(json_string_value(at(eps, "1.address")), "127.0.0.1:8443");
    assert_string_equal(json_string_value(at(eps, "1.host")), admin);
    snprintf(want, sizeof want, "https://%s:8443", web);
    assert_string_equal(json_string_value(at(eps, "0.address")), want);
    json_decref(eps);
    p.gateway.connect_address = "a b;rm -rf /";
    assert_int_equal(ctf_gateway_check(&p, &st), KOP_EINVAL);

    /* ctf_endpoints waits for no NodePort in this mode. */
    bool complete = false;
    assert_int_equal(ctf_endpoints(&GATEWAY_CFG, def, "ctf-shop-x", NULL, &eps, &complete),
                     KOP_OK);
    assert_true(complete);
    assert_int_equal(json_array_size(eps), 0);
    json_decref(eps);
    json_decref(def);
}

/* A warm instance has no route; claimed, it gains its team's routes and nothing else changes. */
static void test_warm(void **state)
{
    (void)state;
    json_t *def = parse(DEF_WEB), *chal = parse(CHAL_WEB), *warm = NULL, *claimed = NULL;
    kop_status st;
    assert_int_equal(ctf_build_pooled_children(&GATEWAY_CFG, def, ID, NULL, "", &warm, &st),
                     KOP_OK);
    assert_int_equal(ctf_build_pooled_children(&GATEWAY_CFG, def, ID, chal, "flag{t}", &claimed,
                                               &st),
                     KOP_OK);
    size_t i;
    json_t *o;
    json_array_foreach(warm, i, o)
    {
        assert_string_not_equal(json_string_value(json_object_get(o, "kind")), "HTTPRoute");
        assert_string_not_equal(json_string_value(json_object_get(o, "kind")), "TLSRoute");
    }
    assert_int_equal(json_array_size(claimed), json_array_size(warm) + 1);
    json_t *route = json_array_get(claimed, json_array_size(claimed) - 1);
    assert_string_equal(json_string_value(json_object_get(route, "kind")), "HTTPRoute");
    assert_string_equal(json_string_value(at(route, "spec.hostnames.0")),
                        host_of(&GATEWAY_CFG, DEF_WEB, "team1", "web"));
    /* Its labels name the Challenge (its status events wake it directly). */
    assert_string_equal(kop_meta_label(route, CTF_LABEL_CHALLENGE), "web-team1");
    assert_string_equal(kop_meta_label(route, CTF_LABEL_TEAM), "team1");
    /* Every other child is the warm one, but the Namespace and the flag Secret (the claim's
     * labels, the team's flag): no Deployment changes, so no pod restarts. */
    json_array_foreach(warm, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        if (strcmp(kind, "Namespace") == 0 || strcmp(kind, "Secret") == 0)
            continue;
        if (!json_equal(o, json_array_get(claimed, i)))
            fail_msg("%s %s differs once claimed", kind, kop_meta_name(o));
    }
    json_decref(warm);
    json_decref(claimed);
    json_decref(chal);
    json_decref(def);
}

/* route_status returns a route of generation gen with one parent's conditions. */
static json_t *route_status(int gen, const char *parent_ns, const char *parent, const char *acc,
                            const char *acc_reason, const char *res, int seen)
{
    json_t *r = parse("{'metadata':{'name':'admin','namespace':'ctf-shop-x'},"
                      "'status':{'parents':[]}}");
    json_object_set_new(json_object_get(r, "metadata"), "generation", json_integer(gen));
    json_t *conds = json_array();
    if (acc)
        json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:i}", "type", "Accepted",
                                               "status", acc, "reason", acc_reason, "message",
                                               "listener says no", "observedGeneration", seen));
    if (res)
        json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:i}", "type", "ResolvedRefs",
                                               "status", res, "reason",
                                               strcmp(res, "True") == 0 ? "ResolvedRefs"
                                                                        : "BackendNotFound",
                                               "observedGeneration", seen));
    json_t *ref = json_pack("{s:s, s:s}", "kind", "Gateway", "name", parent);
    if (parent_ns)
        json_object_set_new(ref, "namespace", json_string(parent_ns));
    json_array_append_new(at(r, "status.parents"),
                          json_pack("{s:o, s:s, s:o}", "parentRef", ref, "controllerName",
                                    "traefik.io/gateway-controller", "conditions", conds));
    return r;
}

/* What a route's status says of our Gateway. */
static void test_route_state(void **state)
{
    (void)state;
    char msg[512];
    static const struct {
        int gen, seen;
        const char *parent_ns, *parent, *acc, *acc_reason, *res;
        ctf_route_state want;
        const char *in_msg;
    } cases[] = {
        {1, 1, "edge", "door", "True", "Accepted", "True", CTF_ROUTE_ACCEPTED, "accepted"},
        /* Another Gateway's answer is not ours. */
        {1, 1, "edge", "other", "True", "Accepted", "True", CTF_ROUTE_WAITING,
         "waiting for gateway edge/door to accept TLSRoute ctf-shop-x/admin"},
        {1, 1, "elsewhere", "door", "True", "Accepted", "True", CTF_ROUTE_WAITING, "waiting"},
        /* Refused, with the gateway's reason. */
        {1, 1, "edge", "door", "False", "NotAllowedByListeners", "True", CTF_ROUTE_REFUSED,
         "gateway edge/door does not serve TLSRoute ctf-shop-x/admin: Accepted=False "
         "NotAllowedByListeners: listener says no"},
        {1, 1, "edge", "door", "True", "Accepted", "False", CTF_ROUTE_REFUSED,
         "ResolvedRefs=False BackendNotFound"},
        /* An answer about an older version of the route does not count. */
        {2, 1, "edge", "door", "True", "Accepted", "True", CTF_ROUTE_WAITING, "waiting"},
        {2, 1, "edge", "door", "False", "NotAllowedByListeners", "True", CTF_ROUTE_WAITING,
         "waiting"},
        /* Accepted, but its backend not resolved yet. */
        {1, 1, "edge", "door", "True", "Accepted", NULL, CTF_ROUTE_WAITING, "waiting"},
    };
    for (size_t c = 0; c < LEN(cases); c++) {
        json_t *r = route_status(cases[c].gen, cases[c].parent_ns, cases[c].parent, cases[c].acc,
                                 cases[c].acc_reason, cases[c].res, cases[c].seen);
        ctf_route_state s = ctf_gateway_route_state(&GATEWAY_CFG, r, "TLSRoute", "ctf-shop-x",
                                                    "admin", msg, sizeof msg);
        if (s != cases[c].want || !strstr(msg, cases[c].in_msg))
            fail_msg("case %zu: state %d (want %d), message \"%s\" (want \"%s\" in it)", c,
                     (int)s, (int)cases[c].want, msg, cases[c].in_msg);
        json_decref(r);
    }
    /* No status, or not stored yet: waiting, naming the Gateway. */
    json_t *bare = parse("{'metadata':{'name':'admin','namespace':'ctf-shop-x','generation':1}}");
    assert_int_equal(ctf_gateway_route_state(&GATEWAY_CFG, bare, "TLSRoute", "ctf-shop-x", "admin",
                                             msg, sizeof msg),
                     CTF_ROUTE_WAITING);
    assert_int_equal(ctf_gateway_route_state(&DEFAULT_CFG, NULL, "HTTPRoute", "ns1", "web", msg,
                                             sizeof msg),
                     CTF_ROUTE_WAITING);
    assert_string_equal(msg, "waiting for gateway kopc-gateway/ctf to accept HTTPRoute ns1/web");
    json_decref(bare);
    /* A parentRef without a namespace means the route's own. */
    ctf_config same = GATEWAY_CFG;
    same.gateway.namespace = "ctf-shop-x";
    json_t *r = route_status(1, NULL, "door", "True", "Accepted", "True", 1);
    assert_int_equal(ctf_gateway_route_state(&same, r, "TLSRoute", "ctf-shop-x", "admin", msg,
                                             sizeof msg),
                     CTF_ROUTE_ACCEPTED);
    json_decref(r);
}

/* Settings checked at start-up. */
static void test_check(void **state)
{
    (void)state;
    kop_status st;
    assert_int_equal(ctf_gateway_check(&GATEWAY_CFG, &st), KOP_OK);
    assert_int_equal(ctf_gateway_check(&DEFAULT_CFG, &st), KOP_OK);
    assert_int_equal(ctf_gateway_check(&NODEPORT_CFG, &st), KOP_OK); /* off */
    static const char *const bad_selectors[] = {"app", "app=", "=x", "a=b,a=c", "a b=c", "a=b,,"};
    for (size_t i = 0; i < LEN(bad_selectors); i++) {
        ctf_config c = GATEWAY_CFG;
        c.gateway.pod_selector = bad_selectors[i];
        if (strcmp(bad_selectors[i], "app=") == 0 || strcmp(bad_selectors[i], "a=b,,") == 0) {
            /* An empty value is a valid label value; an empty pair is skipped. */
            assert_int_equal(ctf_gateway_check(&c, &st), KOP_OK);
            continue;
        }
        if (ctf_gateway_check(&c, &st) != KOP_EINVAL)
            fail_msg("selector \"%s\" accepted", bad_selectors[i]);
        assert_null(ctf_gateway_peer(&c));
    }
    ctf_config c = GATEWAY_CFG;
    c.gateway.key_len = CTF_HOST_KEY_MIN - 1;
    assert_int_equal(ctf_gateway_check(&c, &st), KOP_EINVAL);
    c = GATEWAY_CFG;
    c.gateway.domain = "Not A Domain";
    assert_int_equal(ctf_gateway_check(&c, &st), KOP_EINVAL);
    c = GATEWAY_CFG;
    c.gateway.namespace = "Bad_NS";
    assert_int_equal(ctf_gateway_check(&c, &st), KOP_EINVAL);
    c = GATEWAY_CFG;
    c.gateway.port = 70000;
    assert_int_equal(ctf_gateway_check(&c, &st), KOP_EINVAL);
    /* A bad setting fails the build with its reason, not as memory. */
    json_t *def = parse(DEF_NC), *chal = challenge_for("nc"), *out = NULL;
    c = GATEWAY_CFG;
    c.gateway.pod_selector = "app";
    assert_int_equal(ctf_build_children(&c, def, chal, "flag{x}", &out, &st), KOP_EINVAL);
    assert_null(out);
    assert_non_null(strstr(st.message, "selector"));
    json_decref(chal);
    json_decref(def);

    /* Defaults fill what is unset. */
    ctf_gateway g = {.domain = "d.test"};
    ctf_gateway_defaults(&g);
    assert_string_equal(g.namespace, "kopc-gateway");
    assert_string_equal(g.name, "ctf");
    assert_string_equal(g.tls_listener, "tls");
    assert_string_equal(g.https_listener, "https");
    assert_string_equal(g.pod_namespace, "kopc-gateway");
    assert_int_equal(g.port, 443);
}

/* V: the verdict on a C string answer. */
#define V(answer, http, poked, closed)                                                      \
    ctf_gateway_probe_verdict(answer, strlen(answer), http, poked, closed)

/* What the gateway answered a probe: the instance's bytes, or the gateway's own. */
static void test_probe_verdict(void **state)
{
    (void)state;
    static const char T404[] = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 19\r\n\r\n404 page not found\n";
    static const char T404B[] = "HTTP/1.1 404 Not Found\r\nDate: Fri, 27 Nov 2026\r\n"
                                "Content-Length: 19\r\n\r\n404 page not found\n";
    static const char APP404[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno such\r\n";

    /* TCP, before anything was sent: a greeting is the instance, a close is no server. */
    assert_int_equal(V("Your flag is flag{x}\n", false, false, false), CTF_PROBE_SERVED);
    assert_int_equal(V("", false, false, true), CTF_PROBE_GATEWAY);
    /* TCP, after the request: the gateway's HTTP handler, or a silent or hung-up instance. */
    assert_int_equal(V(T404, false, true, true), CTF_PROBE_COMPARE);
    assert_int_equal(V("HTTP/1.1 503 Service Unavailable\r\n\r\nno available server", false,
                       true, true),
                     CTF_PROBE_GATEWAY);
    assert_int_equal(V("", false, true, false), CTF_PROBE_SERVED);
    assert_int_equal(V("", false, true, true), CTF_PROBE_SERVED);
    assert_int_equal(V("> ", false, true, false), CTF_PROBE_SERVED);

    /* HTTP: 502/503/504 and silence are the gateway's; 404 and 421 need the comparison. */
    assert_int_equal(V("HTTP/1.1 200 OK\r\n\r\nhi", true, true, true), CTF_PROBE_SERVED);
    assert_int_equal(V("HTTP/1.1 302 Found\r\n\r\n", true, true, true), CTF_PROBE_SERVED);
    assert_int_equal(V("HTTP/1.1 500 Oops\r\n\r\n", true, true, true), CTF_PROBE_SERVED);
    assert_int_equal(V("HTTP/1.1 502 Bad Gateway\r\n\r\n", true, true, true), CTF_PROBE_GATEWAY);
    assert_int_equal(V("HTTP/1.0 503 x\r\n\r\n", true, true, true), CTF_PROBE_GATEWAY);
    assert_int_equal(V("HTTP/1.1 504 x\r\n\r\n", true, true, true), CTF_PROBE_GATEWAY);
    assert_int_equal(V(T404, true, true, true), CTF_PROBE_COMPARE);
    assert_int_equal(V("HTTP/1.1 421 Misdirected\r\n\r\n", true, true, true), CTF_PROBE_COMPARE);
    assert_int_equal(V("", true, true, true), CTF_PROBE_GATEWAY);
    assert_int_equal(V("", true, true, false), CTF_PROBE_GATEWAY);
    /* Not an HTTP status line: the instance's (whatever it is). */
    assert_int_equal(V("HTTP/1.1 5x3 x\r\n\r\n", true, true, true), CTF_PROBE_SERVED);
    assert_int_equal(V("HTTP/2 503\r\n\r\n", true, true, true), CTF_PROBE_SERVED);

    /* The status line, strictly. */
    assert_int_equal(ctf_gateway_http_status(T404, strlen(T404)), 404);
    assert_int_equal(ctf_gateway_http_status("HTTP/1.1 404", 12), 404);
    assert_int_equal(ctf_gateway_http_status("HTTP/1.1 40", 11), 0);
    assert_int_equal(ctf_gateway_http_status("HTTP/1.1 099 x", 14), 0);
    assert_int_equal(ctf_gateway_http_status(NULL, 0), 0);

    /* The same 404 as a host without a route: same status and body, other headers. */
    assert_true(ctf_gateway_probe_same(T404, strlen(T404), T404B, strlen(T404B)));
    assert_false(ctf_gateway_probe_same(APP404, strlen(APP404), T404, strlen(T404)));
    assert_false(ctf_gateway_probe_same(T404, strlen(T404), "HTTP/1.1 503 x\r\n\r\n404 page not found\n",
                                        strlen("HTTP/1.1 503 x\r\n\r\n404 page not found\n")));
    assert_false(ctf_gateway_probe_same(T404, strlen(T404), "", 0));
    assert_false(ctf_gateway_probe_same("HTTP/1.1 404 x", 14, "HTTP/1.1 404 x", 14));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_children), cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_endpoints), cmocka_unit_test(test_warm),
        cmocka_unit_test(test_route_state), cmocka_unit_test(test_check),
        cmocka_unit_test(test_probe_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

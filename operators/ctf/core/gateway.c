/*
 * gateway.c - the gateway exposure mode's decisions (see gateway.h): the
 * hosts and endpoints of a team's instance, the route spec of each
 * exposure, the NetworkPolicy peer of the gateway's pods, and what a
 * route's status says of our Gateway.
 *
 * Workload: one call per exposure per reconcile of a team's instance (at
 * most 10 exposures); a route's status holds a handful of parents. Linear
 * scans of small jansson trees are the right data structure.
 *
 * Invariant: every function reads a setting through the accessors below,
 * so an unset field means its documented default everywhere, whether or
 * not ctf_gateway_defaults ran.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kop/meta.h>

#include "core/gateway.h"
#include "core/host.h"
#include "core/json.h"

/* The longest pod selector accepted ("k=v,..."): ten labels of the longest kind fit. */
#define SELECTOR_MAX 4096

/* ---- the settings, with their defaults ------------------------------------ */

static const char *or_default(const char *v, const char *dflt)
{
    return ctf_nonempty(v) ? v : dflt;
}

static const char *gw_namespace(const ctf_gateway *g)
{
    return or_default(g->namespace, CTF_GATEWAY_DEFAULT_NAMESPACE);
}

static const char *gw_name(const ctf_gateway *g)
{
    return or_default(g->name, CTF_GATEWAY_DEFAULT_NAME);
}

static const char *gw_pod_namespace(const ctf_gateway *g)
{
    return or_default(g->pod_namespace, gw_namespace(g));
}

static int gw_port(const ctf_gateway *g)
{
    return g->port > 0 ? g->port : CTF_GATEWAY_DEFAULT_PORT;
}

static bool is_http(const json_t *expose)
{
    return kop_streq(json_string_value(json_object_get(expose, "type")), "HTTP");
}

bool ctf_gateway_on(const ctf_config *cfg)
{
    return cfg && ctf_nonempty(cfg->gateway.domain);
}

void ctf_gateway_defaults(ctf_gateway *g)
{
    g->namespace = gw_namespace(g);
    g->name = gw_name(g);
    g->tls_listener = or_default(g->tls_listener, CTF_GATEWAY_DEFAULT_TLS);
    g->https_listener = or_default(g->https_listener, CTF_GATEWAY_DEFAULT_HTTPS);
    g->pod_namespace = gw_pod_namespace(g);
    g->port = gw_port(g);
}

/* ---- the pod selector --------------------------------------------------------- */

/*
 * parse_selector returns "k=v,k2=v2" as a new object {k: v, k2: v2}; NULL
 * for a malformed selector (a pair without '=', an invalid key or value, a
 * key twice) or no memory. NULL or "" is {}.
 */
static json_t *parse_selector(const char *text)
{
    json_t *labels = json_object();
    char *copy = NULL, *save = NULL;
    if (!labels || !ctf_nonempty(text))
        return labels;
    if (strlen(text) > SELECTOR_MAX || !(copy = strdup(text)))
        goto bad;
    for (char *pair = strtok_r(copy, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pair, '=');
        if (!eq)
            goto bad;
        *eq = '\0';
        if (!kop_meta_is_valid_label_key(pair) || !kop_meta_is_valid_label_value(eq + 1) ||
            json_object_get(labels, pair) || !ctf_put(labels, pair, json_string(eq + 1)))
            goto bad;
    }
    free(copy);
    return labels;
bad:
    free(copy);
    json_decref(labels);
    return NULL;
}

kop_err ctf_gateway_check(const ctf_config *cfg, kop_status *st)
{
    if (!ctf_gateway_on(cfg))
        return KOP_OK;
    const ctf_gateway *g = &cfg->gateway;
    const char *labels[] = {gw_namespace(g), gw_pod_namespace(g)};
    const char *sections[] = {or_default(g->tls_listener, CTF_GATEWAY_DEFAULT_TLS),
                              or_default(g->https_listener, CTF_GATEWAY_DEFAULT_HTTPS)};
    if (!kop_meta_is_valid_dns1123_subdomain(g->domain) ||
        strlen(g->domain) + 1 + CTF_HOST_ID_LEN > KOP_META_DNS1123_SUBDOMAIN_MAX) {
        kop_status_setf(st, 0, NULL, "The gateway domain \"%s\" is not a DNS name that fits.",
                        g->domain);
        return KOP_EINVAL;
    }
    for (size_t i = 0; i < CTF_LEN(labels); i++) {
        if (!kop_meta_is_valid_dns1123_label(labels[i])) {
            kop_status_setf(st, 0, NULL, "\"%s\" is not a namespace name.", labels[i]);
            return KOP_EINVAL;
        }
    }
    if (!kop_meta_is_valid_dns1123_subdomain(gw_name(g))) {
        kop_status_setf(st, 0, NULL, "\"%s\" is not a Gateway name.", gw_name(g));
        return KOP_EINVAL;
    }
    for (size_t i = 0; i < CTF_LEN(sections); i++) {
        if (!kop_meta_is_valid_dns1123_subdomain(sections[i])) {
            kop_status_setf(st, 0, NULL, "\"%s\" is not a listener name.", sections[i]);
            return KOP_EINVAL;
        }
    }
    if (g->port < 0 || g->port > 65535) {
        kop_status_setf(st, 0, NULL, "The gateway port %d is out of range.", g->port);
        return KOP_EINVAL;
    }
    /* It goes into the commands the page builds (shell and Python text): a name, no more. */
    if (ctf_nonempty(g->connect_address) &&
        !kop_meta_is_valid_dns1123_subdomain(g->connect_address)) {
        kop_status_setf(st, 0, NULL,
                        "The gateway connect address \"%s\" is not a DNS name or IPv4 address.",
                        g->connect_address);
        return KOP_EINVAL;
    }
    if (!g->key || g->key_len < CTF_HOST_KEY_MIN) {
        kop_status_setf(st, 0, NULL, "The gateway's host key must hold at least %d bytes.",
                        CTF_HOST_KEY_MIN);
        return KOP_EINVAL;
    }
    json_t *sel = parse_selector(g->pod_selector);
    if (!sel) {
        kop_status_setf(st, 0, NULL,
                        "The gateway pod selector \"%s\" is not key=value pairs joined by ','.",
                        g->pod_selector);
        return KOP_EINVAL;
    }
    json_decref(sel);
    return KOP_OK;
}

/* ---- hosts and endpoints ------------------------------------------------------ */

kop_err ctf_gateway_host(const ctf_config *cfg, const json_t *def, const char *team,
                         const char *exposure, char *out, size_t size, kop_status *st)
{
    char id[CTF_HOST_ID_SIZE];
    if (!ctf_gateway_on(cfg)) {
        kop_status_setf(st, 0, NULL, "The gateway mode is off.");
        return KOP_EINVAL;
    }
    ctf_host_parts parts = {.team = team,
                            .challenge_ns = kop_meta_namespace(def),
                            .challenge = kop_meta_name(def),
                            .exposure = exposure};
    kop_err err = ctf_host_id(cfg->gateway.key, cfg->gateway.key_len, &parts, id, sizeof id, st);
    if (!err)
        err = ctf_host_name(id, cfg->gateway.domain, out, size, st);
    return err;
}

kop_err ctf_gateway_endpoints(const ctf_config *cfg, const json_t *def, const char *team,
                              json_t **out, kop_status *st)
{
    const json_t *expose = ctf_get2(def, "spec", "expose");
    json_t *list = json_array();
    kop_err err = list ? KOP_OK : KOP_ENOMEM;
    size_t i;
    const json_t *e;
    *out = NULL;
    int port = ctf_gateway_on(cfg) ? gw_port(&cfg->gateway) : CTF_GATEWAY_DEFAULT_PORT;
    json_array_foreach(expose, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        char host[CTF_HOST_SIZE], address[CTF_HOST_SIZE + 32], suffix[16] = "";
        if (err)
            break;
        if ((err = ctf_gateway_host(cfg, def, team, name, host, sizeof host, st)) != KOP_OK)
            break;
        if (port != 443)
            snprintf(suffix, sizeof suffix, ":%d", port);
        if (is_http(e))
            snprintf(address, sizeof address, "https://%s%s", host, suffix);
        else
            snprintf(address, sizeof address, "%s:%d",
                     ctf_nonempty(cfg->gateway.connect_address) ? cfg->gateway.connect_address
                                                                : host,
                     port);
        if (!ctf_push(list, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", name, "type",
                                      is_http(e) ? "HTTP" : "TCP", "address", address, "host",
                                      host, "port", port)))
            err = KOP_ENOMEM;
    }
    if (err) {
        json_decref(list);
        return err;
    }
    *out = list;
    return KOP_OK;
}

/* ---- routes ------------------------------------------------------------------ */

const char *ctf_gateway_route_kind(const json_t *expose)
{
    return is_http(expose) ? CTF_KIND_HTTPROUTE : CTF_KIND_TLSROUTE;
}

json_t *ctf_gateway_route_spec(const ctf_config *cfg, const json_t *expose, const char *host)
{
    const ctf_gateway *g = &cfg->gateway;
    const char *section = is_http(expose)
                              ? or_default(g->https_listener, CTF_GATEWAY_DEFAULT_HTTPS)
                              : or_default(g->tls_listener, CTF_GATEWAY_DEFAULT_TLS);
    /* The backend is the exposure's Service, named as the exposure (instance.c). */
    return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}], s:[s], s:[{s:[{s:s, s:I}]}]}",
                     "parentRefs", "group", CTF_GATEWAY_GROUP, "kind", "Gateway", "namespace",
                     gw_namespace(g), "name", gw_name(g), "sectionName", section, "hostnames",
                     host, "rules", "backendRefs", "name",
                     json_string_value(json_object_get(expose, "name")), "port",
                     json_integer_value(json_object_get(expose, "port")));
}

json_t *ctf_gateway_peer(const ctf_config *cfg)
{
    json_t *sel = parse_selector(cfg->gateway.pod_selector);
    if (!sel)
        return NULL;
    return json_pack("{s:{s:{s:s}}, s:{s:o}}", "namespaceSelector", "matchLabels",
                     "kubernetes.io/metadata.name", gw_pod_namespace(&cfg->gateway),
                     "podSelector", "matchLabels", sel);
}

/* ours: a status.parents[] entry is about our Gateway (route_ns: the default namespace). */
static bool ours(const ctf_gateway *g, const json_t *parent, const char *route_ns)
{
    const json_t *ref = json_object_get(parent, "parentRef");
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *ns = json_string_value(json_object_get(ref, "namespace"));
    return (!kind || kop_streq(kind, "Gateway")) &&
           kop_streq(json_string_value(json_object_get(ref, "name")), gw_name(g)) &&
           kop_streq(ctf_nonempty(ns) ? ns : route_ns, gw_namespace(g));
}

/* current: condition c describes generation gen of the route (or says nothing of it). */
static bool current(const json_t *c, json_int_t gen)
{
    const json_t *seen = json_object_get(c, "observedGeneration");
    return !json_is_integer(seen) || gen <= 0 || json_integer_value(seen) >= gen;
}

ctf_route_state ctf_gateway_route_state(const ctf_config *cfg, const json_t *route,
                                        const char *kind, const char *ns, const char *name,
                                        char *msg, size_t size)
{
    const ctf_gateway *g = &cfg->gateway;
    json_int_t gen = route ? kop_meta_generation(route) : 0;
    const json_t *parent;
    size_t i;
    ctf_route_state state = CTF_ROUTE_WAITING;
    const json_t *why = NULL;

    json_array_foreach(ctf_get2(route, "status", "parents"), i, parent)
    {
        if (!ours(g, parent, ns))
            continue;
        const json_t *accepted = kop_meta_find_condition(parent, "Accepted");
        const json_t *resolved = kop_meta_find_condition(parent, "ResolvedRefs");
        /* Refused: either condition False, for this version of the route. */
        const json_t *conds[] = {accepted, resolved};
        for (size_t j = 0; j < CTF_LEN(conds) && !why; j++) {
            if (conds[j] && current(conds[j], gen) &&
                kop_streq(json_string_value(json_object_get(conds[j], "status")), "False"))
                why = conds[j];
        }
        if (why) {
            state = CTF_ROUTE_REFUSED;
            break;
        }
        if (accepted && resolved && current(accepted, gen) && current(resolved, gen) &&
            kop_streq(json_string_value(json_object_get(accepted, "status")), "True") &&
            kop_streq(json_string_value(json_object_get(resolved, "status")), "True"))
            state = CTF_ROUTE_ACCEPTED;
    }
    if (state == CTF_ROUTE_ACCEPTED)
        snprintf(msg, size, "gateway %s/%s accepted %s %s/%s", gw_namespace(g), gw_name(g),
                 kind, ns, name);
    else if (state == CTF_ROUTE_REFUSED)
        snprintf(msg, size, "gateway %s/%s does not serve %s %s/%s: %s=False %s: %.200s",
                 gw_namespace(g), gw_name(g), kind, ns, name,
                 json_string_value(json_object_get(why, "type")),
                 or_default(json_string_value(json_object_get(why, "reason")), "(no reason)"),
                 or_default(json_string_value(json_object_get(why, "message")), ""));
    else
        snprintf(msg, size, "waiting for gateway %s/%s to accept %s %s/%s", gw_namespace(g),
                 gw_name(g), kind, ns, name);
    return state;
}

/* ---- the probe's verdict --------------------------------------------------- */

int ctf_gateway_http_status(const char *answer, size_t len)
{
    /* "HTTP/1.x NNN": twelve bytes at least, three digits after the space. */
    if (!answer || len < 12 || memcmp(answer, "HTTP/1.", 7) != 0 || answer[8] != ' ')
        return 0;
    int code = 0;
    for (size_t i = 9; i < 12; i++) {
        if (answer[i] < '0' || answer[i] > '9')
            return 0;
        code = code * 10 + (answer[i] - '0');
    }
    return code >= 100 && code <= 599 ? code : 0;
}

ctf_probe_verdict ctf_gateway_probe_verdict(const char *answer, size_t len, bool http, bool poked,
                                            bool closed)
{
    if (!http && !poked)
        return len > 0 || !closed ? CTF_PROBE_SERVED : CTF_PROBE_GATEWAY;
    if (len == 0)
        return http ? CTF_PROBE_GATEWAY : CTF_PROBE_SERVED;
    int code = ctf_gateway_http_status(answer, len);
    if (code == 502 || code == 503 || code == 504)
        return CTF_PROBE_GATEWAY;
    if (code == 404 || code == 421)
        return CTF_PROBE_COMPARE;
    return CTF_PROBE_SERVED;
}

/* body_of points *body at the bytes after the head's blank line; false when there is none. */
static bool body_of(const char *a, size_t len, const char **body, size_t *blen)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        if (memcmp(a + i, "\r\n\r\n", 4) == 0) {
            *body = a + i + 4;
            *blen = len - i - 4;
            return true;
        }
    }
    return false;
}

bool ctf_gateway_probe_same(const char *a, size_t alen, const char *b, size_t blen)
{
    const char *ba, *bb;
    size_t na, nb;
    int ca = ctf_gateway_http_status(a, alen);
    if (ca == 0 || ca != ctf_gateway_http_status(b, blen))
        return false;
    if (!body_of(a, alen, &ba, &na) || !body_of(b, blen, &bb, &nb))
        return false;
    return na == nb && memcmp(ba, bb, na) == 0;
}

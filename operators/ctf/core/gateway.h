/*
 * core/gateway.h - the gateway exposure mode (gateway.c): every exposure of
 * an instance is reached through one TLS port of an existing Gateway API
 * gateway, by an unguessable, stable host of its own (core/host.h), instead
 * of a NodePort each. What this file decides, from the operator's settings
 * (ctf_gateway in core/names.h) and the definition, the team and the
 * exposure:
 *
 *  - the host of an exposure, "<id>.<domain>", and the endpoints a team is
 *    shown (host, port and the address to type);
 *  - the route spec that attaches an exposure to the Gateway: a TLSRoute
 *    (gateway.networking.k8s.io/v1, as the v1.6 experimental CRDs serve and
 *    store it) on the TLS listener in Terminate mode for TCP, forwarded as
 *    plain TCP to the exposure's ClusterIP Service; an HTTPRoute on the
 *    HTTPS listener for HTTP, by Host;
 *  - the NetworkPolicy peer of the gateway's pods, the only source the
 *    exposed ports admit in this mode;
 *  - whether a stored route is accepted by our Gateway (its status.parents),
 *    waiting for it, or refused, and why: Running waits for accepted;
 *  - whether what the gateway answered a probe of an instance's host is the
 *    instance's own answer or the gateway's (no route applied yet, no
 *    server): Running waits for the instance's (controller/probe.c).
 *
 * Pure: no network, no cluster, no clock. Ownership: inputs are borrowed;
 * a json_t * handed back is a new reference; strings are written into
 * caller buffers.
 */
#ifndef CTF_CORE_GATEWAY_H
#define CTF_CORE_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

#include "core/names.h"

/* The Gateway API group and the version the routes are written as. */
#define CTF_GATEWAY_GROUP      "gateway.networking.k8s.io"
#define CTF_GATEWAY_API        "gateway.networking.k8s.io/v1"
#define CTF_KIND_TLSROUTE      "TLSRoute"
#define CTF_KIND_HTTPROUTE     "HTTPRoute"

/* Defaults of ctf_gateway's fields: the Gateway the devcluster makes (docs/devcluster.md). */
#define CTF_GATEWAY_DEFAULT_NAMESPACE "kopc-gateway"
#define CTF_GATEWAY_DEFAULT_NAME      "ctf"
#define CTF_GATEWAY_DEFAULT_TLS       "tls"
#define CTF_GATEWAY_DEFAULT_HTTPS     "https"
#define CTF_GATEWAY_DEFAULT_PORT      443

/* Reasons a team's instance shows while its routes are not accepted (then Error at timeout). */
#define CTF_REASON_GATEWAY_PENDING "GatewayPending"  /* no answer from the gateway yet */
#define CTF_REASON_ROUTE_REFUSED   "RouteNotAccepted" /* the gateway said no, or no backend */

/* ctf_gateway_on: cfg asks for the gateway mode (a domain is set). */
bool ctf_gateway_on(const ctf_config *cfg);

/*
 * ctf_gateway_defaults fills g's unset fields (NULL strings, port 0) with
 * the CTF_GATEWAY_DEFAULT_* values; pod_namespace defaults to the Gateway's
 * namespace. The strings put in are static.
 */
void ctf_gateway_defaults(ctf_gateway *g);

/*
 * ctf_gateway_check validates cfg's gateway settings once, at start-up: a
 * DNS domain, the Gateway's namespace and name and the listener names, a
 * port in 1..65535, a connect address (when set) that is a DNS name or a
 * dotted IPv4 address, a key of at least CTF_HOST_KEY_MIN bytes and a pod
 * selector of "key=value" pairs joined by ','. KOP_EINVAL explained in st.
 * KOP_OK when the mode is off.
 */
KOP_NODISCARD kop_err ctf_gateway_check(const ctf_config *cfg, kop_status *st);

/*
 * ctf_gateway_host writes the host of exposure of team's instance of def
 * into out (size >= CTF_HOST_SIZE): ctf_host_name of ctf_host_id of the
 * team, the definition's namespace and name, and the exposure, under the
 * gateway's key. KOP_EINVAL explained in st; KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_gateway_host(const ctf_config *cfg, const json_t *def, const char *team,
                                       const char *exposure, char *out, size_t size,
                                       kop_status *st);

/*
 * ctf_gateway_endpoints returns in *out (a new array) status.endpoints of
 * team's instance of def in the gateway mode, one entry per exposure in
 * expose[] order: {name, type, address, host, port}, where address is
 * "<host>:<port>" for TCP ("<connect_address>:<port>" when that is set: the
 * host is then the SNI only) and "https://<host>" (":<port>" unless 443) for
 * HTTP. Errors as ctf_gateway_host; *out NULL then.
 */
KOP_NODISCARD kop_err ctf_gateway_endpoints(const ctf_config *cfg, const json_t *def,
                                            const char *team, json_t **out, kop_status *st);

/*
 * ctf_gateway_route_kind: the route kind of an exposure (an expose[]
 * entry): CTF_KIND_HTTPROUTE for HTTP, CTF_KIND_TLSROUTE for TCP.
 */
const char *ctf_gateway_route_kind(const json_t *expose);

/*
 * ctf_gateway_route_spec returns the spec of the route of an exposure
 * (an expose[] entry) reached at host: parentRefs naming the Gateway and
 * the listener of its kind, hostnames [host], one rule whose backend is the
 * exposure's Service (named as the exposure) on its port. A new reference,
 * NULL when memory ran out.
 */
json_t *ctf_gateway_route_spec(const ctf_config *cfg, const json_t *expose, const char *host);

/*
 * ctf_gateway_peer returns the NetworkPolicy peer of the gateway's pods, as
 * a new reference: {namespaceSelector: {matchLabels:
 * {kubernetes.io/metadata.name: <pod_namespace>}}, podSelector:
 * {matchLabels: <pod_selector>}} (an empty podSelector: every pod of that
 * namespace). NULL for a selector ctf_gateway_check refuses, or no memory.
 */
json_t *ctf_gateway_peer(const ctf_config *cfg);

/* ctf_route_state: what a route's status says of our Gateway. */
typedef enum ctf_route_state {
    CTF_ROUTE_ACCEPTED, /* Accepted=True and ResolvedRefs=True, for its current generation */
    CTF_ROUTE_WAITING,  /* no (current) answer from our Gateway yet */
    CTF_ROUTE_REFUSED,  /* Accepted=False or ResolvedRefs=False */
} ctf_route_state;

/*
 * ctf_gateway_route_state reads route's status.parents[] for the entry of
 * our Gateway (parentRef name and namespace, the route's namespace when the
 * reference has none) and tells whether it is accepted. A condition whose
 * observedGeneration is older than the route's metadata.generation does not
 * count (the gateway has not seen this version yet). msg (size bytes) gets
 * a sentence naming the Gateway and the route, and, when refused, the
 * condition's reason and message. route NULL (not in the cache yet) is
 * waiting.
 */
ctf_route_state ctf_gateway_route_state(const ctf_config *cfg, const json_t *route,
                                        const char *kind, const char *ns, const char *name,
                                        char *msg, size_t size);

/* ---- the probe through the gateway (controller/probe.c does the I/O) ---- */

/* The host a probe asks for to learn the gateway's answer to a host without a route: never
 * an instance's (theirs are 16 base32 characters, ctf_host_name). */
#define CTF_GATEWAY_UNROUTED_LABEL "kopc-no-route"

/* ctf_probe_verdict: what one probe of an instance's host through the gateway saw. */
typedef enum ctf_probe_verdict {
    CTF_PROBE_SERVED,  /* the instance's own bytes (or a silent TCP instance): served */
    CTF_PROBE_GATEWAY, /* the gateway's own answer (no server, no route yet): not served */
    CTF_PROBE_COMPARE, /* a 404 or 421: the gateway's only if a host without a route gets the
                        * same (ctf_gateway_probe_same) */
} ctf_probe_verdict;

/*
 * ctf_gateway_probe_verdict judges what a probe read (answer, len bytes,
 * not NUL-terminated) from an exposure's host through the gateway; http:
 * the exposure is HTTP; poked: an HTTP request "GET / HTTP/1.1" was sent
 * (always for HTTP; for TCP only after the instance stayed silent a
 * moment); closed: the peer closed the connection (else the read timed
 * out or the buffer filled).
 *
 *  - TCP, nothing sent yet: bytes are the instance's (a gateway never
 *    speaks first); closed without a byte is the gateway with no server.
 *  - After the request: an HTTP answer 502, 503 or 504 is the gateway's
 *    (no available server); 404 or 421 may be either (COMPARE); any other
 *    answer is the instance's. Nothing at all is the instance's for TCP
 *    (a silent challenge, or one that hangs up on a stray request), the
 *    gateway's for HTTP (an HTTP server answers).
 */
ctf_probe_verdict ctf_gateway_probe_verdict(const char *answer, size_t len, bool http, bool poked,
                                            bool closed);

/*
 * ctf_gateway_probe_same: answers a and b (HTTP, as read) have the same
 * status code and the same body (the bytes after the first blank line),
 * i.e. the instance's host got what a host without a route gets. false
 * when either is not an HTTP answer.
 */
bool ctf_gateway_probe_same(const char *a, size_t alen, const char *b, size_t blen);

/* ctf_gateway_http_status: the status code of an HTTP answer's first line, 0 when none. */
int ctf_gateway_http_status(const char *answer, size_t len);

#endif /* CTF_CORE_GATEWAY_H */

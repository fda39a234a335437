/*
 * observe.c - what a reconcile sees of an instance, from the caches only
 * (see observe.h): a container that cannot start (an image that cannot
 * be pulled, a crash loop), Deployments available, endpoints known and
 * every exposed Service's endpoint ready, and in the gateway mode every
 * route accepted by our Gateway, and then (with --gateway-probe-address)
 * every host served through it (controller/probe.h). The events of the
 * instance's objects (the routes' status among them) bring the Challenge
 * back here; only the probe of an instance about to be Running is polled.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/observe.h"
#include "controller/probe.h"
#include "core/wake.h"

void ctf_observe_error(ctf_observation *o, const char *reason, const char *fmt, ...)
{
    va_list ap;
    o->phase = CTF_STATUS_ERROR;
    o->reason = reason;
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof o->message, fmt, ap);
    va_end(ap);
}

time_t ctf_created_at(const json_t *obj)
{
    time_t t = 0;
    const char *ts = ctf_str2(obj, "metadata", "creationTimestamp");
    if (!ts || ctf_parse_time(ts, &t) != KOP_OK)
        t = time(NULL);
    return t;
}

/* pod_failure finds a container that cannot start in ns, for Error. */
static bool pod_failure(ctf_operator *op, const char *ns, ctf_observation *o)
{
    json_t *pods = NULL, *pod, *cs;
    size_t i, j;
    bool found = false;
    kop_index_page one = {.max = 1};
    json_t *keys = NULL;
    /* The index says whether a pod of ns has a container that cannot start, without
     * reading its pods. */
    kop_err err = kop_informer_index_keys(op->pods, CTF_INDEX_FAILING, ns, &one, &keys);
    json_decref(keys);
    if (err == KOP_OK && one.total == 0)
        return false;
    if (kop_informer_list(op->pods, ns, &pods))
        return false;
    json_array_foreach(pods, i, pod)
    {
        json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), j,
                           cs)
        {
            json_t *waiting = json_object_get(json_object_get(cs, "state"), "waiting");
            const char *why = ctf_failure_reason(json_string_value(json_object_get(waiting, "reason")));
            const char *name = json_string_value(json_object_get(cs, "name"));
            const char *image = json_string_value(json_object_get(cs, "image"));
            if (kop_streq(why, "ImagePullFailed"))
                ctf_observe_error(o, why, "image %s of container %s cannot be pulled",
                                  image ? image : "?", name ? name : "?");
            else if (why)
                ctf_observe_error(o, why, "container %s of pod %s keeps crashing",
                                  name ? name : "?", kop_meta_name(pod));
            if ((found = why != NULL))
                goto out;
        }
    }
out:
    json_decref(pods);
    return found;
}

/*
 * deployment_short: the Deployment of the definition's pod spec pod in ns
 * is not available (missing from the cache, rolling out, or short of
 * replicas); with why (may be NULL) set to say which and, short of
 * replicas, its ReplicaFailure condition (pods the ReplicaSet cannot make).
 */
static bool deployment_short(ctf_operator *op, const json_t *pod, const char *ns, char *why,
                             size_t size)
{
    json_t *d = NULL;
    const char *name = json_string_value(json_object_get(pod, "name"));
    if (!name || kop_informer_dup(op->deployments, ns, name, &d) != KOP_OK) {
        if (why)
            snprintf(why, size, "Deployment %s not seen yet", name ? name : "?");
        return true;
    }
    json_t *spec = json_object_get(d, "spec"), *status = json_object_get(d, "status");
    json_int_t want = json_integer_value(json_object_get(spec, "replicas"));
    json_int_t have = json_integer_value(json_object_get(status, "availableReplicas"));
    bool rolling = ctf_update_deployment_rolling(d);
    bool short_of = rolling || ctf_update_deployment_short(d);
    if (short_of && why && rolling)
        snprintf(why, size, "Deployment %s is rolling out", name);
    else if (short_of && why) {
        const char *failure =
            json_string_value(json_object_get(kop_meta_find_condition(status, "ReplicaFailure"),
                                              "message"));
        snprintf(why, size, "Deployment %s has %lld of %lld replicas available%s%.300s%s", name,
                 (long long)have, (long long)want, failure ? " (" : "", failure ? failure : "",
                 failure ? ")" : "");
    }
    json_decref(d);
    return short_of;
}

/* deployments_available: every pod of the definition has an available Deployment; why
 * (may be NULL) says which one is not, when one is not. */
static bool deployments_available(ctf_operator *op, const json_t *def, const char *ns, char *why,
                                  size_t size)
{
    json_t *pod;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(def, "spec"), "pods"), i, pod)
    {
        if (deployment_short(op, pod, ns, why, size))
            return false;
    }
    return true;
}

/*
 * services_ready: every exposed Service of the definition has a ready
 * endpoint, so kube-proxy (or the Ingress) has a pod to send connections to.
 * The EndpointSlice controller labels each slice with its Service's name
 * and copies the Service's labels, which is how the cache holds them.
 */
static bool services_ready(ctf_operator *op, const json_t *def, const char *ns, char *why,
                           size_t size)
{
    json_t *slices = NULL, *e, *s;
    size_t i, j;
    bool all = true;
    if (kop_informer_list(op->endpointslices, ns, &slices) != KOP_OK)
        return false;
    json_array_foreach(json_object_get(json_object_get(def, "spec"), "expose"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        bool ready = false;
        json_array_foreach(slices, j, s)
        {
            const char *svc = kop_meta_label(s, "kubernetes.io/service-name");
            if (name && svc && strcmp(svc, name) == 0 && ctf_slice_ready(s))
                ready = true;
        }
        if (!ready) {
            if (why)
                snprintf(why, size, "no ready endpoint behind Service %s", name ? name : "?");
            all = false;
            break;
        }
    }
    json_decref(slices);
    return all;
}

/*
 * check_instance decides ctf_instance_ready; why (may be NULL) says which
 * check the instance fails, in the order they are taken, when it is
 * starting (the start timeout's message).
 */
static bool check_instance(ctf_operator *op, const json_t *def, const char *ns,
                           ctf_observation *o, char *why, size_t size)
{
    json_t *services = NULL;
    bool complete = false;
    if (pod_failure(op, ns, o))
        return false;
    json_decref(o->endpoints);
    o->endpoints = NULL;
    if (kop_informer_list(op->services, ns, &services) == KOP_OK &&
        ctf_endpoints(&op->instance, def, ns, services, &o->endpoints, &complete) != KOP_OK)
        complete = false;
    json_decref(services);
    if (!complete && why)
        snprintf(why, size, "a Service of %s has no node port yet", ns);
    return complete && deployments_available(op, def, ns, why, size) &&
           services_ready(op, def, ns, why, size);
}

bool ctf_instance_ready(ctf_operator *op, const json_t *def, const char *ns, ctf_observation *o)
{
    return check_instance(op, def, ns, o, NULL, 0);
}

/*
 * routes_accepted: in the gateway mode, our Gateway accepted the route of
 * every exposure of def in ns (core/gateway.h). Otherwise false, with
 * *reason and msg saying what the first refused route (else the first
 * unanswered one) waits for.
 */
static bool routes_accepted(ctf_operator *op, const json_t *def, const char *ns, char *msg,
                            size_t size, const char **reason)
{
    const json_t *e;
    size_t i;
    bool all = true;
    json_array_foreach(ctf_get2(def, "spec", "expose"), i, e)
    {
        const char *kind = ctf_gateway_route_kind(e);
        const char *name = json_string_value(json_object_get(e, "name"));
        kop_informer *cache = kop_streq(kind, CTF_KIND_TLSROUTE) ? op->tlsroutes : op->httproutes;
        json_t *route = NULL;
        char why[sizeof ((ctf_observation *)0)->message];
        if (!cache || !name || kop_informer_dup(cache, ns, name, &route) != KOP_OK)
            route = NULL; /* not in the cache yet: waiting */
        ctf_route_state s =
            ctf_gateway_route_state(&op->instance, route, kind, ns, name ? name : "", why,
                                    sizeof why);
        json_decref(route);
        if (s == CTF_ROUTE_ACCEPTED)
            continue;
        /* A refusal says more than a silence: it wins the message. */
        if (all || s == CTF_ROUTE_REFUSED) {
            if (all || !kop_streq(*reason, CTF_REASON_ROUTE_REFUSED)) {
                snprintf(msg, size, "%s", why);
                *reason = s == CTF_ROUTE_REFUSED ? CTF_REASON_ROUTE_REFUSED
                                                 : CTF_REASON_GATEWAY_PENDING;
            }
        }
        all = false;
    }
    return all;
}

/*
 * gateway_endpoints: in the gateway mode, the endpoints the team is shown are
 * its hosts (core/gateway.h), known from the start; false with o set to
 * Error when they cannot be computed.
 */
static bool gateway_endpoints(ctf_operator *op, const json_t *chal, const json_t *def,
                              ctf_observation *o)
{
    kop_status st;
    json_t *eps = NULL;
    kop_status_clear(&st);
    if (ctf_gateway_endpoints(&op->instance, def, ctf_str2(chal, "spec", "team"), &eps, &st) !=
        KOP_OK) {
        ctf_observe_error(o, "GatewayHost", "cannot name the instance's host: %s", st.message);
        return false;
    }
    json_decref(o->endpoints);
    o->endpoints = eps;
    return true;
}

/* already_running: chal's status says Running: its hosts were served, no probe again. */
static bool already_running(const json_t *chal)
{
    return kop_streq(ctf_str2(chal, "status", "currentStatus"), CTF_STATUS_RUNNING);
}

/*
 * served: the gateway serves every host of o->endpoints (or no probe is
 * configured); false with msg saying which host waits for what, and
 * *reason the condition's reason: CTF_REASON_GATEWAY_CERT when a host's
 * certificate failed verification, else CTF_REASON_GATEWAY_PENDING.
 */
static bool served(ctf_operator *op, const ctf_observation *o, char *msg, size_t size,
                   const char **reason)
{
    ctf_probe_outcome r = ctf_gateway_served(&op->instance, o->endpoints, msg, size);
    *reason = r == CTF_PROBE_UNTRUSTED ? CTF_REASON_GATEWAY_CERT : CTF_REASON_GATEWAY_PENDING;
    return r == CTF_PROBE_OFF || r == CTF_PROBE_OK;
}

/* observe_instance decides Running, Pending or a failure from the caches. */
void ctf_observe_instance(ctf_operator *op, const json_t *chal, const json_t *def, const char *ns,
                          ctf_observation *o)
{
    char wait_msg[sizeof o->message] = "starting", why[256] = "";
    const char *wait_reason = NULL;
    long probe_ms = 0;
    bool ready = check_instance(op, def, ns, o, why, sizeof why);
    if (!o->reason && ctf_gateway_on(&op->instance)) {
        if (!gateway_endpoints(op, chal, def, o))
            return;
        /* The door must be open too: the gateway accepted every route. */
        if (ready && !routes_accepted(op, def, ns, wait_msg, sizeof wait_msg, &wait_reason))
            ready = false;
        /* And it must serve them: Accepted comes before the gateway applies the route. */
        if (ready && !already_running(chal) &&
            !served(op, o, wait_msg, sizeof wait_msg, &wait_reason)) {
            ready = false;
            probe_ms = ctf_probe_retry_ms(difftime(time(NULL), ctf_created_at(chal)) * 1000);
        }
    }
    if (ready) {
        o->phase = CTF_STATUS_RUNNING;
        snprintf(o->message, sizeof o->message, "instance running");
        return;
    }
    if (o->reason)
        return; /* a container that cannot start */
    if (kop_streq(o->phase, CTF_STATUS_UPDATING))
        return; /* being replaced (update.c): no start timeout */
    ctf_lifetime lt;
    int64_t timeout_ms = 5 * 60 * 1000;
    if (ctf_lifetime_parse(json_object_get(def, "spec"), &lt, NULL) == KOP_OK)
        timeout_ms = lt.start_timeout_ms;
    double age_ms = difftime(time(NULL), ctf_created_at(chal)) * 1000;
    if (age_ms >= (double)timeout_ms && wait_reason) {
        ctf_observe_error(o, wait_reason, "not running within %lld s of the request: %.400s",
                          (long long)(timeout_ms / 1000), wait_msg);
        return;
    }
    if (age_ms >= (double)timeout_ms) {
        ctf_observe_error(o, "StartTimeout", "not running within %lld s of the request: %s",
                          (long long)(timeout_ms / 1000), why[0] ? why : "starting");
        return;
    }
    o->phase = CTF_STATUS_PENDING;
    o->waiting = wait_reason;
    snprintf(o->message, sizeof o->message, "%s", wait_msg);
    o->requeue_ms = (long)((double)timeout_ms - age_ms) + 1000;
    if (probe_ms > 0 && probe_ms < o->requeue_ms)
        o->requeue_ms = probe_ms; /* the gateway's progress sends no event: look again */
}

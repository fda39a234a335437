/*
 * bench-loader - the benchmark's load generator, written on libkop.
 *
 * It creates N objects as fast as the apiserver takes them (several threads,
 * each with its own client and so its own connections) and, with a watch
 * opened before the first create, records when each object's status first
 * shows it done: per-object latency from "create sent" to "status seen by a
 * watch", and the time until every object is done.
 *
 *   bench-loader --kubeconfig PATH --workload flighttickets|challenges
 *                --count N --namespace NS --out DIR
 *                [--mode operator|alone|create|wait|warm] [--threads T]
 *                [--definition NAME] [--t0-ms EPOCH_MS] [--timeout SECONDS]
 *
 * Modes:
 *   operator  create N objects; an operator (running) writes their status.
 *   alone     no operator: the loader itself does the operator's writes for
 *             each object right after creating it - the apiserver's ceiling
 *             for the workload ("the limit", defined in docs/benchmarks.md):
 *               flighttickets: create the ticket, create its boarding pass
 *                 ConfigMap (owned by it), merge-patch its status;
 *               challenges: create the Challenge, server-side apply every
 *                 child the CTF operator would (ctf_build_children), and
 *                 once the Deployment is available and the exposed
 *                 Service has a ready endpoint (both seen by watches, the
 *                 operator's own condition) patch the status Running with
 *                 its endpoint.
 *   create    create N objects and exit (objects waiting for an operator:
 *             the cold-start measurement).
 *   wait      create nothing; wait until the N objects are done. Times are
 *             taken from --t0-ms (the operator's start).
 *   warm      (challenges) the warm pool the claim limit claims from, made
 *             unmeasured: warm instance i of the definition (its objects
 *             built by ctf-operator's own code, ctf_build_pooled_children,
 *             with id warm_id(i), in namespace ctf_pool_namespace), every
 *             child server-side applied. Done when applied; the harness
 *             then waits for the pods Ready. So the limit's claims meet an
 *             apiserver holding what kopc's meet: a pool's worth of objects.
 *             With --gateway-domain D, the gateway mode's warm instances.
 *   api       (challenges) each team asks the CTF operator's instance API
 *             for its instance: PUT --api URL/api/v1/teams/team-<i>/
 *             instances/<definition> with the bearer token of --api-token;
 *             the operator creates the Challenge (the burst scenario).
 *
 * --claim       (challenges, alone) the limit for a claim from a warm pool:
 *             instead of building the instance, the loader claims warm
 *             instance i (made beforehand, unmeasured, by --mode warm) with a
 *             merge patch of its Namespace's labels, as ctf-operator's
 *             claim does, and patches the Challenge Running at once (a warm
 *             instance's pods are already Ready): a claim's writes, the
 *             create, the claim patch and the status.
 *
 * --gateway-domain D  (with --claim) the claim in ctf-operator's gateway
 *             mode: after the claim patch the loader server-side applies the
 *             team's route of each exposure into the warm namespace (built by
 *             ctf-operator's own code, ctf_gateway_route_spec, hosts under a
 *             key of the loader's), and patches the Challenge Running only
 *             once a watch of the routes sees the Gateway kopc-gateway/ctf
 *             accept the first exposure's route (Accepted and ResolvedRefs,
 *             ctf_gateway_route_state: the operator's own condition). The
 *             harness runs the gateway (Traefik); the warm instance holds
 *             the exposed Service the route names.
 *
 * --spread-ms MS paces the creates (any mode): object i is sent MS * i / N
 * milliseconds after the first, so N teams press Create within MS (the
 * burst scenario: 1,000 within 10 s). Without it, as fast as possible.
 *
 * Objects are named <prefix>-00000 ... (ft- or chal-); challenge i is for
 * team team-<i>, so no per-team quota applies (the API names its
 * Challenges itself: they are told apart by spec.team). "Done" is status.phase
 * Confirmed for a ticket, status.currentStatus Running for a Challenge.
 *
 * Output in --out: latency.csv (index, create sent, created, done; epoch
 * milliseconds) and summary.json (counts, durations, percentiles). Exit
 * status 0 only when every object was done before the timeout.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <kop/kop.h>

#include "core/gateway.h"
#include "core/instance.h"

static const kop_resource TICKETS = {"flights.com", "v1", "flighttickets", "FlightTicket", true};
static const kop_resource CHALLENGES = {"ctf.kopc.io", "v1alpha1", "challenges", "Challenge", true};
static const kop_resource DEFINITIONS = {"ctf.kopc.io", "v1alpha1", "challengedefinitions",
                                         "ChallengeDefinition", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
static const kop_resource DEPLOYMENTS = {"apps", "v1", "deployments", "Deployment", true};
static const kop_resource SLICES = {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice",
                                    true};
/* The gateway mode's routes (--gateway-domain), in the version ctf-operator writes. */
static const kop_resource TLSROUTES = {"gateway.networking.k8s.io", "v1", "tlsroutes", "TLSRoute",
                                       true};
static const kop_resource HTTPROUTES = {"gateway.networking.k8s.io", "v1", "httproutes",
                                        "HTTPRoute", true};
/* The hosts' key of the limit's routes: any key gives hosts as long as the operator's. */
static const unsigned char GATEWAY_KEY[] = "bench-loader-gateway-host-key-0123456789";

/* The kinds ctf_build_children makes, for the alone mode. */
static const kop_resource CHILD_KINDS[] = {
    {"", "v1", "namespaces", "Namespace", false},
    {"", "v1", "secrets", "Secret", true},
    {"", "v1", "resourcequotas", "ResourceQuota", true},
    {"", "v1", "limitranges", "LimitRange", true},
    {"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true},
    {"apps", "v1", "deployments", "Deployment", true},
    {"", "v1", "services", "Service", true},
    {"networking.k8s.io", "v1", "ingresses", "Ingress", true},
};

#define FIELD_MANAGER "bench-loader"
#define MAX_THREADS   64

enum mode { MODE_OPERATOR, MODE_ALONE, MODE_CREATE, MODE_WAIT, MODE_API, MODE_WARM };

/* record: what happened to object i. Times are epoch milliseconds, 0: not yet. */
struct record {
    double sent, created, done;
    char *uid;        /* challenges, alone: the Challenge's uid */
    char *endpoint;   /* challenges, alone: host:nodePort once its Service exists */
    bool children;    /* challenges, alone: every child applied */
    bool available;   /* challenges, alone: its Deployment is available */
    bool serving;     /* challenges, alone: its exposed Service has a ready endpoint */
    bool claimed;     /* challenges, alone: the status patch is queued */
};

static struct {
    const char *kubeconfig, *workload, *ns, *out, *definition;
    const char *api, *api_token; /* api mode: the instance API and its admin token */
    enum mode mode;
    int count, threads;
    double t0;
    double spread_ms; /* > 0: object i is sent spread_ms * i / count after the first */
    double first_ms;  /* when the first create was due (paced runs) */
    long timeout_s;
    bool tickets; /* else challenges */
    bool claim;   /* challenges, alone: claim warm namespaces (--claim) */
    const char *gateway_domain; /* with claim: write the routes, wait for Accepted */
    ctf_config gw;              /* the gateway mode's settings (gateway_domain) */
    const char *prefix;

    struct record *rec;
    atomic_int next;      /* next index to create */
    atomic_int ndone;     /* objects seen done */
    atomic_int nerrors;   /* failed creates */
    atomic_long nwrites;  /* the operator's writes done here (alone mode) */
    pthread_mutex_t lock; /* records' challenge fields, the patch queue */
    pthread_cond_t cond;
    int *queue; /* challenges, alone: indices whose status is to be patched */
    int qhead, qtail;
    bool stop;
    json_t *def;         /* challenges, alone: the definition */
    const char *exposed; /* challenges, alone: its exposed Service (the first), in def */
    char *flag;
} L = {.threads = 8, .timeout_s = 1800, .lock = PTHREAD_MUTEX_INITIALIZER,
       .cond = PTHREAD_COND_INITIALIZER};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, kop_err err, const kop_status *st)
{
    fprintf(stderr, "bench-loader: %s: %s: %s\n", what, kop_strerror(err), st ? st->message : "");
    exit(2);
}

/* new_client makes a client of its own for one thread. */
static kop_client *new_client(void)
{
    kop_config *cfg = NULL;
    kop_client *c = NULL;
    kop_status st;
    kop_err err = kop_config_load(&(kop_config_opts){.kubeconfig = L.kubeconfig}, &cfg, &st);
    if (!err)
        err = kop_client_new(cfg, NULL, &c, &st); /* cfg lives as long as the process */
    if (err)
        die("client", err, &st);
    return c;
}

/* index_of parses i out of "<prefix>-<i>"; -1 when the name is not ours. */
static int index_of(const char *name)
{
    size_t n = strlen(L.prefix);
    if (!name || strncmp(name, L.prefix, n) != 0 || name[n] != '-')
        return -1;
    char *end;
    long i = strtol(name + n + 1, &end, 10);
    return *end || i < 0 || i >= L.count ? -1 : (int)i;
}

/* index_of_obj: which object obj is (the API names Challenges itself: by spec.team). */
static int index_of_obj(const json_t *obj)
{
    if (L.mode != MODE_API)
        return index_of(kop_meta_name(obj));
    const char *team = json_string_value(json_object_get(json_object_get(obj, "spec"), "team"));
    char *end;
    if (!team || strncmp(team, "team-", 5) != 0)
        return -1;
    long i = strtol(team + 5, &end, 10);
    return *end || i < 0 || i >= L.count ? -1 : (int)i;
}

/* ---- the objects ---------------------------------------------------------- */

static json_t *new_object(int i)
{
    char name[64], team[64];
    snprintf(name, sizeof name, "%s-%05d", L.prefix, i);
    if (L.tickets)
        return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:i}}", "apiVersion",
                         "flights.com/v1", "kind", "FlightTicket", "metadata", "name", name,
                         "namespace", L.ns, "spec", "from", "Paris", "to", "London", "number",
                         1 + i % 10);
    snprintf(team, sizeof team, "team-%05d", i);
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "apiVersion",
                     "ctf.kopc.io/v1alpha1", "kind", "Challenge", "metadata", "name", name,
                     "namespace", L.ns, "spec", "definition", L.definition, "team", team);
}

/* is_done: the object's status says an operator finished with it. */
static bool is_done(const json_t *obj)
{
    const json_t *status = json_object_get(obj, "status");
    const char *v = json_string_value(
        json_object_get(status, L.tickets ? "phase" : "currentStatus"));
    return v && strcmp(v, L.tickets ? "Confirmed" : "Running") == 0;
}

static void mark_done(const json_t *obj)
{
    int i = index_of_obj(obj);
    if (i < 0 || !is_done(obj))
        return;
    pthread_mutex_lock(&L.lock);
    bool first = L.rec[i].done == 0;
    if (first)
        L.rec[i].done = now_ms();
    pthread_mutex_unlock(&L.lock);
    if (first && atomic_fetch_add(&L.ndone, 1) + 1 == L.count) {
        pthread_mutex_lock(&L.lock);
        pthread_cond_broadcast(&L.cond);
        pthread_mutex_unlock(&L.lock);
    }
}

/* ---- the limit: the operator's writes done by the loader ------------------ */

/* ticket_writes creates the boarding pass of ticket and confirms it. */
static kop_err ticket_writes(kop_client *c, const json_t *ticket, kop_status *st)
{
    char name[128];
    const json_t *spec = json_object_get(ticket, "spec");
    snprintf(name, sizeof name, "%s-boarding-pass", kop_meta_name(ticket));
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:O, s:O, s:s}}", "apiVersion", "v1",
                           "kind", "ConfigMap", "metadata", "name", name, "namespace", L.ns,
                           "data", "from", json_object_get(spec, "from"), "to",
                           json_object_get(spec, "to"), "passenger", kop_meta_name(ticket));
    char seats[16];
    snprintf(seats, sizeof seats, "%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(spec, "number")));
    json_object_set_new(json_object_get(cm, "data"), "seats", json_string(seats));
    kop_err err = kop_meta_set_controller_ref(cm, ticket, st);
    if (!err)
        err = kop_create_object(c,
                                &(kop_write_req){.target = {&CONFIGMAPS, L.ns, NULL}, .object = cm},
                                NULL, st);
    atomic_fetch_add(&L.nwrites, 1);
    json_decref(cm);
    if (err)
        return err;
    char at[32];
    time_t t = time(NULL);
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_t *status = json_pack("{s:s, s:O, s:s, s:I}", "phase", "Confirmed", "seats",
                               json_object_get(spec, "number"), "confirmedAt", at,
                               "observedGeneration", (json_int_t)kop_meta_generation(ticket));
    err = kop_patch_status(c, &TICKETS, ticket, status, NULL, st);
    atomic_fetch_add(&L.nwrites, 1);
    json_decref(status);
    return err;
}

static const kop_resource *kind_resource(const json_t *obj)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    for (size_t i = 0; kind && i < sizeof CHILD_KINDS / sizeof CHILD_KINDS[0]; i++)
        if (strcmp(CHILD_KINDS[i].kind, kind) == 0)
            return &CHILD_KINDS[i];
    return NULL;
}

/* queue_status_locked queues challenge i's status patch once both halves are there. */
static void queue_status_locked(int i)
{
    struct record *r = &L.rec[i];
    if (r->claimed || !r->children || !r->available || !r->serving)
        return;
    r->claimed = true;
    L.queue[L.qtail++] = i;
    pthread_cond_broadcast(&L.cond);
}

/* challenge_writes applies every child of chal (what ctf-operator applies). */
static kop_err challenge_writes(kop_client *c, int i, const json_t *chal, kop_status *st)
{
    ctf_config cfg = {.node_address = "127.0.0.1"};
    json_t *children = NULL, *child;
    size_t k;
    char *endpoint = NULL;
    kop_err err = ctf_build_children(&cfg, L.def, chal, L.flag, &children, st);
    if (err)
        return err;
    kop_write_opts wo = {.field_manager = FIELD_MANAGER, .force = true};
    json_array_foreach(children, k, child)
    {
        const kop_resource *r = kind_resource(child);
        json_t *stored = NULL;
        kop_patch_req req = {.target = {r, kop_meta_namespace(child), kop_meta_name(child)},
                             .type = KOP_PATCH_APPLY,
                             .patch = child,
                             .opts = wo};
        err = r ? kop_patch_object(c, &req, &stored, st) : KOP_EINVAL;
        atomic_fetch_add(&L.nwrites, 1);
        if (!err && r && strcmp(r->kind, "Service") == 0 && !endpoint) {
            json_t *port = json_array_get(json_object_get(json_object_get(stored, "spec"), "ports"), 0);
            char buf[64];
            snprintf(buf, sizeof buf, "127.0.0.1:%" JSON_INTEGER_FORMAT,
                     json_integer_value(json_object_get(port, "nodePort")));
            endpoint = strdup(buf);
        }
        json_decref(stored);
        if (err)
            break;
    }
    json_decref(children);
    pthread_mutex_lock(&L.lock);
    if (!err) {
        L.rec[i].endpoint = endpoint;
        endpoint = NULL;
        L.rec[i].children = true;
        queue_status_locked(i);
    }
    pthread_mutex_unlock(&L.lock);
    free(endpoint);
    return err;
}

/*
 * route_writes applies the team's route of every exposure of the definition
 * into the claimed namespace ns (gateway mode), as ctf-operator's claim
 * does, and marks challenge i's instance built and its pods ready (a warm
 * instance's are): the patcher writes its status once the route watch sees
 * the first exposure's route accepted.
 */
static kop_err route_writes(kop_client *c, int i, const json_t *chal, const char *ns,
                            kop_status *st)
{
    const char *team = json_string_value(json_object_get(json_object_get(chal, "spec"), "team"));
    const json_t *e;
    size_t k;
    kop_err err = KOP_OK;
    json_array_foreach(json_object_get(json_object_get(L.def, "spec"), "expose"), k, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *kind = ctf_gateway_route_kind(e);
        char host[CTF_HOST_SIZE];
        err = ctf_gateway_host(&L.gw, L.def, team ? team : "", name ? name : "", host,
                               sizeof host, st);
        if (err)
            break;
        json_t *route = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}, s:o*}", "apiVersion",
                                  CTF_GATEWAY_API, "kind", kind, "metadata", "name", name,
                                  "namespace", ns, "labels", CTF_LABEL_MANAGED_BY,
                                  CTF_MANAGED_BY, CTF_LABEL_CHALLENGE, kop_meta_name(chal),
                                  "spec", ctf_gateway_route_spec(&L.gw, e, host));
        kop_patch_req req = {
            .target = {kop_streq(kind, CTF_KIND_TLSROUTE) ? &TLSROUTES : &HTTPROUTES, ns, name},
            .type = KOP_PATCH_APPLY,
            .patch = route,
            .opts = {.field_manager = FIELD_MANAGER, .force = true}};
        err = route ? kop_patch_object(c, &req, NULL, st) : KOP_ENOMEM;
        atomic_fetch_add(&L.nwrites, 1);
        json_decref(route);
        if (err)
            break;
    }
    if (!err) {
        pthread_mutex_lock(&L.lock);
        L.rec[i].children = L.rec[i].available = true;
        queue_status_locked(i);
        pthread_mutex_unlock(&L.lock);
    }
    return err;
}

/* warm_id: warm instance i's id (CTF_POOL_ID_LEN hex digits, as the pool's random ones). */
static void warm_id(int i, char id[CTF_POOL_ID_LEN + 1])
{
    snprintf(id, CTF_POOL_ID_LEN + 1, "%0*x", CTF_POOL_ID_LEN, (unsigned)i);
}

/* warm_namespace: the namespace of warm instance i (ctf_pool_namespace, as the pool names it). */
static void warm_namespace(int i, char *ns, size_t size)
{
    char id[CTF_POOL_ID_LEN + 1];
    warm_id(i, id);
    if (ctf_pool_namespace(L.ns, L.definition, id, ns, size) != KOP_OK)
        ns[0] = '\0';
}

/*
 * warm_writes makes warm instance i (--mode warm): every object the pool
 * would (ctf_build_pooled_children, in the gateway mode with
 * --gateway-domain), server-side applied.
 */
static kop_err warm_writes(kop_client *c, int i, kop_status *st)
{
    char id[CTF_POOL_ID_LEN + 1];
    json_t *children = NULL, *child;
    size_t k;
    warm_id(i, id);
    kop_err err = ctf_build_pooled_children(&L.gw, L.def, id, NULL, L.flag, &children, st);
    kop_write_opts wo = {.field_manager = FIELD_MANAGER, .force = true};
    json_array_foreach(children, k, child)
    {
        const kop_resource *r = kind_resource(child);
        kop_patch_req req = {.target = {r, kop_meta_namespace(child), kop_meta_name(child)},
                             .type = KOP_PATCH_APPLY,
                             .patch = child,
                             .opts = wo};
        err = r ? kop_patch_object(c, &req, NULL, st) : KOP_EINVAL;
        if (err)
            break;
    }
    json_decref(children);
    return err;
}

/*
 * claim_writes does a warm-pool claim's writes for challenge i (alone mode,
 * --claim): the merge patch that labels warm instance i's Namespace for
 * the Challenge and carries its uid (what ctf-operator's claim_one
 * writes), then its status Running in that namespace.
 */
static kop_err claim_writes(kop_client *c, int i, const json_t *chal, kop_status *st)
{
    char ns[CTF_NAMESPACE_SIZE];
    warm_namespace(i, ns, sizeof ns);
    const char *uid = kop_meta_uid(chal);
    json_t *patch = json_pack("{s:{s:{s:s, s:s}, s:{s:s}}}", "metadata", "labels",
                              CTF_LABEL_CHALLENGE, kop_meta_name(chal), CTF_LABEL_CHALLENGE_NS,
                              L.ns, "annotations", CTF_ANNOTATION_CHALLENGE_UID, uid ? uid : "");
    kop_patch_req req = {.target = {&CHILD_KINDS[0], NULL, ns}, .type = KOP_PATCH_MERGE,
                         .patch = patch};
    kop_err err = patch ? kop_patch_object(c, &req, NULL, st) : KOP_ENOMEM;
    atomic_fetch_add(&L.nwrites, 1);
    json_decref(patch);
    if (!err && L.gateway_domain)
        return route_writes(c, i, chal, ns, st); /* the status once the route is accepted */
    if (err)
        return err;
    json_t *status = json_pack("{s:s, s:s, s:s}", "currentStatus", "Running", "message",
                               "instance running", "namespace", ns);
    atomic_fetch_add(&L.nwrites, 1); /* before: the watch may see Running, and the loader end */
    err = status ? kop_patch_status(c, &CHALLENGES, chal, status, NULL, st) : KOP_ENOMEM;
    json_decref(status);
    return err;
}

/* patcher writes the Running status of the challenges queued (alone mode). */
static void *patcher(void *arg)
{
    (void)arg;
    kop_client *c = new_client();
    for (;;) {
        pthread_mutex_lock(&L.lock);
        while (L.qhead == L.qtail && !L.stop)
            pthread_cond_wait(&L.cond, &L.lock);
        if (L.qhead == L.qtail) {
            pthread_mutex_unlock(&L.lock);
            break;
        }
        int i = L.queue[L.qhead++];
        char *endpoint = L.rec[i].endpoint ? strdup(L.rec[i].endpoint) : NULL;
        pthread_mutex_unlock(&L.lock);

        char name[64], ns[CTF_NAMESPACE_SIZE], team[64];
        snprintf(name, sizeof name, "%s-%05d", L.prefix, i);
        snprintf(team, sizeof team, "team-%05d", i);
        if (L.claim)
            warm_namespace(i, ns, sizeof ns); /* gateway mode: as claim_writes */
        else if (ctf_instance_namespace(L.ns, L.definition, team, ns, sizeof ns) != KOP_OK)
            ns[0] = '\0';
        json_t *obj = json_pack("{s:{s:s, s:s}}", "metadata", "name", name, "namespace", L.ns);
        json_t *status = L.claim ? json_pack("{s:s, s:s, s:s}", "currentStatus", "Running",
                                             "message", "instance running", "namespace", ns)
                                 : json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}",
                                             "currentStatus", "Running", "message",
                                             "instance running", "namespace", ns, "endpoints",
                                             "name", "tcp", "type", "TCP", "address",
                                             endpoint ? endpoint : "");
        kop_status st;
        /* Counted before it is sent: the watch may see Running, and the loader end, first. */
        atomic_fetch_add(&L.nwrites, 1);
        kop_err err = kop_patch_status(c, &CHALLENGES, obj, status, NULL, &st);
        if (err)
            fprintf(stderr, "bench-loader: status of %s: %s\n", name, st.message);
        json_decref(status);
        json_decref(obj);
        free(endpoint);
    }
    kop_client_free(c);
    return NULL;
}

/* mark sets one of challenge i's readiness flags and queues its status once all are set. */
static void mark(int i, bool *flag)
{
    pthread_mutex_lock(&L.lock);
    *flag = true;
    queue_status_locked(i);
    pthread_mutex_unlock(&L.lock);
}

/* deployment_event: a Deployment of a challenge is available (alone mode). */
static void deployment_event(const json_t *d)
{
    json_int_t want = json_integer_value(json_object_get(json_object_get(d, "spec"), "replicas"));
    json_int_t avail =
        json_integer_value(json_object_get(json_object_get(d, "status"), "availableReplicas"));
    int i = index_of(kop_meta_label(d, CTF_LABEL_CHALLENGE));
    if (i >= 0 && avail >= want && want > 0)
        mark(i, &L.rec[i].available);
}

/*
 * slice_event: the exposed Service of a challenge has a ready endpoint
 * (alone mode), the condition ctf-operator waits for before Running (its
 * observe.c), so the limit does the same waiting. The EndpointSlice
 * controller copies the Service's labels onto its slices.
 */
static void slice_event(const json_t *s)
{
    const char *svc = kop_meta_label(s, "kubernetes.io/service-name");
    int i = index_of(kop_meta_label(s, CTF_LABEL_CHALLENGE));
    const json_t *ep;
    size_t k;
    if (i < 0 || !svc || !L.exposed || strcmp(svc, L.exposed) != 0)
        return;
    json_array_foreach(json_object_get(s, "endpoints"), k, ep)
    {
        const json_t *ready = json_object_get(json_object_get(ep, "conditions"), "ready");
        if (!ready || json_is_true(ready)) { /* absent means ready (discovery.k8s.io/v1) */
            mark(i, &L.rec[i].serving);
            return;
        }
    }
}

/*
 * route_event: the gateway accepted the route of the first exposure of a
 * claimed challenge (--gateway-domain), the condition ctf-operator waits
 * for before Running in the gateway mode (its observe.c).
 */
static void route_event(const json_t *r)
{
    char msg[512];
    const char *name = kop_meta_name(r);
    int i = index_of(kop_meta_label(r, CTF_LABEL_CHALLENGE));
    if (i < 0 || !name || !L.exposed || strcmp(name, L.exposed) != 0)
        return;
    if (ctf_gateway_route_state(&L.gw, r, json_string_value(json_object_get(r, "kind")),
                                kop_meta_namespace(r), name, msg, sizeof msg) == CTF_ROUTE_ACCEPTED)
        mark(i, &L.rec[i].serving);
}

/* child_watch: a watch of the challenges' children of one kind (alone mode). */
struct child_watch {
    const kop_resource *res;
    void (*on_event)(const json_t *obj); /* called for every object added or modified */
    pthread_t thread;
};

/* child_watch_run watches its kind across namespaces until the loader stops. */
static void *child_watch_run(void *arg)
{
    struct child_watch *cw = arg;
    kop_client *c = new_client();
    kop_watch *w = NULL;
    kop_watch_event ev;
    kop_status st;
    char *rv = NULL;
    while (!L.stop) {
        kop_watch_opts wo = {.resource_version = rv,
                             .label_selector = CTF_LABEL_MANAGED_BY "=" CTF_MANAGED_BY,
                             .timeout_seconds = 3600};
        if (kop_watch_open(c, cw->res, NULL, &wo, &w, &st) != KOP_OK) {
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);
            continue;
        }
        while (kop_watch_next(w, &ev, &st) == KOP_OK) {
            const char *v = json_string_value(
                json_object_get(json_object_get(ev.object, "metadata"), "resourceVersion"));
            if (v) {
                free(rv);
                rv = strdup(v);
            }
            if (ev.type != KOP_WATCH_DELETED)
                cw->on_event(ev.object);
            kop_watch_event_fini(&ev);
        }
        kop_watch_free(w);
        w = NULL;
    }
    free(rv);
    kop_client_free(c);
    return NULL;
}

/* ---- creators ----------------------------------------------------------- */

/*
 * pace waits until object i is due (--spread-ms) and returns when it was
 * due: the moment its team pressed Create. Latency counts from then, so a
 * sender that falls behind the schedule (the loader alone, doing the
 * operator's writes between its creates) is not flattered by sending late.
 */
static double pace(int i)
{
    if (L.spread_ms <= 0)
        return now_ms();
    double due = L.first_ms + L.spread_ms * i / L.count, left = due - now_ms();
    if (left > 0)
        usleep((useconds_t)(left * 1000));
    return due;
}

/* api_put asks the instance API for team i's instance (api mode). */
static kop_err api_put(CURL *h, int i, kop_status *st)
{
    char url[512], auth[256];
    long code = 0;
    snprintf(url, sizeof url, "%s/api/v1/teams/team-%05d/instances/%s", L.api, i, L.definition);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", L.api_token);
    struct curl_slist *hdr = curl_slist_append(NULL, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdr);
    if (rc == CURLE_OK && (code == 200 || code == 201))
        return KOP_OK;
    kop_status_setf(st, (int)code, NULL, "PUT %s: %s, HTTP %ld", url, curl_easy_strerror(rc), code);
    return KOP_EIO;
}

/* discard swallows the API's answer. */
static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static void *creator(void *arg)
{
    (void)arg;
    kop_client *c = new_client();
    CURL *h = L.mode == MODE_API ? curl_easy_init() : NULL;
    if (h)
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    int i;
    while ((i = atomic_fetch_add(&L.next, 1)) < L.count) {
        kop_status st;
        json_t *obj = new_object(i), *stored = NULL;
        kop_write_req create = {.target = {L.tickets ? &TICKETS : &CHALLENGES, L.ns, NULL},
                                .object = obj};
        L.rec[i].sent = pace(i);
        kop_err err = L.mode == MODE_API    ? api_put(h, i, &st)
                      : L.mode == MODE_WARM ? warm_writes(c, i, &st)
                                            : kop_create_object(
                                                  c, &create,
                                                  L.mode == MODE_ALONE ? &stored : NULL, &st);
        L.rec[i].created = now_ms();
        if (!err && L.mode == MODE_WARM)
            L.rec[i].done = L.rec[i].created;
        if (!err && L.mode == MODE_ALONE)
            err = L.tickets  ? ticket_writes(c, stored, &st)
                  : L.claim ? claim_writes(c, i, stored, &st)
                            : challenge_writes(c, i, stored, &st);
        if (err) {
            atomic_fetch_add(&L.nerrors, 1);
            fprintf(stderr, "bench-loader: object %d: %s: %s\n", i, kop_strerror(err), st.message);
        }
        json_decref(stored);
        json_decref(obj);
    }
    if (h)
        curl_easy_cleanup(h);
    kop_client_free(c);
    return NULL;
}

/* ---- the watch that sees objects done ------------------------------------- */

struct watcher {
    kop_client *c;
    char *rv; /* list's version: watch from there */
    pthread_t thread;
};

static kop_err list_page(json_t *page, void *user)
{
    (void)user;
    json_t *item;
    size_t i;
    json_array_foreach(json_object_get(page, "items"), i, item)
        mark_done(item);
    return KOP_OK;
}

/* prime lists the namespace once (objects already done count) and keeps the version. */
static void prime(struct watcher *w)
{
    kop_status st;
    free(w->rv);
    w->rv = NULL;
    kop_err err = kop_list_each(w->c,
                                &(kop_list_req){.resource = L.tickets ? &TICKETS : &CHALLENGES,
                                                .namespace = L.ns, .fn = list_page}, &w->rv, &st);
    if (err)
        die("list", err, &st);
}

static void *watch_done(void *arg)
{
    struct watcher *w = arg;
    kop_status st;
    while (!L.stop) {
        kop_watch *wt = NULL;
        kop_watch_event ev;
        kop_watch_opts wo = {.resource_version = w->rv, .timeout_seconds = 3600};
        kop_err err = kop_watch_open(w->c, L.tickets ? &TICKETS : &CHALLENGES, L.ns, &wo, &wt, &st);
        if (err) {
            prime(w);
            continue;
        }
        while ((err = kop_watch_next(wt, &ev, &st)) == KOP_OK) {
            const char *v = json_string_value(
                json_object_get(json_object_get(ev.object, "metadata"), "resourceVersion"));
            if (v) {
                free(w->rv);
                w->rv = strdup(v);
            }
            if (ev.type == KOP_WATCH_ADDED || ev.type == KOP_WATCH_MODIFIED)
                mark_done(ev.object);
            kop_watch_event_fini(&ev);
        }
        kop_watch_free(wt);
        if (err == KOP_EGONE || err == KOP_EEXPIRED)
            prime(w);
    }
    return NULL;
}

/* ---- output ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, int n, double p)
{
    if (n == 0)
        return 0;
    int k = (int)ceil(p / 100.0 * n) - 1;
    return sorted[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

static void write_output(double t_start, double t_end)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/latency.csv", L.out);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fprintf(f, "index,sent_ms,created_ms,done_ms\n");
    double *lat = calloc((size_t)L.count + 1, sizeof *lat);
    double first = 0, last_created = 0, last_done = 0;
    int nlat = 0, ndone = 0;
    for (int i = 0; i < L.count; i++) {
        struct record *r = &L.rec[i];
        fprintf(f, "%d,%.3f,%.3f,%.3f\n", i, r->sent, r->created, r->done);
        if (r->sent && (!first || r->sent < first))
            first = r->sent;
        if (r->created > last_created)
            last_created = r->created;
        if (r->done) {
            ndone++;
            if (r->done > last_done)
                last_done = r->done;
            if (r->sent)
                lat[nlat++] = r->done - r->sent;
        }
    }
    fclose(f);
    qsort(lat, (size_t)nlat, sizeof *lat, cmp_double);
    double from = L.mode == MODE_WAIT ? L.t0 : first;
    snprintf(path, sizeof path, "%s/summary.json", L.out);
    f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fprintf(f,
            "{\"workload\": \"%s\", \"mode\": \"%s\", \"count\": %d, \"threads\": %d,\n"
            " \"done\": %d, \"errors\": %d, \"operator_writes\": %ld,\n"
            " \"start_ms\": %.3f, \"first_sent_ms\": %.3f, \"last_created_ms\": %.3f,\n"
            " \"last_done_ms\": %.3f, \"end_ms\": %.3f,\n"
            " \"create_s\": %.3f, \"converge_s\": %.3f,\n"
            " \"latency_ms\": {\"n\": %d, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
            "\"max\": %.1f}}\n",
            L.workload,
            L.mode == MODE_OPERATOR ? "operator"
            : L.mode == MODE_ALONE  ? "alone"
            : L.mode == MODE_CREATE ? "create"
            : L.mode == MODE_API    ? "api"
            : L.mode == MODE_WARM   ? "warm"
                                    : "wait",
            L.count, L.threads, ndone, atomic_load(&L.nerrors), atomic_load(&L.nwrites), t_start,
            first, last_created, last_done, t_end,
            first && last_created ? (last_created - first) / 1e3 : 0,
            from && last_done ? (last_done - from) / 1e3 : 0, nlat, percentile(lat, nlat, 50),
            percentile(lat, nlat, 90), percentile(lat, nlat, 99), nlat ? lat[nlat - 1] : 0);
    fclose(f);
    free(lat);
}

/* ---- main --------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench-loader --kubeconfig PATH --workload flighttickets|challenges "
                    "--count N --namespace NS --out DIR [--mode operator|alone|create|wait|warm] "
                    "[--threads T] [--definition NAME] [--t0-ms MS] [--timeout S] "
                    "[--spread-ms MS] [--claim 1 [--gateway-domain D]] [--mode api --api URL --api-token TOKEN]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    const char *mode = "operator";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(f, "--kubeconfig"))
            L.kubeconfig = v;
        else if (!strcmp(f, "--workload"))
            L.workload = v;
        else if (!strcmp(f, "--count"))
            L.count = atoi(v);
        else if (!strcmp(f, "--namespace"))
            L.ns = v;
        else if (!strcmp(f, "--out"))
            L.out = v;
        else if (!strcmp(f, "--mode"))
            mode = v;
        else if (!strcmp(f, "--threads"))
            L.threads = atoi(v);
        else if (!strcmp(f, "--definition"))
            L.definition = v;
        else if (!strcmp(f, "--t0-ms"))
            L.t0 = strtod(v, NULL);
        else if (!strcmp(f, "--timeout"))
            L.timeout_s = atol(v);
        else if (!strcmp(f, "--spread-ms"))
            L.spread_ms = strtod(v, NULL);
        else if (!strcmp(f, "--claim"))
            L.claim = strcmp(v, "0") != 0;
        else if (!strcmp(f, "--gateway-domain"))
            L.gateway_domain = v;
        else if (!strcmp(f, "--api"))
            L.api = v;
        else if (!strcmp(f, "--api-token"))
            L.api_token = v;
        else
            usage();
    }
    if (!L.workload || !L.ns || !L.out || L.count <= 0 || L.threads < 1 ||
        L.threads > MAX_THREADS)
        usage();
    L.tickets = strcmp(L.workload, "flighttickets") == 0;
    if (!L.tickets && (strcmp(L.workload, "challenges") != 0 || !L.definition))
        usage();
    L.prefix = L.tickets ? "ft" : "chal";
    if (!strcmp(mode, "operator"))
        L.mode = MODE_OPERATOR;
    else if (!strcmp(mode, "alone"))
        L.mode = MODE_ALONE;
    else if (!strcmp(mode, "create"))
        L.mode = MODE_CREATE;
    else if (!strcmp(mode, "wait"))
        L.mode = MODE_WAIT;
    else if (!strcmp(mode, "api") && !L.tickets && L.api && L.api_token)
        L.mode = MODE_API;
    else if (!strcmp(mode, "warm") && !L.tickets)
        L.mode = MODE_WARM;
    else
        usage();
    if (L.gateway_domain && !L.claim && L.mode != MODE_WARM)
        usage();
}

/* setup_gateway: the gateway mode's settings in L.gw (--gateway-domain), as ctf-operator's. */
static void setup_gateway(void)
{
    kop_status st;
    L.gw.node_address = "127.0.0.1";
    if (!L.gateway_domain)
        return;
    L.gw.gateway.domain = L.gateway_domain;
    L.gw.gateway.key = GATEWAY_KEY;
    L.gw.gateway.key_len = sizeof GATEWAY_KEY - 1;
    ctf_gateway_defaults(&L.gw.gateway);
    kop_err err = ctf_gateway_check(&L.gw, &st);
    if (err)
        die("--gateway-domain", err, &st);
}

/* prepare_challenges reads the definition and its flag (alone mode). */
static void prepare_challenges(kop_client *c)
{
    kop_status st;
    kop_err err = kop_get(c, &DEFINITIONS, L.ns, L.definition, &L.def, &st);
    if (!err)
        err = ctf_flag(L.def, L.definition, "team", NULL, 0, &L.flag, &st);
    if (err)
        die("definition (the alone mode needs a static flag)", err, &st);
    free(L.flag); /* per team it is the same static value; compute it once */
    L.flag = NULL;
    err = ctf_flag(L.def, L.definition, "team-00000", NULL, 0, &L.flag, &st);
    if (err)
        die("flag", err, &st);
    L.exposed = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(L.def, "spec"), "expose"), 0), "name"));
    if (!L.exposed)
        die("definition (the alone mode needs an exposed Service)", KOP_EINVAL, NULL);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    L.rec = calloc((size_t)L.count, sizeof *L.rec);
    L.queue = calloc((size_t)L.count, sizeof *L.queue);
    if (!L.rec || !L.queue)
        die("memory", KOP_ENOMEM, NULL);

    double t_start = now_ms();
    struct watcher w = {.c = new_client()};
    pthread_t threads[MAX_THREADS], patchers[2];
    struct child_watch children[] = {{.res = &DEPLOYMENTS, .on_event = deployment_event},
                                     {.res = &SLICES, .on_event = slice_event}};
    bool waits = L.mode != MODE_CREATE && L.mode != MODE_WARM;
    bool alone_chal = L.mode == MODE_ALONE && !L.tickets && !L.claim;
    bool gw_claim = L.mode == MODE_ALONE && L.claim && L.gateway_domain;
    struct child_watch routes = {.res = &TLSROUTES, .on_event = route_event};

    if (waits) {
        prime(&w); /* the watch starts before the first create */
        if (pthread_create(&w.thread, NULL, watch_done, &w))
            die("thread", KOP_ENOMEM, NULL);
    }
    if (alone_chal) {
        prepare_challenges(w.c);
        for (size_t i = 0; i < sizeof children / sizeof *children; i++)
            if (pthread_create(&children[i].thread, NULL, child_watch_run, &children[i]))
                die("thread", KOP_ENOMEM, NULL);
        for (int i = 0; i < 2; i++)
            if (pthread_create(&patchers[i], NULL, patcher, NULL))
                die("thread", KOP_ENOMEM, NULL);
    }
    if (L.mode == MODE_WARM) {
        prepare_challenges(w.c);
        setup_gateway();
    }
    if (gw_claim) {
        prepare_challenges(w.c);
        setup_gateway();
        if (pthread_create(&routes.thread, NULL, child_watch_run, &routes))
            die("thread", KOP_ENOMEM, NULL);
        for (int i = 0; i < 2; i++)
            if (pthread_create(&patchers[i], NULL, patcher, NULL))
                die("thread", KOP_ENOMEM, NULL);
    }
    int nthreads = L.mode == MODE_WAIT ? 0 : L.threads;
    if (L.mode == MODE_API && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        die("curl", KOP_ENOMEM, NULL);
    L.first_ms = now_ms() + 100; /* every thread started before the first is due */
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&threads[i], NULL, creator, NULL))
            die("thread", KOP_ENOMEM, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);

    int rc = 0;
    if (waits) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += L.timeout_s;
        pthread_mutex_lock(&L.lock);
        while (atomic_load(&L.ndone) < L.count &&
               pthread_cond_timedwait(&L.cond, &L.lock, &until) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&L.lock);
        rc = atomic_load(&L.ndone) == L.count ? 0 : 1;
        if (rc)
            fprintf(stderr, "bench-loader: timed out: %d of %d done\n", atomic_load(&L.ndone),
                    L.count);
    }
    double t_end = now_ms();
    write_output(t_start, t_end);
    if (atomic_load(&L.nerrors))
        rc = 1;
    /* The watches block in the network; the process exit ends them. */
    fflush(NULL);
    _exit(rc);
}

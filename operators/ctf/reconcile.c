/*
 * reconcile.c - the Challenge controller: one team's instance of one
 * definition, from request to cleanup.
 *
 * reconcile() reads as the lifecycle it implements:
 *
 *   deleted            -> finalize: Terminating, delete the namespace, wait
 *                         until it is gone, Deleted, release the finalizer
 *   no finalizer yet   -> add it (so nothing can be left behind)
 *   no definition      -> Error DefinitionNotFound (a definition event
 *                         brings it back)
 *   invalid definition -> Error InvalidDefinition
 *   expired            -> delete the Challenge
 *   over quota         -> Error QuotaExceeded
 *   otherwise          -> apply every child (server-side apply: idempotent,
 *                         a crash half-way converges), then observe them:
 *                         Running once every Deployment is available, every
 *                         endpoint known and every exposed Service has a
 *                         ready endpoint (pods are Ready only once their
 *                         readiness probes pass, which the builder sets from
 *                         the exposed ports: Running means answering); Error
 *                         on an image that cannot be pulled, a crash loop, or
 *                         the start timeout; Pending until then.
 *
 * Children live in the instance's own namespace, where owner references
 * cannot point back at the Challenge, so every child carries labels naming
 * it, and their events are mapped back through those labels: readiness is
 * noticed from watch events, never polled. Every write is server-side apply
 * with deterministic names, so AlreadyExists cannot happen and a retry
 * never makes a second instance.
 *
 * Admission (the quotas) is decided under a lock against an in-memory
 * registry of admitted instances united with what the cache shows as
 * admitted, so two requests racing for a team's last slot cannot both win,
 * and a restarted operator counts what it admitted before.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "ctf.h"

const kop_resource CTF_CHALLENGES = {"ctf.kopc.io", "v1alpha1", "challenges", "Challenge", true};
const kop_resource CTF_DEFINITIONS = {"ctf.kopc.io", "v1alpha1", "challengedefinitions",
                                      "ChallengeDefinition", true};
const kop_resource CTF_NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
const kop_resource CTF_DEPLOYMENTS = {"apps", "v1", "deployments", "Deployment", true};
const kop_resource CTF_PODS = {"", "v1", "pods", "Pod", true};
const kop_resource CTF_SERVICES = {"", "v1", "services", "Service", true};
const kop_resource CTF_SECRETS = {"", "v1", "secrets", "Secret", true};
const kop_resource CTF_ENDPOINTSLICES = {"discovery.k8s.io", "v1", "endpointslices",
                                         "EndpointSlice", true};

#define STATUS_PENDING     "Pending"
#define STATUS_RUNNING     "Running"
#define STATUS_ERROR       "Error"
#define STATUS_TERMINATING "Terminating"
#define STATUS_DELETED     "Deleted"
#define NS_WAIT_MS         2000
#define MAX_ADMITTED       100000

/* ---- what one reconcile observed ------------------------------------------ */

/* observation: the status one pass decides on. */
typedef struct observation {
    const char *phase;  /* currentStatus */
    const char *reason; /* CamelCase, Error only */
    char message[512];
    json_t *endpoints;  /* owned, may be NULL */
    long requeue_ms;    /* 0: none */
} observation;

static void observe_error(observation *o, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void observe_error(observation *o, const char *reason, const char *fmt, ...)
{
    va_list ap;
    o->phase = STATUS_ERROR;
    o->reason = reason;
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof o->message, fmt, ap);
    va_end(ap);
}

/* ---- small readers ---------------------------------------------------------- */

static const char *spec_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "spec"), field));
}

static const char *status_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "status"), field));
}

static time_t created_at(const json_t *obj)
{
    time_t t = 0;
    const char *ts = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "creationTimestamp"));
    if (!ts || ctf_parse_time(ts, &t) != KOP_OK)
        t = time(NULL);
    return t;
}

static void instance_namespace(const json_t *chal, char *out, size_t size)
{
    if (ctf_instance_namespace(kop_meta_namespace(chal), spec_str(chal, "definition"),
                               spec_str(chal, "team"), out, size) != KOP_OK)
        out[0] = '\0';
}

/* ---- admission registry ----------------------------------------------------- */

struct admitted {
    char uid[64];
    char team[192]; /* "<namespace>/<team>" */
};

static pthread_mutex_t admission_lock = PTHREAD_MUTEX_INITIALIZER;
static struct admitted *admitted;
static size_t nadmitted, admitted_cap;

static bool registry_has(const char *uid)
{
    for (size_t i = 0; i < nadmitted; i++)
        if (strcmp(admitted[i].uid, uid) == 0)
            return true;
    return false;
}

static void registry_add(const char *uid, const char *team_key)
{
    if (registry_has(uid) || nadmitted >= MAX_ADMITTED)
        return;
    if (nadmitted == admitted_cap) {
        size_t cap = admitted_cap ? admitted_cap * 2 : 64;
        struct admitted *grown = realloc(admitted, cap * sizeof *grown);
        if (!grown)
            return;
        admitted = grown;
        admitted_cap = cap;
    }
    struct admitted *a = &admitted[nadmitted++];
    snprintf(a->uid, sizeof a->uid, "%s", uid);
    snprintf(a->team, sizeof a->team, "%s", team_key);
}

static void registry_remove(const char *uid)
{
    pthread_mutex_lock(&admission_lock);
    for (size_t i = 0; i < nadmitted; i++) {
        if (strcmp(admitted[i].uid, uid) == 0) {
            admitted[i] = admitted[--nadmitted];
            break;
        }
    }
    pthread_mutex_unlock(&admission_lock);
}

/* is_admitted: the cache shows the Challenge was admitted (it has an instance). */
static bool is_admitted(const json_t *chal)
{
    const char *phase = status_str(chal, "currentStatus");
    const char *reason = status_str(chal, "reason");
    if (kop_meta_is_deleting(chal))
        return false;
    if (phase && strcmp(phase, STATUS_ERROR) == 0 && reason &&
        strcmp(reason, "QuotaExceeded") == 0)
        return false;
    return status_str(chal, "namespace") != NULL;
}

/*
 * count_others counts admitted instances other than chal's: of its team
 * (same namespace and spec.team) when by_team, else all. Registry and
 * cache are united by UID.
 */
static int count_others(ctf_operator *op, const json_t *chal, const char *team_key, bool by_team)
{
    const char *uid = kop_meta_uid(chal), *ns = kop_meta_namespace(chal);
    int n = 0;
    for (size_t i = 0; i < nadmitted; i++)
        if (strcmp(admitted[i].uid, uid) != 0 && (!by_team || strcmp(admitted[i].team, team_key) == 0))
            n++;
    json_t *all = NULL, *c;
    size_t i;
    if (by_team ? kop_informer_by_index(op->challenges, CTF_INDEX_TEAM, spec_str(chal, "team"), &all)
                : kop_informer_list(op->challenges, NULL, &all))
        return n;
    json_array_foreach(all, i, c)
    {
        const char *cuid = kop_meta_uid(c);
        if (by_team && strcmp(kop_meta_namespace(c), ns) != 0)
            continue;
        if (cuid && strcmp(cuid, uid) != 0 && is_admitted(c) && !registry_has(cuid))
            n++;
    }
    json_decref(all);
    return n;
}

/* admit decides the quotas for chal; false with o filled when refused. */
static bool admit(ctf_operator *op, const json_t *chal, observation *o)
{
    char team_key[192];
    const char *uid = kop_meta_uid(chal);
    snprintf(team_key, sizeof team_key, "%s/%s", kop_meta_namespace(chal), spec_str(chal, "team"));
    pthread_mutex_lock(&admission_lock);
    bool ok = true;
    if (registry_has(uid) || is_admitted(chal)) {
        registry_add(uid, team_key); /* admitted before (or before a restart) */
    } else if (count_others(op, chal, team_key, true) >= op->max_per_team) {
        observe_error(o, "QuotaExceeded",
                      "team %s already has %d instances running (--max-instances-per-team); "
                      "stop one first",
                      spec_str(chal, "team"), op->max_per_team);
        ok = false;
    } else if (count_others(op, chal, team_key, false) >= op->max_instances) {
        observe_error(o, "QuotaExceeded",
                      "the CTF runs its maximum of %d instances (--max-instances); try later",
                      op->max_instances);
        ok = false;
    } else {
        registry_add(uid, team_key);
    }
    pthread_mutex_unlock(&admission_lock);
    return ok;
}

/* ---- writes ----------------------------------------------------------------- */

/* apply server-side-applies obj (borrowed). */
static kop_err apply(ctf_operator *op, const kop_resource *r, json_t *obj, kop_status *st)
{
    kop_write_opts wo = {.field_manager = CTF_FIELD_MANAGER, .force = true};
    return kop_patch(kop_manager_client(op->mgr), r, kop_meta_namespace(obj), kop_meta_name(obj),
                     KOP_PATCH_APPLY, obj, &wo, NULL, st);
}

static const kop_resource *resource_of(const json_t *obj)
{
    static const kop_resource QUOTAS = {"", "v1", "resourcequotas", "ResourceQuota", true};
    static const kop_resource LIMITS = {"", "v1", "limitranges", "LimitRange", true};
    static const kop_resource NETPOLS = {"networking.k8s.io", "v1", "networkpolicies",
                                         "NetworkPolicy", true};
    static const kop_resource INGRESSES = {"networking.k8s.io", "v1", "ingresses", "Ingress",
                                           true};
    static const kop_resource *const all[] = {&CTF_NAMESPACES, &CTF_SECRETS, &QUOTAS,
                                              &LIMITS, &NETPOLS, &CTF_DEPLOYMENTS,
                                              &CTF_SERVICES, &INGRESSES};
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    for (size_t i = 0; kind && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->kind, kind) == 0)
            return all[i];
    return NULL;
}

/*
 * update_finalizers adds or removes our finalizer on the server with a JSON
 * patch guarded by a test of what chal (from the cache) says
 * (kop_meta_finalizers_patch): a concurrent change of the finalizers makes
 * it fail (and the reconcile retry), while our own status writes do not.
 */
static kop_err update_finalizers(ctf_operator *op, json_t *chal, bool add, kop_status *st)
{
    json_t *now = json_deep_copy(chal), *patch = NULL;
    kop_err err = now ? KOP_OK : KOP_ENOMEM;
    if (!err) {
        if (add)
            kop_meta_add_finalizer(now, CTF_FINALIZER);
        else
            kop_meta_remove_finalizer(now, CTF_FINALIZER);
        err = kop_meta_finalizers_patch(
            chal, json_object_get(json_object_get(now, "metadata"), "finalizers"), &patch);
    }
    if (!err)
        err = kop_patch(kop_manager_client(op->mgr), &CTF_CHALLENGES, kop_meta_namespace(chal),
                        kop_meta_name(chal), KOP_PATCH_JSON, patch, NULL, NULL, st);
    json_decref(patch);
    json_decref(now);
    return err;
}

static kop_err ensure_finalizer(ctf_operator *op, json_t *chal, kop_status *st)
{
    if (kop_meta_has_finalizer(chal, CTF_FINALIZER))
        return KOP_OK;
    return update_finalizers(op, chal, true, st);
}

/* ---- status ------------------------------------------------------------------ */

static void set_condition(json_t *status, const char *type, bool on, const char *reason,
                          const char *message, int64_t gen)
{
    kop_condition c = {.type = type, .status = on ? "True" : "False", .reason = reason,
                       .message = message ? message : "", .observed_generation = gen};
    bool changed;
    kop_status st;
    /* Inputs are constants and the observation's text: it cannot refuse them. */
    if (kop_meta_set_condition(status, &c, time(NULL), &changed, &st) != KOP_OK)
        return;
}

/* desired_status builds the status to write from the observation (new ref). */
static json_t *desired_status(const json_t *chal, const observation *o, const char *ns,
                              time_t expires)
{
    const json_t *old = json_object_get(chal, "status");
    json_t *status = old ? json_deep_copy(old) : json_object();
    if (!status)
        return NULL;
    int64_t gen = kop_meta_generation(chal);
    char ts[32];
    json_object_set_new(status, "currentStatus", json_string(o->phase));
    json_object_set_new(status, "reason", o->reason ? json_string(o->reason) : json_null());
    json_object_set_new(status, "message", json_string(o->message));
    json_object_set_new(status, "observedGeneration", json_integer(gen));
    if (ns && ns[0])
        json_object_set_new(status, "namespace", json_string(ns));
    if (expires > 0 && ctf_format_time(expires, ts) == KOP_OK)
        json_object_set_new(status, "expiresAt", json_string(ts));
    bool running = strcmp(o->phase, STATUS_RUNNING) == 0;
    if (o->endpoints)
        json_object_set(status, "endpoints", o->endpoints);
    else if (!running)
        json_object_set_new(status, "endpoints", json_array());
    if (running && !json_object_get(status, "startedAt") &&
        ctf_format_time(time(NULL), ts) == KOP_OK)
        json_object_set_new(status, "startedAt", json_string(ts));
    bool error = strcmp(o->phase, STATUS_ERROR) == 0;
    bool pending = strcmp(o->phase, STATUS_PENDING) == 0;
    const char *why = o->reason ? o->reason : o->phase;
    set_condition(status, "Ready", running, running ? "InstanceRunning" : why, o->message, gen);
    set_condition(status, "Progressing", pending, pending ? "InstanceStarting" : why, o->message,
                  gen);
    set_condition(status, "Degraded", error, error ? why : "AsExpected", o->message, gen);
    return status;
}

/* status_equal compares what matters, ignoring condition timestamps. */
static bool status_equal(const json_t *a, const json_t *b)
{
    static const char *const fields[] = {"currentStatus", "reason", "message", "namespace",
                                         "endpoints", "expiresAt", "startedAt",
                                         "observedGeneration"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *x = json_object_get(a, fields[i]), *y = json_object_get(b, fields[i]);
        if (json_is_null(x))
            x = NULL;
        if (json_is_null(y))
            y = NULL;
        if (!(x == y || (x && y && json_equal(x, y))))
            return false;
    }
    return true;
}

/* write_status patches the status when it changed, and tells of transitions. */
static kop_err write_status(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                            const observation *o, const char *ns, time_t expires)
{
    kop_status st;
    json_t *status = desired_status(chal, o, ns, expires);
    const json_t *old = json_object_get(chal, "status");
    kop_err err = KOP_OK;
    if (!status)
        return KOP_ENOMEM;
    if (old && status_equal(old, status))
        goto out;
    err = kop_patch_status(kop_manager_client(op->mgr), &CTF_CHALLENGES, chal, status, NULL, &st);
    if (err == KOP_ENOTFOUND)
        err = KOP_OK; /* gone meanwhile: nothing to report on */
    if (err) {
        kop_logger_log(req->log, KOP_LOG_ERROR, "status not written", KOP_LOG_ERR(err),
                       KOP_LOG_STR("detail", st.message));
        goto out;
    }
    const char *was = old ? json_string_value(json_object_get(old, "currentStatus")) : NULL;
    if (!was || strcmp(was, o->phase) != 0) {
        bool bad = strcmp(o->phase, STATUS_ERROR) == 0;
        kop_logger_log(req->log, bad ? KOP_LOG_WARN : KOP_LOG_INFO, "instance status",
                       KOP_LOG_STR("status", o->phase), KOP_LOG_STR("reason", o->reason),
                       KOP_LOG_STR("message", o->message));
        kop_event(op->events, chal, bad ? KOP_EVENT_WARNING : KOP_EVENT_NORMAL,
                  o->reason ? o->reason : o->phase, o->phase, "%s%s%s", o->phase,
                  o->message[0] ? ": " : "", o->message);
        if (strcmp(o->phase, STATUS_RUNNING) == 0 && !status_str(chal, "startedAt"))
            kop_metric_observe(op->ready_seconds, NULL,
                               difftime(time(NULL), created_at(chal)));
    }
out:
    json_decref(status);
    return err;
}

/*
 * wake_refused re-enqueues the Challenges refused for quota: a slot was just
 * freed, and nothing else would tell them.
 */
static void wake_refused(ctf_operator *op)
{
    json_t *all = NULL, *c;
    size_t i;
    if (kop_informer_list(op->challenges, NULL, &all))
        return;
    json_array_foreach(all, i, c)
    {
        const char *reason = status_str(c, "reason");
        if (reason && strcmp(reason, "QuotaExceeded") == 0)
            kop_controller_enqueue(op->ctl, kop_meta_namespace(c), kop_meta_name(c));
    }
    json_decref(all);
}

/* ---- finalization ----------------------------------------------------------- */

/*
 * delete_orphans deletes the instance namespaces labelled for the Challenge
 * ns/name, which no longer exists. A namespace can outlive its Challenge
 * when an operator is killed with its create in flight: the apiserver
 * finishes it after the next operator found no namespace and released the
 * finalizer. The namespace's own watch event brings its Challenge's key
 * here, so the orphan goes as soon as it appears.
 */
static void delete_orphans(ctf_operator *op, const kop_reconcile *req)
{
    json_t *all = NULL, *n;
    size_t i;
    kop_status st;
    if (kop_informer_list(op->namespaces, NULL, &all) != KOP_OK)
        return;
    json_array_foreach(all, i, n)
    {
        const char *cns = kop_meta_label(n, "ctf.kopc.io/challenge-namespace");
        const char *cname = kop_meta_label(n, "ctf.kopc.io/challenge");
        if (!cns || !cname || strcmp(cns, req->namespace) || strcmp(cname, req->name) ||
            kop_meta_is_deleting(n))
            continue;
        kop_delete_opts o = {.precondition_uid = kop_meta_uid(n)};
        if (kop_delete(req->client, &CTF_NAMESPACES, NULL, kop_meta_name(n), &o, NULL, &st) ==
            KOP_OK)
            kop_logger_log(req->log, KOP_LOG_INFO, "deleted an orphaned instance namespace",
                           KOP_LOG_STR("instance_namespace", kop_meta_name(n)));
    }
    json_decref(all);
}

/* owns_namespace: the namespace was made for this Challenge. */
static bool owns_namespace(const json_t *nsobj, const json_t *chal)
{
    const char *uid = kop_meta_annotation(nsobj, "ctf.kopc.io/challenge-uid");
    return uid && kop_meta_uid(chal) && strcmp(uid, kop_meta_uid(chal)) == 0;
}

static kop_result finalize(ctf_operator *op, const kop_reconcile *req, json_t *chal)
{
    kop_status st;
    char ns[64];
    json_t *nsobj = NULL;
    observation o = {.phase = STATUS_TERMINATING};
    kop_client *c = kop_manager_client(op->mgr);

    if (!kop_meta_has_finalizer(chal, CTF_FINALIZER))
        return KOP_DONE;
    instance_namespace(chal, ns, sizeof ns);

    /* While the instance's namespace exists: Terminating, and delete it. */
    kop_err err = ns[0] ? kop_get(c, &CTF_NAMESPACES, NULL, ns, &nsobj, &st) : KOP_ENOTFOUND;
    if (err && err != KOP_ENOTFOUND)
        return KOP_RETRY;
    if (err == KOP_OK && owns_namespace(nsobj, chal)) {
        snprintf(o.message, sizeof o.message, "deleting namespace %s", ns);
        if (write_status(op, req, chal, &o, ns, 0)) {
            json_decref(nsobj);
            return KOP_RETRY;
        }
        if (!kop_meta_is_deleting(nsobj)) {
            kop_delete_opts d = {.propagation = KOP_PROPAGATION_BACKGROUND,
                                 .precondition_uid = kop_meta_uid(nsobj)};
            err = kop_delete(c, &CTF_NAMESPACES, NULL, ns, &d, NULL, &st);
            if (err && err != KOP_ENOTFOUND && err != KOP_ECONFLICT) {
                json_decref(nsobj);
                return KOP_RETRY;
            }
        }
        json_decref(nsobj);
        /* The namespace's deletion event wakes us; the timer is a safety net. */
        return KOP_REQUEUE_AFTER(NS_WAIT_MS);
    }
    json_decref(nsobj);

    /* Gone (or never ours): Deleted, and let the Challenge go. */
    o.phase = STATUS_DELETED;
    snprintf(o.message, sizeof o.message, "instance removed");
    if (write_status(op, req, chal, &o, ns, 0))
        return KOP_RETRY;
    err = update_finalizers(op, chal, false, &st);
    if (err && err != KOP_ENOTFOUND)
        return KOP_RETRY;
    registry_remove(kop_meta_uid(chal));
    wake_refused(op);
    return KOP_DONE;
}

/* ---- the instance -------------------------------------------------------------- */

/* read_flag computes the instance's flag; *flag is owned (NULL: none). */
static bool read_flag(ctf_operator *op, const json_t *chal, const json_t *def, char **flag,
                      observation *o)
{
    kop_status st;
    unsigned char *key = NULL;
    size_t key_len = 0;
    const char *name = NULL, *k = NULL;
    *flag = NULL;
    if (ctf_flag_secret_ref(def, &name, &k)) {
        json_t *secret = NULL;
        if (!name || kop_get(kop_manager_client(op->mgr), &CTF_SECRETS, kop_meta_namespace(def),
                             name, &secret, &st) != KOP_OK) {
            observe_error(o, "InvalidDefinition", "flag key Secret %s not found",
                          name ? name : "(unnamed)");
            return false;
        }
        kop_err err = ctf_secret_value(secret, k ? k : "key", &key, &key_len);
        json_decref(secret);
        if (err) {
            observe_error(o, "InvalidDefinition", "flag key Secret %s has no usable key \"%s\"",
                          name, k ? k : "key");
            return false;
        }
    }
    kop_err err = ctf_flag(def, kop_meta_name(def), spec_str(chal, "team"), key, key_len, flag, &st);
    if (key) {
        OPENSSL_cleanse(key, key_len);
        free(key);
    }
    if (err) {
        observe_error(o, "InvalidDefinition", "flag: %s", st.message);
        return false;
    }
    return true;
}

/* apply_instance applies every child; false with o filled on a refusal. */
static kop_err apply_instance(ctf_operator *op, const json_t *chal, const json_t *def,
                              const char *flag, observation *o, const kop_reconcile *req)
{
    kop_status st;
    json_t *children = NULL, *child;
    size_t i;
    kop_err err = ctf_build_children(&op->instance, def, chal, flag, &children, &st);
    if (err) {
        observe_error(o, "InvalidDefinition", "%s", st.message);
        return KOP_OK;
    }
    json_array_foreach(children, i, child)
    {
        const kop_resource *r = resource_of(child);
        err = r ? apply(op, r, child, &st) : KOP_EINVAL;
        if (err) {
            kop_logger_log(req->log, KOP_LOG_ERROR, "apply failed", KOP_LOG_ERR(err),
                           KOP_LOG_STR("kind", json_string_value(json_object_get(child, "kind"))),
                           KOP_LOG_STR("name", kop_meta_name(child)),
                           KOP_LOG_STR("detail", st.message));
            if (err == KOP_EINVALID || err == KOP_EFORBIDDEN) {
                /* The cluster refuses this instance as built: say why, keep it. */
                observe_error(o, err == KOP_EFORBIDDEN ? "Forbidden" : "InvalidDefinition",
                              "%s %s refused: %.300s",
                              json_string_value(json_object_get(child, "kind")),
                              kop_meta_name(child), st.message);
                err = KOP_OK;
            }
            break;
        }
    }
    json_decref(children);
    return err;
}

/* pod_failure finds a container that cannot start in ns, for Error. */
static bool pod_failure(ctf_operator *op, const char *ns, observation *o)
{
    json_t *pods = NULL, *pod, *cs;
    size_t i, j;
    bool found = false;
    if (kop_informer_list(op->pods, ns, &pods))
        return false;
    json_array_foreach(pods, i, pod)
    {
        json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), j,
                           cs)
        {
            json_t *waiting = json_object_get(json_object_get(cs, "state"), "waiting");
            const char *why = json_string_value(json_object_get(waiting, "reason"));
            const char *name = json_string_value(json_object_get(cs, "name"));
            const char *image = json_string_value(json_object_get(cs, "image"));
            if (!why)
                continue;
            if (strcmp(why, "ImagePullBackOff") == 0 || strcmp(why, "ErrImagePull") == 0 ||
                strcmp(why, "InvalidImageName") == 0) {
                observe_error(o, "ImagePullFailed", "image %s of container %s cannot be pulled",
                              image ? image : "?", name ? name : "?");
                found = true;
            } else if (strcmp(why, "CrashLoopBackOff") == 0) {
                observe_error(o, "CrashLoop", "container %s of pod %s keeps crashing",
                              name ? name : "?", kop_meta_name(pod));
                found = true;
            }
            if (found)
                goto out;
        }
    }
out:
    json_decref(pods);
    return found;
}

/* deployments_available: every pod of the definition has an available Deployment. */
static bool deployments_available(ctf_operator *op, const json_t *def, const char *ns)
{
    json_t *pod;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(def, "spec"), "pods"), i, pod)
    {
        json_t *d = NULL;
        const char *name = json_string_value(json_object_get(pod, "name"));
        if (!name || kop_informer_get(op->deployments, ns, name, &d) != KOP_OK)
            return false;
        json_t *spec = json_object_get(d, "spec"), *status = json_object_get(d, "status");
        json_int_t want = json_integer_value(json_object_get(spec, "replicas"));
        bool ok = json_integer_value(json_object_get(status, "observedGeneration")) >=
                      kop_meta_generation(d) &&
                  json_integer_value(json_object_get(status, "availableReplicas")) >= want &&
                  json_integer_value(json_object_get(status, "updatedReplicas")) >= want;
        json_decref(d);
        if (!ok)
            return false;
    }
    return true;
}

/* slice_ready reports whether an EndpointSlice has an endpoint that is ready. */
static bool slice_ready(const json_t *slice)
{
    size_t i;
    const json_t *ep;
    json_array_foreach(json_object_get(slice, "endpoints"), i, ep)
    {
        const json_t *ready = json_object_get(json_object_get(ep, "conditions"), "ready");
        /* An absent condition means ready (discovery.k8s.io/v1). */
        if (!ready || json_is_true(ready))
            return true;
    }
    return false;
}

/*
 * services_ready: every exposed Service of the definition has a ready
 * endpoint, so kube-proxy (or the Ingress) has a pod to send connections to.
 * The EndpointSlice controller labels each slice with its Service's name
 * and copies the Service's labels, which is how the cache holds them.
 */
static bool services_ready(ctf_operator *op, const json_t *def, const char *ns)
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
            if (name && svc && strcmp(svc, name) == 0 && slice_ready(s))
                ready = true;
        }
        if (!ready) {
            all = false;
            break;
        }
    }
    json_decref(slices);
    return all;
}

/* observe_instance decides Running, Pending or a failure from the caches. */
static void observe_instance(ctf_operator *op, const json_t *chal, const json_t *def,
                             const char *ns, observation *o)
{
    json_t *services = NULL;
    bool complete = false;
    if (pod_failure(op, ns, o))
        return;
    if (kop_informer_list(op->services, ns, &services) == KOP_OK &&
        ctf_endpoints(&op->instance, def, ns, services, &o->endpoints, &complete) != KOP_OK)
        complete = false;
    json_decref(services);
    if (complete && deployments_available(op, def, ns) && services_ready(op, def, ns)) {
        o->phase = STATUS_RUNNING;
        snprintf(o->message, sizeof o->message, "instance running");
        return;
    }
    ctf_lifetime lt;
    int64_t timeout_ms = 5 * 60 * 1000;
    if (ctf_lifetime_parse(json_object_get(def, "spec"), &lt, NULL) == KOP_OK)
        timeout_ms = lt.start_timeout_ms;
    double age_ms = difftime(time(NULL), created_at(chal)) * 1000;
    if (age_ms >= (double)timeout_ms) {
        observe_error(o, "StartTimeout", "not running within %lld s of the request",
                      (long long)(timeout_ms / 1000));
        return;
    }
    o->phase = STATUS_PENDING;
    snprintf(o->message, sizeof o->message, "starting");
    o->requeue_ms = (long)((double)timeout_ms - age_ms) + 1000;
}

/* ---- reconcile ------------------------------------------------------------------ */

static long min_positive(long a, long b)
{
    if (a <= 0)
        return b;
    if (b <= 0)
        return a;
    return a < b ? a : b;
}

static kop_result reconcile(const kop_reconcile *req, void *user)
{
    ctf_operator *op = user;
    kop_status st;
    json_t *chal = NULL, *def = NULL;
    char *flag = NULL;
    char ns[64] = "";
    observation o = {.phase = STATUS_PENDING};
    time_t expires = 0;
    kop_result res = KOP_DONE;

    if (kop_informer_get(req->cache, req->namespace, req->name, &chal) != KOP_OK) {
        delete_orphans(op, req); /* gone: the finalizer already ran */
        return KOP_DONE;
    }
    if (kop_meta_is_deleting(chal)) {
        res = finalize(op, req, chal);
        goto out;
    }
    if (ensure_finalizer(op, chal, &st) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }

    /* The definition. */
    const char *def_name = spec_str(chal, "definition");
    if (!def_name || kop_informer_get(op->definitions, req->namespace, def_name, &def) != KOP_OK) {
        observe_error(&o, "DefinitionNotFound", "ChallengeDefinition %s not found in namespace %s",
                      def_name ? def_name : "(none)", req->namespace);
        goto status;
    }
    if (ctf_validate_definition(def, &st) != KOP_OK) {
        observe_error(&o, "InvalidDefinition", "%s", st.message);
        goto status;
    }

    /* The lifetime: past it, the instance goes away. */
    if (ctf_expiry(created_at(chal), json_object_get(def, "spec"), spec_str(chal, "expiresAt"),
                   &expires, &st) == KOP_OK) {
        double left = difftime(expires, time(NULL));
        if (left <= 0) {
            kop_logger_log(req->log, KOP_LOG_INFO, "instance expired; deleting it");
            kop_event(op->events, chal, KOP_EVENT_NORMAL, "Expired", "Delete", "instance expired");
            kop_err err = kop_delete(req->client, &CTF_CHALLENGES, req->namespace, req->name, NULL,
                                     NULL, &st);
            res = err && err != KOP_ENOTFOUND ? KOP_RETRY : KOP_DONE;
            goto out;
        }
        o.requeue_ms = (long)(left * 1000) + 500;
    }

    /* Admission, then the instance itself. */
    instance_namespace(chal, ns, sizeof ns);
    if (!ns[0]) {
        observe_error(&o, "InvalidDefinition", "cannot name the instance's namespace");
        goto status;
    }
    if (!admit(op, chal, &o)) {
        ns[0] = '\0'; /* refused: it has no instance */
        goto status;
    }
    json_t *existing = NULL;
    if (kop_informer_get(op->namespaces, NULL, ns, &existing) == KOP_OK) {
        bool ours = owns_namespace(existing, chal), going = kop_meta_is_deleting(existing);
        json_decref(existing);
        if (!ours && !going) {
            observe_error(&o, "DuplicateInstance",
                          "namespace %s already holds this team's instance of %s", ns, def_name);
            ns[0] = '\0'; /* that namespace is another Challenge's */
            registry_remove(kop_meta_uid(chal));
            goto status;
        }
        if (going) { /* a previous instance is still being removed */
            snprintf(o.message, sizeof o.message, "waiting for namespace %s to be removed", ns);
            o.requeue_ms = NS_WAIT_MS;
            goto status;
        }
    }
    if (!read_flag(op, chal, def, &flag, &o))
        goto status;
    if (apply_instance(op, chal, def, flag, &o, req) != KOP_OK) {
        res = KOP_RETRY;
        goto out;
    }
    if (!o.reason) {
        long expiry_ms = o.requeue_ms;
        observe_instance(op, chal, def, ns, &o);
        o.requeue_ms = min_positive(o.requeue_ms, expiry_ms);
    }

status:
    if (write_status(op, req, chal, &o, ns, expires) != KOP_OK)
        res = KOP_RETRY;
    else if (o.requeue_ms > 0)
        res = KOP_REQUEUE_AFTER(o.requeue_ms);
out:
    if (flag) {
        OPENSSL_cleanse(flag, strlen(flag));
        free(flag);
    }
    json_decref(o.endpoints);
    json_decref(def);
    json_decref(chal);
    return res;
}

/* ---- watches ------------------------------------------------------------------- */

/* by_definition maps a ChallengeDefinition to the Challenges that use it. */
static void by_definition(const json_t *def, kop_emit_fn emit, void *ctx, void *user)
{
    ctf_operator *op = user;
    json_t *chals = NULL, *c;
    size_t i;
    if (kop_informer_by_index(op->challenges, CTF_INDEX_DEFINITION, kop_meta_name(def), &chals))
        return;
    json_array_foreach(chals, i, c)
        if (strcmp(kop_meta_namespace(c), kop_meta_namespace(def)) == 0)
            emit(kop_meta_namespace(c), kop_meta_name(c), ctx);
    json_decref(chals);
}

/* by_labels maps an instance's child to its Challenge through its labels. */
static void by_labels(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    (void)user;
    const char *ns = kop_meta_label(obj, "ctf.kopc.io/challenge-namespace");
    const char *name = kop_meta_label(obj, "ctf.kopc.io/challenge");
    if (ns && name)
        emit(ns, name, ctx);
}

/* Indexes of Challenges by spec.definition and by spec.team (any namespace). */
static size_t index_definition(const json_t *c, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? spec_str(c, "definition") : NULL;
    return values[0] ? 1 : 0;
}

static size_t index_team(const json_t *c, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] = max ? spec_str(c, "team") : NULL;
    return values[0] ? 1 : 0;
}

/* count_by_status fills ctf_instances{status} at each scrape. */
static void count_by_status(void *user)
{
    ctf_operator *op = user;
    static const char *const phases[] = {"None", STATUS_PENDING, STATUS_RUNNING, STATUS_ERROR,
                                         STATUS_TERMINATING, STATUS_DELETED};
    double n[6] = {0};
    json_t *all = NULL, *c;
    size_t i;
    if (kop_informer_list(op->challenges, NULL, &all))
        return;
    json_array_foreach(all, i, c)
    {
        const char *p = status_str(c, "currentStatus");
        size_t k = 0;
        for (size_t j = 1; p && j < 6; j++)
            if (strcmp(p, phases[j]) == 0)
                k = j;
        n[k]++;
    }
    json_decref(all);
    for (size_t j = 0; j < 6; j++) {
        const char *labels[] = {phases[j], NULL};
        kop_metric_set(op->instances, labels, n[j]);
    }
}

kop_err ctf_setup_controller(ctf_operator *op, kop_status *st)
{
    kop_err err;
    kop_metrics *m = kop_manager_metrics(op->mgr);
    static const char *const status_label[] = {"status", NULL};
    kop_controller_opts co = {
        .name = "challenge",
        .for_resource = CTF_CHALLENGES,
        .namespace = op->watch_namespace,
        .reconcile = reconcile,
        .user = op,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 4,
    };
    err = kop_metrics_gauge(m, "ctf_instances", "Challenge instances by status", status_label,
                            &op->instances);
    if (!err)
        err = kop_metrics_histogram(m, "ctf_instance_ready_seconds",
                                    "Seconds from a Challenge's creation to its instance Running",
                                    NULL, NULL, 0, &op->ready_seconds);
    if (!err)
        err = kop_metrics_add_collector(m, count_by_status, op);
    if (!err)
        err = kop_controller_new(op->mgr, &co, &op->ctl);
    if (err) {
        kop_status_setf(st, 0, NULL, "challenge controller: %s", kop_strerror(err));
        return err;
    }
    op->challenges = kop_controller_cache(op->ctl);
    err = kop_informer_add_index(op->challenges, CTF_INDEX_DEFINITION, index_definition, NULL);
    if (!err)
        err = kop_informer_add_index(op->challenges, CTF_INDEX_TEAM, index_team, NULL);
    if (!err)
        err = kop_controller_watches(op->ctl, &CTF_DEFINITIONS, NULL, by_definition, op);
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS, &CTF_PODS,
                                      &CTF_SERVICES, &CTF_ENDPOINTSLICES};
    for (size_t i = 0; !err && i < 5; i++)
        err = kop_controller_watches(op->ctl, children[i], CTF_MANAGED, by_labels, op);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_DEFINITIONS, NULL, NULL, &op->definitions);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_NAMESPACES, NULL, CTF_MANAGED, &op->namespaces);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_DEPLOYMENTS, NULL, CTF_MANAGED, &op->deployments);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_PODS, NULL, CTF_MANAGED, &op->pods);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_SERVICES, NULL, CTF_MANAGED, &op->services);
    if (!err)
        err = kop_manager_informer(op->mgr, &CTF_ENDPOINTSLICES, NULL, CTF_MANAGED,
                                   &op->endpointslices);
    if (err)
        kop_status_setf(st, 0, NULL, "challenge watches: %s", kop_strerror(err));
    return err;
}

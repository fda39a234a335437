/*
 * webhook.c - the validating webhook for Challenges: what would only become
 * an Error status once the reconciler ran (a definition that does not
 * exist or does not pass its checks, a team at --max-instances-per-team,
 * the CTF at --max-instances) is refused at `kubectl apply` instead, with
 * the reason and message that status would show (core/admission.c's
 * ctf_admission_review, the same ledger and words the reconciler and the
 * instance API use).
 *
 * Served by the manager's webhook server (kop/webhook.h) when the operator
 * runs with --webhook-bind; off, nothing here is registered and the status
 * path alone says why a Challenge does not run. The status path stays in
 * any case: a Challenge created while the webhook was absent, or admitted
 * by a replica whose counts lagged (two creates of one team at once both
 * see room), still gets its Error.
 *
 * What it reads: the operator's caches, never a list: the quotas' ledger
 * (fed by the Challenge and namespace caches on every replica, leader or
 * not) and the definitions' cache. A definition the cache does not hold
 * yet is asked of the apiserver once (a GET by name, served from etcd),
 * since `kubectl apply -f` of a file with a definition and a
 * Challenge creates them milliseconds apart: refusing on a lagging cache
 * would refuse a valid Challenge. That read has its own client with a
 * short timeout and no retries, well inside the webhook's timeoutSeconds.
 *
 * When it cannot judge it lets the Challenge through with a warning
 * kubectl prints, and the reconciler judges it later: before the caches
 * have synced (a replica starting), and when the apiserver could not be
 * asked about a definition. Refusing then would block a valid create on
 * an operator-side hiccup; letting through costs nothing but the Error
 * status the webhook exists to anticipate.
 *
 * Only CREATE is judged (spec.definition and spec.team are immutable, so an
 * update cannot change the answer) and the configuration sends nothing
 * else: DELETE is never intercepted, so the operator being down never
 * blocks a deletion (docs/operations.md, "The admission webhook").
 *
 * The same server answers the CRD conversion of ChallengeDefinitions
 * between v1alpha1 and v1beta1 at /convert (core/conversion.c,
 * docs/crd-versions.md): a pure function of each object, no cache read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/operator.h"
#include "controller/webhook.h"
#include "core/conversion.h"

/* How long the webhook's own read of a definition may take: a fraction of
 * the configuration's timeoutSeconds (5 s). */
#define WEBHOOK_READ_TIMEOUT_MS 2000

struct ctf_webhook {
    ctf_operator *op;       /* borrowed */
    kop_client *client;     /* the definition reads' own: short timeout, no retries */
    ctf_webhook_view view;
};

/* let_through admits a Challenge it could not judge, saying so in a warning. */
static kop_err let_through(kop_admission_response *resp, const char *why)
{
    kop_admission_warn(resp, "ctf-operator did not check this Challenge now (%s); "
                             "its status will say whether it runs", why);
    return KOP_OK;
}

kop_err ctf_webhook_judge(const ctf_webhook_view *v, const kop_admission_request *req,
                          kop_admission_response *resp)
{
    json_t *def = NULL;
    ctf_refusal r;
    kop_err err;

    if (strcmp(req->operation, "CREATE") != 0 || strcmp(req->group, "ctf.kopc.io") != 0 ||
        strcmp(req->kind, "Challenge") != 0 || !json_is_object(req->object))
        return KOP_OK; /* not a question for this webhook */
    const char *ns = req->namespace[0] ? req->namespace : kop_meta_namespace(req->object);
    if (!ns || (v->watch_namespace && strcmp(ns, v->watch_namespace) != 0))
        return KOP_OK; /* not a Challenge this operator runs */
    if (!v->synced(v->user))
        return let_through(resp, "its caches are still loading");

    const char *name = ctf_str2(req->object, "spec", "definition");
    err = name ? v->definition(v->user, ns, name, &def) : KOP_ENOTFOUND;
    if (err != KOP_OK && err != KOP_ENOTFOUND)
        return let_through(resp, "the ChallengeDefinition could not be read");
    bool admitted = ctf_admission_review(v->admission, ns, req->object, def, &r);
    json_decref(def);
    if (admitted)
        return KOP_OK;
    err = kop_admission_deny(resp, "%s", r.message);
    snprintf(resp->status.reason, sizeof resp->status.reason, "%s", r.reason);
    return err;
}

/* ---- the operator's view: its caches ----------------------------------------- */

static bool synced(void *user)
{
    ctf_operator *op = ((ctf_webhook *)user)->op;
    return kop_informer_has_synced(op->challenges) &&
           kop_informer_has_synced(op->definitions) && kop_informer_has_synced(op->namespaces);
}

/*
 * definition finds ns/name in the definitions' cache, and on a miss asks
 * the apiserver (a GET: served from etcd, a quorum read) so that a
 * definition created a moment ago is not taken for a missing one.
 */
static kop_err definition(void *user, const char *ns, const char *name, json_t **def)
{
    ctf_webhook *w = user;
    kop_status st;
    *def = NULL;
    if (kop_informer_dup(w->op->definitions, ns, name, def) == KOP_OK)
        return KOP_OK;
    if (!kop_meta_is_valid_dns1123_subdomain(name))
        return KOP_ENOTFOUND; /* no object can bear that name */
    kop_err err = kop_get(w->client, &CTF_DEFINITIONS, ns, name, def, &st);
    if (err && err != KOP_ENOTFOUND)
        kop_log(KOP_LOG_WARN, "webhook: could not read a ChallengeDefinition",
                KOP_LOG_STR("namespace", ns), KOP_LOG_STR("name", name), KOP_LOG_ERR(err),
                KOP_LOG_STR("message", st.message));
    return err;
}

/* validate is the handler the server calls: the judgement, logged when it refuses. */
static kop_err validate(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    ctf_webhook *w = user;
    kop_err err = ctf_webhook_judge(&w->view, req, resp);
    if (err)
        kop_log(KOP_LOG_INFO, "webhook refused a Challenge", KOP_LOG_STR("namespace", req->namespace),
                KOP_LOG_STR("name", req->name), KOP_LOG_STR("user", req->username),
                KOP_LOG_STR("reason", resp->status.reason),
                KOP_LOG_STR("message", resp->status.message));
    return err;
}

/* convert_definition is the ChallengeDefinition converter (kop_conversion_fn). */
static kop_err convert_definition(json_t *obj, const char *from, const char *to, kop_status *st,
                                  void *user)
{
    (void)user;
    return ctf_convert_definition(obj, from, to, st);
}

kop_err ctf_setup_webhook(ctf_operator *op, kop_status *st)
{
    kop_webhook_server *srv = NULL;
    ctf_webhook *w = NULL;
    kop_err err = kop_manager_webhook_server(op->mgr, &srv, st);
    if (err || !srv)
        return err; /* off (--webhook-bind 0): the status path alone */
    if (!(w = calloc(1, sizeof *w))) {
        err = KOP_ENOMEM;
        goto out;
    }
    w->op = op;
    w->view = (ctf_webhook_view){.admission = op->admission,
                                 .watch_namespace = op->watch_namespace,
                                 .definition = definition,
                                 .synced = synced,
                                 .user = w};
    err = kop_client_new(kop_manager_config(op->mgr),
                         &(kop_client_opts){.timeout_ms = WEBHOOK_READ_TIMEOUT_MS,
                                            .max_retries = -1,
                                            .user_agent = "kopc-ctf-operator/webhook"},
                         &w->client, st);
    if (!err)
        err = kop_webhook_add_admission(srv, &(kop_webhook_admission){
                                                 .path = CTF_WEBHOOK_VALIDATE_CHALLENGE,
                                                 .handle = validate,
                                                 .user = w});
    if (!err)
        err = kop_webhook_add_converter(srv, &(kop_webhook_converter){
                                                 .group = "ctf.kopc.io",
                                                 .kind = "ChallengeDefinition",
                                                 .convert = convert_definition});
out:
    if (err) {
        ctf_webhook_free(w);
        w = NULL;
    }
    op->webhook = w;
    return err;
}

void ctf_webhook_free(ctf_webhook *w)
{
    if (!w)
        return;
    kop_client_free(w->client);
    free(w);
}

/*
 * write.c - the API's writes: PUT creates a team's instance (idempotent:
 * the Challenge's name is a function of team and challenge), POST renew
 * extends it (a merge patch guarded by resourceVersion, retried on a
 * conflict), DELETE stops it (202 Stopping). Quotas are asked of the
 * admission (admission.c), the same the reconciler asks. Every refusal
 * happens before the write. A DELETE or renew that does not find the
 * instance in the cache asks the apiserver for it by its name, so a stop
 * right after the create is never answered 404.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"
#include "core/names.h"

/* new_challenge builds the Challenge a PUT creates (owned). */
static json_t *new_challenge(ctf_api *api, const request *rq, const char *name,
                             const ctf_put_body *body)
{
    json_t *spec =
        json_pack("{s:s, s:s}", "definition", rq->route.challenge, "team", rq->route.team);
    if (spec && body->expires_at[0])
        json_object_set_new(spec, "expiresAt", json_string(body->expires_at));
    /* With the operator's finalizer from the start: the first pass of the
     * instance writes no finalizer patch (one round trip less per claim). */
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:[s]}, s:o}", "apiVersion",
                     "ctf.kopc.io/v1alpha1", "kind", "Challenge", "metadata", "name", name,
                     "namespace", api->opts.challenge_namespace, "labels", CREATED_BY,
                     "kopc-ctf-api", "finalizers", CTF_FINALIZER, "spec", spec);
}

/* is_routes_instance: chal is for the route's team and challenge (not another holding its name). */
static bool is_routes_instance(const json_t *chal, const request *rq)
{
    const char *team = ctf_str2(chal, "spec", "team"), *def = ctf_str2(chal, "spec", "definition");
    return team && def && strcmp(team, rq->route.team) == 0 &&
           strcmp(def, rq->route.challenge) == 0;
}

/* existing_answer answers a PUT that found the team's Challenge already there. */
static enum MHD_Result existing_answer(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                       const json_t *chal)
{
    if (!is_routes_instance(chal, rq))
        return ctf_api_send_error(api, conn, rq, 409, "Conflict",
                                  "another Challenge holds this instance's name", NULL);
    if (kop_meta_is_deleting(chal))
        return ctf_api_stopping(api, conn, rq);
    json_t *v = ctf_api_view(api, chal);
    enum MHD_Result ret = ctf_api_send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

/*
 * put_instance: idempotent create. The name is a function of team and
 * challenge, so of concurrent PUTs the apiserver lets exactly one create
 * and the others find it (AlreadyExists, then a GET that sees it).
 */
enum MHD_Result ctf_api_put_instance(ctf_api *api, struct MHD_Connection *conn, request *rq,
                                     const ctf_put_body *body)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    const char *ns = api->opts.challenge_namespace;
    char name[KOP_META_DNS1123_LABEL_MAX + 1], msg[300];
    json_t *def = NULL, *chal = NULL, *obj = NULL, *created = NULL;
    ctf_api_refusal refusal;
    kop_status st;
    enum MHD_Result ret;

    if (!(def = ctf_api_definition(api, rq->route.challenge))) {
        snprintf(msg, sizeof msg, "no challenge named %s", rq->route.challenge);
        ret = ctf_api_send_error(api, conn, rq, 404, "NotFound", msg, NULL);
        goto out;
    }
    if ((chal = ctf_api_find_instance(api, rq->route.team, rq->route.challenge))) {
        ret = existing_answer(api, conn, rq, chal);
        goto out;
    }
    if (ctf_admission_check(api->op->admission, ns, rq->route.team, msg, sizeof msg) !=
        CTF_ADMIT_OK) {
        ret = ctf_api_send_error(api, conn, rq, 409, "QuotaExceeded", msg, NULL);
        goto out;
    }
    if (ctf_challenge_name(rq->route.team, rq->route.challenge, name, sizeof name) ||
        !(obj = new_challenge(api, rq, name, body))) {
        ret =
            ctf_api_send_error(api, conn, rq, 500, "Internal", "cannot build the Challenge", NULL);
        goto out;
    }
    kop_write_req create = {.target = {&CTF_CHALLENGES, ns, NULL}, .object = obj};
    kop_err err = kop_create_object(c, &create, &created, &st);
    if (err == KOP_OK) {
        char location[512];
        snprintf(location, sizeof location, "/api/v1/teams/%s/instances/%s", rq->route.team,
                 rq->route.challenge);
        kop_log(KOP_LOG_INFO, "api created an instance", KOP_LOG_STR("team", rq->route.team),
                KOP_LOG_STR("challenge", rq->route.challenge), KOP_LOG_STR("name", name));
        json_t *v = ctf_api_instance_view(created, def, time(NULL));
        const char *h[] = {"Location", location, NULL};
        ret = ctf_api_send_json(api, conn, rq, 201, v, h);
        json_decref(v);
    } else if (err == KOP_EALREADYEXISTS &&
               kop_get(c, &CTF_CHALLENGES, ns, name, &chal, &st) == KOP_OK) {
        ret = existing_answer(api, conn, rq, chal);
    } else if (ctf_api_webhook_refusal(err, &st, &refusal)) {
        /* The operator's webhook refused it (routes.c): answered as the API's own refusal. */
        kop_log(KOP_LOG_INFO, "api create refused by the webhook",
                KOP_LOG_STR("team", rq->route.team), KOP_LOG_STR("reason", st.reason));
        ret = ctf_api_send_error(api, conn, rq, refusal.code, refusal.reason, refusal.message, NULL);
    } else {
        ret = ctf_api_send_apiserver_error(api, conn, rq, err, &st);
    }
out:
    json_decref(created);
    json_decref(obj);
    json_decref(chal);
    json_decref(def);
    return ret;
}

/*
 * find_for_write returns (owned) the team's Challenge for the route's
 * challenge: from the cache, or else from the apiserver under the name the
 * API gives it, so that a DELETE or a renew right after the PUT that made it
 * finds it even before the cache has heard of it (read your own writes).
 * NULL when the team has none, with *asked false when the apiserver could
 * not be asked (then the answer is 503, not 404).
 */
static json_t *find_for_write(ctf_api *api, const request *rq, bool *asked)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    char name[KOP_META_DNS1123_LABEL_MAX + 1];
    json_t *chal = ctf_api_find_instance(api, rq->route.team, rq->route.challenge);
    kop_status st;
    *asked = true;
    if (chal || ctf_challenge_name(rq->route.team, rq->route.challenge, name, sizeof name))
        return chal;
    kop_err err = kop_get(c, &CTF_CHALLENGES, api->opts.challenge_namespace, name, &chal, &st);
    if (err) {
        *asked = err == KOP_ENOTFOUND;
        return NULL;
    }
    if (!is_routes_instance(chal, rq)) {
        json_decref(chal); /* another Challenge holds the name: not this team's instance */
        return NULL;
    }
    return chal;
}

/* not_found answers a DELETE or renew find_for_write found nothing for. */
static enum MHD_Result not_found(ctf_api *api, struct MHD_Connection *conn, request *rq, bool asked)
{
    return asked ? ctf_api_no_instance(api, conn, rq)
                 : ctf_api_send_unavailable(api, conn, rq, "cannot read the instance");
}

kop_err ctf_api_stop(ctf_api *api, const json_t *chal, json_t **gone, kop_status *st)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    json_t *deleted = NULL;
    kop_delete_req del = {.target = {&CTF_CHALLENGES, kop_meta_namespace(chal), kop_meta_name(chal)},
                          .opts = {.precondition_uid = kop_meta_uid(chal)}};
    kop_err err = kop_delete_object(c, &del, &deleted, st);
    if (err == KOP_ENOTFOUND)
        err = KOP_OK;
    if (!err)
        kop_log(KOP_LOG_INFO, "api stopped an instance",
                KOP_LOG_STR("team", ctf_str2(chal, "spec", "team")),
                KOP_LOG_STR("challenge", ctf_str2(chal, "spec", "definition")));
    if (gone && !err)
        *gone = deleted;
    else
        json_decref(deleted);
    return err;
}

/*
 * admin_event records an admin action on chal: reason names it (AdminStop,
 * AdminExtend), done says what happened and what which action of the
 * console did it ("stop all of team t's").
 */
static void admin_event(ctf_api *api, const json_t *chal, const char *reason, const char *action,
                        const char *done, const char *what)
{
    const char *def = ctf_str2(chal, "spec", "definition"), *team = ctf_str2(chal, "spec", "team");
    kop_event(api->op->events, &(kop_event_req){.object = chal, .reason = reason, .action = action},
              "%s by the admin (%s): %s of team %s", done, what, def ? def : "?", team ? team : "?");
}

enum MHD_Result ctf_api_delete_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    bool asked;
    json_t *chal = find_for_write(api, rq, &asked), *gone = NULL;
    kop_status st;
    enum MHD_Result ret;
    if (!chal)
        return not_found(api, conn, rq, asked);
    if (!kop_meta_is_deleting(chal)) {
        kop_err err = ctf_api_stop(api, chal, &gone, &st);
        if (err) {
            ret = ctf_api_send_apiserver_error(api, conn, rq, err, &st);
            goto out;
        }
        if (rq->route.kind == CTF_ROUTE_ADMIN_STOP)
            admin_event(api, chal, "AdminStop", "Stop", "stopped", "stop instance");
    }
    /* The Challenge as deleted (deletionTimestamp set), or else the cached one. */
    const char *kind = json_string_value(json_object_get(gone, "kind"));
    json_t *shown = kind && strcmp(kind, "Challenge") == 0 ? gone : chal;
    json_t *v = ctf_api_view(api, shown);
    if (v && !kop_meta_is_deleting(shown))
        json_object_set_new(v, "state", json_string(CTF_STATE_STOPPING));
    ret = ctf_api_send_json(api, conn, rq, 202, v, NULL);
    json_decref(v);
out:
    json_decref(gone);
    json_decref(chal);
    return ret;
}

/*
 * renew_once computes the next expiry of the Challenge as the apiserver has
 * it and patches it, guarded by its resourceVersion. *at_limit tells a
 * KOP_ECONFLICT of ctf_renew (nothing left to extend) from the apiserver's.
 */
static kop_err renew_once(ctf_api *api, const char *name, const json_t *def, json_t **out,
                          bool *at_limit, kop_status *st)
{
    kop_client *c = kop_manager_client(api->op->mgr);
    const char *ns = api->opts.challenge_namespace;
    const json_t *spec = json_object_get(def, "spec");
    json_t *chal = NULL, *patch = NULL;
    time_t created, expires, next;
    char ts[CTF_TIME_SIZE];
    kop_err err;

    if ((err = kop_get(c, &CTF_CHALLENGES, ns, name, &chal, st)))
        goto out;
    if (kop_meta_is_deleting(chal)) {
        err = KOP_ESHUTDOWN;
        goto out;
    }
    const char *cs =
        json_string_value(json_object_get(json_object_get(chal, "metadata"), "creationTimestamp"));
    if (!cs || ctf_parse_time(cs, &created) != KOP_OK) {
        err = KOP_EPARSE;
        goto out;
    }
    if ((err = ctf_expiry(created, spec, ctf_str2(chal, "spec", "expiresAt"), &expires, st)))
        goto out;
    if ((err = ctf_renew(created, expires, spec, &next, st))) {
        *at_limit = err == KOP_ECONFLICT;
        goto out;
    }
    if ((err = ctf_format_time(next, ts)))
        goto out;
    patch = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "resourceVersion",
                      kop_meta_resource_version(chal), "spec", "expiresAt", ts);
    kop_patch_req req = {
        .target = {&CTF_CHALLENGES, ns, name}, .type = KOP_PATCH_MERGE, .patch = patch};
    err = patch ? kop_patch_object(c, &req, out, st) : KOP_ENOMEM;
out:
    json_decref(patch);
    json_decref(chal);
    return err;
}

enum MHD_Result ctf_api_renew_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    bool asked;
    json_t *chal = find_for_write(api, rq, &asked), *def = NULL, *renewed = NULL;
    kop_status st;
    kop_err err = KOP_ECONFLICT;
    bool at_limit = false;
    enum MHD_Result ret;
    if (!chal)
        return not_found(api, conn, rq, asked);
    if (kop_meta_is_deleting(chal)) {
        ret = ctf_api_stopping(api, conn, rq);
        goto out;
    }
    if (!(def = ctf_api_definition(api, rq->route.challenge))) {
        ret = ctf_api_send_error(api, conn, rq, 404, "NotFound", "the challenge is gone", NULL);
        goto out;
    }
    /* A conflict here is the apiserver's (someone wrote in between): try again. */
    for (int i = 0; i < RENEW_ATTEMPTS && err == KOP_ECONFLICT && !at_limit; i++) {
        kop_status_clear(&st);
        err = renew_once(api, kop_meta_name(chal), def, &renewed, &at_limit, &st);
    }
    if (err == KOP_OK) {
        if (rq->route.kind == CTF_ROUTE_ADMIN_RENEW)
            admin_event(api, renewed, "AdminExtend", "Extend", "extended", "extend instance");
        json_t *v = ctf_api_instance_view(renewed, def, time(NULL));
        ret = ctf_api_send_json(api, conn, rq, 200, v, NULL);
        json_decref(v);
    } else if (at_limit) {
        ret = ctf_api_send_error(
            api, conn, rq, 409, "RenewLimitReached",
            "the instance already runs until the latest time its challenge allows", NULL);
    } else if (err == KOP_ESHUTDOWN) {
        ret = ctf_api_stopping(api, conn, rq);
    } else {
        ret = ctf_api_send_apiserver_error(api, conn, rq, err, &st);
    }
out:
    json_decref(renewed);
    json_decref(def);
    json_decref(chal);
    return ret;
}

/*
 * admin_stop_many stops every instance of the route's team, or of its
 * challenge, in the challenge namespace, as the cache shows them: each
 * stop is an Event AdminStop naming the bulk action. One that fails does
 * not stop the others; the answer counts both and lists the Instances
 * stopped (state Stopping), sorted as the cache's index gives them.
 */
enum MHD_Result ctf_api_admin_stop_many(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    bool by_team = rq->route.kind == CTF_ROUTE_ADMIN_STOP_TEAM;
    const char *name = by_team ? rq->route.team : rq->route.challenge;
    json_t *all = NULL, *list = json_array(), *c;
    char what[CTF_CHALLENGE_SIZE + 64];
    size_t i;
    int failed = 0;
    enum MHD_Result ret;
    snprintf(what, sizeof what, "stop all of %s %s's", by_team ? "team" : "challenge", name);
    if (!list || kop_informer_by_index(api->op->challenges,
                                       by_team ? CTF_INDEX_TEAM : CTF_INDEX_DEFINITION, name, &all)) {
        json_decref(list);
        return ctf_api_send_unavailable(api, conn, rq, "cannot read the instances");
    }
    json_array_foreach(all, i, c)
    {
        kop_status st;
        json_t *gone = NULL;
        kop_status_clear(&st);
        if (strcmp(kop_meta_namespace(c), api->opts.challenge_namespace) != 0 ||
            kop_meta_is_deleting(c))
            continue;
        if (ctf_api_stop(api, c, &gone, &st) != KOP_OK) {
            failed++;
            continue;
        }
        admin_event(api, c, "AdminStop", "Stop", "stopped", what);
        json_t *v = ctf_api_view(api, c);
        if (v)
            json_object_set_new(v, "state", json_string(CTF_STATE_STOPPING));
        json_array_append_new(list, v);
        json_decref(gone);
    }
    json_decref(all);
    kop_log(KOP_LOG_INFO, "api stopped instances in bulk", KOP_LOG_STR("what", what),
            KOP_LOG_INT("stopped", (long long)json_array_size(list)), KOP_LOG_INT("failed", failed));
    json_t *v = json_pack("{s:I, s:i, s:o}", "stopped", (json_int_t)json_array_size(list), "failed",
                          failed, "instances", list);
    ret = v ? ctf_api_send_json(api, conn, rq, 202, v, NULL)
            : ctf_api_send_error(api, conn, rq, 500, "Internal", "out of memory", NULL);
    json_decref(v);
    return ret;
}

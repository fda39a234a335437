/*
 * flag.c - POST .../instances/{challenge}/flag: a CTF platform's
 * backend asks whether a submission is the team's flag (docs/api.md,
 * docs/ctfd.md). Only the admin token may ask, so the question never
 * reaches a participant's browser; the answer is a yes or no, never the
 * flag. It needs no running instance (a team may submit after stopping
 * one), and the flag is computed afresh from the definition and its key,
 * then compared in constant time and cleansed.
 *
 * Two things follow the answer:
 *   - flag attribution: a wrong submission of a dynamic-flag challenge is
 *     compared with the flag of every other team holding a Challenge of
 *     that definition in the cache (core/flag.c, ctf_flag_owner: one HMAC
 *     and a constant-time comparison per team, about 1.8 us each: 3.6 ms
 *     at 2,000 teams on the 2-core test machine, as test_ctf_flag measures
 *     it and docs/api.md says). A match is proof of sharing: the
 *     answer names the team ("sharedFrom"), ctf_flag_shared_total{challenge}
 *     counts it and a Warning Event FlagShared on the definition says who
 *     submitted whose flag. Only the admin token reaches this route, so no
 *     participant ever learns another team's name from it. A static flag
 *     is the same for every team and is never attributed.
 *   - stop on solve: a correct submission of a challenge whose definition
 *     says spec.stopOnSolve stops the team's instance (its quota slot
 *     frees when the Challenge is gone), with an Event StoppedOnSolve.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api/internal.h"

#define ATTRIBUTION_TEAMS_MAX 100000 /* teams tried for one submission; more are not */

/*
 * other_teams returns (owned) the distinct teams, other than team, holding
 * a Challenge of challenge in the challenge namespace, as a JSON object
 * used as a set (team -> true). NULL when out of memory or the cache fails.
 */
static json_t *other_teams(ctf_api *api, const char *challenge, const char *team)
{
    json_t *all = NULL, *set = json_object(), *c;
    size_t i;
    if (!set || kop_informer_by_index(api->op->challenges, CTF_INDEX_DEFINITION, challenge, &all)) {
        json_decref(set);
        return NULL;
    }
    json_array_foreach(all, i, c)
    {
        const char *t = ctf_str2(c, "spec", "team");
        if (!t || strcmp(t, team) == 0 ||
            strcmp(kop_meta_namespace(c), api->opts.challenge_namespace) != 0 ||
            json_object_size(set) >= ATTRIBUTION_TEAMS_MAX)
            continue;
        json_object_set_new(set, t, json_true());
    }
    json_decref(all);
    return set;
}

/*
 * attribute finds whose flag a wrong submission is: copies the team into
 * from (size bytes) and returns true when another team's; false when
 * nobody's or it cannot tell (logged: attribution is best effort, the
 * answer correct:false stands either way).
 */
static bool attribute(ctf_api *api, const json_t *def, const request *rq, const char *submission,
                      char *from, size_t size)
{
    json_t *set = NULL;
    const char **teams = NULL, *t;
    json_t *v;
    size_t n = 0, owner = CTF_FLAG_NO_OWNER;
    kop_status st;
    kop_status_clear(&st);
    if (!ctf_flag_secret_ref(def, NULL, NULL))
        return false; /* static or none: never attributed */
    if (!(set = other_teams(api, rq->route.challenge, rq->route.team)) ||
        !(teams = calloc(json_object_size(set) + 1, sizeof *teams)))
        goto out;
    json_object_foreach(set, t, v) teams[n++] = t;
    kop_err err = ctf_team_flag_owner(api->op, def, teams, n, submission, &owner, &st);
    if (err) {
        kop_log(KOP_LOG_WARN, "flag attribution failed", KOP_LOG_STR("challenge", rq->route.challenge),
                KOP_LOG_STR("error", st.message[0] ? st.message : kop_strerror(err)));
        owner = CTF_FLAG_NO_OWNER;
    }
    if (owner != CTF_FLAG_NO_OWNER)
        snprintf(from, size, "%s", teams[owner]);
out:
    free(teams);
    json_decref(set);
    return owner != CTF_FLAG_NO_OWNER;
}

/* record_shared counts and reports a shared flag: the metric, an Event, a log line. */
static void record_shared(ctf_api *api, const json_t *def, const request *rq, const char *from)
{
    const char *labels[] = {rq->route.challenge, NULL};
    kop_metric_inc(api->flag_shared, labels);
    kop_event(api->op->events,
              &(kop_event_req){.object = def, .type = KOP_EVENT_WARNING, .reason = "FlagShared",
                               .action = "CheckFlag"},
              "team %s submitted the flag of team %s for %s", rq->route.team, from,
              rq->route.challenge);
    kop_log(KOP_LOG_INFO, "a shared flag was submitted", KOP_LOG_STR("team", rq->route.team),
            KOP_LOG_STR("shared_from", from), KOP_LOG_STR("challenge", rq->route.challenge));
}

/* stop_on_solve stops the team's instance after a correct flag when def asks; true if it did. */
static bool stop_on_solve(ctf_api *api, const json_t *def, const request *rq)
{
    if (!json_is_true(json_object_get(json_object_get(def, "spec"), "stopOnSolve")))
        return false;
    json_t *chal = ctf_api_find_instance(api, rq->route.team, rq->route.challenge);
    kop_status st;
    kop_status_clear(&st);
    bool stopped = false;
    if (chal && !kop_meta_is_deleting(chal)) {
        kop_err err = ctf_api_stop(api, chal, NULL, &st);
        stopped = err == KOP_OK;
        if (stopped)
            kop_event(api->op->events,
                      &(kop_event_req){.object = chal, .reason = "StoppedOnSolve", .action = "Stop"},
                      "team %s solved %s: its instance is stopped (stopOnSolve)", rq->route.team,
                      rq->route.challenge);
        else
            kop_log(KOP_LOG_WARN, "stop on solve failed", KOP_LOG_STR("team", rq->route.team),
                    KOP_LOG_STR("challenge", rq->route.challenge),
                    KOP_LOG_STR("error", st.message[0] ? st.message : kop_strerror(err)));
    }
    json_decref(chal);
    return stopped;
}

enum MHD_Result ctf_api_check_flag(ctf_api *api, mhd_conn *conn, request *rq,
                                   const char *submission)
{
    char msg[CTF_CHALLENGE_SIZE + 96], from[CTF_TEAM_SIZE] = "", *flag = NULL;
    kop_status st;
    enum MHD_Result ret;
    json_t *v = NULL;
    kop_status_clear(&st);

    json_t *def = ctf_api_definition(api, rq->route.challenge);
    if (!def) {
        snprintf(msg, sizeof msg, "no challenge named %s", rq->route.challenge);
        return ctf_api_send_error(api, conn, rq, 404, "NotFound", msg, NULL);
    }
    kop_err err = ctf_team_flag(api->op, def, rq->route.team, &flag, &st);
    if (err == KOP_ENOMEM) {
        ret = ctf_api_send_error(api, conn, rq, 500, "Internal", "out of memory", NULL);
        goto out;
    }
    if (err) {
        ret = ctf_api_send_error(api, conn, rq, 409, "InvalidDefinition", st.message, NULL);
        goto out;
    }
    if (!flag) {
        snprintf(msg, sizeof msg, "%s has no flag the operator knows; check it in the platform",
                 rq->route.challenge);
        ret = ctf_api_send_error(api, conn, rq, 409, "NoFlag", msg, NULL);
        goto out;
    }
    bool correct = ctf_api_token_equal(submission, (const unsigned char *)flag, strlen(flag));
    OPENSSL_cleanse(flag, strlen(flag));
    free(flag);
    v = json_pack("{s:b}", "correct", correct);
    if (v && correct && stop_on_solve(api, def, rq))
        json_object_set_new(v, "stopped", json_true());
    if (v && !correct && attribute(api, def, rq, submission, from, sizeof from)) {
        record_shared(api, def, rq, from);
        json_object_set_new(v, "sharedFrom", json_string(from));
    }
    ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
            : ctf_api_send_error(api, conn, rq, 500, "Internal", "out of memory", NULL);
out:
    json_decref(v);
    json_decref(def);
    return ret;
}

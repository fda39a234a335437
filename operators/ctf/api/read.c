/*
 * read.c - the API's reads, all from the manager's informer caches: a
 * team's Instances (one per definition, the best ranked Challenge when
 * more than one claims it), the challenges on offer, and the GET routes.
 * Nothing here calls the apiserver.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"

bool ctf_api_synced(ctf_api *api)
{
    return kop_informer_has_synced(api->op->challenges) &&
           kop_informer_has_synced(api->op->definitions) && kop_informer_has_synced(api->secrets);
}

/* rank orders the candidates for a team's instance: live before stopping, sane before duplicate. */
static int rank(const json_t *chal)
{
    const json_t *status = json_object_get(chal, "status");
    const char *reason = json_string_value(json_object_get(status, "reason"));
    if (kop_meta_is_deleting(chal))
        return 0;
    return reason && strcmp(reason, "DuplicateInstance") == 0 ? 1 : 2;
}

/*
 * team_instances returns (owned) the team's Challenges in the challenge
 * namespace, one per definition (the best ranked), as an object keyed by
 * definition. NULL when out of memory.
 */
static json_t *team_instances(ctf_api *api, const char *team)
{
    json_t *all = NULL, *by_def = json_object(), *c;
    size_t i;
    if (!by_def || kop_informer_by_index(api->op->challenges, CTF_INDEX_TEAM, team, &all)) {
        json_decref(by_def);
        return NULL;
    }
    json_array_foreach(all, i, c)
    {
        const char *def = ctf_str2(c, "spec", "definition");
        if (!def || strcmp(kop_meta_namespace(c), api->opts.challenge_namespace) != 0)
            continue;
        json_t *had = json_object_get(by_def, def);
        if (!had || rank(c) > rank(had))
            json_object_set(by_def, def, c);
    }
    json_decref(all);
    return by_def;
}

/* find_instance returns (owned) the team's Challenge for challenge, or NULL. */
json_t *ctf_api_find_instance(ctf_api *api, const char *team, const char *challenge)
{
    json_t *mine = team_instances(api, team);
    json_t *c = json_incref(json_object_get(mine, challenge));
    json_decref(mine);
    return c;
}

/* definition returns (owned) the ChallengeDefinition named challenge, or NULL. */
json_t *ctf_api_definition(ctf_api *api, const char *challenge)
{
    json_t *def = NULL;
    if (kop_informer_dup(api->op->definitions, api->opts.challenge_namespace, challenge, &def))
        return NULL;
    return def;
}

/* view returns (owned) the Instance of chal, with its definition from the cache. */
json_t *ctf_api_view(ctf_api *api, const json_t *chal)
{
    const char *d = ctf_str2(chal, "spec", "definition");
    json_t *def = d ? ctf_api_definition(api, d) : NULL;
    json_t *v = ctf_api_instance_view(chal, def, time(NULL));
    json_decref(def);
    return v;
}

/* team_views returns (owned) {"team": team, "instances": [...]} sorted by challenge. */
json_t *ctf_api_team_views(ctf_api *api, const char *team, bool admin)
{
    json_t *mine = team_instances(api, team), *list = json_array();
    json_t *out = list ? json_pack("{s:s, s:o}", "team", team, "instances", list) : NULL;
    const char *key;
    json_t *c;
    if (!mine || !out) {
        json_decref(mine);
        json_decref(out);
        return NULL;
    }
    /* jansson keeps insertion order; sort the keys for a stable answer. */
    const char **keys = calloc(json_object_size(mine) + 1, sizeof *keys);
    size_t n = 0;
    json_object_foreach(mine, key, c) if (keys) keys[n++] = key;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        const json_t *chal = json_object_get(mine, keys[i]);
        json_t *view = ctf_api_view(api, chal);
        if (view && admin)
            json_object_set_new(view, "events", ctf_api_recent_events(api, kop_meta_uid(chal)));
        json_array_append_new(list, view);
    }
    free(keys);
    json_decref(mine);
    return out;
}

enum MHD_Result ctf_api_get_whoami(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *v =
        json_pack("{s:o, s:b}", "team", rq->who.admin ? json_null() : json_string(rq->who.team),
                  "admin", rq->who.admin);
    enum MHD_Result ret = ctf_api_send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

static int by_name(const void *a, const void *b)
{
    const char *x = kop_meta_name(*(json_t *const *)a), *y = kop_meta_name(*(json_t *const *)b);
    return strcmp(x ? x : "", y ? y : "");
}

enum MHD_Result ctf_api_get_challenges(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *defs = NULL, *list = json_array();
    if (!list || kop_informer_list(api->op->definitions, api->opts.challenge_namespace, &defs)) {
        json_decref(list);
        return ctf_api_send_unavailable(api, conn, rq, "cannot read the definitions");
    }
    size_t n = json_array_size(defs);
    json_t **sorted = calloc(n + 1, sizeof *sorted);
    for (size_t i = 0; sorted && i < n; i++)
        sorted[i] = json_array_get(defs, i);
    if (sorted)
        qsort(sorted, n, sizeof *sorted, by_name);
    for (size_t i = 0; sorted && i < n; i++)
        json_array_append_new(list, ctf_api_challenge_view(sorted[i]));
    free(sorted);
    json_decref(defs);
    json_t *v = json_pack("{s:o}", "challenges", list);
    enum MHD_Result ret = ctf_api_send_json(api, conn, rq, 200, v, NULL);
    json_decref(v);
    return ret;
}

enum MHD_Result ctf_api_get_instances(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *v = ctf_api_team_views(api, rq->route.team, false);
    enum MHD_Result ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
                            : ctf_api_send_unavailable(api, conn, rq, "cannot read the instances");
    json_decref(v);
    return ret;
}

/* get_instance answers from the cache of views (views.c): a poll costs a copy. */
enum MHD_Result ctf_api_get_instance(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    bool missing = false;
    char *text = ctf_api_views_answer(api, rq->route.team, rq->route.challenge, &missing);
    if (missing)
        return ctf_api_no_instance(api, conn, rq);
    if (!text)
        return ctf_api_send_unavailable(api, conn, rq, "cannot read the instance");
    return ctf_api_send_body(api, conn, rq, 200, "application/json", text, strlen(text),
                             MHD_RESPMEM_MUST_FREE, NULL);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * all_views: the teams holding a Challenge in the challenge namespace are
 * collected first, then each team's Instances are read as its own page
 * reads them (ctf_api_team_views), so the admin sees exactly what each
 * team sees, one Instance per team and challenge, and its last Events.
 */
json_t *ctf_api_all_views(ctf_api *api)
{
    json_t *chals = NULL, *teams = json_object(), *list = json_array(), *c, *v;
    const char **names = NULL, *t;
    size_t i, n = 0;
    json_t *out = NULL;
    if (!teams || !list ||
        kop_informer_list(api->op->challenges, api->opts.challenge_namespace, &chals))
        goto out;
    json_array_foreach(chals, i, c)
    {
        const char *team = ctf_str2(c, "spec", "team");
        if (team)
            json_object_set_new(teams, team, json_true());
    }
    if (!(names = calloc(json_object_size(teams) + 1, sizeof *names)))
        goto out;
    json_object_foreach(teams, t, v) names[n++] = t;
    qsort(names, n, sizeof *names, by_string);
    for (i = 0; i < n; i++) {
        json_t *mine = ctf_api_team_views(api, names[i], true);
        if (!mine)
            goto out;
        json_array_extend(list, json_object_get(mine, "instances"));
        json_decref(mine);
    }
    out = json_pack("{s:O}", "instances", list);
out:
    free(names);
    json_decref(chals);
    json_decref(teams);
    json_decref(list);
    return out;
}

enum MHD_Result ctf_api_get_admin_instances(ctf_api *api, struct MHD_Connection *conn,
                                            request *rq)
{
    json_t *v = ctf_api_all_views(api);
    if (v) {
        json_object_set_new(v, "limits",
                            json_pack("{s:i, s:i}", "maxInstances", api->op->max_instances,
                                      "maxInstancesPerTeam", api->op->max_per_team));
        json_object_set_new(v, "summary", ctf_api_admin_summary(api));
    }
    enum MHD_Result ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
                            : ctf_api_send_unavailable(api, conn, rq, "cannot read the instances");
    json_decref(v);
    return ret;
}

/* ---- the console's summary -------------------------------------------------- */

/* count_of returns obj[key] as an integer, or -1 when it is not one. */
static json_int_t count_of(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* bump adds one to row[key]. */
static void bump(json_t *row, const char *key)
{
    json_object_set_new(row, key, json_integer(json_integer_value(json_object_get(row, key)) + 1));
}

/* definition_row returns (owned) a definition's row, every count 0, its pool from status.pool. */
static json_t *definition_row(const char *name, const json_t *def)
{
    const json_t *pool = ctf_get2(def, "status", "pool");
    json_t *p = json_null();
    if (json_is_object(pool)) {
        json_decref(p);
        p = json_pack("{s:I, s:I, s:I, s:I}", "target", count_of(pool, "target"), "size",
                      count_of(pool, "size"), "ready", count_of(pool, "ready"), "claimed",
                      count_of(pool, "claimed"));
    }
    const char *title = ctf_str2(def, "spec", "title");
    return json_pack("{s:s, s:o, s:b, s:i, s:i, s:i, s:i, s:o}", "name", name, "title",
                     title ? json_string(title) : json_null(), "exists", def != NULL, "running", 0,
                     "starting", 0, "failed", 0, "stopping", 0, "pool", p ? p : json_null());
}

/* state_key: the summary's counter of a page state. */
static const char *state_key(const char *state)
{
    if (strcmp(state, CTF_STATE_RUNNING) == 0)
        return "running";
    if (strcmp(state, CTF_STATE_ERROR) == 0)
        return "failed";
    if (strcmp(state, CTF_STATE_STOPPING) == 0)
        return "stopping";
    return "starting";
}

/* sorted_values returns (owned) the values of obj (rows keyed by name) sorted by key. */
static json_t *sorted_values(json_t *obj)
{
    json_t *out = json_array(), *v;
    const char *k;
    size_t n = 0;
    const char **keys = out ? calloc(json_object_size(obj) + 1, sizeof *keys) : NULL;
    if (!keys) {
        json_decref(out);
        return NULL;
    }
    json_object_foreach(obj, k, v) keys[n++] = k;
    qsort(keys, n, sizeof *keys, by_string);
    for (size_t i = 0; i < n; i++)
        json_array_append(out, json_object_get(obj, keys[i]));
    free(keys);
    return out;
}

/*
 * quota_teams returns (owned) the names of the teams of teams (an object
 * keyed by team) whose admitted instances reach --max-instances-per-team,
 * sorted, at most QUOTA_TEAMS_MAX of them; *count is how many there are.
 */
static json_t *quota_teams(ctf_api *api, json_t *teams, int *count)
{
    json_t *at = json_object(), *v, *out;
    const char *t;
    *count = 0;
    if (!at)
        return NULL;
    json_object_foreach(teams, t, v)
    {
        if (api->op->max_per_team > 0 &&
            ctf_admission_count(api->op->admission, api->opts.challenge_namespace, t) >=
                api->op->max_per_team) {
            json_object_set_new(at, t, json_string(t));
            ++*count;
        }
    }
    out = sorted_values(at);
    json_decref(at);
    while (out && json_array_size(out) > QUOTA_TEAMS_MAX)
        json_array_remove(out, json_array_size(out) - 1);
    return out;
}

/*
 * admin_summary: the rows start from the definitions in the cache (a
 * definition without instances shows zeros); a Challenge of a definition
 * that is gone adds a row of its own (exists false). Every Challenge in the
 * challenge namespace counts once, in its page state (views.c), including
 * duplicates and those refused for quota (failed): the panel counts what
 * the cluster holds, the list one Instance per team and challenge.
 */
json_t *ctf_api_admin_summary(ctf_api *api)
{
    const char *ns = api->opts.challenge_namespace;
    json_t *defs = NULL, *chals = NULL, *rows = json_object(), *teams = json_object();
    json_t *totals = json_pack("{s:i, s:i, s:i, s:i}", "running", 0, "starting", 0, "failed", 0,
                               "stopping", 0);
    json_t *out = NULL, *c, *list = NULL, *quota = NULL;
    size_t i;
    int nquota = 0;
    if (!rows || !teams || !totals || kop_informer_list(api->op->definitions, ns, &defs) ||
        kop_informer_list(api->op->challenges, ns, &chals))
        goto out;
    json_array_foreach(defs, i, c)
    {
        const char *name = kop_meta_name(c);
        if (name)
            json_object_set_new(rows, name, definition_row(name, c));
    }
    json_array_foreach(chals, i, c)
    {
        const char *def = ctf_str2(c, "spec", "definition"), *team = ctf_str2(c, "spec", "team");
        if (!def || !team)
            continue;
        json_t *row = json_object_get(rows, def);
        if (!row && json_object_set_new(rows, def, definition_row(def, NULL)) == 0)
            row = json_object_get(rows, def);
        const char *key = state_key(ctf_api_state(c));
        if (row)
            bump(row, key);
        bump(totals, key);
        json_object_set_new(teams, team, json_true());
    }
    if (!(list = sorted_values(rows)) || !(quota = quota_teams(api, teams, &nquota)))
        goto out;
    ctf_admission *a = api->op->admission;
    int admitted = ctf_admission_count(a, ns, NULL), warm = ctf_admission_warm(a, NULL);
    json_object_set_new(totals, "instances", json_integer(admitted));
    json_object_set_new(totals, "warm", json_integer(warm));
    json_object_set_new(totals, "maxInstances", json_integer(api->op->max_instances));
    json_object_set_new(totals, "room", json_integer(ctf_admission_room(a)));
    json_object_set_new(totals, "teams", json_integer((json_int_t)json_object_size(teams)));
    out = json_pack("{s:O, s:O, s:{s:i, s:i, s:O}}", "definitions", list, "totals", totals,
                    "quota", "maxInstancesPerTeam", api->op->max_per_team, "teamsAtQuota", nquota,
                    "teams", quota);
out:
    json_decref(defs);
    json_decref(chals);
    json_decref(rows);
    json_decref(teams);
    json_decref(totals);
    json_decref(list);
    json_decref(quota);
    return out;
}

enum MHD_Result ctf_api_get_admin_summary(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    json_t *v = ctf_api_admin_summary(api);
    enum MHD_Result ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
                            : ctf_api_send_unavailable(api, conn, rq, "cannot read the summary");
    json_decref(v);
    return ret;
}

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
json_t *ctf_api_team_views(ctf_api *api, const char *team)
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
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, ctf_api_view(api, json_object_get(mine, keys[i])));
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
    json_t *v = ctf_api_team_views(api, rq->route.team);
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
 * team sees, one Instance per team and challenge.
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
        json_t *mine = ctf_api_team_views(api, names[i]);
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
    if (v)
        json_object_set_new(v, "limits",
                            json_pack("{s:i, s:i}", "maxInstances", api->op->max_instances,
                                      "maxInstancesPerTeam", api->op->max_per_team));
    enum MHD_Result ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
                            : ctf_api_send_unavailable(api, conn, rq, "cannot read the instances");
    json_decref(v);
    return ret;
}

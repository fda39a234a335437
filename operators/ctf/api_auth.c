/*
 * api_auth.c - who is asking, and how fast a team may write.
 *
 * Tokens are read from the Secret cache per request (so a rotated token
 * takes effect at the next request), compared in constant time (every
 * team's key is compared, whichever matches, so the time taken does not
 * tell which one did) and cleansed after. No token is ever logged.
 *
 * The write budget is a token bucket per team (ctf_bucket, api_core.c),
 * kept in a table of MAX_BUCKETS under api->lock; full buckets are
 * forgotten when room is needed, since a full bucket is the same as none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api_internal.h"

/* secret_matches tells whether data[key] of secret equals token (constant time). */
static bool secret_matches(const json_t *secret, const char *key, const char *token)
{
    unsigned char *want = NULL;
    size_t len = 0;
    bool same = false;
    if (ctf_secret_value(secret, key, &want, &len) == KOP_OK)
        same = ctf_api_token_equal(token, want, len);
    else
        (void)ctf_api_token_equal(token, NULL, 0); /* the same work either way */
    if (want) {
        OPENSSL_cleanse(want, len);
        free(want);
    }
    return same;
}

/*
 * authenticate finds whose token the Authorization header carries. Every
 * team key is compared, whichever matches, so the time taken does not tell
 * which one did. False when nobody's.
 */
bool ctf_api_authenticate(ctf_api *api, const char *header, principal *who)
{
    char token[CTF_API_TOKEN_MAX + 1];
    json_t *admin = NULL, *teams = NULL;
    const char *key;
    json_t *v;
    bool found = false;

    memset(who, 0, sizeof *who);
    if (!ctf_api_bearer(header, token, sizeof token))
        return false;
    const char *ns = api->opts.system_namespace;
    if (kop_informer_dup(api->secrets, ns, ADMIN_SECRET, &admin) == KOP_OK &&
        secret_matches(admin, ADMIN_KEY, token)) {
        who->admin = true;
        found = true;
    }
    if (kop_informer_dup(api->secrets, ns, TEAMS_SECRET, &teams) == KOP_OK) {
        json_object_foreach(json_object_get(teams, "data"), key, v)
        {
            bool valid = kop_meta_is_valid_dns1123_label(key);
            if (secret_matches(teams, key, token) && valid && !found) {
                snprintf(who->team, sizeof who->team, "%s", key);
                found = true;
            }
        }
    }
    OPENSSL_cleanse(token, sizeof token);
    json_decref(admin);
    json_decref(teams);
    return found;
}

/*
 * spend takes one write from team's bucket; false with *retry_s set when
 * it is empty. Full buckets are forgotten when room is needed: a full
 * bucket is the same as none.
 */
bool ctf_api_spend(ctf_api *api, const char *team, int *retry_s)
{
    int burst = api->opts.team_burst, rate = api->opts.team_per_minute;
    int64_t now = kop_mono_ms();
    struct team_bucket *tb = NULL;
    bool ok;

    pthread_mutex_lock(&api->lock);
    for (size_t i = 0; i < api->nbuckets && !tb; i++)
        if (strcmp(api->buckets[i].team, team) == 0)
            tb = &api->buckets[i];
    if (!tb && api->nbuckets == MAX_BUCKETS) {
        for (size_t i = 0; i < api->nbuckets; i++)
            if (ctf_bucket_full(&api->buckets[i].b, burst, rate, now))
                api->buckets[i--] = api->buckets[--api->nbuckets];
    }
    if (!tb && api->nbuckets < MAX_BUCKETS) {
        tb = &api->buckets[api->nbuckets++];
        memset(tb, 0, sizeof *tb);
        snprintf(tb->team, sizeof tb->team, "%s", team);
    }
    if (tb) {
        ok = ctf_bucket_take(&tb->b, burst, rate, now, retry_s);
    } else {
        ok = false; /* 4096 teams writing at full speed: shed load */
        *retry_s = 60 / (rate > 0 ? rate : 1) + 1;
    }
    pthread_mutex_unlock(&api->lock);
    return ok;
}

/*
 * api_auth.c - who is asking, and how fast a team may write.
 *
 * Tokens come from the token Secrets through a table of their SHA-256
 * digests (ctf_token_table, api_core.c) made once per change of those
 * Secrets, not per request: their handler bumps api->token_gen after the
 * cache has the change, and the first request that sees a newer
 * generation rebuilds the table, so a rotated token takes effect at the
 * next request, as before. A request hashes the token it presents once and
 * compares the digest with the admin's and every team's in constant time
 * (whichever matches, so the time taken does not tell which one did). No
 * token is ever logged.
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

/* rebuild makes the table from the token Secrets in the cache, as of generation gen. */
static void rebuild(ctf_api *api, uint64_t gen)
{
    json_t *admin = NULL, *teams = NULL;
    ctf_token_table *t = NULL;
    const char *ns = api->opts.system_namespace;
    kop_err a = kop_informer_dup(api->secrets, ns, ADMIN_SECRET, &admin);
    kop_err b = kop_informer_dup(api->secrets, ns, TEAMS_SECRET, &teams);
    bool read = (a == KOP_OK || a == KOP_ENOTFOUND) && (b == KOP_OK || b == KOP_ENOTFOUND);
    if (read && ctf_token_table_build(admin, teams, &t) == KOP_OK) {
        ctf_token_table_free(api->tokens);
        api->tokens = t;
        api->tokens_gen = gen;
    } else { /* nobody is let in on Secrets half read; the next request tries again */
        ctf_token_table_free(api->tokens);
        api->tokens = NULL;
    }
    json_decref(admin);
    json_decref(teams);
}

/* current_gen reads api->token_gen (bumped by the token Secrets' handler). */
static uint64_t current_gen(ctf_api *api)
{
    pthread_mutex_lock(&api->lock);
    uint64_t gen = api->token_gen;
    pthread_mutex_unlock(&api->lock);
    return gen;
}

bool ctf_api_authenticate(ctf_api *api, const char *header, principal *who)
{
    char token[CTF_API_TOKEN_MAX + 1];
    bool found = false;

    memset(who, 0, sizeof *who);
    if (!ctf_api_bearer(header, token, sizeof token))
        return false;
    uint64_t gen = current_gen(api); /* read before the cache: a later change rebuilds again */
    pthread_rwlock_rdlock(&api->tokens_lock);
    if (!api->tokens || api->tokens_gen != gen) {
        pthread_rwlock_unlock(&api->tokens_lock);
        pthread_rwlock_wrlock(&api->tokens_lock);
        if (!api->tokens || api->tokens_gen != gen)
            rebuild(api, gen);
    }
    found = ctf_token_table_match(api->tokens, token, &who->admin, who->team);
    who->token_gen = api->tokens_gen; /* the generation this answer holds for */
    pthread_rwlock_unlock(&api->tokens_lock);
    OPENSSL_cleanse(token, sizeof token);
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

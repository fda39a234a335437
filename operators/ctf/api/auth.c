/*
 * auth.c - who is asking, and how fast a team may write.
 *
 * Tokens come from the token Secrets through a table of their SHA-256
 * digests (ctf_token_table, below) made once per change of those
 * Secrets, not per request: their handler bumps api->token_gen after the
 * cache has the change, and the first request that sees a newer
 * generation rebuilds the table, so a rotated token takes effect at the
 * next request, as before. A request hashes the token it presents once and
 * finds the keys of that digest through an open-addressing index keyed by
 * the digest's first bytes, then compares whole digests in constant time.
 * It used to compare the digest with every team's (1,001 comparisons a
 * request at 1,000 teams: the read path's cost grew with the teams). What
 * the time taken can tell is where the presented token's own digest falls
 * in the index, which SHA-256 makes independent of every valid token: it
 * says nothing of them, as a comparison of every key said nothing. No
 * token is ever logged.
 *
 * The write budget is a token bucket per team (ctf_bucket, below),
 * kept in a table of MAX_BUCKETS under api->lock; full buckets are
 * forgotten when room is needed, since a full bucket is the same as none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "api/auth.h"
#include "api/internal.h"
#include "core/flag.h"

/* ---- tokens ----------------------------------------------------------------- */

bool ctf_api_bearer(const char *header, char *out, size_t size)
{
    if (!out || size == 0)
        return false;
    out[0] = '\0';
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *t = header + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == ' ')
        n--;
    if (n == 0 || n > CTF_API_TOKEN_MAX || n >= size)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    memcpy(out, t, n);
    out[n] = '\0';
    return true;
}

bool ctf_api_token_equal(const char *presented, const unsigned char *expected, size_t expected_len)
{
    unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
    const char *p = presented ? presented : "";
    SHA256((const unsigned char *)p, strlen(p), a);
    SHA256(expected ? expected : (const unsigned char *)"", expected ? expected_len : 0, b);
    bool same = CRYPTO_memcmp(a, b, sizeof a) == 0;
    OPENSSL_cleanse(a, sizeof a);
    OPENSSL_cleanse(b, sizeof b);
    return same && expected_len > 0 && p[0] != '\0';
}

/* ---- the token table ------------------------------------------------------- */

struct token_key {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    bool usable;              /* a non-empty token of a valid name */
    char team[CTF_TEAM_SIZE]; /* "" for the admin's key */
};

struct ctf_token_table {
    size_t n;                /* keys[0] is the admin's */
    size_t mask;             /* index has mask + 1 slots, a power of two over 2n */
    int32_t *index;          /* the usable keys' positions in keys, by digest; -1: empty */
    struct token_key keys[]; /* n of them */
};

/* slot_of is where digest d's probe begins. */
static size_t slot_of(const ctf_token_table *t, const unsigned char *d)
{
    uint64_t h;
    memcpy(&h, d, sizeof h); /* the digest is uniform: its first bytes are a hash */
    return (size_t)h & t->mask;
}

/* index_keys puts every usable key into t's index, the admin's first (a match prefers it). */
static kop_err index_keys(ctf_token_table *t)
{
    size_t slots = 16;
    while (slots < 2 * t->n)
        slots *= 2;
    t->mask = slots - 1;
    t->index = malloc(slots * sizeof *t->index);
    if (!t->index)
        return KOP_ENOMEM;
    for (size_t i = 0; i < slots; i++)
        t->index[i] = -1;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->keys[i].usable)
            continue;
        size_t s = slot_of(t, t->keys[i].digest);
        while (t->index[s] >= 0)
            s = (s + 1) & t->mask;
        t->index[s] = (int32_t)i;
    }
    return KOP_OK;
}

/* set_key hashes data[key] of secret into k; usable only when it decodes to a non-empty token. */
static kop_err set_key(struct token_key *k, const json_t *secret, const char *key, bool valid_name)
{
    unsigned char *tok = NULL;
    size_t len = 0;
    kop_err err = secret ? ctf_secret_value(secret, key, &tok, &len) : KOP_ENOTFOUND;
    if (err == KOP_ENOMEM)
        return err;
    SHA256(tok ? tok : (const unsigned char *)"", tok ? len : 0, k->digest);
    k->usable = err == KOP_OK && len > 0 && valid_name;
    if (tok) {
        OPENSSL_cleanse(tok, len);
        free(tok);
    }
    return KOP_OK;
}

kop_err ctf_token_table_build(const json_t *admin_secret, const json_t *teams_secret,
                              ctf_token_table **out)
{
    const json_t *data = json_object_get(teams_secret, "data");
    size_t nteams = json_is_object(data) ? json_object_size(data) : 0;
    ctf_token_table *t = calloc(1, sizeof *t + (nteams + 1) * sizeof t->keys[0]);
    const char *key;
    const json_t *v;
    kop_err err;
    *out = NULL;
    if (!t)
        return KOP_ENOMEM;
    t->n = 1;
    err = set_key(&t->keys[0], admin_secret, "token", true);
    json_object_foreach((json_t *)data, key, v)
    {
        if (err)
            break;
        struct token_key *k = &t->keys[t->n++];
        bool valid = kop_meta_is_valid_dns1123_label(key);
        snprintf(k->team, sizeof k->team, "%s", valid ? key : "");
        err = set_key(k, teams_secret, key, valid);
    }
    if (!err)
        err = index_keys(t);
    if (err) {
        ctf_token_table_free(t);
        return err;
    }
    *out = t;
    return KOP_OK;
}

bool ctf_token_table_match(const ctf_token_table *t, const char *presented, bool *admin, char *team)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    const char *p = presented ? presented : "";
    bool found = false;
    *admin = false;
    team[0] = '\0';
    if (!t || p[0] == '\0')
        return false;
    SHA256((const unsigned char *)p, strlen(p), d);
    /* The probe ends at an empty slot; the admin's key, indexed first, comes first. */
    for (size_t s = slot_of(t, d); t->index[s] >= 0 && !found; s = (s + 1) & t->mask) {
        const struct token_key *k = &t->keys[t->index[s]];
        if (CRYPTO_memcmp(d, k->digest, sizeof d) != 0)
            continue;
        if (t->index[s] == 0)
            *admin = true;
        else
            snprintf(team, CTF_TEAM_SIZE, "%s", k->team);
        found = true;
    }
    OPENSSL_cleanse(d, sizeof d);
    return found;
}

void ctf_token_table_free(ctf_token_table *t)
{
    if (!t)
        return;
    OPENSSL_cleanse(t->keys, t->n * sizeof t->keys[0]);
    free(t->index);
    free(t);
}

/* ---- write budget ----------------------------------------------------------- */

/* refill brings b up to now_ms. */
static void refill(ctf_bucket *b, int burst, int per_minute, int64_t now_ms)
{
    if (b->last_ms == 0) {
        b->tokens = burst;
    } else if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * per_minute / 60000.0;
        if (b->tokens > burst)
            b->tokens = burst;
    }
    if (now_ms > b->last_ms || b->last_ms == 0)
        b->last_ms = now_ms > 0 ? now_ms : 1;
}

bool ctf_bucket_take(ctf_bucket *b, int burst, int per_minute, int64_t now_ms, int *retry_after_s)
{
    if (burst < 1)
        burst = 1;
    if (per_minute < 1)
        per_minute = 1;
    refill(b, burst, per_minute, now_ms);
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return true;
    }
    if (retry_after_s) {
        double secs = (1.0 - b->tokens) * 60.0 / per_minute;
        *retry_after_s = secs < 1.0 ? 1 : (int)ceil(secs);
    }
    return false;
}

bool ctf_bucket_full(const ctf_bucket *b, int burst, int per_minute, int64_t now_ms)
{
    ctf_bucket c = *b;
    refill(&c, burst < 1 ? 1 : burst, per_minute < 1 ? 1 : per_minute, now_ms);
    return c.tokens >= burst;
}

/* ---- the API's callers ------------------------------------------------------ */

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

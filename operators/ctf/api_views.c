/*
 * api_views.c - the Instance views the API answered lately, so that a page
 * polling GET .../instances/{challenge} costs a copy of text, not a parse
 * of the Challenge and its definition out of the informers' caches.
 *
 * A view is kept as its JSON text without "secondsLeft", the one field
 * that changes with the clock; each answer appends it (a JSON object's
 * members are unordered, so the answer is the same Instance as a render).
 * Slots are direct-mapped by a hash of (team, challenge) and hold one view
 * each; a view of another key in the slot is a miss and is replaced.
 *
 * Staleness: each slot has a version, which the Challenge informer's
 * handler bumps (after the cache holds the change) for the team and
 * definition of every Challenge added, changed or deleted. A render reads
 * the version before it reads the caches and keeps its text only if the
 * version is unchanged after, so a change that lands during a render can
 * never hide behind the view rendered before it. A change of any
 * definition forgets every view at once (a generation). Relists call the
 * same handlers, so they forget what they change.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "core/duration.h"

#define VIEW_SLOTS 4096 /* a power of two; 24 bytes each, the views themselves ~0.4 KB */
#define KEY_MAX    (CTF_TEAM_SIZE + CTF_CHALLENGE_SIZE)

/* entry: one view; data holds the key (team '\0' challenge '\0'), then the text. */
struct entry {
    size_t key_len, text_len;
    time_t expires; /* for secondsLeft; 0: no expiry known */
    char data[];
};

struct slot {
    uint64_t version;  /* bumped by every change that may alter a view of this slot */
    uint64_t defs_gen; /* the definitions' generation e was rendered at */
    struct entry *e;   /* owned; NULL: none */
};

struct ctf_api_views {
    pthread_mutex_t lock; /* guards everything below */
    uint64_t defs_gen;    /* bumped by every change of a definition */
    struct slot slots[VIEW_SLOTS];
};

kop_err ctf_api_views_new(ctf_api_views **out)
{
    ctf_api_views *v = calloc(1, sizeof *v);
    *out = NULL;
    if (!v)
        return KOP_ENOMEM;
    pthread_mutex_init(&v->lock, NULL);
    *out = v;
    return KOP_OK;
}

void ctf_api_views_free(ctf_api_views *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < VIEW_SLOTS; i++)
        free(v->slots[i].e);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

/* make_key writes team '\0' challenge '\0' into key (KEY_MAX bytes); its length, 0 if too long. */
static size_t make_key(const char *team, const char *challenge, char *key)
{
    size_t a = strlen(team) + 1, b = strlen(challenge) + 1;
    if (a > CTF_TEAM_SIZE || b > CTF_CHALLENGE_SIZE)
        return 0;
    memcpy(key, team, a);
    memcpy(key + a, challenge, b);
    return a + b;
}

/* slot_of: the slot of a key (FNV-1a). */
static struct slot *slot_of(ctf_api_views *v, const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    return &v->slots[h & (VIEW_SLOTS - 1)];
}

/* ---- forgetting (the informers' handlers) --------------------------------------- */

/* forget bumps the slot of chal's team and definition, dropping its view. */
static void forget(ctf_api *api, const json_t *chal)
{
    const json_t *spec = json_object_get(chal, "spec");
    const char *team = json_string_value(json_object_get(spec, "team"));
    const char *def = json_string_value(json_object_get(spec, "definition"));
    char key[KEY_MAX];
    size_t len = team && def ? make_key(team, def, key) : 0;
    if (!len)
        return; /* no view is ever kept under such a key */
    ctf_api_views *v = api->views;
    struct slot *s = slot_of(v, key, len);
    pthread_mutex_lock(&v->lock);
    s->version++;
    free(s->e);
    s->e = NULL;
    pthread_mutex_unlock(&v->lock);
}

static void chal_added(const json_t *obj, void *user)
{
    forget(user, obj);
}

/* The old object names the same slot: spec.team and spec.definition are immutable (CEL). */
static void chal_updated(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    forget(user, new_obj);
}

kop_informer_handler ctf_api_views_challenge_handler(ctf_api *api)
{
    return (kop_informer_handler){chal_added, chal_updated, chal_added, api, KOP_OLD_UNUSED};
}

static void defs_changed(const json_t *obj, void *user)
{
    ctf_api_views *v = ((ctf_api *)user)->views;
    (void)obj;
    pthread_mutex_lock(&v->lock);
    v->defs_gen++;
    pthread_mutex_unlock(&v->lock);
}

static void def_updated(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    defs_changed(new_obj, user);
}

kop_informer_handler ctf_api_views_definition_handler(ctf_api *api)
{
    return (kop_informer_handler){defs_changed, def_updated, defs_changed, api, KOP_OLD_UNUSED};
}

/* ---- answering ---------------------------------------------------------------- */

/* answer_of returns (owned) e's text with "secondsLeft" as of now appended. */
static char *answer_of(const struct entry *e, time_t now)
{
    const char *text = e->data + e->key_len;
    char *out = e->text_len >= 2 ? malloc(e->text_len + 48) : NULL;
    if (!out)
        return NULL;
    memcpy(out, text, e->text_len - 1); /* all but the closing brace */
    const char *sep = text[e->text_len - 2] == '{' ? "" : ",";
    char *tail = out + e->text_len - 1;
    if (e->expires > 0)
        sprintf(tail, "%s\"secondsLeft\":%" PRId64 "}", sep,
                (int64_t)(e->expires > now ? e->expires - now : 0));
    else
        sprintf(tail, "%s\"secondsLeft\":null}", sep);
    return out;
}

/* make_entry turns a rendered view (its secondsLeft dropped here) into an entry for key. */
static struct entry *make_entry(json_t *view, const char *key, size_t key_len)
{
    time_t expires = 0;
    const char *exp = json_string_value(json_object_get(view, "expiresAt"));
    if (!exp || ctf_parse_time(exp, &expires) != KOP_OK)
        expires = 0;
    json_object_del(view, "secondsLeft");
    char *text = kop_meta_dumps(view, JSON_COMPACT);
    size_t n = text ? strlen(text) : 0;
    struct entry *e = text && n >= 2 ? malloc(sizeof *e + key_len + n + 1) : NULL;
    if (e) {
        e->key_len = key_len;
        e->text_len = n;
        e->expires = expires;
        memcpy(e->data, key, key_len);
        memcpy(e->data + key_len, text, n + 1);
    }
    free(text);
    return e;
}

/* render makes the entry for team's challenge from the informers; NULL with *missing when none. */
static struct entry *render(ctf_api *api, const char *team, const char *challenge, const char *key,
                            size_t key_len, bool *missing)
{
    json_t *chal = ctf_api_find_instance(api, team, challenge);
    if (!chal) {
        *missing = true;
        return NULL;
    }
    json_t *view = ctf_api_view(api, chal);
    json_decref(chal);
    struct entry *e = view ? make_entry(view, key, key_len) : NULL;
    json_decref(view);
    return e;
}

char *ctf_api_views_answer(ctf_api *api, const char *team, const char *challenge, bool *missing)
{
    ctf_api_views *v = api->views;
    char key[KEY_MAX];
    size_t key_len = make_key(team, challenge, key);
    time_t now = time(NULL);
    char *out = NULL;
    *missing = false;
    if (!key_len) { /* the router admits no such names; answer without keeping */
        struct entry *e = render(api, team, challenge, "", 0, missing);
        out = e ? answer_of(e, now) : NULL;
        free(e);
        return out;
    }
    struct slot *s = slot_of(v, key, key_len);
    pthread_mutex_lock(&v->lock);
    uint64_t version = s->version, gen = v->defs_gen;
    bool hit = s->e && s->defs_gen == gen && s->e->key_len == key_len &&
               memcmp(s->e->data, key, key_len) == 0;
    if (hit)
        out = answer_of(s->e, now);
    pthread_mutex_unlock(&v->lock);
    if (hit)
        return out;

    struct entry *e = render(api, team, challenge, key, key_len, missing);
    if (!e)
        return NULL;
    out = answer_of(e, now);
    pthread_mutex_lock(&v->lock);
    if (s->version == version && v->defs_gen == gen) { /* nothing changed while rendering */
        free(s->e);
        s->e = e;
        s->defs_gen = gen;
        e = NULL;
    }
    pthread_mutex_unlock(&v->lock);
    free(e);
    return out;
}

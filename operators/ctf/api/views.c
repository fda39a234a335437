/*
 * views.c - the Instance view: what a team's page shows of a Challenge
 * (ctf_api_instance_view, pure, see views.h), the one place where a
 * Challenge becomes what a page shows, so the page sees the same thing
 * whether it asked by a GET, a write or its event stream; and the views
 * the API answered lately, so that a page polling GET
 * .../instances/{challenge} costs a copy of text, not a parse of the
 * Challenge and its definition out of the informers' caches.
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

#include "api/internal.h"
#include "api/views.h"
#include "core/duration.h"
#include "core/json.h"

#define VIEW_SLOTS 4096 /* a power of two; 24 bytes each, the views themselves ~0.4 KB */

/* ---- views ------------------------------------------------------------------ */

const char *ctf_api_state(const json_t *chal)
{
    const char *phase = ctf_str2(chal, "status", "currentStatus");
    if (kop_meta_is_deleting(chal) || (phase && (strcmp(phase, "Terminating") == 0 ||
                                                 strcmp(phase, "Deleted") == 0)))
        return CTF_STATE_STOPPING;
    if (phase && strcmp(phase, "Error") == 0)
        return CTF_STATE_ERROR;
    if (phase && strcmp(phase, "Running") == 0)
        return CTF_STATE_RUNNING;
    return CTF_STATE_STARTING;
}

/* time_or_null returns t as an RFC 3339 JSON string, or null when t <= 0. */
static json_t *time_or_null(time_t t)
{
    char ts[CTF_TIME_SIZE];
    if (t <= 0 || ctf_format_time(t, ts) != KOP_OK)
        return json_null();
    return json_string(ts);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* expiry_of finds chal's expiry and its furthest renewal (0 when unknown). */
static void expiry_of(const json_t *chal, const json_t *def, time_t *expires, time_t *max)
{
    const json_t *spec = json_object_get(def, "spec");
    const char *created_s = ctf_str2(chal, "metadata", "creationTimestamp");
    const char *status_exp = ctf_str2(chal, "status", "expiresAt");
    time_t created = 0;
    ctf_lifetime lt;
    *expires = *max = 0;
    if (def && created_s && ctf_parse_time(created_s, &created) == KOP_OK &&
        ctf_lifetime_parse(spec, &lt, NULL) == KOP_OK &&
        ctf_expiry(created, spec, ctf_str2(chal, "spec", "expiresAt"), expires, NULL) == KOP_OK) {
        *max = created + (time_t)(lt.max_ms / 1000);
        return;
    }
    if (!status_exp || ctf_parse_time(status_exp, expires) != KOP_OK)
        *expires = 0;
}

json_t *ctf_api_instance_view(const json_t *chal, const json_t *def, time_t now)
{
    const json_t *status = json_object_get(chal, "status");
    const json_t *eps = json_object_get(status, "endpoints");
    const char *state = ctf_api_state(chal);
    const char *phase = json_string_value(json_object_get(status, "currentStatus"));
    time_t expires, max;
    expiry_of(chal, def, &expires, &max);
    bool renewable = max > 0 && expires < max && strcmp(state, CTF_STATE_STOPPING) != 0;

    return json_pack(
        "{s:o, s:o, s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "team",
        str_or_null(ctf_str2(chal, "spec", "team")), "challenge",
        str_or_null(ctf_str2(chal, "spec", "definition")), "name", str_or_null(kop_meta_name(chal)),
        "state", state, "status", phase ? phase : "None", "reason",
        str_or_null(json_string_value(json_object_get(status, "reason"))), "message",
        str_or_null(json_string_value(json_object_get(status, "message"))), "endpoints",
        json_is_array(eps) ? json_deep_copy(eps) : json_array(), "createdAt",
        str_or_null(ctf_str2(chal, "metadata", "creationTimestamp")), "startedAt",
        str_or_null(json_string_value(json_object_get(status, "startedAt"))), "expiresAt",
        time_or_null(expires), "maxExpiresAt", time_or_null(max), "secondsLeft",
        expires > 0 ? json_integer(expires > now ? (json_int_t)(expires - now) : 0) : json_null(),
        "renewable", renewable);
}

json_t *ctf_api_stopped_view(const char *team, const char *challenge)
{
    return json_pack("{s:s, s:s, s:n, s:s, s:n, s:n, s:n, s:[], s:n, s:n, s:n, s:n, s:n, s:b}",
                     "team", team, "challenge", challenge, "name", "state", CTF_STATE_STOPPED,
                     "status", "reason", "message", "endpoints", "createdAt", "startedAt",
                     "expiresAt", "maxExpiresAt", "secondsLeft", "renewable", 0);
}

char *ctf_api_view_key(const json_t *view)
{
    json_t *copy = json_copy((json_t *)view);
    if (!copy)
        return NULL;
    json_object_del(copy, "secondsLeft");
    char *key = kop_meta_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return key;
}

json_t *ctf_api_challenge_view(const json_t *def)
{
    const json_t *spec = json_object_get(def, "spec");
    const json_t *points = json_object_get(spec, "points");
    json_t *expose = json_array(), *lifetime = json_null();
    const json_t *e;
    size_t i;
    ctf_lifetime lt;

    json_array_foreach(json_object_get(spec, "expose"), i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type"));
        json_array_append_new(expose, json_pack("{s:o, s:s}", "name",
                                                str_or_null(json_string_value(
                                                    json_object_get(e, "name"))),
                                                "type", type ? type : "TCP"));
    }
    if (ctf_lifetime_parse(spec, &lt, NULL) == KOP_OK) {
        json_decref(lifetime);
        lifetime = json_pack("{s:I, s:I, s:I}", "default", (json_int_t)(lt.default_ms / 1000),
                             "max", (json_int_t)(lt.max_ms / 1000), "renewBy",
                             (json_int_t)(lt.renew_ms / 1000));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                     str_or_null(kop_meta_name(def)), "title",
                     str_or_null(json_string_value(json_object_get(spec, "title"))), "category",
                     str_or_null(json_string_value(json_object_get(spec, "category"))),
                     "description",
                     str_or_null(json_string_value(json_object_get(spec, "description"))),
                     "points", json_is_integer(points) ? json_copy((json_t *)points) : json_null(),
                     "expose", expose, "lifetimeSeconds", lifetime);
}

/* ---- the views answered lately ---------------------------------------------- */
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

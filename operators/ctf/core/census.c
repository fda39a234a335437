/*
 * core/census.c - the Challenges of each definition by the generation they
 * run (see census.h): uid -> {"def", "class"} and, per definition, a
 * counter per class ("updating", or the generation in decimal). Filing a
 * uid again first takes it out of its old class, so a resync or a missed
 * event never counts one Challenge twice.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kop/meta.h>

#include "core/admission.h"
#include "core/census.h"
#include "core/json.h"

#define CENSUS_UPDATING "updating"

struct ctf_census {
    pthread_mutex_t lock;
    json_t *filed; /* uid -> {"def": "<ns>/<definition>", "class": s} */
    json_t *defs;  /* "<ns>/<definition>" -> {class: count} */
};

kop_err ctf_census_new(ctf_census **out)
{
    ctf_census *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c || !(c->filed = json_object()) || !(c->defs = json_object())) {
        if (c)
            json_decref(c->filed);
        free(c);
        return KOP_ENOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return KOP_OK;
}

void ctf_census_free(ctf_census *c)
{
    if (!c)
        return;
    json_decref(c->filed);
    json_decref(c->defs);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* add_to adds delta to def's counter of class, dropping counters (and defs) at zero. Locked. */
static void add_to(ctf_census *c, const char *def, const char *class, int delta)
{
    json_t *counts = json_object_get(c->defs, def);
    if (!counts && delta > 0) {
        counts = json_object();
        if (!counts || json_object_set_new(c->defs, def, counts) != 0)
            return;
    }
    json_int_t n = json_integer_value(json_object_get(counts, class)) + delta;
    if (n > 0)
        json_object_set_new(counts, class, json_integer(n));
    else
        json_object_del(counts, class);
    if (counts && json_object_size(counts) == 0)
        json_object_del(c->defs, def);
}

/* unfile takes uid out of its class. Locked. */
static void unfile(ctf_census *c, const char *uid)
{
    json_t *was = json_object_get(c->filed, uid);
    if (!was)
        return;
    add_to(c, json_string_value(json_object_get(was, "def")),
           json_string_value(json_object_get(was, "class")), -1);
    json_object_del(c->filed, uid);
}

void ctf_census_seen(ctf_census *c, const json_t *chal)
{
    char def[CTF_TEAM_KEY_SIZE], class[24];
    const char *uid = kop_meta_uid(chal), *name = ctf_str2(chal, "spec", "definition");
    json_int_t runs = json_integer_value(ctf_get2(chal, "status", "definitionGeneration"));
    if (!uid)
        return;
    bool counted = name && !kop_meta_is_deleting(chal) &&
                   (size_t)snprintf(def, sizeof def, "%s/%s", kop_meta_namespace(chal), name) <
                       sizeof def;
    if (kop_streq(ctf_str2(chal, "status", "currentStatus"), "Updating"))
        snprintf(class, sizeof class, "%s", CENSUS_UPDATING);
    else
        snprintf(class, sizeof class, "%lld", (long long)(runs > 0 ? runs : 0));
    pthread_mutex_lock(&c->lock);
    unfile(c, uid);
    json_t *entry = counted ? json_pack("{s:s, s:s}", "def", def, "class", class) : NULL;
    if (entry && json_object_set_new(c->filed, uid, entry) == 0)
        add_to(c, def, class, 1);
    pthread_mutex_unlock(&c->lock);
}

void ctf_census_gone(ctf_census *c, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&c->lock);
    unfile(c, uid);
    pthread_mutex_unlock(&c->lock);
}

ctf_census_counts ctf_census_count(ctf_census *c, const char *ns, const char *name, int64_t gen)
{
    ctf_census_counts n = {0, 0, 0, 0};
    char def[CTF_TEAM_KEY_SIZE];
    const char *class;
    json_t *v;
    if (!ns || !name || (size_t)snprintf(def, sizeof def, "%s/%s", ns, name) >= sizeof def)
        return n;
    pthread_mutex_lock(&c->lock);
    json_object_foreach(json_object_get(c->defs, def), class, v)
    {
        int count = (int)json_integer_value(v);
        long long runs = strtoll(class, NULL, 10);
        n.total += count;
        if (strcmp(class, CENSUS_UPDATING) == 0)
            n.updating += count;
        else if (runs >= gen)
            n.current += count;
        else if (runs > 0)
            n.behind += count;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

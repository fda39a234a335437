/*
 * fresh.c - one quorum read of a definition shared by the claims of a
 * burst (see core/fresh.h for why a read that started after a Challenge
 * was first seen serves its claim).
 *
 * Per definition (a fixed table, CTF_FRESH_DEFINITIONS; when full, the
 * idle entry with the oldest read makes room): the last read that
 * succeeded, with its start time, and whether one is in flight, with its
 * start time. A claim takes the last read when it started late
 * enough, waits for the one in flight when that did, and otherwise starts
 * the next itself once no older read is in flight (one read per definition
 * at a time). A failed read keeps nothing: each claim that waited for it
 * then tries its own. Answers are deep copies, so no JSON is shared across
 * threads.
 *
 * The first sight of each Challenge is a table of uid -> time, capped
 * (CTF_FRESH_SEEN_MAX); a Challenge it could not keep gets "now", which is
 * always safe and only costs that claim its own read.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fresh.h"

#define KEY_SIZE 512 /* "namespace/name" */

struct entry {
    char key[KEY_SIZE]; /* "" : unused */
    bool has_done;      /* a read succeeded */
    int64_t done_start; /* when it started */
    json_t *done;       /* what it found (NULL: no such definition) */
    bool flight;        /* a read is in flight */
    int64_t flight_start;
};

struct ctf_fresh {
    pthread_mutex_t lock;
    pthread_cond_t read_done;
    struct entry defs[CTF_FRESH_DEFINITIONS];
    json_t *seen; /* uid -> first seen (ms) */
};

kop_err ctf_fresh_new(ctf_fresh **out)
{
    ctf_fresh *f = calloc(1, sizeof *f);
    if (!f)
        return KOP_ENOMEM;
    f->seen = json_object();
    if (!f->seen || pthread_mutex_init(&f->lock, NULL) != 0) {
        json_decref(f->seen);
        free(f);
        return KOP_ENOMEM;
    }
    if (pthread_cond_init(&f->read_done, NULL) != 0) {
        pthread_mutex_destroy(&f->lock);
        json_decref(f->seen);
        free(f);
        return KOP_ENOMEM;
    }
    *out = f;
    return KOP_OK;
}

void ctf_fresh_free(ctf_fresh *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < CTF_FRESH_DEFINITIONS; i++)
        json_decref(f->defs[i].done);
    json_decref(f->seen);
    pthread_cond_destroy(&f->read_done);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---- first sight of each Challenge ------------------------------------------ */

void ctf_fresh_seen(ctf_fresh *f, const char *uid, int64_t now_ms)
{
    if (!uid)
        return;
    pthread_mutex_lock(&f->lock);
    if (!json_object_get(f->seen, uid) && json_object_size(f->seen) < CTF_FRESH_SEEN_MAX)
        json_object_set_new(f->seen, uid, json_integer(now_ms));
    pthread_mutex_unlock(&f->lock);
}

void ctf_fresh_gone(ctf_fresh *f, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&f->lock);
    json_object_del(f->seen, uid);
    pthread_mutex_unlock(&f->lock);
}

int64_t ctf_fresh_since(ctf_fresh *f, const char *uid, int64_t now_ms)
{
    pthread_mutex_lock(&f->lock);
    json_t *t = uid ? json_object_get(f->seen, uid) : NULL;
    int64_t since = t ? (int64_t)json_integer_value(t) : now_ms;
    pthread_mutex_unlock(&f->lock);
    return since;
}

/* ---- the shared reads -------------------------------------------------------- */

/*
 * entry_of finds key's entry, or takes a free one, or else the idle one
 * whose last read is the oldest (a definition deleted, or not claimed from
 * for longest: it only costs its next claim a read of its own); NULL when
 * every entry has a read in flight (locked).
 */
static struct entry *entry_of(ctf_fresh *f, const char *key)
{
    struct entry *spare = NULL;
    for (size_t i = 0; i < CTF_FRESH_DEFINITIONS; i++) {
        struct entry *e = &f->defs[i];
        if (strcmp(e->key, key) == 0)
            return e;
        if (e->flight || (spare && !spare->key[0]))
            continue;
        if (!spare || !e->key[0] || e->done_start < spare->done_start)
            spare = e;
    }
    if (spare) {
        json_decref(spare->done);
        memset(spare, 0, sizeof *spare);
        snprintf(spare->key, sizeof spare->key, "%s", key);
    }
    return spare;
}

/* answer copies e's last read into *out (locked). */
static kop_err answer(const struct entry *e, json_t **out)
{
    *out = e->done ? json_deep_copy(e->done) : NULL;
    return e->done && !*out ? KOP_ENOMEM : KOP_OK;
}

kop_err ctf_fresh_definition(ctf_fresh *f, const char *ns, const char *name, int64_t since_ms,
                             ctf_fresh_read_fn read, void *user, int64_t (*clock)(void),
                             json_t **out)
{
    char key[KEY_SIZE];
    *out = NULL;
    if (snprintf(key, sizeof key, "%s/%s", ns ? ns : "", name) >= (int)sizeof key)
        return KOP_EINVAL;
    pthread_mutex_lock(&f->lock);
    struct entry *e = entry_of(f, key);
    if (!e) { /* every entry is being read: this claim reads alone */
        pthread_mutex_unlock(&f->lock);
        return read(ns, name, out, user);
    }
    for (;;) {
        if (e->has_done && e->done_start >= since_ms) {
            kop_err err = answer(e, out);
            pthread_mutex_unlock(&f->lock);
            return err;
        }
        if (e->flight) { /* late enough: it serves; too early: ours starts after it */
            pthread_cond_wait(&f->read_done, &f->lock);
            if (!(e = entry_of(f, key))) { /* its entry may have gone to another meanwhile */
                pthread_mutex_unlock(&f->lock);
                return read(ns, name, out, user);
            }
            continue;
        }
        e->flight = true;
        e->flight_start = clock();
        int64_t started = e->flight_start;
        pthread_mutex_unlock(&f->lock);
        json_t *got = NULL;
        kop_err err = read(ns, name, &got, user);
        pthread_mutex_lock(&f->lock);
        e->flight = false;
        if (!err) {
            json_decref(e->done);
            e->done = got;
            e->done_start = started;
            e->has_done = true;
            err = answer(e, out);
        }
        pthread_cond_broadcast(&f->read_done);
        pthread_mutex_unlock(&f->lock);
        return err;
    }
}

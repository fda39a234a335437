/*
 * core/written.c - the status this process last wrote to each Challenge,
 * until the cache shows it (see written.h): a JSON object of notes
 * {uid: {"rv", "status", "at"}} behind one lock. A note is looked at by
 * the Challenge's own passes only, and the work queue never runs two
 * passes of one Challenge at once, so a note has one writer.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/written.h"

struct ctf_written {
    pthread_mutex_t lock;
    json_t *notes; /* {uid: {"rv": s, "status": o, "at": i}} */
};

kop_err ctf_written_new(ctf_written **out)
{
    ctf_written *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->notes = json_object())) {
        free(w);
        return KOP_ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    *out = w;
    return KOP_OK;
}

void ctf_written_free(ctf_written *w)
{
    if (!w)
        return;
    json_decref(w->notes);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void ctf_written_note(ctf_written *w, const char *uid, const char *rv, const json_t *status,
                      int64_t now_ms)
{
    if (!uid || !rv || !rv[0] || !status)
        return;
    json_t *n = json_pack("{s:s, s:o, s:I}", "rv", rv, "status", json_deep_copy(status), "at",
                          (json_int_t)now_ms);
    pthread_mutex_lock(&w->lock);
    bool room = json_object_get(w->notes, uid) || json_object_size(w->notes) < CTF_WRITTEN_MAX;
    if (!n || !room || json_object_set_new(w->notes, uid, n) != 0)
        json_object_del(w->notes, uid); /* not noted: the next write may meet a 409 */
    else
        n = NULL; /* stolen */
    pthread_mutex_unlock(&w->lock);
    json_decref(n);
}

json_t *ctf_written_dup(ctf_written *w, const char *uid, const char *cached_rv, int64_t now_ms)
{
    json_t *dup = NULL;
    if (!uid)
        return NULL;
    pthread_mutex_lock(&w->lock);
    json_t *n = json_object_get(w->notes, uid);
    const char *rv = json_string_value(json_object_get(n, "rv"));
    int64_t age = now_ms - json_integer_value(json_object_get(n, "at"));
    if (n && ((cached_rv && rv && strcmp(cached_rv, rv) == 0) || age < 0 ||
              age >= CTF_WRITTEN_LAG_MS))
        json_object_del(w->notes, uid); /* caught up, or too old to vouch for */
    else if (n)
        dup = json_deep_copy(json_object_get(n, "status"));
    pthread_mutex_unlock(&w->lock);
    return dup;
}

void ctf_written_forget(ctf_written *w, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&w->lock);
    json_object_del(w->notes, uid);
    pthread_mutex_unlock(&w->lock);
}

size_t ctf_written_count(ctf_written *w)
{
    pthread_mutex_lock(&w->lock);
    size_t n = json_object_size(w->notes);
    pthread_mutex_unlock(&w->lock);
    return n;
}

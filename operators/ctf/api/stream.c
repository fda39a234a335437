/*
 * stream.c - the event streams (Server-Sent Events), without a thread
 * per stream. Each event is formatted by ctf_sse_event (at the end of the
 * file; pure, see stream.h, fuzzed by test/fuzz/fuzz_ctf_sse.c).
 *
 * The API's server polls its connections from a small pool of threads, so
 * a stream with nothing to send must not wait in its content callback:
 * it parks (MHD_suspend_connection) and is resumed when there is
 * something to do. What wakes a parked stream:
 *   - a change to one of its team's Challenges: the informer's handler
 *     marks the team's streams and resumes those parked (note);
 *   - a due heartbeat, the end of its lifetime, a change of the token
 *     Secrets or an eviction: the streamer thread, which sleeps until the
 *     earliest of those;
 *   - the API stopping: every parked stream is resumed and ends.
 * api->lock guards the stream list and every stream's flags, and is held
 * across both MHD_suspend_connection and MHD_resume_connection, so a
 * resume never overtakes the suspend it answers.
 *
 * A resumed stream recomputes the team's Instances from the cache and
 * sends those whose view changed (so it never reorders states), a
 * heartbeat when idle, and holds at most STREAM_OUT_MAX bytes of pending
 * output. It checks its token again whenever the token Secrets changed,
 * and ends when the token no longer stands for its team, and after
 * STREAM_LIFETIME_S in any case (clients reconnect, with a fresh snapshot).
 * A stream is stamped with the generation of the token Secrets its request
 * was authenticated at (principal.token_gen), never the one current when it
 * opens: a token rotated between the two is checked again before the
 * snapshot goes out, and the stream ends at once.
 *
 * The admin stream (GET /api/v1/admin/events, admin token only) is the
 * same machinery over every team: its snapshot is every team's Instances,
 * a Challenge's change marks its team dirty on each admin stream, and a
 * resumed admin stream recomputes only the dirty teams' Instances and
 * sends those that changed. It counts as the streams of a team named
 * ADMIN_BUCKET (no team can be named so), under the same caps. Its views
 * carry each instance's last Events (events.c), and a change of those
 * marks the team dirty too (ctf_api_note_admin). After its snapshot, and
 * after changes when it differs from the last one sent, it sends a
 * "summary" event (ctf_api_admin_summary: the console's panel), at most
 * every SUMMARY_EVERY_MS: a summary reads every Challenge of the cache, so
 * a burst of changes costs one a second, and the streamer wakes the stream
 * for the one held back. A definition's change (its pool's status) wakes
 * the admin streams for the summary alone.
 *
 * Limits: a team holds at most STREAMS_PER_TEAM streams, the API
 * --api-max-streams (2,048). When the API is full, a team below its fair
 * share (the maximum over the teams with streams) still gets one: the oldest
 * stream of the team holding the most is ended to make room.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"
#include "api/stream.h"
#include "api/views.h"

struct stream {
    ctf_api *api;
    struct MHD_Connection *conn;
    struct stream *prev, *next; /* api->streams, oldest first */
    char team[CTF_TEAM_SIZE];
    char *auth;           /* the Authorization header it was opened with (owned) */
    uint64_t token_gen;   /* the token Secrets' generation its token was last checked at */
    bool started;         /* the snapshot went out */
    bool noted;           /* the team's Instances changed since last sent */
    bool parked;          /* suspended, waiting to be resumed */
    bool ending;          /* evicted or the API stopping: end at the next read */
    bool admin;           /* every team's stream (team is ADMIN_BUCKET) */
    json_t *sent;         /* challenge -> view key last sent; admin: team -> that */
    json_t *dirty;        /* admin: the teams changed since last sent (team -> true) */
    char *summary;        /* admin: the text of the summary last sent (owned), or NULL */
    bool summary_due;     /* admin: something changed since the last summary was made */
    int64_t summary_ms;   /* admin: no summary before this */
    kop_buf out;          /* pending output, capped at STREAM_OUT_MAX */
    size_t off;           /* of out, already handed to MHD */
    int64_t heartbeat_ms; /* when the next heartbeat is due */
    int64_t end_ms;       /* the end of its lifetime */
};

/* ---- waking (api->lock held) ------------------------------------------------------- */

/* wake resumes s if it is parked. */
static void wake(stream *s)
{
    if (s->parked) {
        s->parked = false;
        MHD_resume_connection(s->conn);
    }
}

/* due tells whether s has something to do now (or must end). */
static bool due(const stream *s, int64_t now)
{
    return s->api->stopping || s->ending || s->noted || s->token_gen != s->api->token_gen ||
           now >= s->heartbeat_ms || now >= s->end_ms ||
           (s->summary_due && now >= s->summary_ms);
}

/* note marks team's streams changed and resumes those parked. */
static void note(ctf_api *api, const json_t *chal)
{
    const char *ns = kop_meta_namespace(chal);
    const char *team = json_string_value(json_object_get(json_object_get(chal, "spec"), "team"));
    if (!ns || !team || strcmp(ns, api->opts.challenge_namespace) != 0)
        return;
    pthread_mutex_lock(&api->lock);
    for (stream *s = api->streams; s; s = s->next) {
        if (s->admin) {
            /* Out of memory the team is missed until the next change or reconnect. */
            json_object_set_new(s->dirty, team, json_true());
            s->noted = true;
            wake(s);
        } else if (s->team[0] == team[0] && strcmp(s->team, team) == 0) {
            s->noted = true;
            wake(s);
        }
    }
    pthread_mutex_unlock(&api->lock);
}

void ctf_api_note_admin(ctf_api *api, const char *team)
{
    pthread_mutex_lock(&api->lock);
    for (stream *s = api->streams; s; s = s->next) {
        if (!s->admin)
            continue;
        if (team)
            json_object_set_new(s->dirty, team, json_true());
        s->noted = true;
        wake(s);
    }
    pthread_mutex_unlock(&api->lock);
}

bool ctf_api_admin_streams(ctf_api *api)
{
    bool any = false;
    pthread_mutex_lock(&api->lock);
    for (stream *s = api->streams; s && !any; s = s->next)
        any = s->admin;
    pthread_mutex_unlock(&api->lock);
    return any;
}

static void def_changed(const json_t *obj, void *user)
{
    (void)obj;
    ctf_api_note_admin(user, NULL);
}

static void def_updated(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    def_changed(new_obj, user);
}

kop_informer_handler ctf_api_summary_handler(ctf_api *api)
{
    return (kop_informer_handler){def_changed, def_updated, def_changed, api, KOP_OLD_UNUSED};
}

static void on_add(const json_t *obj, void *user)
{
    note(user, obj);
}

static void on_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    note(user, new_obj);
}

static void on_delete(const json_t *obj, void *user)
{
    note(user, obj);
}

kop_informer_handler ctf_api_hub_handler(ctf_api *api)
{
    return (kop_informer_handler){on_add, on_update, on_delete, api, KOP_OLD_UNUSED};
}

/* tokens_changed: a token Secret changed; every stream checks its token again. */
static void tokens_changed(const json_t *obj, void *user)
{
    ctf_api *api = user;
    (void)obj;
    pthread_mutex_lock(&api->lock);
    api->token_gen++;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
}

static void tokens_updated(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    tokens_changed(new_obj, user);
}

kop_informer_handler ctf_api_token_handler(ctf_api *api)
{
    return (kop_informer_handler){tokens_changed, tokens_updated, tokens_changed, api,
                                  KOP_OLD_UNUSED};
}

/* mono_timespec turns a CLOCK_MONOTONIC time in ms into a timespec for a condition wait. */
static struct timespec mono_timespec(int64_t ms)
{
    return (struct timespec){.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
}

/* streamer resumes parked streams whose heartbeat, lifetime or token check is due. */
static void *streamer(void *arg)
{
    ctf_api *api = arg;
    pthread_mutex_lock(&api->lock);
    while (!api->stopping) {
        int64_t now = kop_mono_ms(), next = now + 1000;
        for (stream *s = api->streams; s; s = s->next) {
            if (!s->parked)
                continue;
            if (due(s, now)) {
                wake(s);
                continue;
            }
            next = s->heartbeat_ms < next ? s->heartbeat_ms : next;
            next = s->end_ms < next ? s->end_ms : next;
            if (s->summary_due)
                next = s->summary_ms < next ? s->summary_ms : next;
        }
        struct timespec until = mono_timespec(next);
        pthread_cond_timedwait(&api->changed, &api->lock, &until);
    }
    for (stream *s = api->streams; s; s = s->next) /* MHD stops only with none parked */
        wake(s);
    pthread_mutex_unlock(&api->lock);
    return NULL;
}

kop_err ctf_api_streamer_start(ctf_api *api)
{
    if (pthread_create(&api->streamer, NULL, streamer, api) != 0)
        return KOP_ENOMEM;
    api->streamer_running = true;
    return KOP_OK;
}

void ctf_api_streamer_stop(ctf_api *api)
{
    pthread_mutex_lock(&api->lock);
    api->stopping = true;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
    if (api->streamer_running)
        pthread_join(api->streamer, NULL);
    api->streamer_running = false;
}

/* ---- output ------------------------------------------------------------------------- */

/* append adds text to s's pending output (capped). */
static bool append(stream *s, const char *text, size_t n)
{
    return kop_buf_append(&s->out, text, n) == KOP_OK;
}

static bool append_event(stream *s, const char *name, const json_t *data)
{
    char *ev = NULL;
    size_t n = 0;
    bool ok = ctf_sse_event(name, data, &ev, &n) == KOP_OK && append(s, ev, n);
    free(ev);
    return ok;
}

/* remember records what was sent of views (keys), into sent (challenge -> key, or for the
 * admin's stream team -> that), replacing all. */
static void remember(stream *s, const json_t *views)
{
    json_t *v;
    size_t i;
    json_object_clear(s->sent);
    json_array_foreach(json_object_get(views, "instances"), i, v)
    {
        char *key = ctf_api_view_key(v);
        const char *ch = json_string_value(json_object_get(v, "challenge"));
        const char *team = json_string_value(json_object_get(v, "team"));
        json_t *into = s->admin ? (team ? json_object_get(s->sent, team) : NULL) : s->sent;
        if (s->admin && team && !into && json_object_set_new(s->sent, team, json_object()) == 0)
            into = json_object_get(s->sent, team);
        if (key && ch && into)
            json_object_set_new(into, ch, json_string(key));
        free(key);
    }
}

/*
 * send_summary sends the admin's summary if it differs from the last one
 * sent and SUMMARY_EVERY_MS have passed since the last; else it stays due,
 * for the streamer to wake the stream when the time comes.
 */
static bool send_summary(stream *s)
{
    int64_t now = kop_mono_ms();
    pthread_mutex_lock(&s->api->lock); /* the streamer reads them */
    bool now_ok = now >= s->summary_ms;
    s->summary_due = !now_ok;
    if (now_ok)
        s->summary_ms = now + SUMMARY_EVERY_MS;
    pthread_mutex_unlock(&s->api->lock);
    if (!now_ok)
        return true;
    json_t *sum = ctf_api_admin_summary(s->api);
    char *text = sum ? kop_meta_dumps(sum, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    bool ok = text != NULL;
    if (ok && (!s->summary || strcmp(s->summary, text) != 0)) {
        ok = append_event(s, "summary", sum);
        free(s->summary);
        s->summary = text;
        text = NULL;
    }
    free(text);
    json_decref(sum);
    return ok;
}

static bool send_snapshot(stream *s)
{
    json_t *views =
        s->admin ? ctf_api_all_views(s->api) : ctf_api_team_views(s->api, s->team, false);
    bool ok = views && append_event(s, "snapshot", views);
    if (ok)
        remember(s, views);
    json_decref(views);
    return ok && (!s->admin || send_summary(s));
}

/*
 * send_team_changes sends an instance event for each of team's views that
 * changed since sent (challenge -> view key), and a Stopped one for each
 * that is gone; then sent holds what was sent.
 */
static bool send_team_changes(stream *s, const char *team, json_t *sent)
{
    json_t *views = ctf_api_team_views(s->api, team, s->admin), *v, *now = json_object();
    size_t i;
    const char *ch;
    json_t *old;
    bool ok = views && now;
    json_array_foreach(json_object_get(views, "instances"), i, v)
    {
        char *key = ok ? ctf_api_view_key(v) : NULL;
        const char *c = json_string_value(json_object_get(v, "challenge"));
        if (!key || !c) {
            free(key);
            ok = false;
            break;
        }
        const char *was = json_string_value(json_object_get(sent, c));
        if (!was || strcmp(was, key) != 0)
            ok = append_event(s, "instance", v);
        json_object_set_new(now, c, json_string(key));
        free(key);
    }
    json_object_foreach(sent, ch, old)
    {
        if (!ok || json_object_get(now, ch))
            continue;
        json_t *stopped = ctf_api_stopped_view(team, ch);
        ok = stopped && append_event(s, "instance", stopped);
        json_decref(stopped);
    }
    if (ok) {
        json_object_clear(sent);
        json_object_update(sent, now);
    }
    json_decref(now);
    json_decref(views);
    return ok;
}

/* send_changes sends what changed: of the stream's team, or of every team marked dirty. */
static bool send_changes(stream *s)
{
    if (!s->admin)
        return send_team_changes(s, s->team, s->sent);
    json_t *fresh = json_object(), *dirty, *v;
    const char *team;
    bool ok = true;
    if (!fresh)
        return false;
    pthread_mutex_lock(&s->api->lock); /* note() adds to it */
    dirty = s->dirty;
    s->dirty = fresh;
    pthread_mutex_unlock(&s->api->lock);
    json_object_foreach(dirty, team, v)
    {
        json_t *sent = json_object_get(s->sent, team);
        if (!sent && json_object_set_new(s->sent, team, json_object()) == 0)
            sent = json_object_get(s->sent, team);
        if (!sent || !(ok = send_team_changes(s, team, sent)))
            break;
        if (json_object_size(sent) == 0)
            json_object_del(s->sent, team);
    }
    json_decref(dirty);
    return ok && send_summary(s);
}

/* What a stream does next, decided under api->lock. */
enum step { STEP_END, STEP_PARK, STEP_HEARTBEAT, STEP_CHANGES, STEP_CHECK_TOKEN, STEP_SUMMARY };

static enum step next_step(stream *s)
{
    ctf_api *api = s->api;
    int64_t now = kop_mono_ms();
    if (api->stopping || s->ending || now >= s->end_ms)
        return STEP_END;
    if (s->token_gen != api->token_gen)
        return STEP_CHECK_TOKEN;
    if (s->noted) {
        s->noted = false;
        return STEP_CHANGES;
    }
    if (s->summary_due && now >= s->summary_ms)
        return STEP_SUMMARY;
    if (now >= s->heartbeat_ms)
        return STEP_HEARTBEAT;
    return STEP_PARK;
}

/*
 * token_still_good: the token the stream came with still stands for its
 * team. When it does, the stream is stamped with the generation this check
 * was made at, so any later change of the Secrets makes it check again.
 */
static bool token_still_good(stream *s)
{
    principal who;
    if (!ctf_api_authenticate(s->api, s->auth, &who))
        return false;
    if (!who.admin && strcmp(who.team, s->team) != 0)
        return false;
    pthread_mutex_lock(&s->api->lock); /* the streamer reads it */
    s->token_gen = who.token_gen;
    pthread_mutex_unlock(&s->api->lock);
    return true;
}

/* token_changed: the token Secrets changed since the stream's token was last checked. */
static bool token_changed(stream *s)
{
    pthread_mutex_lock(&s->api->lock);
    bool changed = s->token_gen != s->api->token_gen;
    pthread_mutex_unlock(&s->api->lock);
    return changed;
}

/*
 * fill fills s's pending output with what comes next. Returns 1 with
 * output, 0 when parked (the connection is suspended), -1 to end.
 */
static int fill(stream *s)
{
    static const char hello[] = "retry: 2000\n\n", beat[] = ": heartbeat\n\n";
    ctf_api *api = s->api;
    if (!s->started) {
        /* Revoked since its request was authenticated: nothing goes out. */
        if (token_changed(s) && !token_still_good(s))
            return -1;
        s->started = true;
        return append(s, hello, sizeof hello - 1) && send_snapshot(s) ? 1 : -1;
    }
    while (s->out.len == 0) {
        pthread_mutex_lock(&api->lock);
        enum step step = next_step(s);
        if (step == STEP_PARK) {
            s->parked = true;
            MHD_suspend_connection(s->conn);
        }
        pthread_mutex_unlock(&api->lock);
        switch (step) {
        case STEP_PARK:
            return 0;
        case STEP_END:
            return -1;
        case STEP_CHECK_TOKEN:
            if (!token_still_good(s))
                return -1;
            break;
        case STEP_HEARTBEAT:
            s->heartbeat_ms = kop_mono_ms() + api->opts.heartbeat_s * 1000L;
            if (!append(s, beat, sizeof beat - 1))
                return -1;
            break;
        case STEP_CHANGES:
            if (!send_changes(s))
                return -1;
            break;
        case STEP_SUMMARY:
            if (!send_summary(s))
                return -1;
            break;
        }
    }
    return 1;
}

/* stream_read is MHD's content callback: hand out pending output, or park. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *s = cls;
    (void)pos;
    if (s->off == s->out.len) {
        kop_buf_fini(&s->out); /* a big snapshot's memory goes back at once */
        kop_buf_init(&s->out, STREAM_OUT_MAX);
        s->off = 0;
        int r = fill(s);
        if (r < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (r == 0)
            return 0; /* parked: MHD calls again once resumed */
    }
    size_t n = s->out.len - s->off < max ? s->out.len - s->off : max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* ---- admission of streams (api->lock held) ----------------------------------------- */

/*
 * admit_stream decides whether team may open one more stream; on a refusal
 * msg says why (the team's own cap, or the API full and the team at its
 * fair share). When the API is full and team is below its fair share, the
 * oldest stream of the biggest holder is ended to make room.
 */
static bool admit_stream(ctf_api *api, const char *team, char *msg, size_t size)
{
    json_t *counts = json_object(); /* team -> streams not ending */
    const char *biggest = NULL, *t;
    json_int_t most = 0;
    json_t *n;
    bool ok = false;
    if (!counts) {
        snprintf(msg, size, "out of memory");
        return false;
    }
    for (stream *s = api->streams; s; s = s->next)
        if (!s->ending)
            json_object_set_new(
                counts, s->team,
                json_integer(json_integer_value(json_object_get(counts, s->team)) + 1));
    json_int_t mine = json_integer_value(json_object_get(counts, team));
    json_object_foreach(counts, t, n)
    {
        if (json_integer_value(n) > most) {
            most = json_integer_value(n);
            biggest = t;
        }
    }
    json_int_t fair = api->opts.max_streams / ((json_int_t)json_object_size(counts) + (mine == 0));
    if (mine >= STREAMS_PER_TEAM) {
        snprintf(msg, size, "team %s already holds %d event streams, the most a team may", team,
                 STREAMS_PER_TEAM);
    } else if (api->nstreams < api->opts.max_streams) {
        ok = true;
    } else if (mine < fair && biggest && most > fair && strcmp(biggest, team) != 0) {
        for (stream *s = api->streams; s && !ok; s = s->next) {
            if (!s->ending && strcmp(s->team, biggest) == 0) {
                s->ending = true; /* its oldest stream makes room */
                wake(s);
                ok = true;
            }
        }
    }
    if (!ok && mine < STREAMS_PER_TEAM)
        snprintf(msg, size,
                 "the API holds its maximum of %d event streams and team %s has its fair share "
                 "(%d); retry later",
                 api->opts.max_streams, team, (int)mine);
    json_decref(counts);
    return ok;
}

/* stream_discard frees a stream that is in no list. */
static void stream_discard(stream *s)
{
    json_decref(s->sent);
    json_decref(s->dirty);
    free(s->summary);
    kop_buf_fini(&s->out);
    free(s->auth);
    free(s);
}

/* stream_free is MHD's free callback: the stream leaves the list, then goes. */
static void stream_free(void *cls)
{
    stream *s = cls;
    ctf_api *api = s->api;
    pthread_mutex_lock(&api->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        api->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        api->streams_tail = s->prev;
    api->nstreams--;
    pthread_mutex_unlock(&api->lock);
    stream_discard(s);
}

/* stream_new makes the stream of the request (NULL when out of memory). */
static stream *stream_new(ctf_api *api, struct MHD_Connection *conn, const request *rq)
{
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    kop_buf_init(&s->out, STREAM_OUT_MAX);
    s->admin = rq->route.kind == CTF_ROUTE_ADMIN_EVENTS;
    if (!(s->sent = json_object()) || !(s->dirty = json_object()) ||
        !(s->auth = strdup(auth ? auth : ""))) {
        stream_discard(s);
        return NULL;
    }
    s->api = api;
    s->conn = conn;
    snprintf(s->team, sizeof s->team, "%s", s->admin ? ADMIN_BUCKET : rq->route.team);
    int64_t now = kop_mono_ms();
    s->heartbeat_ms = now + api->opts.heartbeat_s * 1000L;
    s->end_ms = now + STREAM_LIFETIME_S * 1000L;
    return s;
}

enum MHD_Result ctf_api_get_events(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    char msg[200];
    stream *s = stream_new(api, conn, rq);
    if (!s)
        return ctf_api_send_unavailable(api, conn, rq, "out of memory");
    pthread_mutex_lock(&api->lock);
    bool ok = admit_stream(api, s->team, msg, sizeof msg);
    if (ok) { /* the snapshot covers everything before this */
        s->token_gen = rq->who.token_gen; /* as authenticated, not as of now */
        s->prev = api->streams_tail;
        if (api->streams_tail)
            api->streams_tail->next = s;
        else
            api->streams = s;
        api->streams_tail = s;
        api->nstreams++;
    }
    pthread_mutex_unlock(&api->lock);
    if (!ok) {
        stream_discard(s);
        const char *h[] = {"Retry-After", "10", NULL};
        return ctf_api_send_error(api, conn, rq, 429, "TooManyRequests", msg, h);
    }

    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    rq->answered = true;
    ctf_api_count(api, rq, 200);
    return ret;
}

/* ---- events ----------------------------------------------------------------- */

kop_err ctf_sse_event(const char *name, const json_t *data, char **out, size_t *len)
{
    char *json = kop_meta_dumps(data, JSON_COMPACT);
    *out = NULL;
    *len = 0;
    if (!json)
        return KOP_ENOMEM;
    size_t n = strlen(name) + strlen(json) + 20;
    char *s = malloc(n);
    if (!s) {
        free(json);
        return KOP_ENOMEM;
    }
    int w = snprintf(s, n, "event: %s\ndata: %s\n\n", name, json);
    free(json);
    *out = s;
    *len = (size_t)w;
    return KOP_OK;
}

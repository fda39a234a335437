/*
 * api_stream.c - the event hub and the event streams (Server-Sent Events).
 *
 * The hub is a ring of "team T changed" notes fed by the Challenge
 * informer's handlers. Each stream wakes on a new note for its team,
 * recomputes the team's Instances from the cache and sends those whose
 * view changed, so a stream never reorders states, and one that fell
 * behind the ring just sends a fresh snapshot. A stream starts with a
 * snapshot, sends a heartbeat when idle, and holds at most STREAM_OUT_MAX
 * bytes of pending output; a team may hold STREAMS_PER_TEAM streams, the
 * API STREAMS_MAX.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"

/* note records that team's Instances changed, and wakes the streams. */
static void note(ctf_api *api, const json_t *chal)
{
    const char *ns = kop_meta_namespace(chal);
    const char *team = json_string_value(json_object_get(json_object_get(chal, "spec"), "team"));
    if (!ns || !team || strcmp(ns, api->opts.challenge_namespace) != 0)
        return;
    pthread_mutex_lock(&api->lock);
    struct note *n = &api->ring[++api->seq % HUB_RING];
    n->seq = api->seq;
    snprintf(n->team, sizeof n->team, "%s", team);
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
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

typedef struct stream {
    ctf_api *api;
    char team[CTF_TEAM_SIZE];
    uint64_t seq;         /* the last note seen */
    bool started;         /* the snapshot went out */
    json_t *sent;         /* challenge -> view key last sent */
    kop_buf out;          /* pending output, capped at STREAM_OUT_MAX */
    size_t off;           /* of out, already handed to MHD */
    int64_t heartbeat_ms; /* when the next one is due */
} stream;

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

/* remember records what was sent of the team's views (keys), replacing all. */
static void remember(stream *s, const json_t *views)
{
    json_t *v;
    size_t i;
    json_object_clear(s->sent);
    json_array_foreach(json_object_get(views, "instances"), i, v)
    {
        char *key = ctf_api_view_key(v);
        const char *ch = json_string_value(json_object_get(v, "challenge"));
        if (key && ch)
            json_object_set_new(s->sent, ch, json_string(key));
        free(key);
    }
}

static bool send_snapshot(stream *s)
{
    json_t *views = ctf_api_team_views(s->api, s->team);
    bool ok = views && append_event(s, "snapshot", views);
    if (ok)
        remember(s, views);
    json_decref(views);
    return ok;
}

/* send_changes sends an instance event for each of the team's views that changed. */
static bool send_changes(stream *s)
{
    json_t *views = ctf_api_team_views(s->api, s->team), *v, *now = json_object();
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
        const char *was = json_string_value(json_object_get(s->sent, c));
        if (!was || strcmp(was, key) != 0)
            ok = append_event(s, "instance", v);
        json_object_set_new(now, c, json_string(key));
        free(key);
    }
    json_object_foreach(s->sent, ch, old)
    {
        if (!ok || json_object_get(now, ch))
            continue;
        json_t *stopped = ctf_api_stopped_view(s->team, ch);
        ok = stopped && append_event(s, "instance", stopped);
        json_decref(stopped);
    }
    if (ok) {
        json_object_clear(s->sent);
        json_object_update(s->sent, now);
    }
    json_decref(now);
    json_decref(views);
    return ok;
}

/*
 * wait_change blocks until the team has a note after s->seq, the heartbeat
 * is due or the API stops. Returns 1 for a change, 2 for a lost track
 * (the ring moved past s->seq: resend a snapshot), 0 for a heartbeat, -1
 * when stopping.
 */
static int wait_change(stream *s)
{
    ctf_api *api = s->api;
    int r = -1;
    pthread_mutex_lock(&api->lock);
    for (;;) {
        if (api->stopping)
            break;
        if (api->seq != s->seq) {
            bool lost = api->seq - s->seq > HUB_RING;
            bool mine = false;
            for (uint64_t q = s->seq + 1; !lost && q <= api->seq; q++)
                mine = mine || strcmp(api->ring[q % HUB_RING].team, s->team) == 0;
            s->seq = api->seq;
            if (lost || mine) {
                r = lost ? 2 : 1;
                break;
            }
        }
        int64_t now = kop_mono_ms();
        if (now >= s->heartbeat_ms) {
            r = 0;
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t wait = s->heartbeat_ms - now;
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&api->changed, &api->lock, &until);
    }
    pthread_mutex_unlock(&api->lock);
    return r;
}

/* stream_next fills s's pending output with what comes next; false ends the stream. */
static bool stream_next(stream *s)
{
    static const char hello[] = "retry: 2000\n\n", beat[] = ": heartbeat\n\n";
    if (!s->started) {
        s->started = true;
        return append(s, hello, sizeof hello - 1) && send_snapshot(s);
    }
    while (s->out.len == 0) {
        switch (wait_change(s)) {
        case -1:
            return false;
        case 0:
            s->heartbeat_ms = kop_mono_ms() + s->api->opts.heartbeat_s * 1000L;
            if (!append(s, beat, sizeof beat - 1))
                return false;
            break;
        case 2:
            if (!send_snapshot(s))
                return false;
            break;
        default:
            if (!send_changes(s))
                return false;
        }
    }
    return true;
}

/* stream_read is MHD's content callback: hand out pending output, or wait for more. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *s = cls;
    (void)pos;
    if (s->off == s->out.len) {
        kop_buf_fini(&s->out); /* a big snapshot's memory goes back at once */
        kop_buf_init(&s->out, STREAM_OUT_MAX);
        s->off = 0;
        if (!stream_next(s))
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->out.len - s->off < max ? s->out.len - s->off : max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* streams_adjust counts team's open streams by delta; false when +1 would pass a cap. */
static bool streams_adjust(ctf_api *api, const char *team, int delta)
{
    struct team_streams *ts = NULL, *free_slot = NULL;
    bool ok = true;
    pthread_mutex_lock(&api->lock);
    for (int i = 0; i < STREAMS_MAX; i++) {
        if (api->streams[i].n > 0 && strcmp(api->streams[i].team, team) == 0)
            ts = &api->streams[i];
        else if (api->streams[i].n == 0 && !free_slot)
            free_slot = &api->streams[i];
    }
    if (delta > 0) {
        if ((ts && ts->n >= STREAMS_PER_TEAM) || api->nstreams >= STREAMS_MAX ||
            (!ts && !free_slot)) {
            ok = false;
        } else {
            if (!ts) {
                ts = free_slot;
                snprintf(ts->team, sizeof ts->team, "%s", team);
            }
            ts->n++;
            api->nstreams++;
        }
    } else if (ts) {
        ts->n--;
        api->nstreams--;
    }
    pthread_mutex_unlock(&api->lock);
    return ok;
}

static void stream_free(void *cls)
{
    stream *s = cls;
    streams_adjust(s->api, s->team, -1);
    json_decref(s->sent);
    kop_buf_fini(&s->out);
    free(s);
}

enum MHD_Result ctf_api_get_events(ctf_api *api, struct MHD_Connection *conn, request *rq)
{
    stream *s = calloc(1, sizeof *s);
    if (!s || !(s->sent = json_object())) {
        free(s);
        return ctf_api_send_unavailable(api, conn, rq, "out of memory");
    }
    kop_buf_init(&s->out, STREAM_OUT_MAX);
    if (!streams_adjust(api, rq->route.team, +1)) {
        json_decref(s->sent);
        free(s);
        const char *h[] = {"Retry-After", "10", NULL};
        return ctf_api_send_error(api, conn, rq, 429, "TooManyRequests",
                                  "this team has too many event streams open", h);
    }
    s->api = api;
    snprintf(s->team, sizeof s->team, "%s", rq->route.team);
    s->heartbeat_ms = kop_mono_ms() + api->opts.heartbeat_s * 1000L;
    pthread_mutex_lock(&api->lock);
    s->seq = api->seq; /* the snapshot covers everything before */
    pthread_mutex_unlock(&api->lock);

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

kop_informer_handler ctf_api_hub_handler(ctf_api *api)
{
    return (kop_informer_handler){on_add, on_update, on_delete, api};
}

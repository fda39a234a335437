/*
 * events.c - the last Events of each instance, for the organizer's console:
 * a cache of the Events about Challenges in the challenge namespace (an
 * informer of core/v1 Events, field selector involvedObject.kind=Challenge),
 * indexed by the involved Challenge's uid, so an admin view lists the
 * newest CTF_EVENTS_SHOWN Events of its Challenge without a request to the
 * apiserver.
 *
 * The Events are the cluster's, whoever wrote them (this operator, another
 * replica, an admin's action through the API), not a ring of what this
 * process recorded: a restarted operator shows them too, and they go when
 * the apiserver expires them (an hour by default).
 *
 * Memory: the transform keeps only what a view shows of an Event (type,
 * reason, message cut at CTF_EVENT_MESSAGE_MAX bytes, count, last seen) and
 * the keys the cache needs: about 0.5 KB an Event, so 2,000 instances with
 * five Events each in the hour cost about 5 MB.
 *
 * Freshness: a change of an Event marks its Challenge's team on the admin
 * streams (ctf_api_note_admin), which then send that team's Instances
 * again; only admin views carry Events, so team streams never wake for them.
 *
 * This cache is not one the API waits for: until it has synced (or when
 * the operator's role may not list Events, an older install's RBAC), an
 * admin view's "events" is empty and everything else is served.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define INDEX_INVOLVED "involved-uid"

static const kop_resource EVENTS = {"", "v1", "events", "Event", true};

/* copy_str sets key of to from from's same key, when it is a string. */
static void copy_str(json_t *to, const json_t *from, const char *key)
{
    const char *s = json_string_value(json_object_get(from, key));
    if (s)
        json_object_set_new(to, key, json_string(s));
}

/* cut_message returns (owned) msg cut at CTF_EVENT_MESSAGE_MAX bytes on a UTF-8 boundary. */
static json_t *cut_message(const char *msg)
{
    size_t n = msg ? strlen(msg) : 0;
    if (n <= CTF_EVENT_MESSAGE_MAX)
        return json_string(msg ? msg : "");
    n = CTF_EVENT_MESSAGE_MAX;
    while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) /* msg[n] continues a character */
        n--;
    char buf[CTF_EVENT_MESSAGE_MAX + 4];
    memcpy(buf, msg, n);
    memcpy(buf + n, "…", sizeof "…");
    return json_string(buf);
}

json_t *ctf_api_event_slim(json_t *obj, void *user)
{
    (void)user;
    const json_t *meta = json_object_get(obj, "metadata");
    const json_t *inv = json_object_get(obj, "involvedObject");
    const char *uid = json_string_value(json_object_get(inv, "uid"));
    const char *last = json_string_value(json_object_get(obj, "lastTimestamp"));
    if (!last)
        last = json_string_value(json_object_get(obj, "eventTime"));
    if (!last)
        last = json_string_value(json_object_get(obj, "firstTimestamp"));
    json_t *out = uid ? json_object() : NULL, *m = out ? json_object() : NULL,
           *i = m ? json_object() : NULL;
    if (!i) {
        json_decref(out);
        json_decref(m);
        json_decref(obj);
        return NULL;
    }
    copy_str(m, meta, "name");
    copy_str(m, meta, "namespace");
    copy_str(m, meta, "uid");
    copy_str(m, meta, "resourceVersion");
    copy_str(i, inv, "name");
    copy_str(i, inv, "uid");
    json_object_set_new(out, "metadata", m);
    json_object_set_new(out, "involvedObject", i);
    copy_str(out, obj, "type");
    copy_str(out, obj, "reason");
    json_object_set_new(out, "message",
                        cut_message(json_string_value(json_object_get(obj, "message"))));
    json_int_t count = json_integer_value(json_object_get(obj, "count"));
    json_object_set_new(out, "count", json_integer(count));
    if (last)
        json_object_set_new(out, "lastSeen", json_string(last));
    json_decref(obj);
    return out;
}

/* by_involved indexes an Event by the uid of the Challenge it is about. */
static size_t by_involved(const json_t *obj, const char **values, size_t max, void *user)
{
    (void)user;
    const json_t *inv = json_object_get(obj, "involvedObject");
    const char *uid = json_string_value(json_object_get(inv, "uid"));
    if (!uid || max == 0)
        return 0;
    values[0] = uid;
    return 1;
}

/* changed marks the team of the Event's Challenge on the admin streams (if any is open). */
static void changed(const json_t *obj, void *user)
{
    ctf_api *api = user;
    const json_t *inv = json_object_get(obj, "involvedObject");
    const char *name = json_string_value(json_object_get(inv, "name"));
    json_t *chal = NULL;
    if (!name || !ctf_api_admin_streams(api) ||
        kop_informer_dup(api->op->challenges, api->opts.challenge_namespace, name, &chal))
        return; /* its Challenge gone (or not seen yet): no row shows it */
    ctf_api_note_admin(api, ctf_str2(chal, "spec", "team"));
    json_decref(chal);
}

static void updated(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    changed(new_obj, user);
}

kop_err ctf_api_events_new(ctf_api *api)
{
    kop_informer_opts o = {.resource = EVENTS,
                           .namespace = api->opts.challenge_namespace,
                           .field_selector = "involvedObject.kind=Challenge",
                           .transform = ctf_api_event_slim};
    kop_informer_handler h = {changed, updated, changed, api, KOP_OLD_UNUSED};
    kop_err err = kop_informer_new(kop_manager_client(api->op->mgr), &o, &api->events);
    if (!err)
        err = kop_informer_add_index(api->events, INDEX_INVOLVED, by_involved, NULL);
    if (!err)
        err = kop_informer_add_handler(api->events, &h);
    return err;
}

kop_err ctf_api_events_start(ctf_api *api)
{
    return api->events ? kop_informer_start(api->events) : KOP_OK;
}

void ctf_api_events_free(ctf_api *api)
{
    if (!api->events)
        return;
    kop_informer_stop(api->events);
    kop_informer_free(api->events);
    api->events = NULL;
}

/* newer_first orders Events by when last seen (RFC 3339 text), then by name, newest first. */
static int newer_first(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *tx = json_string_value(json_object_get(x, "lastSeen"));
    const char *ty = json_string_value(json_object_get(y, "lastSeen"));
    int c = strcmp(ty ? ty : "", tx ? tx : "");
    if (c)
        return c;
    /* The recorder names Events "<object>.<nanoseconds in hex>": later sorts later. */
    const char *nx = kop_meta_name(x), *ny = kop_meta_name(y);
    return strcmp(ny ? ny : "", nx ? nx : "");
}

json_t *ctf_api_events_shown(const json_t *cached)
{
    json_t *out = json_array();
    size_t n = json_array_size(cached);
    json_t **sorted = out ? calloc(n + 1, sizeof *sorted) : NULL;
    if (!sorted)
        return out;
    for (size_t i = 0; i < n; i++)
        sorted[i] = json_array_get(cached, i);
    qsort(sorted, n, sizeof *sorted, newer_first);
    for (size_t i = 0; i < n && i < CTF_EVENTS_SHOWN; i++) {
        const json_t *e = sorted[i];
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *last = json_string_value(json_object_get(e, "lastSeen"));
        json_int_t count = json_integer_value(json_object_get(e, "count"));
        json_array_append_new(
            out, json_pack("{s:s, s:s, s:s, s:I, s:o}", "type", type ? type : "Normal", "reason",
                           reason ? reason : "", "message", msg ? msg : "", "count",
                           count > 0 ? count : 0, "lastSeen",
                           last ? json_string(last) : json_null()));
    }
    free(sorted);
    return out;
}

json_t *ctf_api_recent_events(ctf_api *api, const char *uid)
{
    json_t *all = NULL;
    if (!uid || !api->events || !kop_informer_has_synced(api->events) ||
        kop_informer_by_index(api->events, INDEX_INVOLVED, uid, &all))
        return json_array();
    json_t *out = ctf_api_events_shown(all);
    json_decref(all);
    return out;
}

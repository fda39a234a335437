/*
 * fuzz_ctf_events.c - libFuzzer target for what the instance API keeps and
 * shows of Kubernetes Events (operators/ctf/api/events.c): the Events
 * cache's transform (ctf_api_event_slim) takes whatever the apiserver sends
 * about Challenges (messages any writer chose), and the console shows the
 * newest of them (ctf_api_events_shown).
 *
 * Input: any JSON document; an array's members are taken as Events, any
 * other value as one. Invariants, abort() on violation:
 *  - slim keeps an Event exactly when it names a string involvedObject.uid,
 *    and keeps no field but metadata, involvedObject, type, reason,
 *    message, count and lastSeen;
 *  - a kept message is valid text (a JSON string), a prefix of the Event's
 *    own, at most CTF_EVENT_MESSAGE_MAX bytes plus an ellipsis, and only
 *    cut when it was longer;
 *  - at most CTF_EVENTS_SHOWN are shown, each with the five fields, in
 *    order of lastSeen, newest first.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char ELLIPSIS[] = "…";

/* check_kept checks what slim kept of ev (a copy of the input). */
static void check_kept(const json_t *ev, const json_t *kept)
{
    const char *uid =
        json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "uid"));
    FUZZ_CHECK((kept != NULL) == (uid != NULL));
    if (!kept)
        return;
    static const char *const allowed[] = {"metadata", "involvedObject", "type",     "reason",
                                          "message",  "count",          "lastSeen", NULL};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)kept, key, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        FUZZ_CHECK(ok);
    }
    const char *in = json_string_value(json_object_get(ev, "message"));
    const char *out = json_string_value(json_object_get(kept, "message"));
    FUZZ_CHECK(out != NULL);
    size_t n_in = in ? strlen(in) : 0, n_out = strlen(out);
    if (n_in <= CTF_EVENT_MESSAGE_MAX) {
        FUZZ_CHECK(n_out == n_in && (n_in == 0 || memcmp(in, out, n_in) == 0));
    } else {
        size_t e = strlen(ELLIPSIS);
        FUZZ_CHECK(n_out >= e && n_out <= CTF_EVENT_MESSAGE_MAX + e);
        FUZZ_CHECK(strcmp(out + n_out - e, ELLIPSIS) == 0);
        FUZZ_CHECK(memcmp(in, out, n_out - e) == 0);
        FUZZ_CHECK(n_out - e > CTF_EVENT_MESSAGE_MAX - 4); /* at most one character dropped */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    json_t *cached = json_array();
    FUZZ_CHECK(cached);
    json_t *each = json_is_array(doc) ? doc : NULL, *ev;
    size_t i;
    if (!each) {
        each = json_array();
        json_array_append(each, doc);
    } else {
        json_incref(each);
    }
    json_array_foreach(each, i, ev)
    {
        json_t *kept = ctf_api_event_slim(json_deep_copy(ev), NULL); /* takes the copy */
        check_kept(ev, kept);
        if (kept)
            json_array_append_new(cached, kept);
    }
    json_t *shown = ctf_api_events_shown(cached);
    FUZZ_CHECK(shown && json_array_size(shown) <= CTF_EVENTS_SHOWN &&
               json_array_size(shown) <= json_array_size(cached));
    const char *prev = NULL;
    json_array_foreach(shown, i, ev)
    {
        FUZZ_CHECK(json_object_size(ev) == 5 && json_is_string(json_object_get(ev, "message")) &&
                   json_is_integer(json_object_get(ev, "count")));
        const char *t = json_string_value(json_object_get(ev, "lastSeen"));
        if (prev)
            FUZZ_CHECK(strcmp(prev, t ? t : "") >= 0);
        prev = t ? t : "";
    }
    json_decref(shown);
    json_decref(cached);
    json_decref(each);
    json_decref(doc);
    return 0;
}

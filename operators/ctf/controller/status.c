/*
 * status.c - a Challenge's status, written from what a reconcile observed
 * (see status.h): currentStatus, reason and message, the instance's
 * namespace, endpoints and times, and the Ready, Progressing and Degraded
 * conditions. A status that says what the cache already shows is not
 * written; a transition is logged, recorded as an Event, and Running counts
 * in ctf_instance_ready_seconds.
 *
 * The write carries the cached resourceVersion: from a cache that lags
 * behind (a late watch event), it is refused as a conflict instead of
 * writing over a newer status, so startedAt, the Running Event and the
 * ready-time observation happen once per instance, whatever the timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/status.h"
#include "kop/clock.h"

static void set_condition(json_t *status, const char *type, bool on, const char *reason,
                          const char *message, int64_t gen)
{
    kop_condition c = {.type = type,
                       .status = on ? "True" : "False",
                       .reason = reason,
                       .message = message ? message : "",
                       .observed_generation = gen};
    bool changed;
    kop_status st;
    /* Inputs are constants and the ctf_observation's text: it cannot refuse them. */
    if (kop_meta_set_condition(status, &c, time(NULL), &changed, &st) != KOP_OK)
        return;
}

/* desired_status builds the status to write from the ctf_observation (new ref). */
static json_t *desired_status(const json_t *chal, const ctf_observation *o, const char *ns,
                              time_t expires)
{
    const json_t *old = json_object_get(chal, "status");
    json_t *status = old ? json_deep_copy(old) : json_object();
    if (!status)
        return NULL;
    int64_t gen = kop_meta_generation(chal);
    char ts[32];
    json_object_set_new(status, "currentStatus", json_string(o->phase));
    json_object_set_new(status, "reason", o->reason ? json_string(o->reason) : json_null());
    json_object_set_new(status, "message", json_string(o->message));
    json_object_set_new(status, "observedGeneration", json_integer(gen));
    if (ns && ns[0])
        json_object_set_new(status, "namespace", json_string(ns));
    if (o->generation > 0)
        json_object_set_new(status, "definitionGeneration", json_integer(o->generation));
    if (o->version[0])
        json_object_set_new(status, "definitionVersion", json_string(o->version));
    if (o->updated && ctf_format_time(time(NULL), ts) == KOP_OK)
        json_object_set_new(status, "updatedAt", json_string(ts));
    if (expires > 0 && ctf_format_time(expires, ts) == KOP_OK)
        json_object_set_new(status, "expiresAt", json_string(ts));
    bool running = strcmp(o->phase, CTF_STATUS_RUNNING) == 0;
    if (o->endpoints)
        json_object_set(status, "endpoints", o->endpoints);
    else if (!running)
        json_object_set_new(status, "endpoints", json_array());
    if (running && !json_object_get(status, "startedAt") &&
        ctf_format_time(time(NULL), ts) == KOP_OK)
        json_object_set_new(status, "startedAt", json_string(ts));
    bool error = strcmp(o->phase, CTF_STATUS_ERROR) == 0;
    bool pending = strcmp(o->phase, CTF_STATUS_PENDING) == 0 ||
                   strcmp(o->phase, CTF_STATUS_UPDATING) == 0;
    const char *why = o->reason ? o->reason : o->phase;
    /* A Pending instance that waits for something named (the gateway) says so. */
    const char *waiting = pending && o->waiting ? o->waiting : NULL;
    set_condition(status, "Ready", running, running ? "InstanceRunning" : waiting ? waiting : why,
                  o->message, gen);
    set_condition(status, "Progressing", pending,
                  !pending  ? why
                  : waiting ? waiting
                  : strcmp(o->phase, CTF_STATUS_UPDATING) == 0 ? "InstanceUpdating"
                                                               : "InstanceStarting",
                  o->message, gen);
    set_condition(status, "Degraded", error, error ? why : "AsExpected", o->message, gen);
    return status;
}

/* status_equal compares what matters, ignoring condition timestamps. */
static bool status_equal(const json_t *a, const json_t *b)
{
    static const char *const fields[] = {
        "currentStatus", "reason",    "message",   "namespace",
        "endpoints",     "expiresAt", "startedAt", "observedGeneration",
        "definitionGeneration", "definitionVersion", "updatedAt"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *x = json_object_get(a, fields[i]), *y = json_object_get(b, fields[i]);
        if (json_is_null(x))
            x = NULL;
        if (json_is_null(y))
            y = NULL;
        if (!ctf_json_same(x, y))
            return false;
    }
    return true;
}

/* patch_status merge-patches chal's status, on the condition that chal is still the version cached.
 */
static kop_err patch_status(ctf_operator *op, const json_t *chal, json_t *status, json_t **stored,
                            kop_status *st)
{
    json_t *patch = json_pack("{s:{s:s?}, s:O}", "metadata", "resourceVersion",
                              kop_meta_resource_version(chal), "status", status);
    if (!patch)
        return KOP_ENOMEM;
    kop_patch_req req = {.target = {&CTF_CHALLENGES, kop_meta_namespace(chal), kop_meta_name(chal)},
                         .type = KOP_PATCH_MERGE,
                         .patch = patch,
                         .opts = {.subresource = "status"}};
    kop_err err = kop_patch_object(kop_manager_client(op->mgr), &req, stored, st);
    json_decref(patch);
    return err;
}

/* write_status patches the status when it changed, and tells of transitions. */
kop_err ctf_write_status(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                         const ctf_observation *o, const char *ns, time_t expires)
{
    kop_status st;
    json_t *status = desired_status(chal, o, ns, expires), *written = NULL, *stored = NULL;
    const json_t *old = json_object_get(chal, "status");
    kop_err err = KOP_OK;
    if (!status)
        return KOP_ENOMEM;
    if (old && status_equal(old, status))
        goto out;
    /* Written by the pass before, which the cache does not show yet (core/written.h). */
    written = ctf_written_dup(op->written, kop_meta_uid(chal), kop_meta_resource_version(chal),
                              kop_mono_ms());
    if (written && status_equal(written, status))
        goto out;
    err = patch_status(op, chal, status, &stored, &st);
    if (!err)
        ctf_written_note(op->written, kop_meta_uid(chal), kop_meta_resource_version(stored),
                         status, kop_mono_ms());
    if (err == KOP_ENOTFOUND)
        err = KOP_OK; /* gone meanwhile: nothing to report on */
    if (err == KOP_ECONFLICT) {
        kop_logger_log(req->log, KOP_LOG_DEBUG, "status not written: the cache is behind");
        goto out;
    }
    if (err) {
        kop_logger_log(req->log, KOP_LOG_ERROR, "status not written", KOP_LOG_ERR(err),
                       KOP_LOG_STR("detail", st.message));
        goto out;
    }
    const char *was = old ? json_string_value(json_object_get(old, "currentStatus")) : NULL;
    if (!was || strcmp(was, o->phase) != 0 || o->updated) {
        bool bad = strcmp(o->phase, CTF_STATUS_ERROR) == 0;
        /* Back Running from an update: the Event says so (update.c). */
        const char *reason = o->reason          ? o->reason
                             : o->updated       ? "Updated"
                                                : o->phase;
        kop_logger_log(req->log, bad ? KOP_LOG_WARN : KOP_LOG_INFO, "instance status",
                       KOP_LOG_STR("status", o->phase), KOP_LOG_STR("reason", o->reason),
                       KOP_LOG_STR("message", o->message));
        /* Into Updating: no Event of its own, the Updated one at its end tells of the
         * replacement (one Event per replaced instance, not two). */
        if (strcmp(o->phase, CTF_STATUS_UPDATING) != 0)
            kop_event(op->events,
                      &(kop_event_req){.object = chal,
                                       .type = bad ? KOP_EVENT_WARNING : KOP_EVENT_NORMAL,
                                       .reason = reason, .action = o->phase},
                      "%s%s%s", o->phase, o->message[0] ? ": " : "", o->message);
        if (strcmp(o->phase, CTF_STATUS_RUNNING) == 0 && !ctf_str2(chal, "status", "startedAt"))
            kop_metric_observe(op->ready_seconds, NULL, difftime(time(NULL), ctf_created_at(chal)));
    }
out:
    json_decref(written);
    json_decref(stored);
    json_decref(status);
    return err;
}

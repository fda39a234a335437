/*
 * flightticket-operator - the smallest complete operator written with libkop.
 *
 * A FlightTicket (flights.com/v1) asks for seats on a flight. For each
 * ticket this operator keeps a "boarding pass" ConfigMap that the ticket
 * owns, and confirms the booking in the ticket's status. Deleting the ticket
 * deletes the boarding pass: the owner reference lets Kubernetes' garbage
 * collector do it, so the operator needs no finalizer.
 *
 *   flightticket-operator [--kubeconfig PATH] [--metrics-bind ADDR]
 *                         [--leader-elect] [--log-format text|json] [-v N]
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <kop/kop.h>

/* The two resources this operator touches. */
static const kop_resource TICKETS = {"flights.com", "v1", "flighttickets", "FlightTicket", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};

#define FIELD_MANAGER "flightticket-operator"

/* boarding_pass builds the ConfigMap we want to exist for ticket. */
static json_t *boarding_pass(const json_t *ticket, kop_status *st)
{
    json_t *spec = json_object_get(ticket, "spec");
    char name[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    snprintf(name, sizeof name, "%s-boarding-pass", kop_meta_name(ticket));
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:O*, s:O*, s:s}}",
                           "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", name, "namespace", kop_meta_namespace(ticket),
                           "data", "from", json_object_get(spec, "from"),
                           "to", json_object_get(spec, "to"), "passenger", kop_meta_name(ticket));
    json_object_set_new(json_object_get(cm, "data"), "seats",
                        json_sprintf("%" JSON_INTEGER_FORMAT,
                                     json_integer_value(json_object_get(spec, "number"))));
    if (kop_meta_set_controller_ref(cm, ticket, st) != KOP_OK) {
        json_decref(cm);
        return NULL;
    }
    return cm;
}

/* The operator's state: the cache of boarding passes (the watch that owns them). */
struct app {
    kop_informer *passes;
};

/*
 * pass_is_current tells whether the cache already shows pass as wanted: the
 * same data, controlled by the ticket. Then applying it again would change
 * nothing, and the write is skipped (controller-runtime's CreateOrUpdate
 * compares the same way). A stale cache only costs a write that changes
 * nothing; the pass's own event brings the ticket back either way.
 */
static bool pass_is_current(kop_informer *passes, const json_t *ticket, const json_t *pass)
{
    json_t *have = NULL;
    if (kop_informer_dup(passes, kop_meta_namespace(pass), kop_meta_name(pass), &have) != KOP_OK)
        return false;
    bool same = !kop_meta_is_deleting(have) &&
                kop_meta_is_controlled_by(have, kop_meta_uid(ticket)) &&
                json_equal(json_object_get(have, "data"), json_object_get(pass, "data"));
    json_decref(have);
    return same;
}

/* confirmed_status is the status a ticket should show once its pass exists. */
static json_t *confirmed_status(const json_t *ticket)
{
    const json_t *old = json_object_get(ticket, "status");
    const char *since = json_string_value(json_object_get(old, "confirmedAt"));
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    return json_pack("{s:s, s:O, s:s, s:I}", "phase", "Confirmed",
                     "seats", json_object_get(json_object_get(ticket, "spec"), "number"),
                     "confirmedAt", since ? since : now,     /* first confirmation stays */
                     "observedGeneration", (json_int_t)kop_meta_generation(ticket));
}

/* status_is_current tells whether the ticket already says what we would write. */
static bool status_is_current(const json_t *ticket, const json_t *want)
{
    const json_t *have = json_object_get(ticket, "status");
    return json_equal(json_object_get(have, "seats"), json_object_get(want, "seats")) &&
           json_equal(json_object_get(have, "observedGeneration"),
                      json_object_get(want, "observedGeneration")) &&
           json_equal(json_object_get(have, "phase"), json_object_get(want, "phase"));
}

/*
 * reconcile: make the boarding pass match the ticket, then confirm the
 * ticket. Runs for every change of a ticket or of its boarding pass.
 */
static kop_result reconcile(const kop_reconcile *req, void *user)
{
    const struct app *app = user;
    kop_status st;
    json_t *ticket = NULL, *pass = NULL, *status = NULL;
    kop_result res = KOP_DONE;

    if (kop_informer_dup(req->cache, req->namespace, req->name, &ticket) == KOP_ENOTFOUND)
        return KOP_DONE; /* deleted: the garbage collector removes the pass */
    if (!ticket || kop_meta_is_deleting(ticket))
        goto out;

    /* 1. The boarding pass: server-side apply makes it exist and match,
     *    unless the cache shows it does already. */
    pass = boarding_pass(ticket, &st);
    kop_patch_req apply = {.target = {&CONFIGMAPS, req->namespace, kop_meta_name(pass)},
                           .type = KOP_PATCH_APPLY,
                           .patch = pass,
                           .opts = {.field_manager = FIELD_MANAGER, .force = true}};
    if (!pass || (!pass_is_current(app->passes, ticket, pass) &&
                  kop_patch_object(req->client, &apply, NULL, &st) != KOP_OK)) {
        kop_logger_log(req->log, KOP_LOG_ERROR, "boarding pass not written",
                       KOP_LOG_STR("reason", st.message));
        res = KOP_RETRY;
        goto out;
    }

    /* 2. The status, written only when it would change. */
    status = confirmed_status(ticket);
    if (!status_is_current(ticket, status)) {
        if (kop_patch_status(req->client, &TICKETS, ticket, status, NULL, &st) != KOP_OK) {
            kop_logger_log(req->log, KOP_LOG_ERROR, "status not written",
                           KOP_LOG_STR("reason", st.message));
            res = KOP_RETRY;
            goto out;
        }
        kop_logger_log(req->log, KOP_LOG_INFO, "ticket confirmed",
                       KOP_LOG_INT("seats", json_integer_value(json_object_get(status, "seats"))));
    }
out:
    json_decref(status);
    json_decref(pass);
    json_decref(ticket);
    return res;
}

int main(int argc, char **argv)
{
    kop_manager_opts mo = {.name = "flightticket-operator"};
    struct app app = {NULL};
    kop_manager *mgr = NULL;
    kop_controller *ctl = NULL;
    kop_status st;
    kop_err err;

    kop_status_clear(&st);
    for (int i = 1; i < argc;) {
        int r = kop_manager_parse_flag(&mo, argc, argv, &i, &st);
        if (r == 0) {
            fprintf(stderr, "usage: %s [flags]\n%s", argv[0], kop_manager_flags_usage());
            return 2;
        }
        if (r < 0) {
            fprintf(stderr, "%s: %s\n", argv[0], st.message);
            return 2;
        }
    }
    err = kop_manager_new(&mo, &mgr, &st);
    if (err)
        goto out;

    /* Reconcile FlightTickets; wake up when a boarding pass they own changes. */
    kop_controller_opts co = {
        .name = "flightticket",
        .for_resource = TICKETS,
        .reconcile = reconcile,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 2,
        .user = &app,
    };
    err = kop_controller_new(mgr, &co, &ctl);
    if (!err)
        err = kop_controller_owns(ctl, &CONFIGMAPS, NULL);
    if (!err) /* the same shared cache the watch above made */
        err = kop_manager_informer(mgr, &CONFIGMAPS, NULL, NULL, &app.passes);
    if (!err)
        err = kop_manager_run(mgr, &st);
out:
    if (err)
        fprintf(stderr, "%s: %s: %s\n", argv[0], kop_strerror(err), st.message);
    kop_manager_free(mgr);
    return err ? 1 : 0;
}

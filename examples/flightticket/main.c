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
#include <time.h>

#include <kop/kop.h>

#include "webhook.h"

/* The two resources this operator touches. */
static const kop_resource TICKETS = {"flights.com", "v1", "flighttickets", "FlightTicket", true};
static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};

/* The cache of boarding passes, filled by the controller's watch of them. */
static kop_informer *passes;

/* boarding_pass is the ConfigMap we want for ticket: only the fields we set. */
static json_t *boarding_pass(const json_t *ticket)
{
    const json_t *spec = json_object_get(ticket, "spec");
    return json_pack("{s:{s:s+}, s:{s:O*, s:O*, s:s, s:o}}",
                     "metadata", "name", kop_meta_name(ticket), "-boarding-pass",
                     "data", "from", json_object_get(spec, "from"),
                     "to", json_object_get(spec, "to"), "passenger", kop_meta_name(ticket),
                     "seats", json_sprintf("%" JSON_INTEGER_FORMAT,
                                           json_integer_value(json_object_get(spec, "number"))));
}

/* confirmed_status is the status a ticket should show once its pass exists. */
static json_t *confirmed_status(const json_t *ticket)
{
    const char *since = json_string_value(
        json_object_get(json_object_get(ticket, "status"), "confirmedAt"));
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    return json_pack("{s:s, s:O, s:s, s:I}", "phase", "Confirmed",
                     "seats", json_object_get(json_object_get(ticket, "spec"), "number"),
                     "confirmedAt", since ? since : now, /* the first confirmation stays */
                     "observedGeneration", (json_int_t)kop_meta_generation(ticket));
}

/*
 * reconcile: make the boarding pass match the ticket, then confirm the
 * ticket. Runs for every change of a ticket or of its boarding pass, and
 * writes only what differs.
 */
static kop_result reconcile(const kop_reconcile *req, void *user)
{
    (void)user;
    kop_status st;
    json_t *ticket = NULL, *pass = NULL, *status = NULL;
    kop_op_result did;
    kop_result res = KOP_RETRY;

    if (kop_informer_dup(req->cache, req->namespace, req->name, &ticket) == KOP_ENOTFOUND)
        return KOP_DONE; /* deleted: the garbage collector removes the pass */
    if (!ticket || kop_meta_is_deleting(ticket))
        goto out;

    /* 1. The boarding pass, owned by the ticket. */
    pass = boarding_pass(ticket);
    kop_child_req child = {.resource = &CONFIGMAPS, .owner = ticket, .object = pass,
                           .cache = passes, .field_manager = "flightticket-operator"};
    if (kop_create_or_update(req->client, &child, &did, &st) != KOP_OK)
        goto fail;

    /* 2. The status, written only when it would change. */
    status = confirmed_status(ticket);
    if (!kop_json_contains(json_object_get(ticket, "status"), status)) {
        if (kop_patch_status(req->client, &TICKETS, ticket, status, NULL, &st) != KOP_OK)
            goto fail;
        kop_logger_log(req->log, KOP_LOG_INFO, "ticket confirmed",
                       KOP_LOG_STR("pass", kop_op_result_name(did)));
    }
    res = KOP_DONE;
    goto out;
fail:
    kop_logger_log(req->log, KOP_LOG_ERROR, "write failed", KOP_LOG_STR("reason", st.message));
out:
    json_decref(status);
    json_decref(pass);
    json_decref(ticket);
    return res;
}

int main(int argc, char **argv)
{
    kop_manager_opts mo = {.name = "flightticket-operator"};
    kop_manager *mgr = NULL;
    kop_controller *ctl = NULL;
    kop_status st;
    kop_err err;

    kop_status_clear(&st);
    for (int i = 1; i < argc;) {
        int r = kop_manager_parse_flag(&mo, argc, argv, &i, &st);
        if (r <= 0) {
            fprintf(stderr, "%s: %s\nusage: %s [flags]\n%s", argv[0],
                    r ? st.message : "unknown flag", argv[0], kop_manager_flags_usage());
            return 2;
        }
    }
    err = kop_manager_new(&mo, &mgr, &st);
    if (!err)
        err = flightticket_webhooks(mgr, &st); /* webhook.c */
    if (err)
        goto out;

    /* Reconcile FlightTickets; wake up when a boarding pass they own changes. */
    kop_controller_opts co = {
        .name = "flightticket",
        .for_resource = TICKETS,
        .reconcile = reconcile,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 2,
    };
    err = kop_controller_new(mgr, &co, &ctl);
    if (!err)
        err = kop_controller_owns(ctl, &CONFIGMAPS, &passes);
    if (!err)
        err = kop_manager_run(mgr, &st);
out:
    if (err)
        fprintf(stderr, "%s: %s: %s\n", argv[0], kop_strerror(err), st.message);
    kop_manager_free(mgr);
    return err ? 1 : 0;
}

/*
 * flightticket-operator - the smallest complete operator written with libkop.
 *
 * A FlightTicket (flights.com/v1) asks for seats on a flight. For each
 * ticket the operator keeps a "boarding pass" ConfigMap that the ticket
 * owns, so Kubernetes deletes it with the ticket, and confirms the booking
 * in the ticket's status. flight_ticket_types.h is generated from crd.yaml
 * by kop-gen; webhook.c adds two admission webhooks. Flags: see --help.
 */
#include <kop/kop.h>

#include "flight_ticket_types.h"
#include "webhook.h"

static const kop_resource CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};

/* reconcile makes the ticket's boarding pass, then confirms the booking. */
static kop_result reconcile(const kop_reconcile *req, void *user)
{
    (void)user;
    json_t *ticket = NULL, *pass = NULL, *status = NULL;
    char now[KOP_RFC3339_SIZE];
    kop_status st;
    kop_err err = kop_reconcile_get(req, KOP_GET_LIVE, &ticket, &st);
    if (!err && ticket) { /* NULL: gone or being deleted; its pass goes with it */
        const char *name = kop_meta_name(ticket);
        const char *since = flight_ticket_status_confirmed_at(ticket); /* the first one stays */
        json_int_t seats = flight_ticket_spec_number(ticket);
        pass = json_pack("{s:{s:s+}, s:{s:s*, s:s*, s:s, s:o}}", "metadata", "name", name,
                         "-boarding-pass", "data", "from", flight_ticket_spec_from(ticket), "to",
                         flight_ticket_spec_to(ticket), "passenger", name, "seats",
                         json_sprintf("%" JSON_INTEGER_FORMAT, seats));
        status = json_pack("{s:s, s:I, s:s}", "phase", "Confirmed", "seats", seats,
                           "confirmedAt", since ? since : kop_rfc3339_now(now));
        /* Each written only when it differs; status gets observedGeneration too. */
        err = kop_reconcile_child(req, &CONFIGMAPS, ticket, pass, NULL, &st);
        if (!err)
            err = kop_reconcile_status(req, ticket, status, NULL, &st);
    }
    json_decref(status);
    json_decref(pass);
    json_decref(ticket);
    return kop_reconcile_end(req, err, &st); /* an error: logged, retried with backoff */
}

int main(int argc, char **argv)
{
    static const kop_resource *const owns[] = {&CONFIGMAPS, NULL};
    return kop_main(argc, argv, &(kop_main_opts){
        .manager.name = "flightticket-operator",
        /* Reconcile FlightTickets on spec changes, and when a pass they own changes. */
        .controller = {.name = "flightticket", .for_resource = FLIGHT_TICKET_RESOURCE,
                       .reconcile = reconcile, .max_concurrent = 2,
                       .update_predicate = kop_predicate_generation_changed},
        .owns = owns,
        .setup = flightticket_webhooks, /* webhook.c; off without --webhook-bind */
    });
}

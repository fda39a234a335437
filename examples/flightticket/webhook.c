/*
 * webhook.c - the FlightTicket's admission webhooks, served by the
 * manager's webhook server when the operator runs with --webhook-bind and
 * --webhook-cert-dir (docs/libkop-runtime.md shows the configuration the
 * apiserver needs to call them):
 *
 *   /validate-flights-com-v1-flightticket  refuses a ticket whose
 *       destination is its departure, a rule the CRD's schema cannot say,
 *       and warns (admitting it) of one holding the most seats, 10;
 *   /mutate-flights-com-v1-flightticket    books one seat when the ticket
 *       does not say how many.
 */
#include <strings.h>

#include <kop/kop.h>

#include "webhook.h"

/* validate: kubectl prints the message after "denied the request: ". */
static kop_err validate(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    (void)user;
    const json_t *spec = json_object_get(req->object, "spec");
    const char *from = json_string_value(json_object_get(spec, "from"));
    const char *to = json_string_value(json_object_get(spec, "to"));
    if (from && to && strcasecmp(from, to) == 0)
        return kop_admission_deny(resp, "spec.to: a flight from %s must go somewhere else", from);
    json_int_t seats = json_integer_value(json_object_get(spec, "number"));
    if (seats >= 10) /* kubectl prints it as "Warning: ..." and the ticket is admitted */
        kop_admission_warn(resp, "spec.number: %lld seats, the most one ticket holds",
                           (long long)seats);
    return KOP_OK;
}

/* default_seats: what the handler changes in req->object is sent back as a JSON patch. */
static kop_err default_seats(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    (void)resp;
    (void)user;
    json_t *spec = json_object_get(req->object, "spec");
    if (json_is_object(spec) && !json_object_get(spec, "number"))
        json_object_set_new(spec, "number", json_integer(1));
    return KOP_OK;
}

kop_err flightticket_webhooks(kop_manager *mgr, void *user, kop_status *st)
{
    (void)user;
    kop_webhook_server *srv = NULL;
    kop_err err = kop_manager_webhook_server(mgr, &srv, st);
    if (!err)
        err = kop_webhook_add_admission(srv, &(kop_webhook_admission){
                                                 .path = "/validate-flights-com-v1-flightticket",
                                                 .handle = validate});
    if (!err)
        err = kop_webhook_add_admission(srv, &(kop_webhook_admission){
                                                 .path = "/mutate-flights-com-v1-flightticket",
                                                 .mutating = true,
                                                 .handle = default_seats});
    return err;
}

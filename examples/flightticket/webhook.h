/* webhook.h - the FlightTicket webhooks (webhook.c), hooked in by main.c. */
#ifndef FLIGHTTICKET_WEBHOOK_H
#define FLIGHTTICKET_WEBHOOK_H

#include <kop/kop.h>

/* flightticket_webhooks registers the webhooks; nothing with --webhook-bind off.
 * A kop_setup_fn (kop/program.h): main.c hands it to kop_main. */
kop_err flightticket_webhooks(kop_manager *mgr, void *user, kop_status *st);

#endif

/* webhook.h - the FlightTicket webhooks (webhook.c), hooked in by main.c. */
#ifndef FLIGHTTICKET_WEBHOOK_H
#define FLIGHTTICKET_WEBHOOK_H

#include <kop/kop.h>

/* flightticket_webhooks registers the webhooks; nothing with --webhook-bind off. */
kop_err flightticket_webhooks(kop_manager *mgr, kop_status *st);

#endif

/*
 * controller/probe.h - Running means served, in the gateway mode (probe.c):
 * before an instance turns Running, the operator connects to the gateway
 * (--gateway-probe-address) as a participant would, TLS with the
 * instance's host as SNI, and checks that the instance answers, not the
 * gateway: a gateway writes a route's Accepted before it applies its
 * configuration (Traefik about 2-3 s before), so Accepted alone is not yet
 * a served host.
 */
#ifndef CTF_CONTROLLER_PROBE_H
#define CTF_CONTROLLER_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/names.h"

/* At most this many probes run at once across the operator's workers (4): the others wait. */
#define CTF_PROBE_MAX_IN_FLIGHT 2

/* ctf_probe_outcome: what ctf_gateway_served found. */
typedef enum ctf_probe_outcome {
    CTF_PROBE_OFF,     /* no probe address: Running waits for Accepted only */
    CTF_PROBE_OK,      /* every host answered with its instance's bytes */
    CTF_PROBE_NOT_YET, /* a host got the gateway's own answer, or the gateway none: msg says */
    CTF_PROBE_BUSY,    /* CTF_PROBE_MAX_IN_FLIGHT probes run already: look again soon */
} ctf_probe_outcome;

/*
 * ctf_gateway_served probes each entry of eps (status.endpoints of the
 * gateway mode: {type, host, ...}) through the gateway at
 * cfg->gateway.probe_address, one connection per host (two when the answer
 * is a 404 to compare with a host without a route), each bounded by about
 * 2 s. CTF_PROBE_NOT_YET stops at the first host not served and writes into
 * msg (size bytes) which host and what it got. Blocking: call it from a
 * reconcile worker. Borrowed inputs; nothing kept.
 */
ctf_probe_outcome ctf_gateway_served(const ctf_config *cfg, const json_t *eps, char *msg,
                                     size_t size);

/*
 * ctf_probe_retry_ms: how long to wait before probing again an instance
 * whose Challenge is age_ms old: 300 ms in its first 30 s (the gateway
 * usually serves within 3 s of Accepted), 1 s until 5 min, then 3 s.
 */
long ctf_probe_retry_ms(double age_ms);

#endif /* CTF_CONTROLLER_PROBE_H */
